// The models page's API (docs/ui.md, "Models"): names, versions with their lineage, the
// architecture, and moving an alias.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/json_util.h"
#include "core/utf8.h"
#include "loom/graph/graph.h"
#include "loom/store/error.h"
#include "loom/store/model_registry.h"
#include "loom/store/runs.h"
#include "ui/api.h"

extern char** environ;

namespace loom::ui::detail {

namespace {

using loom::detail::quote_text;

nlohmann::json lineage(store::Store& store, const store::Provenance& p) {
  nlohmann::json out = {{"task_id", p.task_id}, {"run_id", p.run_id}};
  if (p.run_id > 0) {
    try {
      store::RunInfo run = store.runs().get(p.run_id);
      run.metrics.clear();  // as /api/runs lists a run: the record's keys, its curves left out
      out["run"] = store::record_json<nlohmann::json>(run);
    } catch (const store::NotFoundError&) {  // the run was removed since
      out["run"] = nullptr;
    }
  }
  return out;
}

// A version as its record's JSON (loom/store/record.h: the keys of `loom models --json`), its
// producing run named in `produced_by.run`.
nlohmann::json version_json(store::Store& store, const store::ModelInfo& m) {
  nlohmann::json out = store::record_json<nlohmann::json>(m);
  out["produced_by"] = lineage(store, m.produced_by);
  return out;
}

std::vector<store::ModelInfo> versions_of(store::Store& store, const std::string& name) {
  auto versions = store.models().versions(name);
  if (versions.empty()) throw HttpError(404, "no model " + quote_text(name) + " in the store (GET /api/models lists them)");
  return versions;
}

int64_t version_of(const std::string& text, const std::string& name) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 1)
    throw HttpError(400, "model " + quote_text(name) + ": version " + quote_text(text) + " is not a version number (valid: 1, 2, ...)");
  return v;
}

// Graphviz's `dot` in PATH, or "" when it is not installed.
std::string find_dot() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/dot";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// The DOT text laid out by `dot -Tsvg` (files in a private temporary directory; no shell).
std::string dot_to_svg(const std::string& dot_program, const std::string& dot) {
  std::string dir_template = (std::filesystem::temp_directory_path() / "loom-ui-dot-XXXXXX").string();
  if (!::mkdtemp(dir_template.data())) throw HttpError(500, "cannot make a temporary directory for dot");
  const std::filesystem::path dir = dir_template;
  struct Cleanup {
    std::filesystem::path dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{dir};
  const std::string in = (dir / "graph.dot").string(), out = (dir / "graph.svg").string();
  std::ofstream(in, std::ios::binary) << dot;
  std::vector<std::string> args = {dot_program, "-Tsvg", in, "-o", out};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  const int spawned = posix_spawn(&pid, dot_program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) throw HttpError(500, "cannot run " + dot_program);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw HttpError(500, dot_program + " could not lay out the graph");
  std::ifstream svg(out, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(svg), {});
}

Response move_alias(store::Store& store, const Request& r, const std::string& name, const std::string& alias) {
  only_params(r, {});
  std::string error;
  const auto body = loom::detail::parse_json(r.body, &error);
  const auto version = body && body->is_object() && body->contains("version") ? loom::detail::json_to_int((*body)["version"], 1) : std::nullopt;
  if (!version) throw HttpError(400, "the body must be a JSON object {\"version\": N} with N a version of " + quote_text(name));
  versions_of(store, name);
  try {
    store.models().set_alias(name, alias, *version, /*replace=*/true);
  } catch (const store::NotFoundError& e) {
    throw HttpError(404, e.what());
  } catch (const ValueError& e) {
    throw HttpError(400, e.what());
  }
  return json_response({{"name", name}, {"alias", alias}, {"version", *version}});
}

}  // namespace

Response models_api(store::Store& store, const Request& r, const std::vector<std::string>& p, bool write) {
  const bool get = r.method == "GET";
  if (p.size() == 5 && p[2] == "aliases" && p[4].empty()) throw HttpError(404, "no route " + quote_text(r.path));
  if (p.size() == 4 && p[2] == "aliases") {
    if (r.method != "POST") throw HttpError(405, "use POST for " + r.path + " (moves the alias: body {\"version\": N})");
    if (!write) throw HttpError(500, "unreachable: writes are checked before routing");
    return move_alias(store, r, p[1], p[3]);
  }
  if (!get) throw HttpError(405, "use GET for " + r.path);
  only_params(r, p.size() == 4 ? std::initializer_list<const char*>{"format"} : std::initializer_list<const char*>{});
  if (p.size() == 1) {
    nlohmann::json list = nlohmann::json::array();
    for (const std::string& name : store.models().names()) {
      const auto versions = store.models().versions(name);
      if (versions.empty()) continue;
      nlohmann::json aliases = nlohmann::json::object();
      for (const auto& v : versions)
        for (const auto& a : v.aliases) aliases[a] = v.version;
      list.push_back({{"name", name}, {"versions", versions.size()}, {"latest", versions.back().version}, {"aliases", aliases}});
    }
    return json_response({{"models", list}});
  }
  if (p.size() == 2) {
    nlohmann::json versions = nlohmann::json::array();
    for (const auto& m : versions_of(store, p[1])) versions.push_back(version_json(store, m));
    return json_response({{"name", p[1]}, {"versions", versions}});
  }
  if (p.size() == 4 && p[3] == "architecture") {
    const int64_t version = version_of(p[2], p[1]);
    const std::string format = choice_param(r, "format", {"summary", "dot", "svg"});
    const std::string dot_program = format == "svg" ? find_dot() : "";
    if (format == "svg" && dot_program.empty())
      throw HttpError(404, "format=svg needs Graphviz's 'dot', which is not installed (Debian: graphviz); format=dot gives the DOT text");
    Graph graph;
    try {
      graph = store.models().load(p[1], version);
    } catch (const store::NotFoundError& e) {
      throw HttpError(404, e.what());
    }
    if (format == "svg") return {200, "image/svg+xml", dot_to_svg(dot_program, graph.to_dot()), {}};
    return {200, "text/plain; charset=utf-8", format == "dot" ? graph.to_dot() : graph.summary(), {}};
  }
  throw HttpError(404, "no route " + quote_text(r.path) +
                           " (valid: /api/models, /api/models/NAME, /api/models/NAME/VERSION/architecture, "
                           "POST /api/models/NAME/aliases/ALIAS)");
}

}  // namespace loom::ui::detail
