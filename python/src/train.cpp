// Training (docs/python.md "Training"): loom._core._Model over train::Model, the fit that
// python/loom/training.py's Model.fit calls, Python callbacks, Ctrl-C, and Loom's own callbacks,
// optimizers, metrics and schedules by name and as objects.
//
// The GIL: fit, evaluate and predict release it for their whole run and take it back only to
// call into Python (a callback, a loss or metric written in Python, the check for Ctrl-C), so
// other Python threads run meanwhile. An exception raised by Python code called there travels
// through train::Model::fit as nb::python_error and reaches Python as itself.
#include <Python.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/shared_ptr.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <string>

#include "common.h"
#include "loom/core/error.h"
#include "loom/data/dataset.h"
#include "loom/data/loader.h"
#include "loom/graph/graph.h"
#include "loom/train/callbacks.h"
#include "loom/train/model.h"
#include "loom/train/schedules.h"
#include "loom/zoo/architectures.h"

namespace loom::python {

namespace {

// Python functions a model calls (a loss, metrics written in Python). The model's C++ loss and
// metrics hold this list by shared_ptr and an index, not the objects themselves, so that the
// _Model's tp_traverse can show them to Python's collector and its tp_clear can drop them: a
// loss whose closure refers back to the model is then a cycle the collector breaks.
struct HeldCallables {
  std::vector<nb::object> objects;
  size_t add(nb::handle fn) {
    objects.push_back(nb::borrow(fn));
    return objects.size() - 1;
  }
  nb::handle get(size_t i, const char* what) const {
    if (i >= objects.size() || !objects[i].is_valid())
      throw ValueError(std::string("loom.Model: the Python ") + what + " was released (the model is being collected)");
    return objects[i];
  }
};

struct PyModel {
  std::unique_ptr<train::Model> model;
  std::shared_ptr<HeldCallables> held = std::make_shared<HeldCallables>();
};

// loom.TrainStep: one compiled training step (train::TrainStep), run by hand.
struct PyStep {
  std::unique_ptr<train::TrainStep> step;
  std::shared_ptr<HeldCallables> held = std::make_shared<HeldCallables>();
};

template <class Holder>
int held_traverse(PyObject* self, visitproc visit, void* arg) {
  // nb::inst_ptr is valid once the instance is constructed; before that there is nothing held
  if (nb::inst_ready(self)) {
    Holder* h = nb::inst_ptr<Holder>(self);
    for (const nb::object& o : h->held->objects) Py_VISIT(o.ptr());
  }
  Py_VISIT(Py_TYPE(self));
  return 0;
}

template <class Holder>
int held_clear(PyObject* self) {
  if (nb::inst_ready(self)) {
    Holder* h = nb::inst_ptr<Holder>(self);
    for (nb::object& o : h->held->objects) o.reset();
  }
  return 0;
}

PyType_Slot model_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(held_traverse<PyModel>)},
                             {Py_tp_clear, reinterpret_cast<void*>(held_clear<PyModel>)},
                             {0, nullptr}};
PyType_Slot step_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(held_traverse<PyStep>)},
                            {Py_tp_clear, reinterpret_cast<void*>(held_clear<PyStep>)},
                            {0, nullptr}};

Graph graph_of(nb::handle obj) {
  if (nb::isinstance<Graph>(obj)) return nb::cast<Graph>(obj);
  if (nb::isinstance<zoo::Network>(obj)) return nb::cast<zoo::Network&>(obj).graph;
  throw nb::type_error("loom.Model: expected a loom.Graph or a loom.zoo.Network");
}

