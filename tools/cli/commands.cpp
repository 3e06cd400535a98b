// The command tables' one reader: dispatch of `loom GROUP VERB ...`, every --help text and the
// reference section of docs/cli.md (`loom help --markdown`) come from the groups' Verb entries,
// so that a verb is declared once, where its handler is.
#include <algorithm>
#include <set>
#include <sstream>

#include "cli.h"

namespace loom::cli {

namespace {

constexpr size_t kWidth = 92;  // help is wrapped to fit a terminal of the usual 100 columns

// Paragraphs of a help text: separated by a blank line; inside one, newlines are spaces.
std::vector<std::string> paragraphs(const std::string& text) {
  std::vector<std::string> out(1);
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) {
      if (!out.back().empty()) out.emplace_back();
      continue;
    }
    out.back() += (out.back().empty() ? "" : " ") + line;
  }
  if (out.back().empty()) out.pop_back();
  return out;
}

std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// `tokens` filled into lines of at most kWidth columns: the first after `first` (a space
// between unless `first` is only an indent), the others indented by `indent` spaces (a token
// longer than a line gets one of its own).
std::string fill(const std::vector<std::string>& tokens, const std::string& first, size_t indent) {
  std::string out, line = first;
  bool empty = first.find_first_not_of(' ') == std::string::npos;
  for (const std::string& t : tokens) {
    if (!empty && line.size() + 1 + t.size() > kWidth) {
      out += line + '\n';
      line = std::string(indent, ' ');
      empty = true;
    }
    line += (empty ? "" : " ") + t;
    empty = false;
  }
  return out + line + '\n';
}

// A help text wrapped, each line indented by `indent`, paragraphs a blank line apart.
std::string wrap(const std::string& text, size_t indent) {
  std::string out;
  for (const std::string& p : paragraphs(text)) {
    if (!out.empty()) out += '\n';
    out += fill(words(p), std::string(indent, ' '), indent);
  }
  return out;
}

std::string option_text(const Option& o) { return o.value.empty() ? o.name : o.name + " " + o.value; }

// The verb's name, operands and options as usage writes them: "[--tag T]...", "--metric M",
// "(--kind K | --plan FILE)".
std::vector<std::string> synopsis(const Verb& v) {
  std::vector<std::string> out = words(v.name);
  if (!v.operands.empty()) out.push_back(v.operands);
  std::set<std::string> alternatives_done;
  for (const Option& o : v.options) {
    if (!o.one_of.empty()) {
      if (!alternatives_done.insert(o.one_of).second) continue;
      std::vector<std::string> alternatives;
      for (const Option& p : v.options)
        if (p.one_of == o.one_of) alternatives.push_back(option_text(p));
      out.push_back("(" + join(alternatives, " | ") + ")");
      continue;
    }
    out.push_back((o.required ? option_text(o) : "[" + option_text(o) + "]") + (o.repeated ? "..." : ""));
  }
  return out;
}

std::string command_name(const Group& g, const Verb& v) { return v.name.empty() ? g.name : g.name + " " + v.name; }

// A group of one command ("loom agent"): its verb has no name.
bool single_command(const Group& g) { return g.verbs.size() == 1 && g.verbs[0].name.empty(); }

// "--name N   what it is" lines of the options that say what they are.
std::string option_list(const std::vector<Option>& options) {
  size_t w = 0;
  for (const Option& o : options)
    if (!o.help.empty()) w = std::max(w, option_text(o).size());
  if (w == 0) return "";
  w = std::min<size_t>(w, 24);  // a longer one starts its text on a line of its own
  std::string out = "\noptions:\n";
  for (const Option& o : options) {
    if (o.help.empty()) continue;
    const std::string name = "  " + option_text(o) + (o.short_name.empty() ? "" : ", " + o.short_name);
    const size_t indent = w + 5;
    if (name.size() + 2 > indent) out += name + '\n' + fill(words(o.help), std::string(indent, ' '), indent);
    else out += fill(words(o.help), name + std::string(indent - name.size(), ' '), indent);
  }
  return out;
}

