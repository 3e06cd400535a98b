// Argument parsing, the store of a command and table/JSON output of the `loom` command line.
#include <pthread.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <sys/resource.h>

#include "cli.h"
#include "loom/core/text.h"

namespace loom::cli {

namespace {

const std::vector<Option>& global_options() {
  static const std::vector<Option> g = {{"--store", "URL"}, {"--json", ""}, {"--help", "", false, "-h"}};
  return g;
}

std::string option_list(const std::vector<Option>& options) {
  std::string s;
  for (const auto* list : {&options, &global_options()})
    for (const Option& o : *list) s += (s.empty() ? "" : ", ") + o.name;
  return s;
}

}  // namespace

std::vector<std::string>& leading_global_args() {
  static std::vector<std::string> args;
  return args;
}

size_t take_global_options(const std::vector<std::string>& args, size_t i, const std::string& where, const std::string& help) {
  auto& globals = leading_global_args();
  for (; i < args.size() && args[i].size() > 1 && args[i][0] == '-'; ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") throw HelpRequested{help};
    if (a == "--json" || a.rfind("--store=", 0) == 0) {
      globals.push_back(a);
    } else if (a == "--store") {
      if (i + 1 >= args.size()) throw UsageError(where + "option --store needs a value (--store URL)");
      globals.push_back(a);
      globals.push_back(args[++i]);
    } else {
      throw UsageError(where + "unknown option '" + a + "' (valid before a command: --store, --json, --help)");
    }
  }
  return i;
}

std::pair<std::string, std::vector<std::string>> subcommand(const std::vector<std::string>& args,
                                                            const std::vector<std::string>& commands,
                                                            const std::string& group, const std::string& help) {
  const size_t i = take_global_options(args, 0, group + ": ", help);
  if (i == args.size() || args[i] == "help") throw HelpRequested{help};
  if (std::find(commands.begin(), commands.end(), args[i]) == commands.end())
    throw UsageError(group + ": unknown command '" + args[i] + "' (valid: " + join(commands, ", ") + ")");
  return {args[i], std::vector<std::string>(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end())};
}

Args::Args(const std::vector<std::string>& command_args, const std::vector<Option>& options, int min_positional,
           int max_positional, std::string command, std::string operands, std::string help_text)
    : command_(std::move(command)), operands_(std::move(operands)), help_(std::move(help_text)) {
  auto find = [&](const std::string& name) -> const Option* {
    for (const auto* list : {&options, &global_options()})
      for (const Option& o : *list)
        if (o.name == name || (!o.short_name.empty() && o.short_name == name)) return &o;
    return nullptr;
  };
  std::vector<std::string> args = leading_global_args();
  args.insert(args.end(), command_args.begin(), command_args.end());
  bool options_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (options_done || a.size() < 2 || a[0] != '-' || (a[1] >= '0' && a[1] <= '9')) {
      positional_.push_back(a);  // "-1" is a value, not an option
      continue;
    }
    if (a == "--") {
      options_done = true;
      continue;
    }
    const size_t eq = a.find('=');
    const std::string name = a.rfind("--", 0) == 0 && eq != std::string::npos ? a.substr(0, eq) : a;
    const Option* o = find(name);
    if (!o) fail("unknown option '" + name + "' (valid: " + option_list(options) + ")");
    if (o->value.empty()) {
      if (eq != std::string::npos) fail("option " + o->name + " takes no value");
      flags_.insert(o->name);
      continue;
    }
    std::string v;
    if (eq != std::string::npos) {
      v = a.substr(eq + 1);
    } else {
      if (i + 1 >= args.size()) fail("option " + o->name + " needs a value (" + o->name + " " + o->value + ")");
      v = args[++i];
    }
    auto& slot = values_[o->name];
    if (!o->repeated) slot.clear();  // the last one given wins
    slot.push_back(std::move(v));
  }
  if (help()) throw HelpRequested{help_};
  const int n = static_cast<int>(positional_.size());
  if (n < min_positional) fail("missing argument (loom " + command_ + " " + operands_ + ")");
  if (max_positional >= 0 && n > max_positional)
    fail("unexpected argument '" + positional_[max_positional] + "'");
  check_required(options);
}

// The options the verb declares `required` (Option): each given, or one of each `one_of`.
void Args::check_required(const std::vector<Option>& options) const {
  for (const Option& o : options) {
    if (!o.required) continue;
    if (o.one_of.empty()) {
      if (!flag(o.name) && !value(o.name)) fail("missing " + o.name + (o.value.empty() ? "" : " " + o.value));
      continue;
    }
    std::vector<std::string> alternatives;
    int given = 0;
    for (const Option& p : options)
      if (p.one_of == o.one_of) {
        alternatives.push_back(p.name);
        given += flag(p.name) || value(p.name);
      }
    if (given != 1) fail("give one of " + join(alternatives, " and "));
  }
}

std::optional<std::string> Args::value(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> Args::values(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

int64_t parse_integer(const Args& args, const std::string& text, const std::string& what) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p != end || text.empty()) args.fail(what + " must be an integer, not '" + text + "'");
  return v;
}

int64_t Args::integer(const std::string& name, int64_t def, int64_t min) const {
  const auto v = value(name);
  if (!v) return def;
  const int64_t n = parse_integer(*this, *v, name);
  if (n < min) fail(name + " must be at least " + std::to_string(min) + ", not " + *v);
  return n;
}

