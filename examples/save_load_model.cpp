// Defines a small CNN, trains it for a few steps, and saves it as ONE safetensors file holding
// the architecture (JSON in the header's metadata) and every weight and batch-norm statistic.
// It also writes a sample input and the model's output for it, so that a separate program
// (examples/run_saved_model.cpp, which has no model code at all) can check it reproduces them.
//   ./build/examples/save_load_model [out_dir]      -> out_dir/model.safetensors, sample.safetensors
#include <loom/loom.h>

#include <iostream>

using namespace loom;

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : ".";
  manual_seed(0);

  // 1. The model: 1x12x12 images -> 3 classes.
  nn::Input img(Shape{-1, 1, 12, 12}, Float32, "img");
  nn::Conv2D conv(img, 8, 3, {.padding = "same"}, "conv");
  nn::BatchNorm bn(conv, {}, "bn");
  nn::Activation relu(bn, nn::relu, "relu");
  nn::MaxPool2D pool(relu, 2, {}, "pool");
  nn::Flatten flat(pool, "flat");
  nn::Linear hidden(flat, 16, {}, "hidden");
  nn::Activation act(hidden, nn::tanh, "act");
  nn::Linear logits(act, 3, {}, "logits");
  Graph g = Graph::build({logits}, {img});
  Plan net = g.compile();

  // 2. A few steps of plain SGD on a toy task (class = which third of the image is brightest).
  //    Training mode also moves the batch-norm running statistics, which the file must keep.
  Tensor x = uniform({32, 1, 12, 12});
  x.index_put_({Slice(0, 10), Slice(), Slice(0, 4)}, 2.0);
  x.index_put_({Slice(10, 20), Slice(), Slice(4, 8)}, 2.0);
  x.index_put_({Slice(20, 32), Slice(), Slice(8, 12)}, 2.0);
  Tensor y = concatenate({zeros({10}, Int64), ones({10}, Int64), full({12}, 2, Int64)});
  for (int step = 0; step < 20; ++step) {
    Tensor loss;
    {
      nn::ModeScope train(nn::Mode::Train);
      loss = cross_entropy(net(x), y);
    }
    loss.backward();
    NoGrad no_grad;
    for (auto& [name, p] : io::graph_state(g))
      if (p.requires_grad() && p.grad().defined()) {
        p.copy_(p - p.grad() * 0.1);
        p.zero_grad();
      }
    if (step % 5 == 0) std::cout << "step " << step << " loss " << loss.item<float>() << "\n";
  }

  // 3. Save the model (atomically: a failure would leave a previous file intact) ...
  const std::string model_path = dir + "/model.safetensors";
  io::save_model(model_path, g, {}, {{"description", "toy CNN from examples/save_load_model.cpp"}});
  // ... and a sample with the output the model gives for it (evaluation mode).
  Tensor sample = x.index({Slice(0, 32, 4)});
  Tensor out = net(sample);
  io::save_safetensors(dir + "/sample.safetensors", {{"input", sample}, {"output", out}});
  std::cout << "saved " << model_path << " (" << io::graph_state(g).size() << " tensors)\n";
  std::cout << "predictions: " << out.argmax(1) << "\n";
  return 0;
}