// Keyword arguments of an optimizer or schedule given as an object (loom.optimizers.Adam(lr=...)).
struct Kwargs {
  std::string who;
  nb::dict d;
  std::vector<std::string> known;
  double num(const char* key, double dflt) {
    known.push_back(key);
    return d.contains(key) ? nb::cast<double>(d[key]) : dflt;
  }
  int64_t integer(const char* key, int64_t dflt) {
    known.push_back(key);
    return d.contains(key) ? nb::cast<int64_t>(d[key]) : dflt;
  }
  bool flag(const char* key, bool dflt) {
    known.push_back(key);
    return d.contains(key) ? nb::cast<bool>(d[key]) : dflt;
  }
  std::string text(const char* key, const std::string& dflt) {
    known.push_back(key);
    return d.contains(key) ? nb::cast<std::string>(d[key]) : dflt;
  }
  void done() const {  // an argument nobody read is a typo
    for (auto [k, v] : d) {
      const std::string key = nb::cast<std::string>(k);
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        std::string valid;
        for (const auto& s : known) valid += (valid.empty() ? "" : ", ") + s;
        throw ValueError(who + ": unknown argument '" + key + "' (valid: " + valid + ")");
      }
    }
  }
};

std::shared_ptr<train::Optimizer> make_optimizer(const std::string& name, const nb::dict& kwargs, std::vector<Tensor> params) {
  std::string n;
  for (char c : name) n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  Kwargs k{"loom.optimizers." + name, kwargs, {}};
  std::shared_ptr<train::Optimizer> opt;
  if (n == "sgd") {
    train::SGDOptions o;
    o.lr = k.num("lr", o.lr), o.momentum = k.num("momentum", o.momentum), o.dampening = k.num("dampening", o.dampening);
    o.weight_decay = k.num("weight_decay", o.weight_decay), o.nesterov = k.flag("nesterov", o.nesterov);
    opt = std::make_shared<train::SGD>(std::move(params), o);
  } else if (n == "adam") {
    train::AdamOptions o;
    o.lr = k.num("lr", o.lr), o.beta1 = k.num("beta1", o.beta1), o.beta2 = k.num("beta2", o.beta2), o.eps = k.num("eps", o.eps);
    o.weight_decay = k.num("weight_decay", o.weight_decay), o.amsgrad = k.flag("amsgrad", o.amsgrad);
    opt = std::make_shared<train::Adam>(std::move(params), o);
  } else if (n == "adamw") {
    train::AdamWOptions o;
    o.lr = k.num("lr", o.lr), o.beta1 = k.num("beta1", o.beta1), o.beta2 = k.num("beta2", o.beta2), o.eps = k.num("eps", o.eps);
    o.weight_decay = k.num("weight_decay", o.weight_decay), o.amsgrad = k.flag("amsgrad", o.amsgrad);
    opt = std::make_shared<train::AdamW>(std::move(params), o);
  } else if (n == "rmsprop") {
    train::RMSPropOptions o;
    o.lr = k.num("lr", o.lr), o.alpha = k.num("alpha", o.alpha), o.eps = k.num("eps", o.eps);
    o.weight_decay = k.num("weight_decay", o.weight_decay), o.momentum = k.num("momentum", o.momentum);
    o.centered = k.flag("centered", o.centered);
    opt = std::make_shared<train::RMSProp>(std::move(params), o);
  } else if (n == "adagrad") {
    train::AdagradOptions o;
    o.lr = k.num("lr", o.lr), o.lr_decay = k.num("lr_decay", o.lr_decay), o.weight_decay = k.num("weight_decay", o.weight_decay);
    o.initial_accumulator_value = k.num("initial_accumulator_value", o.initial_accumulator_value), o.eps = k.num("eps", o.eps);
    opt = std::make_shared<train::Adagrad>(std::move(params), o);
  } else {
    return train::make_optimizer(name, std::move(params));  // its error names the valid ones
  }
  k.done();
  return opt;
}

// A loss: Keras' name, or a Python function (prediction, target) -> Tensor, called with the GIL.
train::Loss make_loss(nb::handle loss, const std::shared_ptr<HeldCallables>& held) {
  if (nb::isinstance<nb::str>(loss)) return train::Loss(nb::cast<std::string>(loss));
  if (!PyCallable_Check(loss.ptr())) throw nb::type_error("loom.Model: loss is a name (\"mse\", ...) or a function (prediction, target)");
  const size_t i = held->add(loss);
  return train::Loss([held, i](const Tensor& pred, const Tensor& target) -> Tensor {
    nb::gil_scoped_acquire acquire;
    nb::object out = held->get(i, "loss")(pred, target);
    return as_tensor(out);
  });
}

