// Training throughput: one optimizer step (forward, loss, backward, [clipping,] update) of
// small standard models on synthetic in-memory data, timed per step. Prints one JSON object per
// line, like loom_bench:
//   {"name": "train_mlp", "threads": 1, "seconds": 0.00123, "cpu_seconds": 0.00124}
// `seconds` is the median wall time of one training step after 3 warm-up steps, `cpu_seconds`
// the median process CPU time (every thread's) of one step: on a machine other programs load,
// the 1-thread CPU time is the steadier figure (time spent waiting for a core is not in it). The peer is
// bench/torch_train_peer.py (same models, shapes, losses and optimizers); docs/benchmarks.md
// ("Training throughput") has the results.
//
//   train_mlp       MLP 784-512-512-10 (zoo::mlp), batch 128, cross-entropy, Adam(1e-3)
//   train_cnn       the Fashion-MNIST CNN of issue 11's table (the main job's until 2026-11-24;
//                   zoo::fashion_cnn with widths {32, 64}, hidden 128: conv32-bn-relu-pool,
//                   conv64-bn-relu-pool, flatten, dropout .25, fc128, relu, dropout .25, fc10),
//                   batch 128 of 1x28x28, cross-entropy, Adam(2e-3), Train mode
//   train_ptb_lstm  PTB "small" LSTM LM (zoo::lstm_lm: vocab 10000, embedding 200, 2 LSTM layers
//                   of 200), 20 steps x batch 20, cross-entropy over all 400 tokens, SGD(lr 1),
//                   clip_grad_norm(5); zero initial state per batch
//   train_word2vec  skip-gram with negative sampling: vocab 50000, dim 128, batch 128 (center,
//                   context) pairs with 64 negatives per pair; loss = mean over the batch of
//                   -log s(u.v) - sum_k log s(-n_k.v) (log s(x) = -softplus(-x)); the negative
//                   scores are one batched matmul (128, 64, 128) x (128, 128, 1); dense
//                   gradients of both tables; SGD(lr 0.5)
//   train_gpt       decoder-only byte LM in GPT-2's form: token + learned position embeddings
//                   (nn::Lookup; positions an nn::Constant arange read through a Lookup), 4
//                   pre-norm blocks (nn::TransformerEncoderLayer: norm_first, causal, 6 heads,
//                   d 384, feed-forward 1536 with GELU(tanh), no dropout), final LayerNorm,
//                   linear head to 256 bytes; T 256, batch 8; cross-entropy over all 2048
//                   tokens; AdamW(1e-3, weight decay 0.01)
//   train_gpt_T1024 the same model at T 1024, batch 2 (the same 2048 tokens a step; attention's
//                   share grows with T)
//
// The same batch is used at every step, so the loss must fall over the timed steps: the first
// and last loss go to stderr, and the program fails (exit 1) when a loss did not decrease.
//
// --memory 1 measures memory instead of time (one step after the same 3 warm-up steps, each
// model in a fresh process: the program re-runs itself once per model with --child 1, which
// measures in that process) and prints
//   {"name": "train_cnn", "threads": 1, "peak_bytes": ..., "state_bytes": ..., "rss_growth_bytes": ...}
//   peak_bytes        highest live tensor bytes during the step (memory_stats after
//                     reset_peak_memory; every tensor, oneDNN scratchpads and cached
//                     reordered weights included, sizes as the allocator rounds them)
//   state_bytes       live tensor bytes when the step starts: parameters, gradients, optimizer
//                     state, the batch (what outlives a step); peak_bytes - state_bytes is
//                     what the step itself adds (activations saved for backward, temporaries)
//   rss_growth_bytes  process peak RSS during the step (VmHWM, reset through
//                     /proc/self/clear_refs just before it) minus the RSS once the model and
//                     batch exist, before the first step; -1 where /proc cannot tell
// docs/benchmarks.md ("Peak training memory") describes the method and bench/torch_train_peer.py's
// twin of it.
//
// Usage: train_bench [--threads 1,2] [--only train_mlp,train_cnn] [--steps 15] [--memory 1]
//        train_bench --threads N --serve 1      (bench/python_train.py's C++ side: see serve())
#include <unistd.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "loom/loom.h"
#include "timing.h"

using namespace loom;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<int> parse_ints(const std::string& s) {
  std::vector<int> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(std::atoi(item.c_str()));
  return v;
}

std::vector<Tensor> graph_params(const Graph& g) { return g.parameters(); }

// A training step returns the loss (before the update).
using Step = std::function<float()>;

struct Result {
  double median = 0, cpu_median = 0, min = 0, cpu_min = 0;
  float first_loss = 0, last_loss = 0;
};

