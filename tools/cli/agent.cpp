// `loom agent`: an agent that claims tasks and runs each as a command (docs/cli.md).
#include <signal.h>

#include <atomic>
#include <iostream>

#include "cli.h"
#include "loom/flow/agent.h"

namespace loom::cli {

namespace {

// "a 'b c' \"d\\\"e\"" -> {a, b c, d"e}: whitespace separates words, single quotes keep
// everything, double quotes keep all but \" and \\, a backslash outside quotes escapes.
std::vector<std::string> shell_words(const Args& a, const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else if (c == '\'') {
      const size_t end = text.find('\'', i + 1);
      if (end == std::string::npos) a.fail("--command: unterminated ' in '" + text + "'");
      word += text.substr(i + 1, end - i - 1);
      i = end;
      in_word = true;
    } else if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\' && i + 1 < text.size() && (text[i + 1] == '"' || text[i + 1] == '\\')) ++i;
        word += text[i];
      }
      if (i >= text.size()) a.fail("--command: unterminated \" in '" + text + "'");
      in_word = true;
    } else if (c == '\\') {
      if (i + 1 >= text.size()) a.fail("--command: a trailing backslash in '" + text + "'");
      word += text[++i];
      in_word = true;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

// The agent SIGINT/SIGTERM stop (Agent::stop only stores to an atomic: async-signal-safe).
std::atomic<flow::Agent*> g_agent{nullptr};
static_assert(std::atomic<flow::Agent*>::is_always_lock_free);

extern "C" void on_stop_signal(int) {
  if (flow::Agent* agent = g_agent.load()) agent->stop();
}

int run(const Args& a) {
  const auto commands = a.values("--command");
  flow::AgentOptions options{.poll_ms = a.integer("--poll-ms", 500, 0),
                             .stop_when_idle = a.flag("--stop-when-idle"),
                             .max_tasks = a.integer("--max-tasks", 0, 0),
                             .batch = a.integer("--batch", 0, 0)};
  if (const auto kinds = a.value("--kinds")) options.kinds = split(*kinds, ',');
  std::vector<std::pair<std::string, std::vector<std::string>>> parsed;
  for (const std::string& c : commands) {
    const size_t eq = c.find('=');
    if (eq == std::string::npos || eq == 0) a.fail("--command '" + c + "' is not KIND=PROGRAM");
    auto argv = shell_words(a, c.substr(eq + 1));
    if (argv.empty()) a.fail("--command '" + c + "' names no program");
    parsed.emplace_back(c.substr(0, eq), std::move(argv));
  }

  flow::Agent agent(flow::Tasks(a.open_store()), a.value("--name").value_or(""));
  for (auto& [kind, argv] : parsed) agent.register_command(kind, {.argv = std::move(argv)});
  // SIGINT/SIGTERM stop the agent while it runs; the previous handlers come back after
  struct StopOnSignal {
    struct sigaction old_int {}, old_term {};
    explicit StopOnSignal(flow::Agent& agent) {
      g_agent.store(&agent);
      struct sigaction sa {};
      sa.sa_handler = on_stop_signal;
      sa.sa_flags = SA_RESETHAND;  // a second signal ends the process at once
      sigemptyset(&sa.sa_mask);
      sigaction(SIGINT, &sa, &old_int);
      sigaction(SIGTERM, &sa, &old_term);
    }
    ~StopOnSignal() {
      sigaction(SIGINT, &old_int, nullptr);
      sigaction(SIGTERM, &old_term, nullptr);
      g_agent.store(nullptr);
    }
  } stop_on_signal(agent);
  const int64_t ran = agent.run(options);
  if (a.json()) print_json({{"tasks", ran}});
  else std::cout << "loom agent " << terminal_text(agent.name()) << ": ran " << ran << " task" << (ran == 1 ? "" : "s") << '\n';
  return kExitOk;
}

}  // namespace

const Group& agent_group() {
  static const Group g{
      "agent", "run an agent that claims tasks and runs them as commands",
      {{"", "", 0, 0,
        {{.name = "--command", .value = "KIND=PROGRAM", .repeated = true,
          .help = "run tasks of KIND with PROGRAM, split into words as a shell does (quotes and backslashes; no "
                  "variables or globs), e.g. --command \"eval=/usr/bin/python3 eval.py --fast\"",
          .required = true},
         {"--kinds", "K1,K2", false, "", "the kinds to claim (default: every --command kind)"},
         {"--name", "NAME", false, "", "the agent's name in its tasks (default: <host>:<pid>)"},
         {"--poll-ms", "MS", false, "", "the longest wait when no task is claimable; a submission or a finished dependency wakes the agent at once (default 500)"},
         {"--stop-when-idle", "", false, "", "return when no task is pending"},
         {"--max-tasks", "N", false, "", "return after N tasks"},
         {"--batch", "K", false, "", "claim and record up to K tasks per commit (1: one at a time, for long tasks; default 0: adapt, so that a batch runs about 10 ms)"}},
        "an agent that runs each claimed task as PROGRAM, a child process: the task's hyper-parameters are its stdin "
        "(and the file named by $LOOM_TASK_HYPER_PARAMETERS), its result the JSON it prints on stdout "
        "(docs/workflow.md, Task kinds). SIGINT or SIGTERM stops it after the task it is running; a second one ends it "
        "at once (the task is then replayed by another agent once its lease expires). At the end it prints how many "
        "tasks it ran ({\"tasks\": N} with --json)",
        run}}};
  return g;
}

}  // namespace loom::cli