// Metrics: names, loom.metrics objects (a (class name, kwargs) pair from python/loom/training.py)
// and Python functions (prediction, target) -> float, named by their __name__.
train::MetricList make_metrics(nb::handle metrics, const std::shared_ptr<HeldCallables>& held) {
  std::vector<std::shared_ptr<train::Metric>> out;
  if (metrics.is_none()) return out;
  for (nb::handle m : nb::borrow<nb::sequence>(metrics)) {
    if (nb::isinstance<nb::str>(m)) {
      out.push_back(train::MetricSpec(nb::cast<std::string>(m)).metric());
    } else if (nb::isinstance<nb::tuple>(m)) {
      const std::string kind = nb::cast<std::string>(m[0]);
      Kwargs k{"loom.metrics." + kind, nb::cast<nb::dict>(m[1]), {}};
      if (kind == "Accuracy") out.push_back(std::make_shared<train::Accuracy>(k.num("threshold", 0.5)));
      else if (kind == "TopKAccuracy") out.push_back(std::make_shared<train::TopKAccuracy>(k.integer("k", 5)));
      else if (kind == "MeanSquaredError") out.push_back(std::make_shared<train::MeanSquaredError>());
      else if (kind == "MeanAbsoluteError") out.push_back(std::make_shared<train::MeanAbsoluteError>());
      else throw ValueError("loom.metrics: unknown metric object '" + kind + "' (valid: Accuracy, TopKAccuracy, MeanSquaredError, MeanAbsoluteError)");
      k.done();
    } else if (PyCallable_Check(m.ptr())) {
      const size_t i = held->add(m);
      const std::string name = nb::hasattr(m, "__name__") ? nb::cast<std::string>(m.attr("__name__")) : "metric";
      out.push_back(std::make_shared<train::FunctionMetric>(name, [held, i](const Tensor& pred, const Tensor& target) {
        nb::gil_scoped_acquire acquire;
        return nb::cast<double>(held->get(i, "metric")(pred, target));
      }));
    } else {
      throw nb::type_error("loom.Model: a metric is a name, a loom.metrics object or a function (prediction, target) -> float");
    }
  }
  return out;
}

nb::typed<nb::dict, nb::str, float> logs_dict(const train::Logs& logs) {
  nb::dict d;
  for (const auto& [k, v] : logs) d[k.c_str()] = v;
  return d;
}

nb::typed<nb::dict, nb::str, nb::typed<nb::list, float>> history_dict(const train::History& h) {
  nb::dict d;
  for (const auto& [k, v] : h.series) {
    nb::list l;
    for (double x : v) l.append(x);
    d[k.c_str()] = l;
  }
  return d;
}

// A Python callback under Keras' hook names. Batches are numbered from 0 within the epoch (Keras);
// Loom counts steps from 1.
class PyCallback final : public train::Callback {
 public:
  PyCallback(nb::object cb) : cb_(std::move(cb)) {}
  // Every argument is converted after the GIL is taken (in call): Python objects are made only
  // with it held.
  void on_train_begin(train::Model&) override { call("on_train_begin", train::Logs{}); }
  void on_train_end(train::Model&, const train::History&) override { call("on_train_end", last_); }
  void on_epoch_begin(train::Model&, int64_t epoch) override { call("on_epoch_begin", epoch, train::Logs{}); }
  void on_epoch_end(train::Model&, int64_t epoch, const train::Logs& logs) override {
    last_ = logs;
    call("on_epoch_end", epoch, logs);
  }
  void on_batch_begin(train::Model&, int64_t step) override { call("on_train_batch_begin", step - 1, train::Logs{}); }
  void on_batch_end(train::Model&, int64_t step, const train::Logs& logs) override { call("on_train_batch_end", step - 1, logs); }

 private:
  template <class... A>
  void call(const char* hook, const A&... args) {
    nb::gil_scoped_acquire acquire;
    if (!nb::hasattr(cb_, hook)) return;
    cb_.attr(hook)(convert(args)...);
  }
  static nb::object convert(int64_t v) { return nb::int_(v); }
  static nb::object convert(const train::Logs& l) { return logs_dict(l); }
  nb::object cb_;
  train::Logs last_;
};