Result time_steps(const Step& step, int steps, int warmup = 3) {
  for (int i = 0; i < warmup; ++i) step();  // warm-up: allocator caches, oneDNN primitives, optimizer state
  std::vector<double> t, c;
  Result r;
  for (int i = 0; i < steps; ++i) {
    const double a = now_s(), ca = bench::cpu_ms() * 1e-3;
    const float loss = step();
    c.push_back(bench::cpu_ms() * 1e-3 - ca);
    t.push_back(now_s() - a);
    if (i == 0) r.first_loss = loss;
    r.last_loss = loss;
  }
  std::sort(t.begin(), t.end());
  std::sort(c.begin(), c.end());
  r.median = t[t.size() / 2];
  r.cpu_median = c[c.size() / 2];
  r.min = t.front();
  r.cpu_min = c.front();
  return r;
}

// ------------------------------------------------------------------ memory

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM"), -1 when unavailable.
int64_t proc_status_bytes(const std::string& field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field + ":", 0) == 0) return std::atoll(line.c_str() + field.size() + 1) * 1024;  // kB
  return -1;
}

// Resets VmHWM to the current RSS (Linux: writing 5 to clear_refs).
bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

struct MemoryResult {
  int64_t peak = 0, state = 0, rss_growth = -1;
};

MemoryResult measure_memory(const std::function<Step()>& make) {
  const Step step = make();
  const int64_t rss0 = proc_status_bytes("VmRSS");
  for (int i = 0; i < 3; ++i) step();  // as time_steps: optimizer state exists, caches are warm
  MemoryResult r;
  r.state = memory_stats().current_bytes;
  reset_peak_memory();
  const bool rss_ok = rss0 >= 0 && reset_peak_rss();
  step();
  r.peak = memory_stats().peak_bytes;
  const int64_t hwm = proc_status_bytes("VmHWM");
  if (rss_ok && hwm >= 0) r.rss_growth = hwm - rss0;
  return r;
}

