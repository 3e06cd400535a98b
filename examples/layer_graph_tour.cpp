// A tour of Loom's layer API (after TensorX): layers are stateful functions and graph nodes,
// reuse_with shares state, Module packs a subgraph into one layer, and Graph::build turns a
// graph into a callable plan. Run: ./build/examples/layer_graph_tour
#include <loom/loom.h>

#include <iostream>

using namespace loom;

int main() {
  manual_seed(0);

  // An Input is a stateful placeholder; layers create their parameters at construction.
  nn::Input x(2, Float32, "x");
  x.set_value(uniform({2, 2}));
  nn::Linear l1(x, 3, {}, "l1");
  nn::Activation a1(l1, nn::relu, "a1");
  nn::Linear l2(a1, 4, {}, "l2");
  nn::Dropout d1(a1, 0.4, /*seed=*/1, "d1");
  nn::Layer l3 = l2.reuse_with(d1, "l3");  // same weights as l2, fed through dropout

  std::cout << "l2() =\n" << l2() << "\n";              // runs the graph ending in l2
  {
    nn::ModeScope train(nn::Mode::Train);               // dropout is active only in training
    std::cout << "l3() in train mode =\n" << l3() << "\n";
  }
  std::cout << "l2.compute(ones) = " << l2.compute(ones({1, 3})) << "\n";  // only l2's op

  // A Module makes a subgraph one layer: here the RNN cell of the TensorX paper.
  nn::Input xt(2, Float32, "xt"), h(4, Float32, "h");
  nn::Activation cell_out(nn::Add(nn::Linear(xt, 4, {}, "w"), nn::Linear(h, 4, {.bias = false}, "u")), nn::tanh);
  nn::Module cell({xt, h}, cell_out, "rnn_cell");
  nn::Input x2(2, Float32, "x2");
  nn::Layer step2 = cell.reuse_with({x2, cell}, "step2");  // unrolled: same weights, next step

  // Graph::build traces back from the outputs, orders and validates; compile() gives a plan.
  Graph g = Graph::build({step2}, {xt, h, x2});
  Plan plan = g.compile();
  Tensor out = plan.run({ones({1, 2}), zeros({1, 4}), ones({1, 2}) * 2.0})[0];
  std::cout << "two RNN steps: " << out << "\n";

  // Training through a plan: gradients reach the shared weights.
  sum(out).backward();
  std::cout << "grad of w's weights:\n" << cell.state().all_params()[0].second.grad() << "\n";

  // The architecture as JSON, rebuilt into a working graph; DOT for a picture.
  Graph rebuilt = graph_from_json(graph_to_json(g));
  copy_state(g, rebuilt);
  std::cout << "rebuilt graph agrees: " << std::boolalpha
            << allclose(rebuilt.compile().run({ones({1, 2}), zeros({1, 4}), ones({1, 2}) * 2.0})[0], out) << "\n";
  std::cout << g.to_dot().substr(0, 200) << "...\n";
  return 0;
}