const Verb& find_verb(const Group& g, const std::string& name) {
  for (const Verb& v : g.verbs)
    if (v.name == name) return v;
  throw UsageError(g.name + ": unknown command '" + name + "'");  // (names come from the table)
}

int run_verb(const Group& g, const Verb& v, const std::vector<std::string>& args) {
  const Args a(args, v.options, v.min_positional, v.max_positional, command_name(g, v), v.operands, verb_help(g, v));
  return v.run(a);
}

// Markdown table cells: '|' would end the cell, a newline the row; in text (not `code`), '<'
// would open an HTML tag ("<name>") and '*' emphasis.
std::string cell(const std::string& text, bool code) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else if (!code && c == '<') out += "&lt;";
    else if (!code && c == '*') out += "\\*";
    else out += c;
  }
  return out;
}

}  // namespace

std::string verb_help(const Group& g, const Verb& v) {
  return fill(synopsis(v), "usage: loom " + g.name, 6) + "\n" + wrap(v.help, 0) + option_list(v.options) +
         "\nglobal options: --store URL, --json (see 'loom --help')\n";
}

std::string group_help(const Group& g) {
  if (single_command(g)) return verb_help(g, g.verbs[0]);
  std::string out = "usage: loom " + g.name + " COMMAND [options]\n\n" + g.summary + "\n\ncommands:\n";
  for (const Verb& v : g.verbs) out += fill(synopsis(v), "  ", 4) + wrap(v.help, 8);
  return out + "\nglobal options: --store URL, --json (see 'loom --help'); 'loom " + g.name +
         " COMMAND --help' for one command\n";
}

std::vector<std::string> group_names() {
  std::vector<std::string> names;
  for (const Group* g : groups()) names.push_back(g->name);
  return names;
}

std::string main_help() {
  std::string out = R"(usage: loom [--store URL] [--json] COMMAND ...

Inspect a Loom store, submit tasks and run agents (docs/cli.md).

commands:
)";
  size_t w = 0;
  for (const Group* g : groups()) w = std::max(w, g->name.size());
  for (const Group* g : groups()) out += "  " + g->name + std::string(w - g->name.size() + 2, ' ') + g->summary + '\n';
  return out + R"(
global options (also accepted after the command):
  --store URL   the store: an SQLite file (sqlite:///path too) or postgresql://...;
                default $LOOM_STORE. The command line never creates a store.
  --json        JSON for scripts instead of tables
  --help, -h    usage of loom, of a command group (loom GROUP --help) or of a command

exit codes: 0 success, 1 error (a loom::Error, message on stderr), 2 bad command line,
3 not found (no such store, model, version, alias, dataset, run or task)
)";
}

std::string markdown_reference() {
  std::string out = "| command | what |\n|---|---|\n";
  for (const Group* g : groups())
    for (const Verb& v : g->verbs) {
      std::vector<std::string> usage = synopsis(v);
      usage.insert(usage.begin(), "loom " + g->name);
      out += "| `" + cell(join(usage, " "), true) + "` | " + cell(join(paragraphs(v.help), " "), false) + " |\n";
    }
  return out;
}

int run_group(const Group& g, const std::vector<std::string>& args) {
  const std::string help = group_help(g);
  if (single_command(g)) return run_verb(g, g.verbs[0], args);
  std::vector<std::string> firsts;  // "alias" once for "alias set" and "alias delete"
  for (const Verb& v : g.verbs) {
    const std::string first = v.name.substr(0, v.name.find(' '));
    if (std::find(firsts.begin(), firsts.end(), first) == firsts.end()) firsts.push_back(first);
  }
  const auto [first, rest] = subcommand(args, firsts, g.name, help);
  std::vector<std::string> seconds;  // the verbs of a sub-group ("loom models alias set")
  for (const Verb& v : g.verbs)
    if (v.name.rfind(first + " ", 0) == 0) seconds.push_back(v.name.substr(first.size() + 1));
  if (seconds.empty()) return run_verb(g, find_verb(g, first), rest);
  const auto [second, rest2] = subcommand(rest, seconds, g.name + " " + first, help);
  return run_verb(g, find_verb(g, first + " " + second), rest2);
}

}  // namespace loom::cli