void Args::fail(const std::string& what) const { throw UsageError(command_ + ": " + what); }

store::Store Args::open_store() const {
  std::string url;
  if (auto v = value("--store")) {
    url = *v;
  } else if (const char* env = std::getenv("LOOM_STORE"); env && *env) {
    url = env;
  } else {
    fail("no store: pass --store URL (an SQLite file or postgresql://...) or set LOOM_STORE");
  }
  // Store::open creates a missing SQLite file; a mistyped path should say so instead.
  if (url.rfind("postgresql://", 0) != 0 && url.rfind("postgres://", 0) != 0) {
    const std::string path = url.rfind("sqlite://", 0) == 0 ? url.substr(9) : url;
    std::error_code ec;
    if (!path.empty() && path.find("://") == std::string::npos && !std::filesystem::exists(path, ec))
      throw store::NotFoundError("no store at '" + path + "' (no such file; the command line opens existing stores only)");
  }
  return store::Store::open(url);
}

std::pair<std::string, std::optional<int64_t>> split_version(const Args& args, const std::string& ref) {
  const size_t colon = ref.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == ref.size() ||
      ref.find_first_not_of("0123456789", colon + 1) != std::string::npos)
    return {ref, std::nullopt};
  return {ref.substr(0, colon), parse_integer(args, ref.substr(colon + 1), "the version in '" + ref + "'")};
}

std::string terminal_text(const std::string& text, bool keep_lines) { return escape_text(text, keep_lines); }

void print_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& cells) {
  // escaped first (a cell may hold anything a store holds), then aligned
  std::vector<std::vector<std::string>> rows(cells.size() + 1);
  for (const auto& h : header) rows[0].push_back(terminal_text(h));  // (a run's metric names come from the store)
  for (size_t r = 0; r < cells.size(); ++r)
    for (const auto& cell : cells[r]) rows[r + 1].push_back(terminal_text(cell));
  std::vector<size_t> width(header.size());
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size() && c < width.size(); ++c) width[c] = std::max(width[c], r[c].size());
  for (const auto& r : rows) {
    std::string s;
    for (size_t c = 0; c < r.size() && c < width.size(); ++c) {
      s += r[c];
      if (c + 1 < r.size()) s += std::string(width[c] - r[c].size() + 2, ' ');
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    std::cout << s << '\n';
  }
}

void print_fields(const std::vector<std::pair<std::string, std::string>>& fields) {
  size_t w = 0;
  for (const auto& [k, v] : fields) w = std::max(w, k.size());
  for (const auto& [k, v] : fields)
    std::cout << terminal_text(k) << ':' << std::string(w - k.size() + 1, ' ') << terminal_text(v, true) << '\n';
}

// (names may hold bytes that are not UTF-8: replaced, where dump() would throw). nlohmann
// escapes C0 controls; DEL and the C1 controls, which it writes as they are, are escaped here:
// the text is valid UTF-8 by then, and they can only be inside strings.
void print_json(const nlohmann::ordered_json& j) {
  static const char* hex = "0123456789abcdef";
  const std::string text = j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if (c == 0x7f) {
      out += "\\u007f";
    } else if (c == 0xc2 && next >= 0x80 && next < 0xa0) {
      out += {'\\', 'u', '0', '0', hex[next >> 4], hex[next & 15]};
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  std::cout << out << '\n';
}

std::string read_input(const std::string& file, const std::string& where) {
  std::stringstream text;
  if (file == "-") {
    text << std::cin.rdbuf();
  } else {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw store::NotFoundError(where + ": cannot read '" + file + "'");
    text << in.rdbuf();
  }
  return text.str();
}

std::string format_time(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string format_number(double v) {
  if (std::isnan(v)) return "nan";
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, p);
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : sep) + p;
  return s;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t at = text.find(sep, start);
    out.push_back(text.substr(start, at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

std::string shorten(const std::string& text, size_t width) {
  if (text.size() <= width) return text;
  size_t cut = width - 3;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;  // not inside a character
  return text.substr(0, cut) + "...";
}

nlohmann::ordered_json json_value(const std::string& text) {
  if (text.empty()) return nullptr;
  // the store keeps only valid JSON; anything else is shown as the text it is
  auto j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? nlohmann::ordered_json(text) : j;
}

std::string produced_by_text(const store::Provenance& p) {
  std::vector<std::string> parts;
  if (p.task_id) parts.push_back("task " + std::to_string(p.task_id));
  if (p.run_id) parts.push_back("run " + std::to_string(p.run_id));
  return parts.empty() ? "-" : join(parts, ", ");
}

sigset_t block_stop_signals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  return stop_signals;
}

void raise_open_files_limit(int64_t wanted) {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return;
  if (r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &r) != 0) ::getrlimit(RLIMIT_NOFILE, &r);
  }
  // a few dozen descriptors are the store's, the listener's and the standard streams'
  if (r.rlim_cur != RLIM_INFINITY && static_cast<int64_t>(r.rlim_cur) < wanted + 64)
    std::cerr << "warning: this process may open " << r.rlim_cur << " files, fewer than the " << wanted
              << " connections allowed: connections past it wait in the listen queue (raise 'ulimit -n')" << std::endl;
}

}  // namespace loom::cli
