// loom.Tensor: geometry, NumPy and DLPack export without a copy, indexing, operators, printing.
#include <Python.h>
#include <nanobind/ndarray.h>

#include <string>

#include "common.h"
#include "loom/autograd/autograd.h"
#include "loom/core/error.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/indexing.h"
#include "loom/ops/linalg.h"

namespace loom::python {

namespace {

const char* typestr(DType dtype) {
  switch (dtype) {
    case DType::Bool: return "|b1";
    case DType::UInt8: return "|u1";
    case DType::Int32: return "<i4";
    case DType::Int64: return "<i8";
    case DType::Float16: return "<f2";
    case DType::Float32: return "<f4";
    case DType::Float64: return "<f8";
    case DType::BFloat16: break;
  }
  throw DTypeError("loom.Tensor: NumPy has no bfloat16; convert first: t.astype(loom.float32).numpy()");
}

void check_exportable(const Tensor& t, const char* what) {
  if (t.requires_grad())
    throw AutogradError(std::string(what) + ": the tensor requires grad, and writes through the shared memory would not be "
                        "recorded; export t.detach() instead");
  if (t.device() != Device::cpu())
    throw DeviceError(std::string(what) + ": the tensor is on " + t.device().str() + "; only CPU memory can be shared");
}

}  // namespace

IntTuple int_tuple(const std::vector<int64_t>& v) {
  nb::list out;
  for (int64_t x : v) out.append(x);
  return nb::tuple(out);
}

namespace {

// An operand next to a tensor: a Python scalar becomes a 0-d tensor of the dtype the op would
// give (NumPy 2's weak scalars, Scalar::result_dtype_with), anything else as loom.asarray.
Tensor operand(nb::handle obj, const Tensor& other) {
  if (is_python_scalar(obj)) {
    const Scalar s = to_scalar(obj);
    return scalar_tensor(s, other.defined() ? s.result_dtype_with(other.dtype()) : s.natural_dtype());
  }
  return as_tensor(obj);
}

}  // namespace

Tensor operand_for(nb::handle obj, const Tensor& other) { return operand(obj, other); }

void weak_scalar_operands(nb::handle a, nb::handle b, Tensor& ta, Tensor& tb) {
  ta = is_python_scalar(a) ? Tensor() : as_tensor(a);
  tb = is_python_scalar(b) ? Tensor() : as_tensor(b);
  // The scalar's 0-d tensor has the result's dtype; the tensor takes it too where the scalar's
  // kind is higher (int32 + 1.5 is float32, not promote_types(int32, float32) = float64).
  if (!ta.defined()) {
    ta = operand(a, tb);
    if (tb.defined() && tb.dtype() != ta.dtype()) tb = tb.astype(ta.dtype());
  }
  if (!tb.defined()) {
    tb = operand(b, ta);
    if (ta.dtype() != tb.dtype()) ta = ta.astype(tb.dtype());
  }
}

// Shared with ops.cpp: the binary ops' one way to take operands.
Tensor binary(Tensor (*f)(const Tensor&, const Tensor&), nb::handle a, nb::handle b) {
  Tensor ta, tb;
  weak_scalar_operands(a, b, ta, tb);
  MaybeRelease release(elements_of(ta, tb));
  return f(ta, tb);
}

namespace {

Tensor op_add(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor op_sub(const Tensor& a, const Tensor& b) { return subtract(a, b); }
Tensor op_mul(const Tensor& a, const Tensor& b) { return multiply(a, b); }
Tensor op_div(const Tensor& a, const Tensor& b) { return divide(a, b); }
Tensor op_floordiv(const Tensor& a, const Tensor& b) { return floor_divide(a, b); }
Tensor op_mod(const Tensor& a, const Tensor& b) { return mod(a, b); }
Tensor op_pow(const Tensor& a, const Tensor& b) { return power(a, b); }
Tensor op_matmul(const Tensor& a, const Tensor& b) { return matmul(a, b); }
Tensor op_eq(const Tensor& a, const Tensor& b) { return equal(a, b); }
Tensor op_ne(const Tensor& a, const Tensor& b) { return not_equal(a, b); }
Tensor op_lt(const Tensor& a, const Tensor& b) { return less(a, b); }
Tensor op_le(const Tensor& a, const Tensor& b) { return less_equal(a, b); }
Tensor op_gt(const Tensor& a, const Tensor& b) { return greater(a, b); }
Tensor op_ge(const Tensor& a, const Tensor& b) { return greater_equal(a, b); }
Tensor op_and(const Tensor& a, const Tensor& b) { return logical_and(a, b); }
Tensor op_or(const Tensor& a, const Tensor& b) { return logical_or(a, b); }
Tensor op_xor(const Tensor& a, const Tensor& b) { return logical_xor(a, b); }

using Binary = Tensor (*)(const Tensor&, const Tensor&);

// What an operator takes as its other operand; anything else gets NotImplemented, so that
// Python tries the other side and then its default (t == None is False, t + "a" a TypeError).
bool operand_like(nb::handle obj) {
  return nb::isinstance<Tensor>(obj) || is_python_scalar(obj) || PyObject_CheckBuffer(obj.ptr()) ||
         nb::hasattr(obj, "__dlpack__") || PyList_Check(obj.ptr()) || PyTuple_Check(obj.ptr());
}

// The signature the stubs show (scripts/python_stubs.sh) for an operator that returns a Tensor
// through a Python object (NotImplemented is not part of an operator's type, as in typeshed's).
// nanobind copies the text when it makes the function.
std::string operator_sig(const char* name, const char* params) {
  return std::string("def ") + name + "(self, " + params + ") -> Tensor";
}

// The comparisons stay methods (rich comparison is one slot for all six, and t == None must
// give False through Python's default rather than an error).
template <Binary F>
void def_comparison(nb::class_<Tensor>& cls, const char* name) {
  cls.def(name, [](nb::handle self, nb::handle other) -> nb::object {
    if (!operand_like(other)) return nb::borrow(Py_NotImplemented);
    return nb::cast(binary(F, self, other));
  }, nb::arg("other").none(), nb::sig(operator_sig(name, "other: ArrayLike").c_str()));
}

// The arithmetic operators are the type's number slots, which PyNumber_Add and the others call
// directly: as methods, a one-element a + b spent most of its time reaching the op (Python's
// lookup of __add__, nanobind's argument handling, an operand copy; docs/python.md,
// "Overhead"). A slot gets its operands in the expression's order whichever side is the tensor,
// so one function serves a + b and b + a. Operands that are tensors or Python scalars are
// computed in the slot; anything else, and any operand that makes the op throw, goes to the
// operator's nanobind function (`operator_functions`), which converts it as loom.asarray does
// and raises the error its translator maps (the slot cannot raise a C++ exception itself).
PyTypeObject* tensor_type = nullptr;

enum class Arithmetic { add, sub, mul, truediv, floordiv, mod, pow, matmul, and_, or_, xor_, count };
PyObject* operator_functions[static_cast<int>(Arithmetic::count)] = {};

bool fast_operand(PyObject* obj) {
  return Py_TYPE(obj) == tensor_type || PyFloat_CheckExact(obj) || PyLong_CheckExact(obj) || PyBool_Check(obj);
}

// A new loom.Tensor holding `t`, without nanobind's search for the C++ type's Python type.
PyObject* wrap(Tensor&& t) {
  nb::object out = nb::inst_alloc(nb::handle(reinterpret_cast<PyObject*>(tensor_type)));
  new (nb::inst_ptr<Tensor>(out)) Tensor(std::move(t));
  nb::inst_mark_ready(out);
  return out.release().ptr();
}

template <Binary F>
Tensor computed(PyObject* a, PyObject* b) {
  if (Py_TYPE(a) == tensor_type && Py_TYPE(b) == tensor_type) {  // no handle copies
    const Tensor& x = *nb::inst_ptr<Tensor>(a);
    const Tensor& y = *nb::inst_ptr<Tensor>(b);
    MaybeRelease release(elements_of(x, y));
    return F(x, y);
  }
  return binary(F, a, b);
}

template <Binary F, Arithmetic Op>
PyObject* number_slot(PyObject* a, PyObject* b) noexcept {
  if (fast_operand(a) && fast_operand(b)) {
    try {
      return wrap(computed<F>(a, b));
    } catch (...) {  // raised below, by the function that translates it
    }
  } else if (!operand_like(a) || !operand_like(b)) {
    return Py_NewRef(Py_NotImplemented);
  }
  PyObject* args[2] = {a, b};
  return PyObject_Vectorcall(operator_functions[static_cast<int>(Op)], args, 2, nullptr);
}

template <Binary F, Arithmetic Op>
PyObject* power_slot(PyObject* a, PyObject* b, PyObject* modulus) noexcept {
  if (modulus != Py_None) return Py_NewRef(Py_NotImplemented);  // pow(t, b, m): a TypeError
  return number_slot<F, Op>(a, b);
}

template <Binary F, Arithmetic Op>
void def_operator_function(nb::dict& functions, const char* name) {
  nb::object f = nb::cpp_function([](nb::handle a, nb::handle b) { return binary(F, a, b); },
                                  nb::arg("a").none(), nb::arg("b").none(), nb::name(name));
  operator_functions[static_cast<int>(Op)] = f.ptr();  // kept alive by the module's dict
  functions[name] = f;
}

const PyType_Slot number_slots[] = {
    {Py_nb_add, reinterpret_cast<void*>(&number_slot<op_add, Arithmetic::add>)},
    {Py_nb_subtract, reinterpret_cast<void*>(&number_slot<op_sub, Arithmetic::sub>)},
    {Py_nb_multiply, reinterpret_cast<void*>(&number_slot<op_mul, Arithmetic::mul>)},
    {Py_nb_true_divide, reinterpret_cast<void*>(&number_slot<op_div, Arithmetic::truediv>)},
    {Py_nb_floor_divide, reinterpret_cast<void*>(&number_slot<op_floordiv, Arithmetic::floordiv>)},
    {Py_nb_remainder, reinterpret_cast<void*>(&number_slot<op_mod, Arithmetic::mod>)},
    {Py_nb_power, reinterpret_cast<void*>(&power_slot<op_pow, Arithmetic::pow>)},
    {Py_nb_matrix_multiply, reinterpret_cast<void*>(&number_slot<op_matmul, Arithmetic::matmul>)},
    {Py_nb_and, reinterpret_cast<void*>(&number_slot<op_and, Arithmetic::and_>)},
    {Py_nb_or, reinterpret_cast<void*>(&number_slot<op_or, Arithmetic::or_>)},
    {Py_nb_xor, reinterpret_cast<void*>(&number_slot<op_xor, Arithmetic::xor_>)},
    {0, nullptr}};

void def_operator_functions(nb::module_& m) {
  nb::dict functions;
  def_operator_function<op_add, Arithmetic::add>(functions, "add");
  def_operator_function<op_sub, Arithmetic::sub>(functions, "subtract");
  def_operator_function<op_mul, Arithmetic::mul>(functions, "multiply");
  def_operator_function<op_div, Arithmetic::truediv>(functions, "true_divide");
  def_operator_function<op_floordiv, Arithmetic::floordiv>(functions, "floor_divide");
  def_operator_function<op_mod, Arithmetic::mod>(functions, "mod");
  def_operator_function<op_pow, Arithmetic::pow>(functions, "power");
  def_operator_function<op_matmul, Arithmetic::matmul>(functions, "matmul");
  def_operator_function<op_and, Arithmetic::and_>(functions, "logical_and");
  def_operator_function<op_or, Arithmetic::or_>(functions, "logical_or");
  def_operator_function<op_xor, Arithmetic::xor_>(functions, "logical_xor");
  m.attr("_operator_functions") = functions;
}

// a += b is Loom's in-place operator: it writes into a's memory (every view of it sees the
// change) with its checks (a leaf that requires grad, a result dtype a cannot hold).
using InPlace = Tensor& (*)(Tensor&, const Tensor&);
using InPlaceScalar = Tensor& (*)(Tensor&, Scalar);
template <InPlace F, InPlaceScalar FS>
void def_inplace(nb::class_<Tensor>& cls, const char* name) {
  cls.def(name, [](nb::handle self, nb::handle other) {
    Tensor& t = nb::cast<Tensor&>(self);
    if (is_python_scalar(other)) {
      const Scalar s = to_scalar(other);
      MaybeRelease release(elements_of(t));
      FS(t, s);
    } else {
      const Tensor o = as_tensor(other);
      MaybeRelease release(elements_of(t, o));
      F(t, o);
    }
    return nb::borrow(self);
  }, nb::sig(operator_sig(name, "other: ArrayLike, /").c_str()));
}

std::string text(const Tensor& t) {
  MaybeRelease release(elements_of(t));
  return t.str();
}

void bind_dtype(nb::module_& m) {
  nb::enum_<DType>(m, "DType", "Loom's element types; loom.float32 and the others are its values.")
      .value("bool_", DType::Bool)
      .value("uint8", DType::UInt8)
      .value("int32", DType::Int32)
      .value("int64", DType::Int64)
      .value("float16", DType::Float16)
      .value("bfloat16", DType::BFloat16)
      .value("float32", DType::Float32)
      .value("float64", DType::Float64);
}

void bind_tensor_construction_and_geometry(nb::class_<Tensor>& cls) {
  cls.def("__init__", [](Tensor* self, ArrayLike data, DTypeLike dtype) {
       new (self) Tensor(copy_tensor(data, dtype.is_none() ? std::nullopt : std::optional<DType>(to_dtype(dtype))));
     }, nb::arg("data"), nb::arg("dtype") = nb::none())
      // geometry (strides in bytes, as NumPy's; Loom's C++ strides are in elements)
      .def_prop_ro("shape", [](const Tensor& t) { return int_tuple(t.shape()); }, "The size of each axis, a tuple.")
      .def_prop_ro("strides", [](const Tensor& t) {
        std::vector<int64_t> bytes(t.strides().begin(), t.strides().end());
        for (auto& s : bytes) s *= static_cast<int64_t>(t.itemsize());
        return int_tuple(bytes);
      }, "The step between elements along each axis, in bytes (NumPy's unit; C++ counts elements).")
      .def_prop_ro("ndim", &Tensor::ndim, "The number of axes.")
      .def_prop_ro("size", &Tensor::numel, "The number of elements.")
      .def_prop_ro("itemsize", &Tensor::itemsize, "The bytes of one element.")
      .def_prop_ro("nbytes", &Tensor::nbytes, "The bytes of the elements (size * itemsize).")
      .def_prop_ro("dtype", &Tensor::dtype, "The element type, a loom.DType.")
      .def_prop_ro("device", [](const Tensor& t) { return t.device().str(); }, "The device the memory is on, by name (\"cpu\").")
      .def_prop_ro("T", [](const Tensor& t) { return t.transpose(); }, "The tensor with its axes reversed, a view.")
      .def("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); },
           "The address of the first element (as torch's data_ptr).")
      .def("is_contiguous", &Tensor::is_contiguous, "Whether the elements lie in row-major order without gaps.")
      .def("shares_memory_with", &Tensor::shares_storage_with, nb::arg("other"), "Whether this tensor and other are views of the same memory.");
}

// Python's conversions (len, bool, float, int, item) and Loom's own text.
void bind_tensor_scalars_and_text(nb::class_<Tensor>& cls) {
  cls.def("__len__", [](const Tensor& t) {
        if (t.ndim() == 0) throw nb::type_error("len() of a 0-d tensor");
        return t.dim(0);
      })
      .def("__bool__", [](const Tensor& t) { return static_cast<bool>(t); })
      .def("__float__", [](const Tensor& t) { return t.item<double>(); })
      .def("__int__", [](const Tensor& t) { return t.item<int64_t>(); })
      .def("item", [](nb::handle self) -> nb::object {
        const Tensor& t = nb::cast<const Tensor&>(self);
        if (t.dtype() == DType::Bool) return nb::bool_(t.item<double>() != 0);
        if (t.dtype() == DType::UInt8 || t.dtype() == DType::Int32 || t.dtype() == DType::Int64) return nb::int_(t.item<int64_t>());
        return nb::float_(t.item<double>());
      }, nb::sig("def item(self) -> bool | int | float"), "The value of a one-element tensor as a Python bool, int or float (by dtype).")
      // Loom's own text, as C++ prints it: tensor([...], dtype=float32)
      .def("__repr__", &text)
      .def("__str__", &text);
}

void bind_tensor_copies_and_dtypes(nb::class_<Tensor>& cls) {
  cls.def("astype", [](const Tensor& t, DTypeLike dtype) {
        const DType d = to_dtype(dtype);
        MaybeRelease release(elements_of(t));
        return t.astype(d);
      }, nb::arg("dtype"), "A copy converted to dtype.")
      .def("copy", [](const Tensor& t) {
        MaybeRelease release(elements_of(t));
        return t.copy();
      }, "A copy with memory of its own, contiguous.")
      .def("contiguous", [](const Tensor& t) {
        MaybeRelease release(elements_of(t));
        return t.contiguous();
      }, "The tensor itself when contiguous, else a contiguous copy.")
      .def("fill_", [](nb::handle self, nb::handle value) {
        nb::cast<Tensor&>(self).fill_(to_scalar(value));
        return nb::borrow(self);
      }, nb::arg("value"), nb::sig("def fill_(self, value: bool | int | float) -> Tensor"), "Sets every element to value, in place; returns the tensor.")
      .def("copy_", [](nb::handle self, ArrayLike src) {
        Tensor& t = nb::cast<Tensor&>(self);
        const Tensor s = as_tensor(src);
        MaybeRelease release(elements_of(t));
        t.copy_(s);
        return nb::borrow(self);
      }, nb::arg("src"), nb::sig("def copy_(self, src: ArrayLike) -> Tensor"), "Copies src (broadcast to this tensor's shape) into this tensor's memory; returns the tensor.");
}

// NumPy export without a copy: NumPy keeps this Tensor object as the array's base, so the
// memory lives as long as either does. DLPack's capsule holds it the same way.
void bind_tensor_export(nb::class_<Tensor>& cls) {
  cls.def_prop_ro("__array_interface__", [](const Tensor& t) {
        check_exportable(t, "numpy()");
        nb::dict d;
        d["shape"] = int_tuple(t.shape());
        d["typestr"] = typestr(t.dtype());
        d["data"] = nb::make_tuple(reinterpret_cast<uintptr_t>(t.data_ptr()), false);
        std::vector<int64_t> bytes(t.strides().begin(), t.strides().end());
        for (auto& s : bytes) s *= static_cast<int64_t>(t.itemsize());
        d["strides"] = int_tuple(bytes);
        d["version"] = 3;
        return d;
      })
      .def("numpy", [](nb::handle self) { return nb::module_::import_("numpy").attr("asarray")(self); },
           nb::sig("def numpy(self) -> numpy.typing.NDArray[typing.Any]"),
           "A NumPy array over the same memory (no copy); writes go both ways.")
      .def("__dlpack__", [](nb::handle self, nb::handle stream) {
        const Tensor& t = nb::cast<const Tensor&>(self);
        check_exportable(t, "__dlpack__");
        if (!stream.is_none() && !(PyLong_Check(stream.ptr()) && nb::cast<int64_t>(stream) == -1))
          throw ValueError("__dlpack__: a stream is for device memory; a CPU tensor takes stream=None");
        std::vector<size_t> shape(t.shape().begin(), t.shape().end());
        std::vector<int64_t> strides(t.strides().begin(), t.strides().end());
        nb::dlpack::dtype dt{};
        dt.lanes = 1;
        dt.bits = static_cast<uint8_t>(t.itemsize() * 8);
        using Code = nb::dlpack::dtype_code;
        switch (t.dtype()) {
          case DType::Bool: dt.code = static_cast<uint8_t>(Code::Bool); break;
          case DType::UInt8: dt.code = static_cast<uint8_t>(Code::UInt); break;
          case DType::Int32: case DType::Int64: dt.code = static_cast<uint8_t>(Code::Int); break;
          case DType::BFloat16: dt.code = static_cast<uint8_t>(Code::Bfloat); break;
          default: dt.code = static_cast<uint8_t>(Code::Float); break;
        }
        // the capsule's manager holds this Tensor object, and so the memory
        nb::ndarray<> arr(t.data_ptr(), shape.size(), shape.data(), self, strides.data(), dt, nb::device::cpu::value, 0);
        return nb::cast(arr);  // an ndarray of no framework goes to Python as a DLPack capsule
      }, nb::arg("stream") = nb::none())
      .def("__dlpack_device__", [](const Tensor&) -> TupleOf<int, int> { return nb::make_tuple(int(nb::device::cpu::value), 0); });
}

// Basic indices give views, integer arrays and masks copies (NumPy's rule).
void bind_tensor_indexing(nb::class_<Tensor>& cls) {
  cls.def("__getitem__", [](const Tensor& t, nb::handle key) {
        if (PyLong_Check(key.ptr()) && !PyBool_Check(key.ptr())) return t[nb::cast<int64_t>(key)];
        const auto index = to_index(key);
        MaybeRelease release(elements_of(t));
        return t.index(index);
      })
      .def("__setitem__", [](Tensor& t, nb::handle key, ArrayLike value) {
        const auto index = to_index(key);
        if (is_python_scalar(value)) {
          t.index_put_(index, to_scalar(value));
          return;
        }
        const Tensor v = as_tensor(value);
        MaybeRelease release(elements_of(t, v));
        t.index_put_(index, v);
      });
}

void bind_tensor_autograd(nb::class_<Tensor>& cls) {
  cls.def_prop_rw("requires_grad", &Tensor::requires_grad, [](Tensor& t, bool v) { t.requires_grad_(v); }, "Whether backward() computes a gradient for this tensor (settable on leaves).")
      .def("requires_grad_", [](nb::handle self, bool v) {
        nb::cast<Tensor&>(self).requires_grad_(v);
        return nb::borrow(self);
      }, nb::arg("requires_grad") = true, nb::sig("def requires_grad_(self, requires_grad: bool = True) -> Tensor"), "Sets requires_grad, in place; returns the tensor.")
      .def_prop_ro("grad", [](const Tensor& t) -> std::optional<Tensor> {
        Tensor g = t.grad();
        if (!g.defined()) return std::nullopt;
        return g;
      }, "The gradient accumulated by backward(), or None before one.")
      .def_prop_ro("is_leaf", &Tensor::is_leaf, "Whether the tensor was made by the user rather than computed by a recorded op.")
      .def("zero_grad", &Tensor::zero_grad, "Drops the accumulated gradient (grad becomes None).")
      .def("detach", &Tensor::detach, "A view of the same memory without history (requires_grad False).")
      .def("backward", [](const Tensor& t, ArrayLike grad, bool retain_graph) {
        const Tensor seed = grad.is_none() ? Tensor() : operand(grad, t);
        nb::gil_scoped_release release;  // no Python code runs in a backward pass (no hooks bound)
        loom::backward(t, seed, retain_graph);
      }, nb::arg("grad") = nb::none(), nb::arg("retain_graph") = false, "Accumulates the gradients of this tensor into the .grad of the leaves it was computed from. grad seeds a non-scalar tensor; retain_graph=True keeps the graph for another backward.");
}

// The unary operators, the comparisons and the in-place operators as methods (the binary
// arithmetic operators are number_slots, set when the type is made).
void bind_tensor_operators(nb::class_<Tensor>& cls) {
  cls.def("__neg__", [](const Tensor& t) {
        MaybeRelease release(elements_of(t));
        return negative(t);
      })
      .def("__pos__", [](nb::handle self) { return nb::borrow(self); }, nb::sig("def __pos__(self) -> Tensor"))
      .def("__abs__", [](const Tensor& t) {
        MaybeRelease release(elements_of(t));
        return loom::abs(t);
      })
      .def("__invert__", [](const Tensor& t) {
        if (t.dtype() != DType::Bool)
          throw DTypeError("~t: Loom has no bitwise not of " + std::string(dtype_name(t.dtype())) + "; valid: a bool tensor (logical not)");
        return logical_not(t);
      });
  def_comparison<op_eq>(cls, "__eq__");
  def_comparison<op_ne>(cls, "__ne__");
  def_comparison<op_lt>(cls, "__lt__");
  def_comparison<op_le>(cls, "__le__");
  def_comparison<op_gt>(cls, "__gt__");
  def_comparison<op_ge>(cls, "__ge__");
  def_inplace<static_cast<InPlace>(&operator+=), static_cast<InPlaceScalar>(&operator+=)>(cls, "__iadd__");
  def_inplace<static_cast<InPlace>(&operator-=), static_cast<InPlaceScalar>(&operator-=)>(cls, "__isub__");
  def_inplace<static_cast<InPlace>(&operator*=), static_cast<InPlaceScalar>(&operator*=)>(cls, "__imul__");
  def_inplace<static_cast<InPlace>(&operator/=), static_cast<InPlaceScalar>(&operator/=)>(cls, "__itruediv__");
  cls.attr("__hash__") = nb::none();  // == is elementwise, as NumPy's
  // NumPy defers to the tensor's reflected operators (np_array + t gives a loom.Tensor)
  cls.attr("__array_priority__") = 1000;
}

// A tensor from Python data: over its memory, as a copy, or from a DLPack producer.
void bind_tensor_from_data(nb::module_& m) {
  m.def("asarray", [](ArrayLike obj, DTypeLike dtype) {
    return as_tensor(obj, dtype.is_none() ? std::nullopt : std::optional<DType>(to_dtype(dtype)));
  }, nb::arg("obj"), nb::arg("dtype") = nb::none(),
        "A tensor over obj's memory where Loom can represent it, a copy otherwise (docs/python.md).");
  m.def("tensor", [](ArrayLike obj, DTypeLike dtype) {
    return copy_tensor(obj, dtype.is_none() ? std::nullopt : std::optional<DType>(to_dtype(dtype)));
  }, nb::arg("data"), nb::arg("dtype") = nb::none(), "A new tensor holding a copy of data.");
  m.def("from_dlpack", [](ArrayLike obj) { return as_tensor(obj); }, nb::arg("obj"), "A tensor over the memory of a DLPack producer (a torch tensor, a JAX array), without a copy (as asarray).");
}

}  // namespace

// The groups in a fixed order: the module's namespace, and so its stubs (scripts/python_stubs.sh),
// list the names in the order they are defined.
void bind_tensor(nb::module_& m) {
  bind_dtype(m);

  nb::class_<Tensor> cls(m, "Tensor", "A strided view of Loom memory, with autograd (docs/python.md).",
                         nb::type_slots(number_slots));
  tensor_type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  def_operator_functions(m);
  bind_tensor_construction_and_geometry(cls);
  bind_tensor_scalars_and_text(cls);
  bind_tensor_copies_and_dtypes(cls);
  bind_tensor_export(cls);
  bind_tensor_indexing(cls);
  bind_tensor_autograd(cls);
  bind_tensor_operators(cls);
  bind_tensor_from_data(m);
}

}  // namespace loom::python
