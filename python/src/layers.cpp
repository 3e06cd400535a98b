// Layers and graphs, TensorX style (docs/python.md "Layers and graphs"): loom.Layer over
// nn::Layer, every registered kind built from its registry entry (python/loom/layers.py makes
// the keyword-argument constructors from layer_kind_info, so a kind registered later appears
// without a change here), Module and Sequential, Graph, Plan, and the zoo's networks.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>

#include <memory>
#include <sstream>
#include <string>

#include "common.h"
#include "loom/core/error.h"
#include "loom/graph/graph.h"
#include "loom/graph/module.h"
#include "loom/graph/serialize.h"
#include "loom/nn/layers.h"
#include "loom/nn/registry.h"
#include "loom/zoo/architectures.h"

namespace loom::python {

namespace {

// Layers given as one layer or a sequence of them (TypeError naming the argument otherwise).
std::vector<nn::Layer> layer_list(nb::handle obj, const char* what) {
  if (nb::isinstance<nn::Layer>(obj)) return {nb::cast<nn::Layer>(obj)};
  if (nb::isinstance<zoo::Network>(obj)) return {nb::cast<zoo::Network&>(obj).output};
  std::vector<nn::Layer> out;
  if (!PySequence_Check(obj.ptr()) || nb::isinstance<nb::str>(obj))
    throw nb::type_error((std::string(what) + ": expected a loom.Layer or a sequence of them").c_str());
  for (nb::handle item : nb::borrow<nb::sequence>(obj)) {
    if (!nb::isinstance<nn::Layer>(item))
      throw nb::type_error((std::string(what) + ": expected loom.Layer items, got " +
                            nb::cast<std::string>(nb::str(item.type().attr("__name__"))))
                               .c_str());
    out.push_back(nb::cast<nn::Layer>(item));
  }
  return out;
}


nn::Input as_input(const nn::Layer& l, const char* what) {
  if (std::string(l.kind()) != "Input")
    throw ValueError(std::string("loom.Layer.") + what + ": layer '" + l.name() + "' is a " + l.kind() + ", not an Input");
  return nn::Input(l.node().impl());
}

std::string to_text(const auto& x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

// A plan's result: the tensor for one output, a list for several (Plan::run).
nb::object plan_result(std::vector<Tensor> outs) {
  if (outs.size() == 1) return nb::cast(std::move(outs[0]));
  return nb::cast(std::move(outs));
}

std::vector<Tensor> tensor_args(const nb::args& args) {
  std::vector<Tensor> out;
  for (nb::handle a : args) out.push_back(as_tensor(a));
  return out;
}

int64_t total_elements(const std::vector<Tensor>& ts) {
  int64_t n = 0;
  for (const Tensor& t : ts) n += elements_of(t);
  return n;
}

CompileOptions compile_options(nb::handle input_shapes, const nb::kwargs& flags) {
  CompileOptions o;
  if (!input_shapes.is_none())
    for (nb::handle s : nb::borrow<nb::sequence>(input_shapes)) o.input_shapes.push_back(to_shape(s));
  for (auto [key, value] : flags) {
    const std::string k = nb::cast<std::string>(key);
    const bool v = nb::cast<bool>(value);
    if (k == "remove_dead_nodes") o.remove_dead_nodes = v;
    else if (k == "eliminate_common_subexpressions") o.eliminate_common_subexpressions = v;
    else if (k == "fold_constants") o.fold_constants = v;
    else if (k == "fuse_conv_epilogues") o.fuse_conv_epilogues = v;
    else if (k == "blocked_layouts") o.blocked_layouts = v;
    else if (k == "fuse_elementwise") o.fuse_elementwise = v;
    else if (k == "batch_invariant") o.batch_invariant = v;
    else
      throw ValueError("loom.Graph.compile: unknown option '" + k +
                       "' (valid: input_shapes, remove_dead_nodes, eliminate_common_subexpressions, fold_constants, "
                       "fuse_conv_epilogues, blocked_layouts, fuse_elementwise, batch_invariant)");
  }
  return o;
}

// `with loom.train_mode():` — nn::ModeScope for the block (the mode is per thread; __enter__
// and __exit__ of one `with` run on the same thread).
struct ModeContext {
  nn::Mode mode;
  std::vector<std::shared_ptr<nn::ModeScope>> scopes;  // one per nested entry of this object
};

// `with loom.train_mode():` and `with loom.eval_mode():`, and the mode's query.
void bind_train_and_eval_modes(nb::module_& m) {
  nb::class_<ModeContext>(m, "_ModeContext")
      .def("__enter__", [](ModeContext& c) { c.scopes.push_back(std::make_shared<nn::ModeScope>(c.mode)); })
      .def("__exit__", [](ModeContext& c, nb::args) {
        if (!c.scopes.empty()) c.scopes.pop_back();
        return false;
      });
  m.def("train_mode", [] { return ModeContext{nn::Mode::Train, {}}; },
        "`with loom.train_mode():` layers and plans run in Train mode (dropout active, batch norm on batch statistics) on this thread.");
  m.def("eval_mode", [] { return ModeContext{nn::Mode::Eval, {}}; }, "`with loom.eval_mode():` Eval mode (the default) on this thread.");
  m.def("is_training", [] { return nn::current_mode() == nn::Mode::Train; }, "Whether this thread runs layers in Train mode.");
}

// ------------------------------------------------------------------ Layer
void bind_layer_calls(nb::class_<nn::Layer>& cls) {
  cls.def("__call__",
           [](const nn::Layer& l, nb::args args) -> nb::object {
             if (args.size() == 0) {  // the graph that ends here, on its Inputs' current values
               Tensor out;
               {
                 nb::gil_scoped_release release;
                 out = l();
               }
               return nb::cast(std::move(out));
             }
             bool layers = true;
             for (nb::handle a : args) layers = layers && (nb::isinstance<nn::Layer>(a) || nb::isinstance<zoo::Network>(a));
             const nb::handle first = args[0];
             if (layers || (args.size() == 1 && PyList_Check(first.ptr()) && PyList_GET_SIZE(first.ptr()) > 0 &&
                            nb::isinstance<nn::Layer>(nb::handle(PyList_GET_ITEM(first.ptr(), 0))))) {
               std::vector<nn::Layer> in = args.size() == 1 ? layer_list(args[0], "loom.Layer()") : layer_list(args, "loom.Layer()");
               return nb::cast(l(in));
             }
             const std::vector<Tensor> xs = tensor_args(args);
             Tensor out;
             {
               MaybeRelease release(total_elements(xs));
               out = xs.size() == 1 ? l(xs[0]) : l.compute(xs);
             }
             return nb::cast(std::move(out));
           },
           nb::sig("def __call__(self, *args: object) -> typing.Any"),
           "layer(x, ...) with layers: the Keras-style call (the first call of a layer made without input builds it; "
           "later calls are reuse_with). With tensors or arrays: the layer's value on them, now. With nothing: the value "
           "of the graph that ends here.")
      .def("compute",
           [](const nn::Layer& l, nb::args args) {
             const std::vector<Tensor> xs = tensor_args(args);
             MaybeRelease release(total_elements(xs));
             return l.compute(xs);
           },
           "Only this layer's op on the given tensors, one per input.")
      .def("reuse_with",
           [](const nn::Layer& l, nb::args inputs, const std::string& name) {
             const std::vector<nn::Layer> in =
                 inputs.size() == 1 && !nb::isinstance<nn::Layer>(inputs[0]) ? layer_list(inputs[0], "reuse_with") : layer_list(inputs, "reuse_with");
             return l.reuse_with(in, name);
           },
           nb::arg("inputs"), nb::kw_only(), nb::arg("name") = "",
           "A layer of the same kind on new inputs, sharing this layer's state (weights).");
}

void bind_layer_properties(nb::class_<nn::Layer>& cls) {
  cls.def_prop_ro("name", &nn::Layer::name, "The layer's name, unique in its graph.")
      .def_prop_ro("kind", [](const nn::Layer& l) { return std::string(l.kind()); }, "The layer kind's registered name (\"Linear\", \"Activation\", ...).")
      .def_prop_ro("inputs", &nn::Layer::inputs, "The layers this layer reads, in order.")
      .def_prop_ro("shape", [](const nn::Layer& l) { return int_tuple(l.shape()); },
                   "Output shape; -1 marks a size known only at run time (the batch).")
      .def_prop_ro("n_units", &nn::Layer::n_units, "The last dimension of the output.")
      .def_prop_ro("dtype", &nn::Layer::dtype, "The output's dtype.")
      .def_prop_ro("bound", &nn::Layer::bound, "False for a layer made without input that has not been called yet.")
      .def_prop_ro("node", &nn::Layer::node, "The graph node this handle stands for: itself, or for a layer made without input the layer its first call built.")
      .def("parameters", &nn::Layer::parameters, "The trainable tensors of this layer's state, each once.")
      .def_prop_ro("weights", &nn::Layer::weights, "The trainable tensors of this layer's state, each once (as parameters()).")
      .def_prop_ro("_options_json", [](const nn::Layer& l) { return l.options().to_json(); })
      .def("shares_state_with", [](const nn::Layer& a, const nn::Layer& b) { return a.shared_state() == b.shared_state(); }, "Whether this layer and other share one state (weights): reuse_with and Keras-style calls of one layer do.");
}

// An Input's value (the graph reads it when called without arguments).
void bind_input_value(nb::class_<nn::Layer>& cls) {
  cls.def("set_value", [](const nn::Layer& l, ArrayLike v) { as_input(l, "set_value").set_value(as_tensor(v)); }, nb::arg("value"), "Sets an Input layer's value, read when the graph is called without arguments (its shape and dtype checked).")
      .def_prop_ro("value", [](const nn::Layer& l) { return as_input(l, "value").value(); }, "An Input layer's value (ValueError when it holds none).")
      .def("has_value", [](const nn::Layer& l) { return as_input(l, "has_value").has_value(); }, "Whether an Input layer holds a value.")
      .def("clear", [](const nn::Layer& l) { as_input(l, "clear").clear(); }, "Drops an Input layer's value.");
}

// A loom.Layer is a handle: two are equal, and hash alike, when they hold the same layer.
void bind_layer_identity(nb::class_<nn::Layer>& cls) {
  cls.def("__eq__", [](const nn::Layer& a, nb::handle b) {
        return nb::isinstance<nn::Layer>(b) && a == nb::cast<nn::Layer>(b);
      })
      .def("__hash__", [](const nn::Layer& l) { return std::hash<const void*>()(l.impl().get()); })
      .def("__repr__", [](const nn::Layer& l) { return l.bound() ? "<loom.Layer " + to_text(l) + ">" : "<loom.Layer " + std::string(l.kind()) + " '" + l.name() + "' (not called yet)>"; });
}

// The registry: what python/loom/layers.py builds each kind's constructor from.
void bind_layer_registry(nb::module_& m) {
  m.def("registered_layer_kinds", &nn::registered_layer_kinds, "Every registered layer kind, sorted.");
  m.def("_layer_kind_info", [](const std::string& kind) {
    const nn::KindInfo info = nn::layer_kind_info(kind);
    return nb::make_tuple(info.defaults.to_json(), info.source);
  });
  m.def("_make_layer", [](const std::string& kind, nb::handle inputs, const std::string& options_json, const std::string& name) {
    nn::LayerSpec spec;
    spec.name = name;
    spec.inputs = layer_list(inputs, ("loom.layers." + kind).c_str());
    spec.options = nn::Options::from_json(options_json, "loom.layers." + kind + (name.empty() ? "" : " '" + name + "'"));
    return nn::make_layer(kind, spec);
  });
  m.def("_unbound_layer", [](const std::string& kind, const std::string& options_json, const std::string& name) {
    return nn::unbound_layer(kind, nn::Options::from_json(options_json, "loom.layers." + kind), name);
  });
  m.def("_constant", [](ArrayLike value, const std::string& name) -> nn::Layer { return nn::Constant(copy_tensor(value), name); },
        nb::arg("value"), nb::arg("name") = "");
}

// ------------------------------------------------------------------ Module, Sequential
void bind_module_and_sequential(nb::module_& m) {
  m.def("Module", [](LayerSequence inputs, LayerSequence outputs, const std::string& name) -> nn::Layer {
    return nn::Module(layer_list(inputs, "loom.Module inputs"), layer_list(outputs, "loom.Module outputs"), name);
  }, nb::arg("inputs"), nb::arg("outputs"), nb::arg("name") = "",
        "A subgraph from `inputs` to `outputs` as one layer (kind Module); reuse_with shares every inner weight.");
  m.def("module_output", [](const nn::Layer& module, size_t i, const std::string& name) { return nn::module_output(module, i, name); },
        nb::arg("module"), nb::arg("index"), nb::arg("name") = "", "A layer (kind ModuleOutput) reading output index of module, a Module with several outputs or a reuse_with of one.");
  m.def("module_graph", [](const nn::Layer& l) -> std::optional<Graph> {
    const Graph* g = nn::module_graph(l);
    return g ? std::optional<Graph>(*g) : std::nullopt;
  }, "The inner graph of a layer of kind Module or Sequential, or None for other kinds.");
  m.def("Sequential", [](nb::handle steps, nb::handle input, const std::string& name) -> nn::Layer {
    std::vector<nn::Step> s;
    for (nb::handle step : nb::borrow<nb::sequence>(steps)) {
      if (nb::isinstance<nn::Layer>(step)) {
        const nn::Layer l = nb::cast<nn::Layer>(step);
        s.push_back([l](const nn::Layer& x) { return l(x); });
      } else if (PyCallable_Check(step.ptr()) && !input.is_none()) {
        // Called now, with the GIL held, while the Sequential is built on `input`; the
        // Sequential made without input that holds the steps is a temporary, so no layer keeps
        // the Python function (and no reference cycle can pass through one).
        nb::object fn = nb::borrow(step);
        s.push_back([fn](const nn::Layer& x) { return nb::cast<nn::Layer>(fn(x)); });
      } else {
        throw nb::type_error("loom.Sequential: a step is a loom.Layer, or a function of a layer when the input is given "
                             "(Sequential(steps, input=x))");
      }
    }
    if (input.is_none()) return nn::Sequential(std::move(s), name);
    return nn::Sequential(layer_list(input, "loom.Sequential input").at(0), std::move(s), name);
  }, nb::arg("steps"), nb::arg("input") = nb::none(), nb::arg("name") = "",
        "Layers applied in order as one layer (kind Sequential); made without input, its first call builds it.");
}

// ------------------------------------------------------------------ Graph, Plan
void bind_plan(nb::module_& m) {
  nb::class_<Plan>(m, "Plan", "A compiled graph (docs/compile.md): call it on tensors, one per graph input.")
      .def("__call__", [](const Plan& p, nb::args args) {
        const std::vector<Tensor> xs = tensor_args(args);
        std::vector<Tensor> outs;
        {
          nb::gil_scoped_release release;
          outs = p.run(xs);
        }
        return plan_result(std::move(outs));
      }, nb::sig("def __call__(self, *args: object) -> typing.Any"),
           "The outputs for one tensor (or array) per graph input: a tensor for one output, a list for several.")
      .def("run", [](const Plan& p, ArraySequence inputs) {
        std::vector<Tensor> xs;
        if (!inputs.is_none())
          for (nb::handle a : nb::borrow<nb::sequence>(inputs)) xs.push_back(as_tensor(a));
        nb::gil_scoped_release release;
        return p.run(xs);
      }, nb::arg("inputs") = nb::none(), "Every output, as a list, for the inputs given positionally.")
      .def_prop_ro("graph", &Plan::graph, "The graph the plan was compiled from.")
      .def_prop_ro("input_shapes", [](const Plan& p) -> nb::typed<nb::list, IntTuple> {
        nb::list out;
        for (const Shape& s : p.input_shapes()) out.append(int_tuple(s));
        return out;
      }, "The shapes the plan was compiled for, one per input (-1: open at run time).")
      .def_prop_ro("output_shapes", [](const Plan& p) -> nb::typed<nb::list, IntTuple> {
        nb::list out;
        for (const Shape& s : p.output_shapes()) out.append(int_tuple(s));
        return out;
      }, "The compiled shape of each output (-1: sized at run time).")
      .def_prop_ro("shape_polymorphic", &Plan::shape_polymorphic, "Whether some input dimension is open (-1): the plan then runs any size there.")
      .def("peak_bytes", &Plan::peak_bytes, "The bytes of activations live at once at the plan's peak, from the compiled shapes; -1 when some shape is open.")
      .def("dump", &Plan::dump, "The optimized plan as text: each step, what each pass removed, merged or folded, and the peak bytes.")
      .def("__repr__", &Plan::dump);
}

void bind_graph(nb::module_& m) {
  nb::class_<Graph>(m, "Graph", "A layer graph traced back from its outputs (Graph.build).")
      .def_static("build", [](LayerSequence outputs, LayerSequence inputs) {
        return Graph::build(layer_list(outputs, "Graph.build outputs"),
                            inputs.is_none() ? std::vector<nn::Layer>{} : layer_list(inputs, "Graph.build inputs"));
      }, nb::arg("outputs"), nb::arg("inputs") = nb::none(),
                  "Traces from `outputs` back to `inputs` (every Input reached when not given).")
      .def_prop_ro("nodes", &Graph::nodes, "The layers in dependency order.")
      .def_prop_ro("inputs", &Graph::inputs, "The graph's Input layers, in the order a call takes their values.")
      .def_prop_ro("outputs", &Graph::outputs, "The graph's output layers.")
      .def("edges", &Graph::edges, "The edges as (from, to) positions in nodes.")
      .def("layer", &Graph::layer, nb::arg("name"), "The layer named name (ValueError listing the graph's layer names when there is none).")
      .def("parameters", &Graph::parameters, "Every trainable tensor of the graph's layers (inner Module layers included), each once, in node order.")
      .def("parameter_count", [](const Graph& g) { return zoo::parameter_count(g); }, "The number of elements of the graph's trainable tensors, each counted once.")
      .def("summary", &Graph::summary, "A Keras-like table of the layers, shapes and parameter counts.")
      .def("to_dot", &Graph::to_dot, "Graphviz DOT text of the graph.")
      .def("to_json", [](const Graph& g) { return graph_to_json(g); }, "The architecture as JSON text (no weights); Graph.from_json reads it back.")
      .def_static("from_json", [](const std::string& text) { return graph_from_json(text); }, "A graph from the JSON text of to_json, with newly initialized weights.")
      .def("compile", [](const Graph& g, ShapeSequence input_shapes, const nb::kwargs& flags) {
        const CompileOptions o = compile_options(input_shapes, flags);
        nb::gil_scoped_release release;
        return g.compile(o);
      }, nb::arg("input_shapes") = nb::none(), nb::arg("flags"),
           "The optimized plan; with input_shapes (one per input, -1 open) specialized to them.")
      .def("__call__", [](const Graph& g, nb::args args) {
        const std::vector<Tensor> xs = tensor_args(args);
        std::vector<Tensor> outs;
        {
          nb::gil_scoped_release release;
          outs = g.as_function()(xs);
        }
        return plan_result(std::move(outs));
      }, nb::sig("def __call__(self, *args: object) -> typing.Any"),
           "The graph run without compiling on one tensor (or array) per input: a tensor for one output, a list for several.")
      .def("__repr__", &Graph::summary);
  m.def("copy_state", &copy_state, nb::arg("source"), nb::arg("target"),
        "Copies every parameter and buffer of `source` into the layer of the same name in `target`.");
}

// ------------------------------------------------------------------ the zoo
void bind_zoo(nb::module_& m) {
  nb::module_ zm = m.def_submodule("zoo", "Ready-made networks as graphs (include/loom/zoo/architectures.h).");
  nb::class_<zoo::Network>(zm, "Network", "A zoo model: its graph, its Input layers and its output layer; called on a tensor, its output.")
      .def_ro("name", &zoo::Network::name, "The network's name.")
      .def_ro("graph", &zoo::Network::graph, "The network's graph.")
      .def_ro("inputs", &zoo::Network::inputs, "The network's Input layers, in the order its graph takes them.")
      .def_ro("output", &zoo::Network::output, "The network's output layer.")
      .def("parameters", &zoo::Network::parameters, "The trainable tensors of every layer of the graph, each once.")
      .def("parameter_count", &zoo::Network::parameter_count, "The number of elements of the trainable tensors, each counted once.")
      .def("summary", [](const zoo::Network& n) { return n.graph.summary(); }, "A Keras-like table of the graph's layers, shapes and parameter counts.")
      .def("__call__", [](const zoo::Network& n, ArrayLike x) {
        const Tensor t = as_tensor(x);
        nb::gil_scoped_release release;
        return n(t);
      });
  zm.def("mlp", [](int64_t in_units, const std::vector<int64_t>& hidden, int64_t out_units, const std::string& activation, double dropout) {
    return zoo::mlp(in_units, hidden, out_units, nn::activation_by_name(activation), dropout);
  }, nb::arg("in_units"), nb::arg("hidden"), nb::arg("out_units"), nb::arg("activation") = "relu", nb::arg("dropout") = 0.0, "Input (batch, in_units) -> [Linear(h) -> activation -> Dropout(dropout)] per hidden width -> Linear(out_units); no Dropout layers when dropout is 0.");
  zm.def("lenet", &zoo::lenet, nb::arg("num_classes") = 10, "LeNet-5 for (batch, 1, 28, 28) images: 61,706 parameters for 10 classes.");
  zm.def("fashion_cnn", [](int64_t num_classes, const std::vector<int64_t>& widths, int64_t convs_per_block, int64_t hidden) {
    return zoo::fashion_cnn(num_classes, {.widths = widths, .convs_per_block = convs_per_block, .hidden = hidden});
  }, nb::arg("num_classes") = 10, nb::arg("widths") = std::vector<int64_t>{32, 64, 128}, nb::arg("convs_per_block") = 1,
         nb::arg("hidden") = 256, "The Fashion-MNIST CNN for (N, 1, 28, 28): per width a block of convs_per_block 3x3 convolutions with BatchNorm and ReLU and a 2x2 max pool, then Linear(hidden) and Linear(num_classes), with Dropout(0.25).");
  zm.def("vgg", &zoo::vgg, nb::arg("config"), nb::arg("num_classes") = 1000, nb::arg("batch_norm") = false, nb::arg("dropout") = 0.5,
         nb::arg("in_channels") = 3, nb::arg("classifier_units") = 4096, nb::arg("name") = "vgg", "VGG from a torchvision configuration: integers are 3x3 conv + ReLU widths, 0 a 2x2 max pool; batch_norm adds BatchNorm after each conv.");
  zm.def("vgg11", &zoo::vgg11, nb::arg("num_classes") = 1000, nb::arg("batch_norm") = false, "VGG-11 (configuration A), torchvision's layout.");
  zm.def("vgg16", &zoo::vgg16, nb::arg("num_classes") = 1000, nb::arg("batch_norm") = false, "VGG-16 (configuration D), torchvision's layout.");
  zm.def("vgg19", &zoo::vgg19, nb::arg("num_classes") = 1000, nb::arg("batch_norm") = false, "VGG-19 (configuration E), torchvision's layout.");
  zm.def("resnet", &zoo::resnet, nb::arg("blocks_per_stage"), nb::arg("num_classes") = 1000, nb::arg("in_channels") = 3,
         nb::arg("name") = "resnet", "ResNet with torchvision's BasicBlock, blocks_per_stage blocks in each of its four stages.");
  zm.def("resnet18", &zoo::resnet18, nb::arg("num_classes") = 1000, "ResNet-18 (blocks 2, 2, 2, 2), torchvision's layout.");
  zm.def("resnet34", &zoo::resnet34, nb::arg("num_classes") = 1000, "ResNet-34 (blocks 3, 4, 6, 3), torchvision's layout.");
  zm.def("densenet", &zoo::densenet, nb::arg("growth_rate"), nb::arg("block_config"), nb::arg("num_init_features"), nb::arg("bn_size") = 4,
         nb::arg("compression") = 0.5, nb::arg("num_classes") = 1000, nb::arg("in_channels") = 3, nb::arg("name") = "densenet", "DenseNet-BC as torchvision's: dense blocks of block_config layers growing by growth_rate channels, with transitions.");
  zm.def("densenet121", &zoo::densenet121, nb::arg("num_classes") = 1000, "DenseNet-121 (growth 32, blocks 6, 12, 24, 16, 64 initial features), torchvision's layout.");
  zm.def("unet", &zoo::unet, nb::arg("in_channels") = 1, nb::arg("num_classes") = 2, nb::arg("base_width") = 64, nb::arg("depth") = 4,
         nb::arg("batch_norm") = false, "U-Net with same-padded convolutions, depth down and up steps; height and width must be multiples of 2 ** depth.");
  zm.def("lstm_lm", &zoo::lstm_lm, nb::arg("vocab_size"), nb::arg("embedding"), nb::arg("hidden"), nb::arg("n_layers") = 2,
         nb::arg("dropout") = 0.0, "An LSTM language model: ids (batch, time) int64 -> embedding -> n_layers LSTM layers of hidden units -> logits (batch, time, vocab).");
  zm.def("transformer_classifier", &zoo::transformer_classifier, nb::arg("vocab_size"), nb::arg("seq_len"), nb::arg("d_model"),
         nb::arg("n_heads"), nb::arg("ff_units"), nb::arg("n_layers"), nb::arg("num_classes"), nb::arg("dropout") = 0.1, "A transformer encoder classifier: ids (batch, seq_len) int64 -> embedding + learned positions -> n_layers post-norm encoder layers -> mean over time -> Linear(num_classes).");
}

}  // namespace

// The groups in a fixed order: the module's namespace, and so its stubs (scripts/python_stubs.sh),
// list the names in the order they are defined.
void bind_layers(nb::module_& m) {
  bind_train_and_eval_modes(m);
  nb::class_<nn::Layer> cls(m, "Layer",
                            "A TensorX layer: a stateful function and the end node of the graph that feeds it (docs/python.md).");
  bind_layer_calls(cls);
  bind_layer_properties(cls);
  bind_input_value(cls);
  bind_layer_identity(cls);
  bind_layer_registry(m);
  bind_module_and_sequential(m);
  bind_plan(m);
  bind_graph(m);
  bind_zoo(m);
}

}  // namespace loom::python
