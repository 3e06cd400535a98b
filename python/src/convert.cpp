// Python objects to tensors (loom.asarray, loom.tensor), dtypes, shapes and index expressions.
// The copy rule is docs/python.md's "From NumPy and DLPack".
#include <Python.h>
#include <nanobind/ndarray.h>

#include <cstring>
#include <memory>
#include <string>

#include "common.h"
#include "loom/core/error.h"
#include "loom/core/storage.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"

namespace loom::python {

namespace {

// Releases a Python reference (a buffer view, an imported DLPack tensor) from whichever thread
// drops the last view of the memory: a Loom worker or a thread that released the GIL takes it
// first. After the interpreter has shut down there is nothing left to release to.
template <class T>
std::shared_ptr<void> python_owner(T* held) {
  return std::shared_ptr<void>(held, [](void* p) {
    if (!Py_IsInitialized()) return;  // the interpreter is gone, and with it the memory's owner
    const PyGILState_STATE state = PyGILState_Ensure();
    delete static_cast<T*>(p);
    PyGILState_Release(state);
  });
}

struct HeldBuffer {
  Py_buffer view{};
  bool acquired = false;
  ~HeldBuffer() {
    if (acquired) PyBuffer_Release(&view);
  }
};

// A dtype from the buffer protocol's struct format; nullopt for those Loom has none of.
// `swapped` tells a byte order that is not the machine's (x86: little-endian).
std::optional<DType> buffer_dtype(const char* format, Py_ssize_t itemsize, bool& swapped) {
  swapped = false;
  if (!format) return UInt8;  // no format means unsigned bytes (PEP 3118)
  char order = '@';
  if (std::strchr("@=<>!", format[0])) order = *format++;
  if (std::strlen(format) != 1) return std::nullopt;  // sub-arrays, structs, padding
  swapped = (order == '>' || order == '!') && itemsize > 1;
  switch (format[0]) {
    case '?': return Bool;
    case 'B': return UInt8;
    case 'e': return Float16;
    case 'f': return Float32;
    case 'd': return Float64;
    case 'i': case 'l': case 'q': case 'n':
      if (itemsize == 4) return Int32;
      if (itemsize == 8) return Int64;
      return std::nullopt;
    default: return std::nullopt;
  }
}

const char* kValidDTypes = "bool, uint8, int32, int64, float16, bfloat16, float32, float64";

nb::object numpy() { return nb::module_::import_("numpy"); }

// A view over memory from outside: `data` is the first element, `strides` in bytes. The
// storage spans the lowest to the highest byte any element occupies (negative strides reach
// below `data`).
Tensor wrap(char* data, const Shape& shape, const std::vector<int64_t>& byte_strides, DType dtype,
            std::shared_ptr<void> owner) {
  const int64_t item = static_cast<int64_t>(itemsize(dtype));
  int64_t low = 0, high = 0;
  bool empty = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) empty = true;
    if (shape[i] <= 1) continue;
    const int64_t reach = byte_strides[i] * (shape[i] - 1);
    (reach < 0 ? low : high) += reach;
  }
  Strides strides(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) strides[i] = byte_strides[i] / item;
  if (empty) {
    auto storage = std::make_shared<Storage>(data, 0, Device::cpu(), std::move(owner));
    return Tensor(storage, shape, strides, 0, dtype);
  }
  auto storage = std::make_shared<Storage>(data + low, static_cast<size_t>(high - low + item), Device::cpu(), std::move(owner));
  return Tensor(storage, shape, strides, -low / item, dtype);
}

bool element_aligned(const void* data, const std::vector<int64_t>& byte_strides, const Shape& shape, int64_t item) {
  if (reinterpret_cast<uintptr_t>(data) % item != 0) return false;
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] > 1 && byte_strides[i] % item != 0) return false;
  return true;
}

