// `loom`: inspect a store's models, datasets, runs and tasks, submit and cancel tasks, run an
// agent (docs/cli.md). Exit codes: 0 success, 1 a loom::Error, 2 a bad command line, 3 not found.
// Messages quote stored text and arguments: printed through terminal_text.
#include <iostream>
#include <map>

#include "cli.h"
#include "loom/store/error.h"

namespace {

const char* kUsage = R"(usage: loom [--store URL] [--json] COMMAND ...

Inspect a Loom store, submit tasks and run agents (docs/cli.md).

commands:
  models    list, show, top and alias model versions
  datasets  list and show dataset versions
  runs      list, show, top and compare training runs
  tasks     list, show, submit, cancel and replay tasks; read task events
  plans     submit, list, show, cancel and replay plans (tasks with dependencies)
  searches  list and show hyper-parameter searches and their trials
  queries   create, list, show and delete named queries over datasets
  controllers  create, list, show and run stream controllers (tasks for new data)
  agent     run an agent that claims tasks and runs them as commands
  serve     serve a model over HTTP (Open Inference Protocol v2)
  ui        a web dashboard of the store's runs, models, datasets and tasks

global options (also accepted after the command):
  --store URL   the store: an SQLite file (sqlite:///path too) or postgresql://...;
                default $LOOM_STORE. The command line never creates a store.
  --json        JSON for scripts instead of tables
  --help, -h    usage of loom or of a command group

exit codes: 0 success, 1 error (a loom::Error, message on stderr), 2 bad command line,
3 not found (no such store, model, version, alias, dataset, run or task)
)";

}  // namespace

int main(int argc, char** argv) {
  using namespace loom::cli;
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string help_hint = "loom --help";
  try {
    // leading global options, then the command group
    const size_t i = take_global_options(args, 0, "", kUsage);
    if (i == args.size()) throw UsageError("missing command (valid: models, datasets, runs, tasks, plans, searches, queries, controllers, agent, serve, ui)");
    const std::string group = args[i];
    const std::vector<std::string> rest(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
    if (group == "help") throw HelpRequested{kUsage};
    const std::map<std::string, int (*)(const std::vector<std::string>&)> groups = {
        {"models", models_main}, {"datasets", datasets_main}, {"runs", runs_main}, {"tasks", tasks_main}, {"plans", plans_main},
        {"searches", searches_main}, {"queries", queries_main}, {"controllers", controllers_main},
        {"agent", agent_main}, {"serve", serve_main}, {"ui", ui_main}};
    auto it = groups.find(group);
    if (it == groups.end())
      throw UsageError("unknown command '" + group + "' (valid: models, datasets, runs, tasks, plans, searches, queries, controllers, agent, serve, ui)");
    help_hint = "loom " + group + " --help";
    return it->second(rest);
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
