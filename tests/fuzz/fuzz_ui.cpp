// The dashboard's request handling (ui::Dashboard::handle, the socket left out) over a small
// store (a run, a model of two versions with an alias, a dataset of images, tasks), writes
// allowed. The first byte chooses the method, whether the Host header is this machine's and
// whether the token is right; then the path, the query string (k=v&k=v) and the body, one line
// each. Every request gets an answer: a page or asset, JSON, or a JSON error of 4xx. A 500, an
// answer declared JSON that is not JSON, a crash or a leak is a finding.
#include <loom/flow/tasks.h>
#include <loom/nn/activation.h>
#include <loom/nn/input.h>
#include <loom/nn/linear.h>
#include <loom/store/datasets.h>
#include <loom/store/model_registry.h>
#include <loom/store/runs.h>
#include <loom/ui/dashboard.h>
#include <nlohmann/json.hpp>
#include <stdlib.h>

#include <filesystem>
#include <memory>

#include "fuzz/fuzz_common.h"

namespace {

using namespace loom;

Graph mlp(uint64_t seed) {
  manual_seed(seed);
  nn::Input x(4, Float32, "x");
  return Graph::build({nn::Linear(nn::Activation(nn::Linear(x, 8, {}, "l1"), nn::relu, "a"), 3, {}, "l2")}, {x});
}

std::string& folder() {
  static std::string dir;
  return dir;
}

ui::Dashboard& dashboard() {
  static const std::unique_ptr<ui::Dashboard> d = [] {
    loom_fuzz::init();
    char tmpl[] = "/tmp/loom_fuzz_ui.XXXXXX";
    if (!mkdtemp(tmpl)) std::abort();
    folder() = tmpl;
    std::atexit([] { std::filesystem::remove_all(folder()); });
    store::Store s = store::Store::open(folder() + "/ui.db");
    for (int r = 0; r < 2; ++r) {
      const int64_t id = s.runs().start("exp", "run-" + std::to_string(r), R"({"lr": 0.1, "batch": )" + std::to_string(32 << r) + "}").id;
      for (int64_t e = 0; e < 4; ++e) s.runs().log_epoch(id, e, {{"loss", 1.0 / static_cast<double>(e + 1 + r)}, {"accuracy", 0.5 + 0.1 * e}});
      s.runs().finish(id);
    }
    s.models().save("mlp", mlp(1), {{"accuracy", 0.8}}, "{}", {"small"});
    s.models().save("mlp", mlp(2), {{"accuracy", 0.9}}, "{}");
    s.models().set_alias("mlp", "production", 1);
    store::DatasetWriter w = s.datasets().create("digits", {.fields = {"image", "label"}});
    for (int64_t i = 0; i < 4; ++i) {
      std::vector<uint8_t> px(64, static_cast<uint8_t>(i * 40));
      w.append({.tensors = {{"image", from_vector(px, {1, 8, 8})}, {"label", scalar_tensor(static_cast<double>(i % 2), Int64)}},
                .metadata = R"({"label": )" + std::to_string(i % 2) + "}"});
    }
    w.commit();
    flow::Tasks tasks(s);
    tasks.submit("train", R"({"lr": 0.1})");
    tasks.submit("evaluate", "{}");
    return std::make_unique<ui::Dashboard>(s, ui::DashboardOptions{.allow_writes = true, .token = "fuzz-token-0123456789"});
  }();
  return *d;
}

std::string line(const std::string& s, size_t& at) {
  const size_t end = std::min(s.find('\n', at), s.size());
  std::string out = s.substr(at, end - at);
  at = end < s.size() ? end + 1 : end;
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  ui::Dashboard& d = dashboard();
  static const char* const methods[] = {"GET", "POST", "PUT", "DELETE", "HEAD"};
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  ui::Request r;
  r.method = methods[(data[0] & 7) % 5];
  r.host = (data[0] & 8) ? "evil.example:8080" : "127.0.0.1:8080";
  r.token = (data[0] & 16) ? "fuzz-token-0123456789" : "";
  size_t at = 0;
  r.path = line(rest, at);
  const std::string query = line(rest, at);
  for (size_t p = 0; p < query.size();) {
    const size_t amp = std::min(query.find('&', p), query.size());
    const std::string pair = query.substr(p, amp - p);
    const size_t eq = pair.find('=');
    r.query[pair.substr(0, eq)] = eq == std::string::npos ? "" : pair.substr(eq + 1);
    p = amp + 1;
  }
  r.body = rest.substr(at);
  const ui::Response res = d.handle(r);
  if (res.status >= 500) {
    std::fprintf(stderr, "fuzz_ui: status %d for %s %s: %s\n", res.status, r.method.c_str(), r.path.c_str(), res.body.c_str());
    std::abort();
  }
  if (res.content_type.rfind("application/json", 0) == 0 && !nlohmann::json::accept(res.body)) {
    std::fprintf(stderr, "fuzz_ui: a JSON answer that is not JSON (status %d): %s\n", res.status, res.body.c_str());
    std::abort();
  }
  return 0;
}
