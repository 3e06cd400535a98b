// The main job: a small CNN trained on Fashion-MNIST (from the Debian package
// dataset-fashion-mnist) with Loom's layer graph, Model::fit, a progress bar, a cosine
// learning-rate schedule and random horizontal flips. 5000 training images are held out for
// validation; the epoch with the best validation accuracy is saved to one file (architecture and
// weights), whose test accuracy is then measured once. evaluate_saved_model, a separate program
// that does not contain this model's code, reloads the file and measures it again.
//
//   ./build/examples/cnn_fashion_mnist [--epochs N] [--out DIR] [--data DIR] [--threads N]
#include <loom/loom.h>
#include <loom/data/loader.h>
#include <loom/io/model.h>
#include <loom/train/callbacks.h>
#include <loom/train/model.h>
#include <loom/train/plot.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

using namespace loom;

namespace {

struct Args {
  int epochs = 12;
  int threads = 0;
  std::string out = "main-job";
  std::string data = "/usr/share/datasets/fashion-mnist";
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--epochs") a.epochs = std::atoi(v.c_str());
    else if (k == "--out") a.out = v;
    else if (k == "--data") a.data = v;
    else if (k == "--threads") a.threads = std::atoi(v.c_str());
    else {
      std::fprintf(stderr, "unknown option %s (valid: --epochs N, --out DIR, --data DIR, --threads N)\n", k.c_str());
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
  manual_seed(2026);
  std::filesystem::create_directories(args.out);

  const data::Transform normalize = data::Normalize({0.2860}, {0.3530});
  auto split = data::random_split(load(args.data, "train"), {55000, 5000}, 7);
  data::DataLoader train(split[0], {.batch_size = 128, .shuffle = true, .seed = 1, .n_jobs = 1,
                                    .transform = data::Compose({data::RandomHorizontalFlip(0.5), normalize})});
  data::DataLoader validation(split[1], {.batch_size = 500, .transform = normalize});
  data::DataLoader test(load(args.data, "t10k"), {.batch_size = 500, .transform = normalize});
  std::printf("Fashion-MNIST: %lld training, %lld validation and %lld test images, %d threads\n",
              static_cast<long long>(train.dataset()->size()), static_cast<long long>(validation.dataset()->size()),
              static_cast<long long>(test.dataset()->size()), get_num_threads());

  // conv-bn-relu-pool twice, then a small classifier (loom::zoo::fashion_cnn)
  Graph cnn = zoo::fashion_cnn().graph;
  const std::vector<Tensor> params = cnn.parameters();
  int64_t count = 0;
  for (const Tensor& p : params) count += p.numel();
  std::printf("CNN with %lld parameters\n", static_cast<long long>(count));

  auto adam = std::make_shared<train::Adam>(params, train::AdamOptions{.lr = 2e-3});
  train::Model model(cnn, [](const Tensor& logits, const Tensor& labels) { return cross_entropy(logits, labels); }, adam,
                     {std::make_shared<train::Accuracy>()});
  const std::string model_path = args.out + "/fashion_cnn.safetensors";
  auto schedule = std::make_shared<train::CosineAnnealingLR>(*adam, args.epochs, 1e-5);
  std::vector<std::shared_ptr<train::Callback>> callbacks{
      std::make_shared<train::LearningRateScheduler>(schedule),
      std::make_shared<train::ModelCheckpoint>(model_path, args.out + "/last_checkpoint.safetensors", "val_accuracy"),
      std::make_shared<train::CSVLogger>(args.out + "/history.csv"),
      std::make_shared<train::TerminateOnNaN>()};

  const auto t0 = std::chrono::steady_clock::now();
  train::History h = model.fit(train, {.epochs = args.epochs, .validation = &validation, .callbacks = callbacks});
  const double minutes = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 60;
  train::save_learning_curves(h, args.out + "/learning_curves.svg", "Loom CNN on Fashion-MNIST");

  // the saved model is the best epoch by validation accuracy: put its weights back and test it
  io::load_state(model_path, cnn);
  const auto& val = h["val_accuracy"];
  const auto best = std::max_element(val.begin(), val.end());
  const double test_acc = model.evaluate(test)["accuracy"];
  std::printf("\ntrained %d epochs in %.1f min; best validation accuracy %.2f%% at epoch %d, saved to %s\n",
              static_cast<int>(val.size()), minutes, 100 * *best, static_cast<int>(best - val.begin()) + 1, model_path.c_str());
  std::printf("test accuracy of the saved model: %.2f%%\n", 100 * test_acc);
  std::printf("learning curves: %s/learning_curves.svg, log: %s/history.csv\n", args.out.c_str(), args.out.c_str());
  // training time depends on the machine: name it next to the time
  std::printf("machine: %s; training time %.1f min\n", machine_summary().c_str(), minutes);
  return 0;
}
