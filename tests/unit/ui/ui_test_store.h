#pragma once
// The store the dashboard's tests look at (tests/unit/ui and the browser test tests/ui): three
// finished runs of known curves, a model of two versions (alias "production" on 1, version 2
// made by run 2), a dataset of 8x8 gray images with labels, two pending tasks and one that
// agent "agent-1" has claimed.
#include <loom/core/tensor.h>
#include <loom/flow/tasks.h>
#include <loom/ops/creation.h>
#include <loom/store/datasets.h>
#include <loom/store/model_registry.h>
#include <loom/store/runs.h>
#include <loom/store/store.h>

#include <cstdint>
#include <string>
#include <vector>

#include "unit/store/store_test_util.h"

namespace loom_test {

struct UiStore {
  std::vector<int64_t> runs;   // ids of "lr-0.1", "lr-0.01", "lr-0.01-b64"
  std::vector<int64_t> tasks;  // two pending tasks, then one running (claimed by "agent-1")
};

// loss of run r at epoch e: 1 / (e + 1) * (r + 1), val_accuracy: 0.5 + 0.1 * e - 0.05 * r.
inline double ui_loss(size_t r, size_t e) { return 1.0 / static_cast<double>(e + 1) * static_cast<double>(r + 1); }
inline double ui_accuracy(size_t r, size_t e) { return 0.5 + 0.1 * static_cast<double>(e) - 0.05 * static_cast<double>(r); }
constexpr size_t kUiEpochs = 5;

// The image of sample i: pixel (y, x) = (i * 16 + y * 8 + x) % 256.
inline uint8_t ui_pixel(int64_t i, int64_t y, int64_t x) { return static_cast<uint8_t>((i * 16 + y * 8 + x) % 256); }

inline UiStore fill_ui_store(loom::store::Store& s) {
  using namespace loom;
  UiStore out;
  const std::vector<std::string> names = {"lr-0.1", "lr-0.01", "lr-0.01-b64"};
  const std::vector<std::string> hps = {R"({"lr": 0.1, "batch": 32, "optimizer": "adam"})", R"({"lr": 0.01, "batch": 32, "optimizer": "adam"})",
                                        R"({"lr": 0.01, "batch": 64, "optimizer": "adam"})"};
  for (size_t r = 0; r < names.size(); ++r) {
    const int64_t id = s.runs().start("mnist", names[r], hps[r], r == 2 ? std::vector<std::string>{"baseline"} : std::vector<std::string>{}).id;
    for (size_t e = 0; e < kUiEpochs; ++e) s.runs().log_epoch(id, static_cast<int64_t>(e), {{"loss", ui_loss(r, e)}, {"val_accuracy", ui_accuracy(r, e)}});
    s.runs().finish(id);
    out.runs.push_back(id);
  }
  s.models().save("mlp", small_mlp(1), {{"accuracy", 0.8}}, R"({"hidden": 8})", {"small"});
  s.models().save("mlp", small_mlp(2), {{"accuracy", 0.9}}, R"({"hidden": 8})", {}, {.task_id = 0, .run_id = out.runs[1]});
  s.models().set_alias("mlp", "production", 1);
  store::DatasetWriter w = s.datasets().create("digits", {.fields = {"image", "label"}, .tags = {"toy"}});
  for (int64_t i = 0; i < 6; ++i) {
    std::vector<uint8_t> px;
    for (int64_t y = 0; y < 8; ++y)
      for (int64_t x = 0; x < 8; ++x) px.push_back(ui_pixel(i, y, x));
    w.append({.tensors = {{"image", from_vector(px, {1, 8, 8})}, {"label", scalar_tensor(static_cast<double>(i % 3), Int64)}},
              .metadata = R"({"label": )" + std::to_string(i % 3) + R"(, "split": ")" + (i < 4 ? "train" : "test") + "\"}",
              .tags = i == 5 ? std::vector<std::string>{"hard"} : std::vector<std::string>{}});
  }
  w.commit();
  flow::Tasks tasks(s);
  out.tasks.push_back(tasks.submit("train", R"({"lr": 0.1})"));
  out.tasks.push_back(tasks.submit("evaluate", "{}"));
  out.tasks.push_back(tasks.submit("export", "{}"));
  tasks.claim({"export"}, "agent-1");
  return out;
}

}  // namespace loom_test