// NumPy makes the copy where Loom cannot take the memory as it is: an aligned, native-order,
// C-contiguous array, which is then wrapped (the new array is the tensor's owner).
Tensor through_numpy(nb::handle obj, bool from_python_data) {
  nb::object np = numpy();
  nb::object a = np.attr("array")(obj, nb::arg("copy") = true, nb::arg("order") = "C");
  nb::object dt = a.attr("dtype");
  if (!nb::cast<bool>(dt.attr("isnative"))) a = a.attr("astype")(dt.attr("newbyteorder")("="));
  // Python numbers and lists of them: Loom's default float is float32 (as a Scalar's).
  if (from_python_data && nb::cast<std::string>(a.attr("dtype").attr("name")) == "float64") a = a.attr("astype")("float32");
  nb::object fresh = a;
  auto held = new HeldBuffer;
  if (PyObject_GetBuffer(fresh.ptr(), &held->view, PyBUF_RECORDS_RO) != 0) {
    delete held;
    throw nb::python_error();
  }
  held->acquired = true;
  bool swapped = false;
  const auto dtype = buffer_dtype(held->view.format, held->view.itemsize, swapped);
  if (!dtype) {
    const std::string format = held->view.format ? held->view.format : "B";
    delete held;
    throw DTypeError("loom.asarray: NumPy's dtype " + nb::cast<std::string>(nb::str(a.attr("dtype"))) + " (format '" + format +
                     "') has no Loom dtype; valid: " + kValidDTypes + " (convert first, e.g. a.astype('float32'))");
  }
  Shape shape(held->view.shape, held->view.shape + held->view.ndim);
  std::vector<int64_t> strides(held->view.strides, held->view.strides + held->view.ndim);
  char* data = static_cast<char*>(held->view.buf);
  return wrap(data, shape, strides, *dtype, python_owner(held));
}

Tensor from_buffer(nb::handle obj) {
  auto held = new HeldBuffer;
  if (PyObject_GetBuffer(obj.ptr(), &held->view, PyBUF_RECORDS_RO) != 0) {
    delete held;
    throw nb::python_error();
  }
  held->acquired = true;
  const Py_buffer& v = held->view;
  bool swapped = false;
  const auto dtype = buffer_dtype(v.format, v.itemsize, swapped);
  Shape shape(v.shape, v.shape + v.ndim);
  std::vector<int64_t> strides(v.strides, v.strides + v.ndim);
  if (!dtype) {
    const std::string what = "a buffer of format '" + std::string(v.format ? v.format : "B") + "' (" +
                             std::to_string(v.itemsize) + "-byte items)";
    delete held;  // releases the view `v` names
    throw DTypeError("loom.asarray: " + what + " has no Loom dtype; valid: " + kValidDTypes);
  }
  const bool aligned = element_aligned(v.buf, strides, shape, static_cast<int64_t>(v.itemsize));
  if (swapped || !aligned) {
    delete held;
    return through_numpy(obj, false);
  }
  char* data = static_cast<char*>(v.buf);
  const bool readonly = v.readonly != 0;
  Tensor t = wrap(data, shape, strides, *dtype, python_owner(held));
  // Loom has no read-only tensors: a view of read-only memory would let any op's out-of-place
  // result be written back by t[...] = v, so read-only memory is copied (and released at once).
  return readonly ? t.copy() : t;
}