// Ctrl-C during fit: Python's handler only sets a flag while Loom runs without the GIL, so after
// each batch this takes the GIL and runs the pending handlers (PyErr_CheckSignals, which acts on
// the main thread only). When one raises (KeyboardInterrupt), training stops after this batch —
// the model holds that batch's update and stays usable — and the exception is raised again once
// fit has returned.
// Only the main thread runs signal handlers, so a fit on another thread skips the check (and the
// wait for the GIL it costs when other Python threads are busy: up to the switch interval).
class InterruptCheck final : public train::Callback {
 public:
  explicit InterruptCheck(bool main_thread) : main_thread_(main_thread) {}
  void on_batch_end(train::Model& m, int64_t, const train::Logs&) override {
    if (!main_thread_) return;
    nb::gil_scoped_acquire acquire;
    if (PyErr_CheckSignals() == 0) return;
    PyErr_Fetch(&type_, &value_, &traceback_);
    m.stop_training();
  }
  // With the GIL held, after fit: raises what a handler raised, if anything.
  void rethrow() {
    if (!type_) return;
    PyErr_Restore(type_, value_, traceback_);
    type_ = value_ = traceback_ = nullptr;
    throw nb::python_error();
  }
  ~InterruptCheck() override {  // destroyed with the GIL held (the fit binding's scope)
    Py_XDECREF(type_);
    Py_XDECREF(value_);
    Py_XDECREF(traceback_);
  }

 private:
  bool main_thread_;
  PyObject *type_ = nullptr, *value_ = nullptr, *traceback_ = nullptr;
};

// Loom's own callbacks (EarlyStopping, ModelCheckpoint, ...), made by python/loom/training.py.
struct NativeCallback {
  std::shared_ptr<train::Callback> cb;
};

train::MonitorMode monitor_mode(const std::string& mode) {
  if (mode == "auto") return train::MonitorMode::Auto;
  if (mode == "min") return train::MonitorMode::Min;
  if (mode == "max") return train::MonitorMode::Max;
  throw ValueError("loom.callbacks: mode '" + mode + "' is not one of 'auto', 'min', 'max'");
}

// A loom.schedules object's (kind, kwargs) (python/loom/schedules.py) over `opt`. base_lr sets the
// optimizer's rate first (a Schedule reads its base rate from the optimizer when made); a
// LinearWarmup's `after` is made before the warmup, over the same optimizer, as C++ requires.
std::unique_ptr<train::Schedule> make_schedule(train::Optimizer& opt, const std::string& kind, const nb::dict& kwargs) {
  Kwargs k{"loom.schedules." + kind, kwargs, {}};
  if (kwargs.contains("base_lr")) opt.set_lr(k.num("base_lr", 0.0));
  else k.known.push_back("base_lr");
  std::unique_ptr<train::Schedule> s;
  if (kind == "StepLR") {
    const int64_t step = k.integer("step_size", 1);
    s = std::make_unique<train::StepLR>(opt, step, k.num("gamma", 0.1));
  } else if (kind == "ExponentialLR") {
    s = std::make_unique<train::ExponentialLR>(opt, k.num("gamma", 0.9));
  } else if (kind == "CosineAnnealingLR") {
    const int64_t t_max = k.integer("t_max", 1);
    s = std::make_unique<train::CosineAnnealingLR>(opt, t_max, k.num("eta_min", 0.0));
  } else if (kind == "LinearWarmup") {
    const int64_t w = k.integer("warmup_steps", 1);
    const double start_factor = k.num("start_factor", 1.0 / 3.0);
    std::unique_ptr<train::Schedule> after;
    k.known.push_back("after");
    if (kwargs.contains("after")) {
      const nb::tuple spec = nb::cast<nb::tuple>(kwargs["after"]);
      after = make_schedule(opt, nb::cast<std::string>(spec[0]), nb::cast<nb::dict>(spec[1]));
    }
    s = std::make_unique<train::LinearWarmup>(opt, w, start_factor, std::move(after));
  } else {
    throw ValueError("loom.schedules: unknown schedule '" + kind + "' (valid: StepLR, ExponentialLR, CosineAnnealingLR, LinearWarmup, ReduceLROnPlateau)");
  }
  k.done();
  return s;
}

