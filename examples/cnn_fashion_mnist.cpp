// The main job: a small CNN trained on Fashion-MNIST (from the Debian package
// dataset-fashion-mnist) with Loom's layer graph, Model::fit, AdamW, a progress bar, a cosine
// learning-rate schedule and random horizontal flips. 5000 training images are held out for
// validation; the epoch with the best validation accuracy is saved to one file (architecture and
// weights), whose test accuracy is then measured once; so is a second file, the same network
// averaging its logits over each image and its mirror image (test-time augmentation: one graph
// that applies the trained network twice, sharing its weights). evaluate_saved_model, a separate
// program that does not contain this model's code, reloads the files and measures them again.
//
//   ./build/examples/cnn_fashion_mnist [--epochs N] [--out DIR] [--data DIR] [--threads N]
//                                      [--limit N] [--distributed]
//
// Data-parallel (docs/distributed.md): `mpirun -np 2 ./build/examples/cnn_fashion_mnist ...`
// trains in 2 processes (automatic under Open MPI's mpirun, or with --distributed), each with
// half of every batch of 128 and synchronized batch norm, as one process would; rank 0 prints,
// saves and tests.
#include <loom/dist/optimizer.h>
#include <loom/loom.h>
#include <loom/data/loader.h>
#include <loom/io/model_file.h>
#include <loom/train/callbacks.h>
#include <loom/train/model.h>
#include <loom/train/plot.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <optional>
#include <string>

using namespace loom;

namespace {

struct Args {
  int epochs = 18;
  int threads = 0;
  int64_t limit = 0;  // train on the first N training images only (a quick check); 0: all
  bool distributed = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;  // launched by mpirun
  std::string out = "main-job";
  std::string data = "/usr/share/datasets/fashion-mnist";
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--distributed") {
      a.distributed = true;
      --i;  // a flag: no value
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "option %s needs a value\n", k.c_str());
      std::exit(2);
    }
    const std::string v = argv[i + 1];
    if (k == "--epochs") a.epochs = std::atoi(v.c_str());
    else if (k == "--limit") a.limit = std::atoll(v.c_str());
    else if (k == "--out") a.out = v;
    else if (k == "--data") a.data = v;
    else if (k == "--threads") a.threads = std::atoi(v.c_str());
    else {
      std::fprintf(stderr, "unknown option %s (valid: --epochs N, --out DIR, --data DIR, --threads N, --limit N, --distributed)\n",
                   k.c_str());
      std::exit(2);
    }
  }
  return a;
}