Tensor from_dlpack(nb::handle obj) {
  nb::ndarray<nb::ro> arr;
  if (!nb::try_cast(obj, arr, false)) throw nb::python_error();
  if (arr.device_type() != nb::device::cpu::value)
    throw DeviceError("loom.asarray: a DLPack tensor on device type " + std::to_string(arr.device_type()) +
                      "; Loom's Python module takes CPU memory only (move it first, e.g. t.cpu())");
  const nb::dlpack::dtype dt = arr.dtype();
  std::optional<DType> dtype;
  using Code = nb::dlpack::dtype_code;
  if (dt.lanes == 1) {
    const auto code = static_cast<Code>(dt.code);
    if (code == Code::Bool && dt.bits == 8) dtype = Bool;
    if (code == Code::UInt && dt.bits == 8) dtype = UInt8;
    if (code == Code::Int && dt.bits == 32) dtype = Int32;
    if (code == Code::Int && dt.bits == 64) dtype = Int64;
    if (code == Code::Float && dt.bits == 16) dtype = Float16;
    if (code == Code::Float && dt.bits == 32) dtype = Float32;
    if (code == Code::Float && dt.bits == 64) dtype = Float64;
    if (code == Code::Bfloat && dt.bits == 16) dtype = BFloat16;
  }
  if (!dtype)
    throw DTypeError("loom.asarray: a DLPack tensor of type code " + std::to_string(dt.code) + ", " + std::to_string(dt.bits) +
                     " bits, " + std::to_string(dt.lanes) + " lanes has no Loom dtype; valid: " + kValidDTypes);
  const int64_t item = static_cast<int64_t>(itemsize(*dtype));
  Shape shape(arr.ndim());
  std::vector<int64_t> strides(arr.ndim());
  for (size_t i = 0; i < arr.ndim(); ++i) {
    shape[i] = static_cast<int64_t>(arr.shape(i));
    strides[i] = arr.stride(i) * item;
  }
  char* data = static_cast<char*>(const_cast<void*>(arr.data()));
  return wrap(data, shape, strides, *dtype, python_owner(new nb::ndarray<nb::ro>(arr)));
}

}  // namespace

DType to_dtype(nb::handle obj) {
  if (nb::isinstance<DType>(obj)) return nb::cast<DType>(obj);
  if (obj.ptr() == reinterpret_cast<PyObject*>(&PyBool_Type)) return Bool;
  if (obj.ptr() == reinterpret_cast<PyObject*>(&PyLong_Type)) return Int64;
  if (obj.ptr() == reinterpret_cast<PyObject*>(&PyFloat_Type)) return Float64;
  std::string name;
  if (nb::isinstance<nb::str>(obj)) name = nb::cast<std::string>(obj);
  else if (nb::hasattr(obj, "dtype") && !nb::isinstance<nb::type_object>(obj)) return to_dtype(obj.attr("dtype"));
  else if (nb::hasattr(obj, "name")) name = nb::cast<std::string>(nb::str(obj.attr("name")));       // numpy.dtype
  else if (nb::hasattr(obj, "__name__")) name = nb::cast<std::string>(nb::str(obj.attr("__name__")));  // numpy.float32
  else name = nb::cast<std::string>(nb::str(obj));
  if (name.rfind("torch.", 0) == 0) name = name.substr(6);
  if (name == "bool" || name == "bool_") return Bool;
  if (name == "uint8") return UInt8;
  if (name == "int32") return Int32;
  if (name == "int64") return Int64;
  if (name == "float16" || name == "half") return Float16;
  if (name == "bfloat16") return BFloat16;
  if (name == "float32" || name == "float") return Float32;
  if (name == "float64" || name == "double") return Float64;
  throw DTypeError("loom: unknown dtype '" + name + "'; valid: " + kValidDTypes);
}

bool is_python_scalar(nb::handle obj) {
  return PyBool_Check(obj.ptr()) || PyLong_Check(obj.ptr()) || PyFloat_Check(obj.ptr());
}

Scalar to_scalar(nb::handle obj) {
  if (PyBool_Check(obj.ptr())) return Scalar(obj.ptr() == Py_True);
  if (PyLong_Check(obj.ptr())) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(obj.ptr(), &overflow);
    if (overflow != 0)
      throw ValueError("loom: a Python int of " + std::to_string(_PyLong_NumBits(obj.ptr())) +
                       " bits does not fit int64 (Loom's widest integer); valid: integers in [-2**63, 2**63), or a float");
    return Scalar(static_cast<int64_t>(v));
  }
  return Scalar(nb::cast<double>(obj));
}

