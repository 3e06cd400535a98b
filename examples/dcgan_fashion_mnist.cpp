// A deep convolutional GAN (Radford et al. 2016) on Fashion-MNIST, as in TensorLayer's DCGAN
// tutorial: a generator draws 28x28 images from 64 random numbers, a discriminator tells them
// from real ones, and each learns against the other. It saves a grid of generated images as a
// PNG file.
//
//   dcgan_fashion_mnist [--short] [--epochs N] [--data DIR] [--out grid.png]
//
// Generator: z (64) -> Linear 128x7x7 -> BatchNorm -> ReLU -> ConvTranspose 64, 4x4 stride 2
// (14x14) -> BatchNorm -> ReLU -> ConvTranspose 1, 4x4 stride 2 (28x28) -> tanh.
// Discriminator: image -> Conv 64, 4x4 stride 2 -> LeakyReLU 0.2 -> Conv 128, 4x4 stride 2 ->
// BatchNorm -> LeakyReLU 0.2 -> Linear 1 (a logit). Adam (2e-4, beta1 0.5) for both, as DCGAN.
// It exits 1 unless the generator learned the data's look: the mean of its images must be at
// least twice as close to the mean real image as at the start, and its images must differ from
// one another (no collapse to one picture).
#include <loom/core/file.h>
#include <loom/loom.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

using namespace loom;

namespace {

constexpr int64_t kNoise = 64, kBatch = 64;

// The mean absolute difference between the mean image of `a` and that of `b` (both N, 1, 28, 28).
double mean_image_distance(const Tensor& a, const Tensor& b) {
  return mean(abs(mean(a, {0}) - mean(b, {0}))).item<double>();
}

// 8 x 8 images in [-1, 1] as one uint8 (1, 8*28 + 9, 8*28 + 9) picture with 1-pixel borders.
Tensor grid(const Tensor& images) {
  const std::vector<float> v = images.to_vector<float>();
  const int64_t side = 8 * 29 + 1;
  std::vector<uint8_t> px(static_cast<size_t>(side * side), 255);
  for (int64_t k = 0; k < 64; ++k)
    for (int64_t y = 0; y < 28; ++y)
      for (int64_t x = 0; x < 28; ++x) {
        const double p = (v[static_cast<size_t>(k * 784 + y * 28 + x)] + 1.0) * 127.5;
        px[static_cast<size_t>((1 + (k / 8) * 29 + y) * side + 1 + (k % 8) * 29 + x)] =
            static_cast<uint8_t>(std::lround(std::min(255.0, std::max(0.0, p))));
      }
  return from_vector<uint8_t>(px, {1, side, side});
}

}  // namespace