// A schedule stepped per optimizer step (interval "step", Keras' learning_rate=schedule): the
// rate of the model's step k (counted by its optimizer over every fit) is lr_at(k). Set at each
// batch's start, from the optimizer's count, so that the batch hooks and the epoch's "lr" log
// see the rate the batch trains at, and a later fit or a loaded checkpoint goes on from the
// steps the model has.
class StepSchedule final : public train::Callback {
 public:
  explicit StepSchedule(std::shared_ptr<train::Schedule> schedule) : schedule_(std::move(schedule)) {}
  void on_batch_begin(train::Model& m, int64_t) override {
    while (schedule_->last_epoch() < m.optimizer().steps()) schedule_->step();
  }

 private:
  std::shared_ptr<train::Schedule> schedule_;
};

std::vector<Tensor> tensors_of(nb::handle obj) {
  std::vector<Tensor> out;
  if (nb::isinstance<nb::list>(obj) || nb::isinstance<nb::tuple>(obj))
    for (nb::handle x : nb::borrow<nb::sequence>(obj)) out.push_back(as_tensor(x));
  else
    out.push_back(as_tensor(obj));
  return out;
}

// An optimizer over tensors the caller owns (torch.optim's form: loom.optimizers.Adam(params,
// lr=...)), for a training step written by hand; python/loom/optimizers.py makes it.
void bind_param_optimizer(nb::module_& m) {
  nb::class_<train::Optimizer>(m, "_ParamOptimizer", "A loom.optimizers object's C++ optimizer over given tensors.")
      .def("step", [](train::Optimizer& o) {
        nb::gil_scoped_release release;  // no Python code runs in an update
        o.step();
      }, "One update of every parameter that has a gradient.")
      .def("zero_grad", &train::Optimizer::zero_grad, "Drops every parameter's gradient (grad becomes None).")
      .def_prop_rw("lr", &train::Optimizer::lr, &train::Optimizer::set_lr, "The learning rate (settable).")
      .def_prop_ro("steps", &train::Optimizer::steps, "Updates taken.")
      .def_prop_ro("params", [](const train::Optimizer& o) { return o.params(); }, "The tensors it updates.");
  m.def("_param_optimizer", [](const std::string& name, nb::dict kwargs, std::vector<Tensor> params) {
    return make_optimizer(name, kwargs, std::move(params));
  }, nb::arg("name"), nb::arg("kwargs"), nb::arg("params"));
}

// Keras' loss and metric names, and a loss by name on given tensors.
void bind_losses_by_name(nb::module_& m) {
  m.def("_loss_names", &train::Loss::valid_names);
  m.def("_metric_names", &train::MetricSpec::valid_names);
  m.def("_loss", [](const std::string& name, ArrayLike pred, ArrayLike target) {
    const train::Loss loss(name);
    const Tensor p = as_tensor(pred), t = as_tensor(target);
    MaybeRelease release(elements_of(p, t));
    return loss(p, t);
  }, nb::arg("name"), nb::arg("prediction"), nb::arg("target"), "The loss of Keras' name `name` (train::Loss) on these tensors.");
}