// Runs this program again for one model and thread count and waits for it: each memory figure
// comes from a fresh process, so no model's cached blocks or RSS count in another's.
bool run_child(const char* self, const std::string& name, int threads) {
  const std::string t = std::to_string(threads);
  const pid_t pid = fork();
  if (pid == 0) {
    execl(self, self, "--memory", "1", "--only", name.c_str(), "--threads", t.c_str(), "--child", "1",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// ------------------------------------------------------------------ models

// The three graph models run their steps as Model::fit does: one train::TrainStep call.
Step make_mlp() {
  auto m = std::make_shared<zoo::Network>(zoo::mlp(784, {512, 512}, 10));
  auto opt = std::make_shared<train::Adam>(m->parameters(), train::AdamOptions{.lr = 1e-3});
  auto step = std::make_shared<train::TrainStep>(
      m->graph, [](const Tensor& y, const Tensor& t) { return cross_entropy(y, t); }, opt);
  Generator gen(1);
  Tensor x = randn({128, 784}, Float32, default_device(), &gen);
  Tensor y = randint(0, 10, {128}, Int64, default_device(), &gen);
  return [m, step, x, y] { return (*step)({x, y}).loss.item<float>(); };
}


Step make_cnn() {
  Graph g = zoo::fashion_cnn(10, {.widths = {32, 64}, .hidden = 128}).graph;  // the benchmarks' CNN
  auto opt = std::make_shared<train::Adam>(graph_params(g), train::AdamOptions{.lr = 2e-3});
  auto step = std::make_shared<train::TrainStep>(
      g, [](const Tensor& y, const Tensor& t) { return cross_entropy(y, t); }, opt);
  Generator gen(2);
  Tensor x = randn({128, 1, 28, 28}, Float32, default_device(), &gen);
  Tensor y = randint(0, 10, {128}, Int64, default_device(), &gen);
  return [step, x, y] { return (*step)({x, y}).loss.item<float>(); };
}

Step make_lstm() {
  constexpr int64_t V = 10000, E = 200, H = 200, B = 20, T = 20;
  auto m = std::make_shared<zoo::Network>(zoo::lstm_lm(V, E, H, 2));
  auto opt = std::make_shared<train::SGD>(m->parameters(), train::SGDOptions{.lr = 1.0});
  // logits (B, T, V) against (B * T) targets; gradients clipped to norm 5 before the update
  auto step = std::make_shared<train::TrainStep>(
      m->graph, [](const Tensor& logits, const Tensor& t) { return cross_entropy(logits.reshape({-1, V}), t); }, opt,
      train::TrainStepOptions{.clip_grad_norm = 5.0});
  Generator gen(3);
  Tensor ids = randint(0, V, {B, T}, Int64, default_device(), &gen);
  Tensor target = randint(0, V, {B * T}, Int64, default_device(), &gen);
  return [m, step, ids, target] { return (*step)({ids, target}).loss.item<float>(); };
}

Step make_word2vec() {
  constexpr int64_t V = 50000, D = 128, B = 128, K = 64;
  Generator gen(4);
  Tensor w_in = normal({V, D}, 0.0, 0.1, Float32, default_device(), &gen).requires_grad_();
  Tensor w_out = normal({V, D}, 0.0, 0.1, Float32, default_device(), &gen).requires_grad_();
  auto opt = std::make_shared<train::SGD>(std::vector<Tensor>{w_in, w_out}, train::SGDOptions{.lr = 0.5});
  Tensor center = randint(0, V, {B}, Int64, default_device(), &gen);
  Tensor context = randint(0, V, {B}, Int64, default_device(), &gen);
  Tensor negatives = randint(0, V, {B, K}, Int64, default_device(), &gen);
  return [opt, w_in, w_out, center, context, negatives] {
    opt->zero_grad();
    Tensor v = embedding(w_in, center);                         // (B, D)
    Tensor u = embedding(w_out, context);                       // (B, D)
    Tensor n = embedding(w_out, negatives);                     // (B, K, D)
    Tensor pos = sum(u * v, {1});                               // (B,)
    Tensor neg = matmul(n, v.reshape({B, D, 1})).reshape({B, K});  // (B, K)
    // -log s(pos) = softplus(-pos); -log s(-neg) = softplus(neg)
    Tensor loss = mean(softplus(-pos) + sum(softplus(neg), {1}));
    loss.backward();
    opt->step();
    return loss.item<float>();
  };
}

// GPT-2's form from the existing layers (train_gpt, train_gpt_T1024 above). zoo::gpt is not used
// so that the benchmark measures exactly these layers, as the peer's twin does.
std::function<Step()> make_gpt(int64_t T, int64_t B) {
  return [T, B]() -> Step {
    constexpr int64_t V = 256, D = 384, H = 6, L = 4;
    nn::Input ids(Shape{-1, T}, Int64, "ids");
    nn::Layer tok = nn::Lookup(ids, V, D, {.init = nn::Init::normal(0, 0.02)}, "wte");
    nn::Constant positions(arange(T, Int64), "positions");
    nn::Layer pos = nn::Lookup(positions, T, D, {.init = nn::Init::normal(0, 0.02)}, "wpe");
    nn::Layer h = nn::Add(tok, pos, "embed");
    for (int64_t i = 0; i < L; ++i)
      h = nn::TransformerEncoderLayer(h, H,
                                      {.ff_units = 4 * D, .dropout = 0, .activation = nn::gelu_tanh, .norm_first = true,
                                       .causal = true},
                                      std::nullopt, "h." + std::to_string(i));
    h = nn::LayerNorm(h, 1e-5, "ln_f");
    nn::Layer logits = nn::Linear(h, V, {}, "lm_head");
    Graph g = Graph::build({logits}, {ids});
    auto opt = std::make_shared<train::AdamW>(graph_params(g), train::AdamWOptions{.lr = 1e-3});
    auto step = std::make_shared<train::TrainStep>(
        g, [](const Tensor& y, const Tensor& t) { return cross_entropy(y.reshape({-1, V}), t); }, opt);
    Generator gen(5);
    Tensor x = randint(0, V, {B, T}, Int64, default_device(), &gen);
    Tensor y = randint(0, V, {B * T}, Int64, default_device(), &gen);
    return [step, x, y] { return (*step)({x, y}).loss.item<float>(); };
  };
}

// --serve 1: bench/python_train.py's C++ side. Reads "name steps" lines from stdin; a model is
// made (after manual_seed(0), as below) and warmed up (3 steps) at its first request and kept, so
// that a round of a few steps costs no rebuild; each request times `steps` more steps of it and
// answers one line: the medians, the fastest step (min_...: on a loaded machine noise only adds
// time), and the first and last loss at 9 digits (python_train.py checks that Loom from Python
// computed the same):
//   {"name": "train_mlp", "threads": 1, "seconds": ..., "cpu_seconds": ..., "min_seconds": ...,
//    "min_cpu_seconds": ..., "first_loss": ..., "last_loss": ...}
int serve(const std::vector<std::pair<std::string, std::function<Step()>>>& cases, int threads) {
  set_num_threads(threads);
  std::map<std::string, Step> live;
  std::string name;
  int steps = 0;
  while (std::cin >> name >> steps) {
    auto c = std::find_if(cases.begin(), cases.end(), [&](const auto& kv) { return kv.first == name; });
    if (c == cases.end() || steps < 1) {
      std::fprintf(stderr, "train_bench --serve: bad request '%s %d'\n", name.c_str(), steps);
      return 2;
    }
    int warmup = 0;
    if (!live.count(name)) {
      manual_seed(0);
      live[name] = c->second();
      warmup = 3;
    }
    const Result r = time_steps(live[name], steps, warmup);
    std::printf("{\"name\": \"%s\", \"threads\": %d, \"seconds\": %.6g, \"cpu_seconds\": %.6g, \"min_seconds\": %.6g, "
                "\"min_cpu_seconds\": %.6g, \"first_loss\": %.9g, \"last_loss\": %.9g}\n",
                name.c_str(), threads, r.median, r.cpu_median, r.min, r.cpu_min, static_cast<double>(r.first_loss),
                static_cast<double>(r.last_loss));
    std::fflush(stdout);
  }
  return 0;
}

// --only's comma-separated names, matched whole (train_gpt must not select train_gpt_T1024).
bool selected(const std::string& only, const std::string& name) {
  if (only.empty()) return true;
  std::stringstream ss(only);
  std::string item;
  while (std::getline(ss, item, ','))
    if (item == name) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads{1, get_num_threads()};
  std::string only;
  int steps = 15;
  bool memory = false, child = false, serving = false;
  if (argc % 2 == 0) {  // options come in pairs: a lone one (--help) would otherwise run everything
    std::fprintf(stderr, "usage: train_bench [--threads N[,M]] [--only a,b] [--steps N] [--memory 0|1]\n");
    return 2;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--threads") threads = parse_ints(argv[i + 1]);
    else if (k == "--only") only = argv[i + 1];
    else if (k == "--steps") steps = std::max(1, std::atoi(argv[i + 1]));
    else if (k == "--memory") memory = std::atoi(argv[i + 1]) != 0;
    else if (k == "--child") child = std::atoi(argv[i + 1]) != 0;
    else if (k == "--serve") serving = std::atoi(argv[i + 1]) != 0;
    else {
      std::fprintf(stderr, "unknown option %s (valid: --threads N[,M], --only a,b, --steps N, --memory 0|1, --serve 0|1)\n",
                   k.c_str());
      return 2;
    }
  }
  std::sort(threads.begin(), threads.end());
  threads.erase(std::unique(threads.begin(), threads.end()), threads.end());

  const std::vector<std::pair<std::string, std::function<Step()>>> cases = {
      {"train_mlp", make_mlp},
      {"train_cnn", make_cnn},
      {"train_ptb_lstm", make_lstm},
      {"train_word2vec", make_word2vec},
      {"train_gpt", make_gpt(256, 8)},
      {"train_gpt_T1024", make_gpt(1024, 2)},
  };
  if (serving) return serve(cases, threads.back());
  bool ok = true;
  if (memory) {
    for (int t : threads) {
      set_num_threads(t);
      for (const auto& [name, make] : cases) {
        if (!selected(only, name)) continue;
        if (!child) {
          ok = run_child("/proc/self/exe", name, t) && ok;
          continue;
        }
        manual_seed(0);
        const MemoryResult r = measure_memory(make);
        std::printf("{\"name\": \"%s\", \"threads\": %d, \"peak_bytes\": %lld, \"state_bytes\": %lld, "
                    "\"rss_growth_bytes\": %lld}\n",
                    name.c_str(), t, static_cast<long long>(r.peak), static_cast<long long>(r.state),
                    static_cast<long long>(r.rss_growth));
        std::fflush(stdout);
      }
    }
    return ok ? 0 : 1;
  }
  for (int t : threads) {
    set_num_threads(t);
    for (const auto& [name, make] : cases) {
      if (!selected(only, name)) continue;
      manual_seed(0);  // initializers and dropout masks
      const Result r = time_steps(make(), steps);
      std::printf("{\"name\": \"%s\", \"threads\": %d, \"seconds\": %.6g, \"cpu_seconds\": %.6g}\n", name.c_str(), t,
                  r.median, r.cpu_median);
      std::fflush(stdout);
      const bool fell = r.last_loss < r.first_loss;
      std::fprintf(stderr, "# %s threads %d: loss %.4f -> %.4f over %d timed steps%s\n", name.c_str(), t, r.first_loss,
                   r.last_loss, steps, fell ? "" : "  ** DID NOT DECREASE **");
      ok = ok && fell;
    }
  }
  return ok ? 0 : 1;
}
