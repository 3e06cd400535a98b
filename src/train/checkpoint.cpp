// Model::save_checkpoint and Model::load_checkpoint: the weights in the model file, the
// training state (optimizer, generator, epochs, history, loader position) in its metadata
// under "loom.train". Loading reads and checks every part before anything changes.
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "core/json_util.h"
#include "loom/data/dataset.h"
#include "loom/io/model_file.h"
#include "loom/ops/random.h"
#include "loom/train/model.h"

namespace loom::train {

using json = nlohmann::json;

void Model::save_checkpoint(const std::string& path, const data::DataLoader* loader) const {
  const OptimizerState os = optimizer_->state_dict();
  io::TensorMap extra;
  for (const auto& [k, t] : os.tensors) extra["optimizer/" + k] = t;
  // Floats through detail::json_float: a NaN or inf loss must not become null (unloadable).
  json scalars = json::object(), history = json::object();
  for (const auto& [k, v] : os.scalars) scalars[k] = detail::json_float(v);
  for (const auto& [k, series] : history_.series) {
    json values = json::array();
    for (double v : series) values.push_back(detail::json_float(v));
    history[k] = std::move(values);
  }
  json meta{{"optimizer", optimizer_->name()}, {"counters", os.counters},
            {"scalars", std::move(scalars)},   {"rng", {default_generator().seed(), default_generator().counter()}},
            {"epochs_done", epochs_done_},     {"history", std::move(history)}};
  if (loader) {
    meta["loader"] = {loader->position().epoch, loader->position().batch};
    // What a batch was, so that a loader of another layout (data-parallel at another number
    // of ranks, another batch size) resumes at the same place in the epoch's order.
    const data::LoaderOptions& lo = loader->options();
    meta["loader_layout"] = {{"batch_size", lo.batch_size}, {"shards", lo.shard.count}, {"batches", loader->size()}};
  }
  io::save_state(path, inference_, extra, {{"loom.train", meta.dump()}});
}

namespace {

// A checkpoint's training state as read from its file, every part checked, nothing applied yet.
struct TrainingState {
  OptimizerState optimizer;
  uint64_t rng_seed = 0, rng_counter = 0;
  int64_t epochs_done = 0;
  std::map<std::string, std::vector<double>> history;
  std::optional<data::LoaderPosition> position;
};

// The file's training-state JSON, one error message for everything malformed in it.
class TrainingStateJson {
 public:
  TrainingStateJson(const io::Checkpoint& c, const std::string& path) : path_(path) {
    auto it = c.metadata.find("loom.train");
    if (it == c.metadata.end()) throw IOError("Model::load_checkpoint: '" + path + "' holds weights but no training state");
    std::string error;
    std::optional<json> parsed = detail::parse_json(it->second, &error);
    if (!parsed) throw bad(error);
    if (!parsed->is_object()) throw bad("it is not a JSON object");
    meta_ = std::move(*parsed);
  }

  IOError bad(const std::string& what) const {
    return IOError("Model::load_checkpoint: '" + path_ + "' has a malformed training state: " + what);
  }

  // A required field of the given JSON type.
  const json& field(const char* key, bool (json::*is)() const noexcept, const char* valid) const {
    auto f = meta_.find(key);
    if (f == meta_.end()) throw bad(std::string("the field '") + key + "' is missing");
    if (!((*f).*is)()) throw bad(std::string("the field '") + key + "' is not " + valid);
    return *f;
  }

