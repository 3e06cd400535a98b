#pragma once
// The `loom` command line (docs/cli.md): shared pieces of its command groups — argument
// parsing, the store a command runs on, and output as aligned tables or JSON.
#include <csignal>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "loom/core/error.h"
#include "loom/store/provenance.h"
#include "loom/store/store.h"

namespace loom::cli {

// Exit codes (docs/cli.md, "Exit codes").
constexpr int kExitOk = 0;
constexpr int kExitError = 1;     // a loom::Error: the store or library refused the request
constexpr int kExitUsage = 2;     // the command line itself: unknown command or option, bad value
constexpr int kExitNotFound = 3;  // store::NotFoundError: no such model, version, run, task, ...

// A command line that cannot be understood (exit code 2).
class UsageError : public Error { using Error::Error; };

// --help: main prints `text` on stdout and exits 0.
struct HelpRequested {
  std::string text;
};

// Global options given before a command ("loom --store x.db models list", "loom models --json
// list"): every command parses them first, so that the same option given after it wins.
std::vector<std::string>& leading_global_args();
// Moves the global options that start args[i...] into leading_global_args(); returns the index
// of the first other argument. --help throws HelpRequested{help}; another option is a UsageError.
size_t take_global_options(const std::vector<std::string>& args, size_t i, const std::string& where, const std::string& help);

// The subcommand that `args` (what follows `group`, global options allowed first) names, one of
// `commands` (UsageError naming them otherwise), and the arguments after it. HelpRequested when
// there is none or --help.
std::pair<std::string, std::vector<std::string>> subcommand(const std::vector<std::string>& args,
                                                            const std::vector<std::string>& commands,
                                                            const std::string& group, const std::string& help);

struct Option {
  std::string name;          // "--tag"
  std::string value;         // the value's placeholder ("T"); empty: a flag
  bool repeated = false;
  std::string short_name;    // "-n", or empty
  // What it is, in the verb's --help.
  std::string help = {};
  // The command line refuses the verb without it ("missing --metric M"); shown without [ ].
  bool required = false;
  // Options with the same `one_of` are alternatives, shown as "(--kind K | --plan FILE)"; when
  // they are `required`, exactly one must be given.
  std::string one_of = {};
};

// A command's arguments once parsed. The global options (--store URL, --json, --help) are
// accepted by every command, anywhere on its command line.
class Args {
 public:
  // Parses `args` (what follows the subcommand) against `options` and checks that there are min..max positional arguments
  // (max < 0: any number), `operands` naming them ("NAME ALIAS VERSION"). UsageError naming the
  // valid options otherwise; HelpRequested for --help. `command` is what
  // messages call it ("models list"), `help` its group's usage text.
  Args(const std::vector<std::string>& args, const std::vector<Option>& options, int min_positional,
       int max_positional, std::string command, std::string operands, std::string help_text);

  bool flag(const std::string& name) const { return flags_.count(name) > 0; }
  std::optional<std::string> value(const std::string& name) const;
  std::vector<std::string> values(const std::string& name) const;
  // An integer option (default when absent); UsageError for a value that is not one or is
  // below `min`.
  int64_t integer(const std::string& name, int64_t def, int64_t min = INT64_MIN) const;
  const std::vector<std::string>& positional() const { return positional_; }
  bool json() const { return flag("--json"); }
  bool help() const { return flag("--help"); }
  const std::string& command() const { return command_; }
  const std::string& help_text() const { return help_; }
  // UsageError "<command>: <what>".
  [[noreturn]] void fail(const std::string& what) const;

  // The store of --store or $LOOM_STORE, which must exist (the command line never creates one).
  store::Store open_store() const;