int main(int argc, char** argv) {
  bool short_run = false;
  int64_t epochs = 5;
  std::string dir = "/usr/share/datasets/fashion-mnist", out = "dcgan_fashion_mnist.png";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--short") short_run = true;
    else if (a == "--epochs" && i + 1 < argc) epochs = std::stoll(argv[++i]);
    else if (a == "--data" && i + 1 < argc) dir = argv[++i];
    else if (a == "--out" && i + 1 < argc) out = argv[++i];
  }
  // images scaled to [-1, 1], the generator's tanh range
  Tensor images = data::read_idx(dir + "/train-images-idx3-ubyte.gz").astype(Float32).reshape({-1, 1, 28, 28}) / 127.5 - 1.0;
  const int64_t n = short_run ? 6400 : images.shape()[0];
  images = slice(images, 0, 0, n);

  manual_seed(7);
  nn::Input z(Shape{-1, kNoise}, Float32, "z");
  nn::Linear g1(z, 128 * 7 * 7, {}, "g_project");
  nn::BatchNorm g1n(g1, {}, "g_project_norm");
  nn::Activation g1a(g1n, nn::relu, "g_project_relu");
  nn::Reshape g1r(g1a, Shape{128, 7, 7}, "g_reshape");
  nn::Conv2DTranspose g2(g1r, 64, {4, 4}, {.stride = 2, .padding = 1}, "g_up1");
  nn::BatchNorm g2n(g2, {}, "g_up1_norm");
  nn::Activation g2a(g2n, nn::relu, "g_up1_relu");
  nn::Conv2DTranspose g3(g2a, 1, {4, 4}, {.stride = 2, .padding = 1}, "g_up2");
  nn::Activation image(g3, nn::tanh, "g_image");
  const Graph generator = Graph::build({image}, {z});

  // LeakyReLU with DCGAN's slope of 0.2 (nn::leaky_relu is PyTorch's default, 0.01)
  const nn::ActivationFn leaky{"leaky_relu_0.2", [](const Tensor& t) { return leaky_relu(t, 0.2); }};
  nn::Input x(Shape{-1, 1, 28, 28}, Float32, "x");
  nn::Conv2D d1(x, 64, {4, 4}, {.stride = 2, .padding = 1}, "d_conv1");
  nn::Activation d1a(d1, leaky, "d_conv1_lrelu");
  nn::Conv2D d2(d1a, 128, {4, 4}, {.stride = 2, .padding = 1}, "d_conv2");
  nn::BatchNorm d2n(d2, {}, "d_conv2_norm");
  nn::Activation d2a(d2n, leaky, "d_conv2_lrelu");
  nn::Flatten d3(d2a, "d_flatten");
  nn::Linear logit(d3, 1, {}, "d_logit");
  const Graph discriminator = Graph::build({logit}, {x});

  const auto G = generator.as_function();
  const auto D = discriminator.as_function();
  train::Adam opt_g(generator.parameters(), train::AdamOptions{.lr = 2e-4, .beta1 = 0.5});
  train::Adam opt_d(discriminator.parameters(), train::AdamOptions{.lr = 2e-4, .beta1 = 0.5});

  Generator noise(11);
  const Tensor fixed_z = randn({64, kNoise}, Float32, default_device(), &noise);  // the grid's inputs
  auto sample = [&] {
    nn::ModeScope eval(nn::Mode::Eval);
    NoGrad no_grad;
    return G({fixed_z})[0];
  };
  const Tensor real_sample = slice(images, 0, 0, 1000);
  const double start_distance = mean_image_distance(sample(), real_sample);

  const int64_t steps_per_epoch = n / kBatch, total_epochs = short_run ? 3 : epochs;
  const Tensor ones = full({kBatch, 1}, 1.0), zeros_ = zeros({kBatch, 1});
  for (int64_t e = 0; e < total_epochs; ++e) {
    const Tensor order = permutation(n, default_device(), &noise);
    double d_sum = 0, g_sum = 0;
    nn::ModeScope train_mode(nn::Mode::Train);
    for (int64_t s = 0; s < steps_per_epoch; ++s) {
      const Tensor real = take(images, slice(order, 0, s * kBatch, (s + 1) * kBatch), 0);
      const Tensor latent = randn({kBatch, kNoise}, Float32, default_device(), &noise);
      // the discriminator: real images are 1, generated ones 0
      Tensor fake;
      {
        NoGrad no_grad;
        fake = G({latent})[0];
      }
      opt_d.zero_grad();
      const Tensor d_loss = binary_cross_entropy_with_logits(D({real})[0], ones) + binary_cross_entropy_with_logits(D({fake})[0], zeros_);
      d_loss.backward();
      opt_d.step();
      // the generator: make the discriminator say 1 (the non-saturating loss)
      opt_g.zero_grad();
      const Tensor g_loss = binary_cross_entropy_with_logits(D({G({latent})[0]})[0], ones);
      g_loss.backward();
      opt_g.step();
      d_sum += d_loss.item<double>();
      g_sum += g_loss.item<double>();
    }
    std::printf("epoch %lld: discriminator loss %.3f, generator loss %.3f\n", static_cast<long long>(e + 1),
                d_sum / static_cast<double>(steps_per_epoch), g_sum / static_cast<double>(steps_per_epoch));
  }

  const Tensor final_images = sample();
  const double end_distance = mean_image_distance(final_images, real_sample);
  // how different the generated images are from one another: the mean per-pixel spread
  const double spread = mean(sqrt(var(final_images, {0}))).item<double>();
  write_file_atomic(out, data::encode_png(grid(final_images)));
  const bool ok = end_distance < start_distance / 2 && spread > 0.1;
  std::printf("mean image distance %.3f -> %.3f, spread between images %.3f; grid written to %s: %s\n", start_distance,
              end_distance, spread, out.c_str(), ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