  const json& meta() const { return meta_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  json meta_;
};

// The optimizer's state: its tensors (the file's extra tensors under "optimizer/"), counters
// and scalars; the optimizer that wrote it must be of this model's kind.
OptimizerState read_optimizer_state(const TrainingStateJson& state, const io::Checkpoint& c, const std::string& expected) {
  const std::string optimizer = state.field("optimizer", &json::is_string, "a string").get<std::string>();
  if (optimizer != expected)
    throw ValueError("Model::load_checkpoint: '" + state.path() + "' was written by a " + optimizer + " optimizer, this model uses " +
                     expected);
  OptimizerState os;
  for (const auto& [k, t] : c.extra)
    if (k.rfind("optimizer/", 0) == 0) os.tensors[k.substr(10)] = t;
  for (const auto& [k, v] : state.field("counters", &json::is_object, "an object").items()) {
    const auto n = detail::json_to_int(v);
    if (!n) throw state.bad("the counter '" + k + "' is not an integer");
    os.counters[k] = *n;
  }
  for (const auto& [k, v] : state.field("scalars", &json::is_object, "an object").items()) {
    const auto x = detail::json_to_float(v);
    if (!x) throw state.bad("the scalar '" + k + "' is not " + detail::json_float_help());
    os.scalars[k] = *x;
  }
  return os;
}

std::map<std::string, std::vector<double>> read_history(const TrainingStateJson& state) {
  std::map<std::string, std::vector<double>> history;
  for (const auto& [k, series] : state.field("history", &json::is_object, "an object").items()) {
    if (!series.is_array()) throw state.bad("the history of '" + k + "' is not an array");
    std::vector<double>& out = history[k];
    for (const json& v : series) {
      // null: a non-finite value as files before detail::json_float wrote it
      const auto x = v.is_null() ? std::optional<double>(std::nan("")) : detail::json_to_float(v);
      if (!x) throw state.bad("the history of '" + k + "' holds " + v.dump() + " (valid: " + detail::json_float_help() + ")");
      out.push_back(*x);
    }
  }
  return history;
}

// The layout a saved loader position counts in: batch size, shards and batches per epoch.
struct LoaderLayout {
  int64_t batch_size = 0, shards = 0, batches = 0;
};

// The file's layout (written with one), else this loader's (older files).
LoaderLayout saved_layout(const TrainingStateJson& state, const data::DataLoader& loader) {
  LoaderLayout layout{loader.options().batch_size, loader.options().shard.count, loader.size()};
  if (!state.meta().contains("loader_layout")) return layout;
  const json& lay = state.meta()["loader_layout"];
  auto get = [&](const char* key) {
    const auto v = lay.is_object() && lay.contains(key) ? detail::json_to_int(lay[key], 1) : std::nullopt;
    if (!v) throw state.bad(std::string("the loader layout's '") + key + "' is missing or not an integer >= 1");
    return *v;
  };
  layout.batch_size = get("batch_size");
  layout.shards = get("shards");
  layout.batches = lay.is_object() && lay.contains("batches") ? detail::json_to_int(lay["batches"], 0).value_or(-1) : -1;
  if (layout.batches < 0) throw state.bad("the loader layout's 'batches' is missing or not an integer >= 0");
  return layout;
}

std::string layout_text(int64_t shards, int64_t batch_size) {
  return std::to_string(shards) + (shards == 1 ? " shard" : " shards") + " of batch " + std::to_string(batch_size) +
         " (a global batch of " + std::to_string(shards * batch_size) + ")";
}

// Where `loader` resumes: the saved position, moved into this loader's layout. Mid-epoch, the
// same place in the epoch's order (every shard's batch b covers the order's positions
// [b * global, (b + 1) * global)), which this loader must have a batch boundary at.
std::optional<data::LoaderPosition> resume_position(const TrainingStateJson& state, const data::DataLoader* loader) {
  if (!loader || !state.meta().contains("loader")) return std::nullopt;
  const LoaderLayout saved = saved_layout(state, *loader);
  const json& l = state.meta()["loader"];
  const auto epoch = l.is_array() && l.size() == 2 ? detail::json_to_int(l[0], 0) : std::nullopt;
  const auto batch = l.is_array() && l.size() == 2 ? detail::json_to_int(l[1], 0, saved.batches) : std::nullopt;
  if (!epoch || !batch)
    throw state.bad("the loader position " + (l.is_structured() ? std::string("") : l.dump()) + " is not [epoch >= 0, batch in [0, " +
                    std::to_string(saved.batches) + "]]");
  data::LoaderPosition position{*epoch, *batch};
  const int64_t here = loader->options().batch_size * loader->options().shard.count;
  int64_t global = 0, sample = 0;
  if (__builtin_mul_overflow(saved.batch_size, saved.shards, &global) || __builtin_mul_overflow(*batch, global, &sample))
    throw state.bad("the loader layout's global batch (batch_size * shards) or position overflows");
  if (*batch == saved.batches) {
    position.batch = loader->size();  // the epoch's batches were all delivered
    return position;
  }
  const std::string& path = state.path();
  const std::string this_layout = layout_text(loader->options().shard.count, loader->options().batch_size);
  if (sample / here > loader->size())
    throw ValueError("Model::load_checkpoint: '" + path + "' stands at position " + std::to_string(sample) + " of epoch " +
                     std::to_string(position.epoch) + "'s order, beyond this loader's " + std::to_string(loader->size()) + " batches of " +
                     this_layout);
  if (sample % here != 0)
    throw ValueError("Model::load_checkpoint: '" + path + "' stands mid-epoch after batch " + std::to_string(*batch) + " of " +
                     std::to_string(saved.batches) + " of epoch " + std::to_string(position.epoch) + " of a loader of " +
                     layout_text(saved.shards, saved.batch_size) + ", at position " + std::to_string(sample) +
                     " of the epoch's order; this loader of " + this_layout +
                     " has no batch boundary there (valid: a global batch that divides " + std::to_string(sample) +
                     ", or a checkpoint written at the end of an epoch)");
  position.batch = sample / here;
  return position;
}

TrainingState read_training_state(const io::Checkpoint& c, const std::string& path, const std::string& optimizer,
                                  const data::DataLoader* loader) {
  const TrainingStateJson state(c, path);
  TrainingState s;
  s.optimizer = read_optimizer_state(state, c, optimizer);
  const json& rng = state.field("rng", &json::is_array, "an array");
  if (rng.size() != 2 || !rng[0].is_number_unsigned() || !rng[1].is_number_unsigned())
    throw state.bad("the field 'rng' is not two non-negative integers (seed, counter)");
  s.rng_seed = rng[0].get<uint64_t>();
  s.rng_counter = rng[1].get<uint64_t>();
  const auto epochs = detail::json_to_int(state.field("epochs_done", &json::is_number, "a number"), 0);
  if (!epochs) throw state.bad("the field 'epochs_done' is not an integer >= 0");
  s.epochs_done = *epochs;
  s.history = read_history(state);
  s.position = resume_position(state, loader);
  return s;
}

}  // namespace

void Model::load_checkpoint(const std::string& path, data::DataLoader* loader) {
  // All or nothing: the file is read and every part checked (weights, training state,
  // optimizer state, loader position) before the model, the optimizer or the loader change.
  const std::string source = "'" + path + "'";
  io::TensorMap weights;
  const io::Checkpoint c = io::read_state(path, &weights);
  io::check_graph_state(inference_, weights, source);
  TrainingState s = read_training_state(c, path, optimizer_->name(), loader);
  // Commit. The optimizer checks its state against its parameters and changes nothing when it
  // throws; the weights were checked above, so copying them cannot fail.
  optimizer_->load_state_dict(s.optimizer);
  io::load_graph_state(inference_, weights, source);
  default_generator().set_state(s.rng_seed, s.rng_counter);
  epochs_done_ = s.epochs_done;
  history_.series = std::move(s.history);
  if (s.position) loader->set_position(*s.position);
}

}  // namespace loom::train
