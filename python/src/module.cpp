// loom._core: the native half of the `loom` package (python/loom/__init__.py re-exports it).
// It links libloom only; the store, flow, dist and serve parts will be submodules with
// libraries of their own (docs/python.md).
#include <Python.h>

#include <string>

#include "common.h"
#include "loom/core/error.h"
#include "loom/core/grad_mode.h"
#include "loom/core/parallel.h"
#include "loom/ops/linalg.h"
#include "loom/ops/registry.h"

namespace loom::python {

namespace {

// The Python classes of Loom's errors, made once: each is a loom.Error and the built-in class
// Python code already catches for that kind of mistake (ShapeError is a ValueError, ...).
struct ErrorClasses {
  PyObject* error = nullptr;
  PyObject* shape = nullptr;
  PyObject* dtype = nullptr;
  PyObject* device = nullptr;
  PyObject* index = nullptr;
  PyObject* value = nullptr;
  PyObject* linalg = nullptr;
  PyObject* memory = nullptr;
  PyObject* autograd = nullptr;
  PyObject* io = nullptr;
};
ErrorClasses errors;

PyObject* make_error(nb::module_& m, const char* name, PyObject* loom_base, PyObject* builtin, const char* doc) {
  PyObject* bases = builtin ? PyTuple_Pack(2, loom_base, builtin) : PyTuple_Pack(1, loom_base);
  const std::string qualified = std::string("loom.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  Py_DECREF(bases);
  if (!cls) throw nb::python_error();
  m.attr(name) = nb::handle(cls);  // the module holds a reference too; ours lives as long
  return cls;
}

}  // namespace

void bind_errors(nb::module_& m) {
  errors.error = PyErr_NewExceptionWithDoc("loom.Error", "Every error Loom raises.", PyExc_Exception, nullptr);
  if (!errors.error) throw nb::python_error();
  m.attr("Error") = nb::handle(errors.error);
  errors.shape = make_error(m, "ShapeError", errors.error, PyExc_ValueError, "Shapes that do not fit the op.");
  errors.dtype = make_error(m, "DTypeError", errors.error, PyExc_TypeError, "A dtype the op does not take.");
  errors.device = make_error(m, "DeviceError", errors.error, PyExc_ValueError, "A device that is unknown or does not fit.");
  errors.index = make_error(m, "IndexError", errors.error, PyExc_IndexError, "An index out of range.");
  errors.value = make_error(m, "ValueError", errors.error, PyExc_ValueError, "An argument's value is not valid.");
  errors.linalg = make_error(m, "LinAlgError", errors.value, nullptr, "A matrix the decomposition cannot take.");
  errors.memory = make_error(m, "OutOfMemoryError", errors.error, PyExc_MemoryError, "The memory limit or the system's memory ran out.");
  errors.autograd = make_error(m, "AutogradError", errors.error, PyExc_RuntimeError, "A gradient that cannot be taken.");
  errors.io = make_error(m, "IOError", errors.error, PyExc_OSError, "A file or stream that cannot be read or written.");

  // Most derived first: LinAlgError is a loom::ValueError.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const LinAlgError& e) {
      PyErr_SetString(errors.linalg, e.what());
    } catch (const ShapeError& e) {
      PyErr_SetString(errors.shape, e.what());
    } catch (const DTypeError& e) {
      PyErr_SetString(errors.dtype, e.what());
    } catch (const DeviceError& e) {
      PyErr_SetString(errors.device, e.what());
    } catch (const IndexError& e) {
      PyErr_SetString(errors.index, e.what());
    } catch (const ValueError& e) {
      PyErr_SetString(errors.value, e.what());
    } catch (const OutOfMemoryError& e) {
      PyErr_SetString(errors.memory, e.what());
    } catch (const AutogradError& e) {
      PyErr_SetString(errors.autograd, e.what());
    } catch (const IOError& e) {
      PyErr_SetString(errors.io, e.what());
    } catch (const Error& e) {
      PyErr_SetString(errors.error, e.what());
    }
  });
}

}  // namespace loom::python

using namespace loom;
using namespace loom::python;

NB_MODULE(_core, m) {
  m.doc() = "Loom's native module: tensors, ops, autograd, layers, graphs, training, files (docs/python.md)";
  bind_errors(m);
  bind_tensor(m);
  bind_ops(m);
  bind_linalg_random_autograd(m);
  bind_nn(m);
  bind_layers(m);
  bind_train(m);
  bind_io(m);
  bind_sparse(m);

  m.def("set_num_threads", &set_num_threads, nb::arg("n"), "Threads of Loom's pool (1 runs every op inline).");
  m.def("get_num_threads", &get_num_threads, "Threads of Loom's pool (the calling thread included).");
  m.def("is_grad_enabled", &grad_enabled, "Whether ops record gradients on this thread.");
  m.def("set_grad_enabled", &set_grad_enabled, nb::arg("enabled"), "Turns gradient recording on or off on this thread (loom.no_grad and loom.enable_grad use it).");
  m.def(
      "op_registry",
      []() -> nb::typed<nb::list, TupleOf<nb::str, nb::str, bool>> {
        nb::list out;
        for (const auto& op : op_registry()) out.append(nb::make_tuple(op.name, op.category, op.differentiable));
        return out;
      },
      "Every op of Loom as (name, category, differentiable), as op_registry() in C++.");
}
