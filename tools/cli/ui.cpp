// `loom ui`: the web dashboard over the store (docs/ui.md).
#include <pthread.h>

#include <csignal>
#include <iostream>

#include "cli.h"
#include "loom/ui/dashboard.h"

namespace loom::cli {

namespace {

int run(const Args& a) {
  ui::DashboardOptions options;
  options.host = a.value("--host").value_or("127.0.0.1");
  options.port = static_cast<int>(a.integer("--port", 8080, 0));
  if (options.port > 65535) a.fail("--port must be 0 to 65535");
  options.threads = static_cast<int>(std::min<int64_t>(a.integer("--threads", 8, 1), 1024));
  options.max_connections = a.integer("--max-connections", 10000, 1);
  raise_open_files_limit(options.max_connections);
  options.allow_writes = a.flag("--allow-writes");

  store::Store s = a.open_store();
  // SIGINT and SIGTERM are taken by sigwait below, in this thread, not by the server's threads
  const sigset_t stop_signals = block_stop_signals();

  ui::Dashboard dashboard(std::move(s), options);
  dashboard.start();
  std::cout << "dashboard on http://" << options.host << ":" << dashboard.port() << "/" << std::endl;
  if (options.allow_writes)
    std::cout << "writes allowed with the token " << dashboard.token() << std::endl;
  else
    std::cout << "read-only (--allow-writes to move aliases and cancel tasks)" << std::endl;
  int sig = 0;
  sigwait(&stop_signals, &sig);
  dashboard.stop();
  std::cout << "stopped" << std::endl;
  return kExitOk;
}

}  // namespace

const Group& ui_group() {
  static const Group g{
      "ui", "a web dashboard of the store's runs, models, datasets and tasks",
      {{"", "", 0, 0,
        {{"--host", "H", false, "", "the address to listen on (default 127.0.0.1: this machine only)"},
         {"--port", "N", false, "", "the port (default 8080; 0: any free port, printed)"},
         {"--allow-writes", "", false, "", "allow moving aliases and cancelling tasks, with the token printed at start (given in the page's write token box); read-only otherwise"},
         {"--threads", "T", false, "", "requests handled at once (default 8); connections are not bound to threads: idle and slow clients hold none"},
         {"--max-connections", "N", false, "", "connections open at once; past it a client is answered 503 (default 10000)"}},
        "the web dashboard of the store (docs/ui.md): runs (each metric's final, best and worst value, learning curves "
        "over epochs or wall-clock time, a diff of hyper-parameters, groups), models (versions, aliases, lineage, "
        "architecture), datasets (versions, fields, a sample query, image previews) and the task queue (live), on "
        "http://127.0.0.1:8080/ until SIGINT or SIGTERM (every request received is answered first)",
        run}}};
  return g;
}

}  // namespace loom::cli