void bind_native_callbacks(nb::module_& m) {
  nb::class_<NativeCallback>(m, "_NativeCallback");
  m.def("_native_callback", [](const std::string& kind, PyModel* model, nb::dict kwargs) {
    Kwargs k{"loom.callbacks." + kind, kwargs, {}};
    std::shared_ptr<train::Callback> cb;
    if (kind == "EarlyStopping") {
      const std::string monitor = k.text("monitor", "val_loss");
      const int64_t patience = k.integer("patience", 3);
      const double min_delta = k.num("min_delta", 0);
      const std::string mode = k.text("mode", "auto");
      cb = std::make_shared<train::EarlyStopping>(monitor, static_cast<int>(patience), min_delta, monitor_mode(mode),
                                                  k.flag("restore_best_weights", false));
    } else if (kind == "ModelCheckpoint") {
      const std::string best = k.text("filepath", ""), last = k.text("last_path", ""), monitor = k.text("monitor", "val_loss");
      cb = std::make_shared<train::ModelCheckpoint>(best, last, monitor, monitor_mode(k.text("mode", "auto")));
    } else if (kind == "CSVLogger") {
      cb = std::make_shared<train::CSVLogger>(k.text("filename", ""));
    } else if (kind == "JSONLinesLogger") {
      cb = std::make_shared<train::JSONLinesLogger>(k.text("filename", ""));
    } else if (kind == "TerminateOnNaN") {
      cb = std::make_shared<train::TerminateOnNaN>();
    } else if (kind == "LearningRateScheduler" || kind == "ReduceLROnPlateau") {
      if (!model) throw ValueError("loom.callbacks." + kind + ": needs the model");
      train::Optimizer& opt = model->model->optimizer();
      if (kind == "ReduceLROnPlateau") {
        train::PlateauOptions o;
        const std::string mode = k.text("mode", "min");
        if (mode != "min" && mode != "max") throw ValueError("loom.callbacks.ReduceLROnPlateau: mode '" + mode + "' is not 'min' or 'max'");
        o.mode = mode == "min" ? train::PlateauOptions::Mode::Min : train::PlateauOptions::Mode::Max;
        o.factor = k.num("factor", o.factor), o.patience = k.integer("patience", o.patience), o.threshold = k.num("threshold", o.threshold);
        o.cooldown = k.integer("cooldown", o.cooldown), o.min_lr = k.num("min_lr", o.min_lr), o.eps = k.num("eps", o.eps);
        const std::string monitor = k.text("monitor", "val_loss");
        cb = std::make_shared<train::LearningRateScheduler>(std::make_shared<train::ReduceLROnPlateau>(opt, o), monitor);
      } else {
        nb::tuple spec = nb::cast<nb::tuple>(kwargs["schedule"]);
        k.known.push_back("schedule");
        const std::string interval = k.text("interval", "epoch");
        if (interval != "epoch" && interval != "step")
          throw ValueError("loom.callbacks.LearningRateScheduler: interval '" + interval + "' is not one of 'epoch', 'step'");
        std::shared_ptr<train::Schedule> s = make_schedule(opt, nb::cast<std::string>(spec[0]), nb::cast<nb::dict>(spec[1]));
        if (interval == "step") cb = std::make_shared<StepSchedule>(std::move(s));
        else cb = std::make_shared<train::LearningRateScheduler>(std::move(s));
      }
    } else {
      throw ValueError("loom.callbacks: unknown callback '" + kind + "'");
    }
    k.done();
    return NativeCallback{cb};
  }, nb::arg("kind"), nb::arg("model").none(), nb::arg("kwargs"));
}

void bind_model_construction_and_fit(nb::class_<PyModel>& cls) {
  cls.def("__init__", [](PyModel* self, GraphLike graph, nb::handle loss, nb::handle optimizer, nb::handle metrics) {
        new (self) PyModel();
        const Graph g = graph_of(graph);
        train::Loss l = make_loss(loss, self->held);
        train::MetricList ms = make_metrics(metrics, self->held);
        std::shared_ptr<train::Optimizer> opt;
        if (nb::isinstance<nb::str>(optimizer)) opt = train::make_optimizer(nb::cast<std::string>(optimizer), g.parameters());
        else opt = make_optimizer(nb::cast<std::string>(optimizer[0]), nb::cast<nb::dict>(optimizer[1]), g.parameters());
        self->model = std::make_unique<train::Model>(g, std::move(l), std::move(opt), std::move(ms));
      }, nb::arg("graph"), nb::arg("loss"), nb::arg("optimizer"), nb::arg("metrics").none())
      // x, y arrays (or lists of them), or x a loom.data.DataLoader and y None; validation a
      // DataLoader or None.
      .def("_fit", [](PyModel& self, nb::handle x, nb::handle y, int epochs, int64_t batch_size, double validation_split, bool shuffle,
                      uint64_t seed, nb::handle callbacks, bool progress, int progress_every, nb::handle validation) {
        const bool main_thread = nb::module_::import_("threading").attr("current_thread")().is(
            nb::module_::import_("threading").attr("main_thread")());
        auto interrupt = std::make_shared<InterruptCheck>(main_thread);
        train::FitOptions o;
        o.epochs = epochs, o.batch_size = batch_size, o.validation_split = validation_split, o.shuffle = shuffle, o.seed = seed;
        o.progress = progress, o.progress_every = progress_every;
        if (!validation.is_none()) o.validation = &nb::cast<data::DataLoader&>(validation);
        for (nb::handle cb : nb::borrow<nb::sequence>(callbacks)) {
          if (nb::isinstance<NativeCallback>(cb)) o.callbacks.push_back(nb::cast<NativeCallback&>(cb).cb);
          else o.callbacks.push_back(std::make_shared<PyCallback>(nb::borrow(cb)));
        }
        o.callbacks.push_back(interrupt);
        train::History h;
        if (nb::isinstance<data::DataLoader>(x)) {
          data::DataLoader& loader = nb::cast<data::DataLoader&>(x);
          nb::gil_scoped_release release;
          h = self.model->fit(loader, o);
        } else {
          const std::vector<Tensor> xs = tensors_of(x), ys = tensors_of(y);
          nb::gil_scoped_release release;
          h = self.model->fit(xs, ys, o);
        }
        interrupt->rethrow();
        return history_dict(h);
      }, nb::arg("x"), nb::arg("y").none(), nb::arg("epochs"), nb::arg("batch_size"), nb::arg("validation_split"), nb::arg("shuffle"),
         nb::arg("seed"), nb::arg("callbacks"), nb::arg("progress"), nb::arg("progress_every"), nb::arg("validation").none());
}