// (N, 1, 28, 28) float32 images in [0, 1] and int64 labels.
std::shared_ptr<data::TensorDataset> load(const std::string& dir, const std::string& split) {
  Tensor images = data::read_idx(dir + "/" + split + "-images-idx3-ubyte.gz");
  Tensor labels = data::read_idx(dir + "/" + split + "-labels-idx1-ubyte.gz");
  Tensor x = (images.astype(Float32) / 255.0).reshape({images.dim(0), 1, 28, 28});
  return std::make_shared<data::TensorDataset>(std::vector<Tensor>{x, labels.astype(Int64)});
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  if (args.threads > 0) set_num_threads(args.threads);
  std::optional<dist::Context> context;  // MPI for the whole run when data-parallel
  if (args.distributed) context.emplace();
  const int ranks = context ? context->size() : 1;
  const bool root = !context || context->rank() == 0;
  if (128 % ranks != 0) {
    std::fprintf(stderr, "--distributed: the batch of 128 must split evenly over the %d processes\n", ranks);
    return 2;
  }
  manual_seed(2026);
  std::filesystem::create_directories(args.out);

  const data::Transform normalize = data::Normalize({0.2860}, {0.3530});
  auto split = data::random_split(load(args.data, "train"), {55000, 5000}, 7);
  std::shared_ptr<const data::Dataset> train_set = split[0];
  if (args.limit > 0 && args.limit < train_set->size()) {
    std::vector<int64_t> first(static_cast<size_t>(args.limit));
    std::iota(first.begin(), first.end(), int64_t{0});
    train_set = std::make_shared<data::Subset>(train_set, std::move(first));
  }
  // per process: its share of every batch of 128, and of the validation set (fit shards the
  // training loader itself)
  data::DataLoader train(train_set, {.batch_size = 128 / ranks, .shuffle = true, .seed = 1, .n_jobs = 1,
                                     .transform = data::Compose({data::RandomHorizontalFlip(0.5), normalize})});
  data::DataLoader validation(split[1], {.batch_size = 500, .transform = normalize,
                                         .shard = context ? dist::shard() : data::Shard{}});
  data::DataLoader test(load(args.data, "t10k"), {.batch_size = 500, .transform = normalize});
  if (root)
    std::printf("Fashion-MNIST: %lld training, %lld validation and %lld test images, %d threads\n",
                static_cast<long long>(train.dataset()->size()), static_cast<long long>(validation.dataset()->size()),
                static_cast<long long>(test.dataset()->size()), get_num_threads());

  // conv-bn-relu-pool three times (32, 64, 128 filters), then a small classifier
  // (loom::zoo::fashion_cnn)
  Graph cnn = zoo::fashion_cnn().graph;
  const std::vector<Tensor> params = cnn.parameters();
  int64_t count = 0;
  for (const Tensor& p : params) count += p.numel();
  if (root) std::printf("CNN with %lld parameters\n", static_cast<long long>(count));
  // data-parallel: batch norm over the whole batch of 128, not each process's part
  if (context) {
    nn::sync_batch_norm(cnn);
    if (root) std::printf("data-parallel: %d processes x %d images per batch, synchronized batch norm\n", ranks, 128 / ranks);
  }

  // AdamW's decoupled weight decay: without it this model overfits (Adam: 93.19 % test, AdamW
  // 93.50 %; docs/benchmarks-history.md, "The main job's model")
  auto adam = std::make_shared<train::AdamW>(params, train::AdamWOptions{.lr = 2e-3, .weight_decay = 0.05});
  train::Model model(cnn, [](const Tensor& logits, const Tensor& labels) { return cross_entropy(logits, labels); }, adam,
                     {std::make_shared<train::Accuracy>()});
  // the weights are rank 0's (fit broadcasts them); dropout draws differently on every rank
  if (context) manual_seed(2026 + static_cast<uint64_t>(context->rank()));
  const std::string model_path = args.out + "/fashion_cnn.safetensors";
  auto schedule = std::make_shared<train::CosineAnnealingLR>(*adam, args.epochs, 1e-5);
  std::vector<std::shared_ptr<train::Callback>> callbacks{
      std::make_shared<train::LearningRateScheduler>(schedule),
      std::make_shared<train::ModelCheckpoint>(model_path, args.out + "/last_checkpoint.safetensors", "val_accuracy"),
      std::make_shared<train::CSVLogger>(args.out + "/history.csv"),
      std::make_shared<train::TerminateOnNaN>()};

  const auto t0 = std::chrono::steady_clock::now();
  train::FitOptions fit{.epochs = args.epochs, .validation = &validation, .callbacks = callbacks};
  if (context) fit.distributed = dist::data_parallel();  // rank 0 shows progress and writes the files
  train::History h = model.fit(train, fit);
  const double minutes = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 60;
  if (!root) return 0;  // every rank holds the same model: rank 0 saves and tests it
  train::save_learning_curves(h, args.out + "/learning_curves.svg", "Loom CNN on Fashion-MNIST");

  // the saved model is the best epoch by validation accuracy: put its weights back and test it
  io::load_state(model_path, cnn);
  const auto& val = h["val_accuracy"];
  const auto best = std::max_element(val.begin(), val.end());
  const double test_acc = model.evaluate(test)["accuracy"];
  std::printf("\ntrained %d epochs in %.1f min; best validation accuracy %.2f%% at epoch %d, saved to %s\n",
              static_cast<int>(val.size()), minutes, 100 * *best, static_cast<int>(best - val.begin()) + 1, model_path.c_str());
  std::printf("test accuracy of the saved model: %.2f%%\n", 100 * test_acc);
  // fit() ran each batch as one compiled train::TrainStep call: what they did with memory
  const train::StepStats& step = model.train_step().stats();
  std::printf("training steps: one train::TrainStep call per batch (compiled plan, backward, %s over all parameters "
              "in one pass); %lld of %lld took every block from the allocator's cache or the memory plan, %lld ran "
              "on the plan (a %.1f MB buffer laid out by the blocks' lifetimes); the last: peak %.1f MB\n",
              model.optimizer().name().c_str(), static_cast<long long>(step.cached_steps),
              static_cast<long long>(step.steps), static_cast<long long>(step.arena_steps),
              static_cast<double>(step.arena_bytes) / 1e6, static_cast<double>(step.peak_bytes) / 1e6);

  // Test-time augmentation: the trained network as one layer (nn::Module, sharing its weights),
  // applied to each image and to its mirror image (nn::Flip along the width), logits averaged.
  // Training flipped images at random, so both views are ones the network knows.
  nn::Module network(cnn.inputs(), cnn.outputs()[0], "fashion_cnn");
  nn::Input image(Shape{-1, 1, 28, 28}, Float32, "image");
  nn::Mean averaged({network.reuse_with(image, "as_seen"), network.reuse_with(nn::Flip(image, {2}, "mirror"), "mirrored")},
                    "flip_averaged");
  Graph flips = Graph::build({averaged}, {image});
  // a Model to evaluate and save it; the optimizer is the training's, over the same weights,
  // and is not stepped again
  train::Model flips_model(flips, [](const Tensor& logits, const Tensor& labels) { return cross_entropy(logits, labels); },
                           adam, {std::make_shared<train::Accuracy>()});
  const std::string flips_path = args.out + "/fashion_cnn_flips.safetensors";
  flips_model.save(flips_path);
  std::printf("test accuracy averaged over each image and its mirror image: %.2f%% (saved to %s)\n",
              100 * flips_model.evaluate(test)["accuracy"], flips_path.c_str());
  std::printf("learning curves: %s/learning_curves.svg, log: %s/history.csv\n", args.out.c_str(), args.out.c_str());
  // training time depends on the machine: name it next to the time
  std::printf("machine: %s; training time %.1f min\n", machine_summary().c_str(), minutes);
  return 0;
}