// A source of a dtype Loom lacks, with a dtype asked for: NumPy converts it (a copy).
static Tensor converted_by_numpy(nb::handle obj, DType dtype) {
  const char* name = dtype == BFloat16 ? "float32" : dtype_name(dtype);  // NumPy has no bfloat16
  nb::object a = numpy().attr("asarray")(obj).attr("astype")(name);
  return through_numpy(a, false);
}

Tensor as_tensor(nb::handle obj, std::optional<DType> dtype) {
  Tensor t;
  if (nb::isinstance<Tensor>(obj)) t = nb::cast<Tensor>(obj);
  else if (PyObject_CheckBuffer(obj.ptr())) {
    try {
      t = from_buffer(obj);
    } catch (const DTypeError&) {
      if (!dtype) throw;
      t = converted_by_numpy(obj, *dtype);
    }
  }
  else if (nb::hasattr(obj, "__dlpack__")) t = from_dlpack(obj);
  else if (is_python_scalar(obj)) {
    const Scalar s = to_scalar(obj);
    t = scalar_tensor(s, s.natural_dtype());
  } else t = through_numpy(obj, true);
  return dtype && *dtype != t.dtype() ? t.astype(*dtype) : t;
}

Tensor copy_tensor(nb::handle obj, std::optional<DType> dtype) {
  if (!nb::isinstance<Tensor>(obj) && !PyObject_CheckBuffer(obj.ptr()) && !nb::hasattr(obj, "__dlpack__"))
    return as_tensor(obj, dtype);  // Python data: made anew, shared with nothing
  Tensor t = as_tensor(obj);
  if (dtype && *dtype != t.dtype()) return t.astype(*dtype);  // astype makes new storage
  return t.detach().copy();
}

Shape to_shape(nb::handle obj) {
  if (PyLong_Check(obj.ptr())) return Shape{nb::cast<int64_t>(obj)};
  Shape shape;
  for (nb::handle item : obj) shape.push_back(nb::cast<int64_t>(item));
  return shape;
}

Axes to_axes(nb::handle obj) {
  if (obj.is_none()) return {};
  if (PyLong_Check(obj.ptr())) return Axes{nb::cast<int64_t>(obj)};
  Axes axes;
  for (nb::handle item : obj) axes.push_back(nb::cast<int64_t>(item));
  return axes;
}

namespace {
std::optional<int64_t> slice_part(PyObject* v) {
  if (v == Py_None) return std::nullopt;
  return nb::cast<int64_t>(nb::handle(v));
}

TensorIndex one_index(nb::handle item) {
  PyObject* p = item.ptr();
  if (PyBool_Check(p)) return TensorIndex(p == Py_True);
  if (PyLong_Check(p)) return TensorIndex(nb::cast<int64_t>(item));
  if (p == Py_None) return TensorIndex(NewAxis);
  if (p == Py_Ellipsis) return TensorIndex(Ellipsis);
  if (PySlice_Check(p)) {
    auto* s = reinterpret_cast<PySliceObject*>(p);
    const auto step = slice_part(s->step);
    if (step && *step == 0) throw ValueError("loom: slice step cannot be zero");
    return TensorIndex(Slice(slice_part(s->start), slice_part(s->stop), step.value_or(1)));
  }
  // numpy.int64 and 0-d integer arrays index as integers do, as in NumPy (a view, the axis gone)
  const bool zero_d = !PyObject_CheckBuffer(p) || (nb::hasattr(item, "ndim") && nb::cast<int64_t>(item.attr("ndim")) == 0);
  if (PyIndex_Check(p) && !nb::isinstance<Tensor>(item) && zero_d) return TensorIndex(nb::cast<int64_t>(nb::int_(item)));
  return TensorIndex(as_tensor(item));  // an integer array or a boolean mask
}
}  // namespace

std::vector<TensorIndex> to_index(nb::handle key) {
  std::vector<TensorIndex> out;
  if (PyTuple_Check(key.ptr())) {
    for (nb::handle item : key) out.push_back(one_index(item));
  } else {
    out.push_back(one_index(key));
  }
  return out;
}

}  // namespace loom::python