void bind_model_evaluation(nb::class_<PyModel>& cls) {
  cls.def("_evaluate_loader", [](PyModel& self, data::DataLoader& loader) {
        train::Logs logs;
        {
          nb::gil_scoped_release release;
          logs = self.model->evaluate(loader);
        }
        return logs_dict(logs);
      })
      .def("evaluate", [](PyModel& self, ArrayLike x, ArrayLike y, int64_t batch_size) {
        const std::vector<Tensor> xs = tensors_of(x), ys = tensors_of(y);
        train::Logs logs;
        {
          nb::gil_scoped_release release;
          logs = self.model->evaluate(xs, ys, batch_size);
        }
        return logs_dict(logs);
      }, nb::arg("x"), nb::arg("y"), nb::arg("batch_size") = 32, "Mean loss and metrics over the samples (Eval mode, no gradients).")
      .def("predict", [](PyModel& self, ArrayLike x, int64_t batch_size) {
        const std::vector<Tensor> xs = tensors_of(x);
        nb::gil_scoped_release release;
        return self.model->predict(xs, batch_size);
      }, nb::arg("x"), nb::arg("batch_size") = 256, "The output for x in batches (Eval mode, no gradients).");
}

// The model's files, and what it has done so far (epochs, history, the optimizer's state).
void bind_model_files_and_state(nb::class_<PyModel>& cls) {
  cls.def("save", [](PyModel& self, const std::string& path) {
        nb::gil_scoped_release release;
        self.model->save(path);
      }, nb::arg("path"), "The graph's architecture and weights in one model file (loom.load_model reads it).")
      .def("save_checkpoint", [](PyModel& self, const std::string& path) {
        nb::gil_scoped_release release;
        self.model->save_checkpoint(path);
      }, nb::arg("path"), "Weights, optimizer state, generator, epoch count and history.")
      .def("load_checkpoint", [](PyModel& self, const std::string& path) {
        nb::gil_scoped_release release;
        self.model->load_checkpoint(path);
      }, nb::arg("path"), "All or nothing: a bad file leaves the model as it was.")
      .def("stop_training", [](PyModel& self) { self.model->stop_training(); }, "Asks fit to stop after the current batch (as setting stop_training = True from a callback).")
      .def_prop_ro("graph", [](PyModel& self) { return self.model->graph(); }, "The graph the model trains.")
      .def_prop_ro("history", [](PyModel& self) { return history_dict(self.model->history()); }, "Every epoch's logs across fit calls: a dict of lists (loss, metrics, val_..., lr).")
      .def_prop_ro("epochs_done", [](PyModel& self) { return self.model->epochs_done(); }, "The epochs trained across fit calls.")
      .def_prop_rw("lr", [](PyModel& self) { return self.model->optimizer().lr(); },
                   [](PyModel& self, double lr) { self.model->optimizer().set_lr(lr); }, "The optimizer's learning rate (settable).")
      .def_prop_ro("steps", [](PyModel& self) { return self.model->optimizer().steps(); }, "Optimizer steps taken (batches trained).")
      .def_prop_ro("optimizer_name", [](PyModel& self) { return self.model->optimizer().name(); }, "The optimizer's name (\"adam\", \"sgd\", ...).")
      .def("summary", [](PyModel& self) { return self.model->summary(); }, "The inference graph's summary table, then the optimizer (name, learning rate, the tensors and values it trains) and the metrics.");
}

