// `loom`: inspect a store's models, datasets, runs and tasks, submit and cancel tasks, run an
// agent (docs/cli.md). Exit codes: 0 success, 1 a loom::Error, 2 a bad command line, 3 not found.
// Messages quote stored text and arguments: printed through terminal_text.
#include <algorithm>
#include <iostream>

#include "cli.h"
#include "loom/store/error.h"

namespace loom::cli {

// Each defined with its verbs in its own file (models.cpp, ...).
const Group& models_group();
const Group& datasets_group();
const Group& runs_group();
const Group& tasks_group();
const Group& plans_group();
const Group& searches_group();
const Group& queries_group();
const Group& controllers_group();
const Group& agent_group();
const Group& serve_group();
const Group& ui_group();
const Group& generate_group();

const std::vector<const Group*>& groups() {
  static const std::vector<const Group*> all = {&models_group(),   &datasets_group(),    &runs_group(),  &tasks_group(),
                                                &plans_group(),    &searches_group(),    &queries_group(),
                                                &controllers_group(), &agent_group(),    &serve_group(), &ui_group(),
                                                &generate_group()};
  return all;
}

namespace {

// `loom help`: the usage; `loom help --markdown`: docs/cli.md's table of commands.
int help(const std::vector<std::string>& rest) {
  if (std::find(rest.begin(), rest.end(), "--markdown") != rest.end()) std::cout << markdown_reference();
  else std::cout << main_help();
  return kExitOk;
}

// The group that args[i...] names (leading global options taken first), run.
int dispatch(const std::vector<std::string>& args, std::string& help_hint) {
  const size_t i = take_global_options(args, 0, "", main_help());
  const std::string valid = " (valid: " + join(group_names(), ", ") + ")";
  if (i == args.size()) throw UsageError("missing command" + valid);
  const std::string& name = args[i];
  const std::vector<std::string> rest(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
  if (name == "help") return help(rest);
  for (const Group* g : groups())
    if (g->name == name) {
      help_hint = "loom " + name + " --help";
      return run_group(*g, rest);
    }
  throw UsageError("unknown command '" + name + "'" + valid);
}

}  // namespace

}  // namespace loom::cli

int main(int argc, char** argv) {
  using namespace loom::cli;
  const std::vector<std::string> args(argv + 1, argv + argc);
  std::string help_hint = "loom --help";
  try {
    return dispatch(args, help_hint);
  } catch (const HelpRequested& h) {
    std::cout << h.text;
    return kExitOk;
  } catch (const UsageError& e) {
    std::cerr << "loom: " << terminal_text(e.what(), true) << "\n(usage: " << terminal_text(help_hint) << ")\n";
    return kExitUsage;
  } catch (const loom::store::NotFoundError& e) {
    std::cerr << "loom: error: " << terminal_text(e.what(), true) << '\n';
    return kExitNotFound;
  } catch (const loom::Error& e) {
    std::cerr << "loom: error: " << terminal_text(e.what(), true) << '\n';
    return kExitError;
  } catch (const std::exception& e) {
    // not a loom::Error: a bug in the command line or the library, reported as such
    std::cerr << "loom: internal error: " << terminal_text(e.what(), true) << '\n';
    return kExitError;
  }
}