 private:
  void check_required(const std::vector<Option>& options) const;
  std::map<std::string, std::vector<std::string>> values_;
  std::set<std::string> flags_;
  std::vector<std::string> positional_;
  std::string command_, operands_, help_;
};

// Parses an integer argument; UsageError naming `what` otherwise.
int64_t parse_integer(const Args& args, const std::string& text, const std::string& what);

// "NAME:VERSION" (the last ':' followed by digits only): the name and the version; otherwise
// the whole reference as the name and no version.
std::pair<std::string, std::optional<int64_t>> split_version(const Args& args, const std::string& ref);

// Text from a store, a program or the command line as it may be shown on a terminal: control
// characters (C0 but newline and tab when `keep_lines`, DEL, C1) and bytes that are not UTF-8
// escaped (\x1b, \u{9b}; loom::escape_text, loom/core/text.h). Everything the command line prints goes
// through it (print_table, print_fields, messages) or through print_json.
std::string terminal_text(const std::string& text, bool keep_lines = false);
// Raises this process's open-file limit to its hard limit (often 1024 soft, far more hard): a
// server holds a descriptor per connection, and `loom serve` / `loom ui` hold up to
// --max-connections of them. Says on stderr when the limit stays below `wanted`.
void raise_open_files_limit(int64_t wanted);

// Blocks SIGINT and SIGTERM in this thread and every thread started after it (a server's), so
// that sigwait(&returned, ...) here takes them: `loom serve` and `loom ui` stop on them.
sigset_t block_stop_signals();

// An aligned table on stdout: a header row, then the rows; columns two spaces apart; every cell
// through terminal_text (on one line).
void print_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);
// "key: value" lines with the values aligned, for one record; values through terminal_text
// (their newlines kept).
void print_fields(const std::vector<std::pair<std::string, std::string>>& fields);
// JSON on stdout: strings keep their exact text as JSON escapes (control characters, DEL and C1
// as \u00XX), so nothing in it acts on a terminal; bytes that are not UTF-8 become U+FFFD.
void print_json(const nlohmann::ordered_json& j);

// The text of FILE, or of standard input for "-"; NotFoundError naming `where` when unreadable.
std::string read_input(const std::string& file, const std::string& where);
std::string format_time(int64_t unix_ms);  // "2026-11-23 18:04:05" (UTC); "-" for 0
std::string format_number(double v);        // shortest round-trip text; "nan"
std::string join(const std::vector<std::string>& parts, const std::string& sep = ",");
std::vector<std::string> split(const std::string& text, char sep);
std::string shorten(const std::string& text, size_t width);  // "..." past `width` bytes (cut at a character)
// A stored JSON text as a JSON value (null when empty).
nlohmann::ordered_json json_value(const std::string& text);

// What produced a version: "task 12, run 3" ("-" for nothing).
std::string produced_by_text(const store::Provenance& p);

// A verb of a command group, declared once in its group's table (the group's file): dispatch,
// its --help and its group's, and the reference in docs/cli.md (`loom help --markdown`, held
// to the docs by cli_test) all come from this entry (commands.cpp).
struct Verb {
  std::string name;      // "list"; "alias set": a verb of a sub-group; empty: the group is one command
  std::string operands;  // the positional arguments as usage shows them: "NAME[:VERSION|@ALIAS]"
  int min_positional = 0;
  int max_positional = 0;  // < 0: any number
  std::vector<Option> options;
  std::string help;  // what it does (paragraphs a blank line apart; wrapped when shown)
  int (*run)(const Args&) = nullptr;
};

struct Group {
  std::string name;     // "models"
  std::string summary;  // its line in `loom --help`
  std::vector<Verb> verbs;
};

// The command groups, in the order `loom --help` lists them (main.cpp's table); each group's
// table of verbs is in its own file.
const std::vector<const Group*>& groups();

// Runs the verb of `g` that `args` (everything after the group's name) names.
int run_group(const Group& g, const std::vector<std::string>& args);
std::vector<std::string> group_names();
std::string main_help();                             // loom --help
std::string group_help(const Group& g);              // loom GROUP --help
std::string verb_help(const Group& g, const Verb& v);  // loom GROUP VERB --help
// docs/cli.md's table of commands, from the same tables.
std::string markdown_reference();

}  // namespace loom::cli
