// Files (docs/python.md "Files"): model files, state files, safetensors dicts and ONNX, each a
// thin binding of loom/io. Every call releases the GIL while it reads or writes.
#include <nanobind/stl/map.h>
#include <nanobind/stl/shared_ptr.h>

#include <map>
#include <string>

#include "common.h"
#include "loom/data/dataset.h"
#include "loom/data/idx.h"
#include "loom/data/loader.h"
#include "loom/data/npy.h"
#include "loom/graph/graph.h"
#include "loom/io/model_file.h"
#include "loom/io/onnx.h"
#include "loom/io/safetensors.h"
#include "loom/zoo/architectures.h"

namespace loom::python {

namespace {

io::TensorMap tensor_map(nb::handle d) {
  io::TensorMap out;
  if (d.is_none()) return out;
  for (auto [k, v] : nb::cast<nb::dict>(d)) out[nb::cast<std::string>(k)] = as_tensor(v);
  return out;
}

io::Metadata metadata_of(nb::handle d) {
  io::Metadata out;
  if (d.is_none()) return out;
  for (auto [k, v] : nb::cast<nb::dict>(d)) out[nb::cast<std::string>(k)] = nb::cast<std::string>(v);
  return out;
}

Graph graph_arg(nb::handle obj) {
  if (nb::isinstance<zoo::Network>(obj)) return nb::cast<zoo::Network&>(obj).graph;
  if (nb::hasattr(obj, "graph") && !nb::isinstance<Graph>(obj)) return nb::cast<Graph>(obj.attr("graph"));  // a loom.Model
  return nb::cast<Graph>(obj);
}

// Files of one graph: its model file (architecture and weights) and its state (weights alone).
void bind_model_and_state_files(nb::module_& io) {
  io.def("save_model", [](const std::string& path, GraphLike graph, TensorMapping extra, TextMapping metadata) {
    const Graph g = graph_arg(graph);
    const io::TensorMap e = tensor_map(extra);
    const io::Metadata md = metadata_of(metadata);
    nb::gil_scoped_release release;
    io::save_model(path, g, e, md);
  }, nb::arg("path"), nb::arg("graph"), nb::arg("extra") = nb::none(), nb::arg("metadata") = nb::none(),
         "The graph's architecture and weights in one safetensors file, written atomically.");
  io.def("load_model", [](const std::string& path) {
    nb::gil_scoped_release release;
    return io::load_model(path);
  }, nb::arg("path"), "The graph rebuilt from a model file, with its weights.");
  io.def("save_state", [](const std::string& path, GraphLike graph, TensorMapping extra, TextMapping metadata) {
    const Graph g = graph_arg(graph);
    const io::TensorMap e = tensor_map(extra);
    const io::Metadata md = metadata_of(metadata);
    nb::gil_scoped_release release;
    io::save_state(path, g, e, md);
  }, nb::arg("path"), nb::arg("graph"), nb::arg("extra") = nb::none(), nb::arg("metadata") = nb::none(), "Writes the graph's weights (and extra tensors and string metadata, when given) to a safetensors file, atomically.");
  io.def("load_state", [](const std::string& path, GraphLike graph) -> TupleOf<nb::typed<nb::dict, nb::str, Tensor>, nb::typed<nb::dict, nb::str, nb::str>> {
    const Graph g = graph_arg(graph);
    io::Checkpoint c;
    {
      nb::gil_scoped_release release;
      c = io::load_state(path, g);
    }
    return nb::make_tuple(c.extra, c.metadata);
  }, nb::arg("path"), nb::arg("graph"), "Loads the weights into the graph (strictly); returns (extra tensors, metadata).");
  io.def("graph_state", [](GraphLike graph) { return io::graph_state(graph_arg(graph)); },
         "Every parameter and buffer by its key (the graph's own tensors, not copies).");
  io.def("load_graph_state", [](GraphLike graph, TensorMapping tensors) {
    const Graph g = graph_arg(graph);
    const io::TensorMap t = tensor_map(tensors);
    nb::gil_scoped_release release;
    io::load_graph_state(g, t, "loom.io.load_graph_state");
  }, nb::arg("graph"), nb::arg("tensors"), "Sets the graph's parameters and buffers from a dict by key, strictly: every one of them, nothing else.");
}

void bind_safetensors(nb::module_& io) {
  io.def("save_safetensors", [](const std::string& path, TensorMapping tensors, TextMapping metadata) {
    const io::TensorMap t = tensor_map(tensors);
    const io::Metadata md = metadata_of(metadata);
    nb::gil_scoped_release release;
    io::save_safetensors(path, t, md);
  }, nb::arg("path"), nb::arg("tensors"), nb::arg("metadata") = nb::none(), "A dict of tensors (or arrays) as a safetensors file.");
  io.def("load_safetensors", [](const std::string& path) {
    io::TensorMap t;
    {
      nb::gil_scoped_release release;
      t = io::load_safetensors(path);
    }
    return t;
  }, nb::arg("path"), "The tensors of a safetensors file as a dict.");
  io.def("load_safetensors_metadata", [](const std::string& path) {
    nb::gil_scoped_release release;
    return io::load_safetensors_metadata(path);
  }, nb::arg("path"), "The string metadata of a safetensors file's header, as a dict.");
}

void bind_onnx(nb::module_& io) {
  io.def("export_onnx", [](GraphLike graph, const std::string& path, bool dynamic_batch, int64_t batch_size, bool fold_batch_norm) {
    const Graph g = graph_arg(graph);
    io::OnnxExportOptions o;
    o.dynamic_batch = dynamic_batch, o.batch_size = batch_size, o.fold_batch_norm = fold_batch_norm;
    nb::gil_scoped_release release;
    io::export_onnx(g, path, o);
  }, nb::arg("graph"), nb::arg("path"), nb::arg("dynamic_batch") = true, nb::arg("batch_size") = 1, nb::arg("fold_batch_norm") = false, "Writes the graph as an ONNX model (dynamic_batch: the batch axis open, else batch_size; fold_batch_norm: batch norm folded into the preceding convolution).");
  io.def("import_onnx", [](const std::string& path) {
    nb::gil_scoped_release release;
    return io::import_onnx(path);
  }, nb::arg("path"), "An ONNX model as a graph of Loom's layers.");
}

// The data readers that the examples use (Fashion-MNIST's IDX files, NumPy's .npy).
void bind_data_readers(nb::module_& data) {
  data.def("read_idx", [](const std::string& path) {
    nb::gil_scoped_release release;
    return data::read_idx(path);
  }, nb::arg("path"), "An IDX file (MNIST's format), plain or gzip, as a tensor of its dtype and shape.");
  data.def("load_npy", [](const std::string& path) {
    nb::gil_scoped_release release;
    return data::load_npy(path);
  }, nb::arg("path"), "A NumPy .npy file as a tensor of its dtype and shape.");
}

// Loom's loaders over arrays: what Model.fit takes besides arrays (batches of the dataset's
// fields: the graph's inputs, then the target).
void bind_data_loaders(nb::module_& data) {
  nb::class_<data::Dataset>(data, "Dataset", "A dataset of Loom's (its examples are lists of tensors).")
      .def("__len__", &data::Dataset::size);
  nb::class_<data::TensorDataset, data::Dataset>(data, "_TensorDataset");
  data.def("TensorDataset", [](nb::args arrays) -> std::shared_ptr<data::Dataset> {
    std::vector<Tensor> ts;
    for (nb::handle a : arrays) ts.push_back(as_tensor(a));
    return std::make_shared<data::TensorDataset>(std::move(ts));
  }, nb::sig("def TensorDataset(*arrays: loom._core.ArrayLike) -> Dataset"), "Examples are the rows of the arrays (one field each, all with as many rows).");
  nb::class_<data::DataLoader>(data, "DataLoader", "Batches of a dataset, optionally shuffled per epoch (include/loom/data/loader.h).")
      .def("__init__", [](data::DataLoader* self, std::shared_ptr<data::Dataset> dataset, int64_t batch_size, bool shuffle, uint64_t seed,
                          bool drop_last, int n_jobs) {
        data::LoaderOptions o;
        o.batch_size = batch_size, o.shuffle = shuffle, o.seed = seed, o.drop_last = drop_last, o.n_jobs = n_jobs;
        new (self) data::DataLoader(std::move(dataset), o);
      }, nb::arg("dataset"), nb::arg("batch_size") = 1, nb::arg("shuffle") = false, nb::arg("seed") = 0, nb::arg("drop_last") = false,
           nb::arg("n_jobs") = 0)
      .def("__len__", &data::DataLoader::size, "Batches per epoch.")
      .def("__iter__", [](nb::handle self) { return self; }, nb::sig("def __iter__(self) -> DataLoader"), "One epoch: iterating again gives the next.")
      .def("__next__", [](data::DataLoader& l) {
        std::optional<data::Batch> b;
        {
          nb::gil_scoped_release release;
          b = l.next();
        }
        if (!b) throw nb::stop_iteration();
        return *b;
      })
      .def_prop_ro("position", [](const data::DataLoader& l) -> TupleOf<int64_t, int64_t> { return nb::make_tuple(l.position().epoch, l.position().batch); },
                   "(epoch, batches delivered in it).")
      .def("set_position", [](data::DataLoader& l, int64_t epoch, int64_t batch) { l.set_position({epoch, batch}); },
           nb::arg("epoch"), nb::arg("batch") = 0, "Moves the loader to (epoch, batch): it then yields exactly the batches an uninterrupted run would have yielded next.");
}

}  // namespace

// The groups in a fixed order: the module's namespace, and so its stubs (scripts/python_stubs.sh),
// list the names in the order they are defined.
void bind_io(nb::module_& m) {
  nb::module_ io = m.def_submodule("io", "Model files, state files, safetensors and ONNX (include/loom/io).");
  bind_model_and_state_files(io);
  bind_safetensors(io);
  bind_onnx(io);
  nb::module_ data = m.def_submodule("data", "Readers of data files (include/loom/data).");
  bind_data_readers(data);
  bind_data_loaders(data);
}

}  // namespace loom::python