void bind_train_step(nb::module_& m) {
  nb::class_<PyStep>(m, "TrainStep", nb::type_slots(step_slots), nb::is_weak_referenceable(),
                     "One training step compiled once (train::TrainStep): step(x, y) runs zero_grad, forward, loss, backward "
                     "and the optimizer's update on one batch, without the GIL, and returns the loss.")
      .def("__init__", [](PyStep* self, GraphLike graph, nb::handle loss, nb::handle optimizer, double clip_grad_norm) {
        new (self) PyStep();
        const Graph g = graph_of(graph);
        train::Loss l = make_loss(nb::hasattr(loss, "_loom_name") ? nb::handle(loss.attr("_loom_name")) : loss, self->held);
        std::shared_ptr<train::Optimizer> opt;
        if (nb::isinstance<nb::str>(optimizer)) opt = train::make_optimizer(nb::cast<std::string>(optimizer), g.parameters());
        else {
          const nb::tuple spec = nb::cast<nb::tuple>(optimizer.attr("_spec")());
          const nb::dict kwargs = nb::cast<nb::dict>(spec[1]);
          // a step has no epochs nor a step count of its own to drive a schedule with
          if (kwargs.contains("lr") && !PyNumber_Check(nb::handle(kwargs["lr"]).ptr()))
            throw ValueError("loom.TrainStep: the optimizer's lr must be a number; a loom.schedules object as lr is stepped by "
                             "loom.Model.fit (with a TrainStep, set step.lr before each step)");
          opt = make_optimizer(nb::cast<std::string>(spec[0]), kwargs, g.parameters());
        }
        train::TrainStepOptions o;
        o.clip_grad_norm = clip_grad_norm;
        self->step = std::make_unique<train::TrainStep>(g, l.function(), std::move(opt), o);
      }, nb::arg("graph"), nb::arg("loss"), nb::arg("optimizer") = "adam", nb::arg("clip_grad_norm") = 0.0)
      .def("__call__", [](PyStep& self, ArrayLike x, ArrayLike y) {
        std::vector<Tensor> batch = tensors_of(x);
        for (const Tensor& t : tensors_of(y)) batch.push_back(t);
        nb::gil_scoped_release release;
        return self.step->operator()(batch).loss.detach();
      }, nb::arg("x"), nb::arg("y"), "One step on the batch (x: the graph's inputs, y the target); the loss (0-d).")
      .def_prop_rw("lr", [](PyStep& self) { return self.step->optimizer().lr(); },
                   [](PyStep& self, double lr) { self.step->optimizer().set_lr(lr); }, "The optimizer's learning rate (settable).")
      .def_prop_ro("steps", [](PyStep& self) { return self.step->stats().steps; }, "Steps taken.")
      .def("dump", [](PyStep& self) { return self.step->dump(); }, "The compiled step as text: the forward plan, the loss, backward and update stages, and the last step's memory figures.");
}

}  // namespace

// The groups in a fixed order: the module's namespace, and so its stubs (scripts/python_stubs.sh),
// list the names in the order they are defined.
void bind_train(nb::module_& m) {
  bind_param_optimizer(m);
  bind_losses_by_name(m);
  bind_native_callbacks(m);
  nb::class_<PyModel> cls(m, "_Model", nb::type_slots(model_slots), nb::is_weak_referenceable());
  bind_model_construction_and_fit(cls);
  bind_model_evaluation(cls);
  bind_model_files_and_state(cls);
  bind_train_step(m);
}

}  // namespace loom::python
