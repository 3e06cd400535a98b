#pragma once
// Shared pieces of the Python module's translation units (docs/python.md): converting Python
// objects to tensors, dtypes and index expressions, and the rule for releasing the GIL.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "loom/core/dtype.h"
#include "loom/core/index.h"
#include "loom/core/scalar.h"
#include "loom/core/shape.h"
#include "loom/core/tensor.h"

namespace nb = nanobind;

namespace loom::python {

// Parameter types for the stubs (docs/python.md, "Type stubs"). A binding that takes a Python
// object converted later (as_tensor, to_dtype, to_shape, to_axes) takes it as one of these rather
// than as nb::handle: nanobind's stub generator then writes the name given here instead of
// `object`, and python/stubs.pat defines each name as a type alias in loom/_core/__init__.pyi
// (ArrayLike = Tensor | numpy.typing.ArrayLike, ...). Every object is accepted, as by nb::handle:
// the conversion checks it and names what is valid.
inline bool accept_any(PyObject*) { return true; }
#define LOOM_TYPED_OBJECT(Type, Str)                  \
  class Type : public nb::object {                    \
   public:                                            \
    NB_OBJECT_DEFAULT(Type, object, Str, accept_any)  \
  };
LOOM_TYPED_OBJECT(ArrayLike, "loom._core.ArrayLike")            // a tensor operand (as_tensor)
LOOM_TYPED_OBJECT(ArraySequence, "loom._core.ArraySequence")    // tensor operands (a list, a tuple)
LOOM_TYPED_OBJECT(DTypeLike, "loom._core.DTypeLike")            // a dtype (to_dtype)
LOOM_TYPED_OBJECT(ShapeLike, "loom._core.ShapeLike")            // a shape or per-axis sizes (to_shape)
LOOM_TYPED_OBJECT(AxesLike, "loom._core.AxesLike")              // axes (to_axes)
LOOM_TYPED_OBJECT(GraphLike, "loom._core.Graph | loom._core.zoo.Network")  // graph_of's
LOOM_TYPED_OBJECT(GeneratorArg, "loom._core.random.Generator")  // a generator= argument
LOOM_TYPED_OBJECT(Number, "float")                              // a Python int or float (to_scalar)
LOOM_TYPED_OBJECT(TensorMapping, "collections.abc.Mapping[str, loom._core.ArrayLike]")  // name -> tensor
LOOM_TYPED_OBJECT(TextMapping, "collections.abc.Mapping[str, str]")                     // metadata
LOOM_TYPED_OBJECT(LayerSequence, "loom._core.Layer | collections.abc.Sequence[loom._core.Layer]")  // layer_list's
LOOM_TYPED_OBJECT(ShapeSequence, "collections.abc.Sequence[loom._core.ShapeLike]")     // a shape per input
LOOM_TYPED_OBJECT(OrdArg, "float | str")                                                 // a norm's ord
#undef LOOM_TYPED_OBJECT

// The dtype named by a loom.DType, a string ("float32"), a NumPy dtype or scalar type, or the
// Python types bool/int/float (NumPy's defaults: bool, int64, float64). DTypeError otherwise.
DType to_dtype(nb::handle obj);

// loom.asarray's rule: a Tensor as it is; an object with the buffer protocol or DLPack whose
// memory Loom can represent, without a copy (its memory kept alive by the tensor); a copy
// otherwise (read-only, byte-swapped, or unaligned memory; anything else through NumPy).
Tensor as_tensor(nb::handle obj, std::optional<DType> dtype = std::nullopt);
// loom.tensor's rule: always a copy, never sharing the object's memory.
Tensor copy_tensor(nb::handle obj, std::optional<DType> dtype = std::nullopt);

// An operand of an operator or op: a Tensor, a Python scalar (kept a Scalar, so that Loom's
// scalar promotion applies: float32 + 1.0 stays float32), or anything as_tensor takes.
bool is_python_scalar(nb::handle obj);
Scalar to_scalar(nb::handle obj);

// A NumPy index expression (int, slice, None, Ellipsis, bool, arrays, tuples of these).
std::vector<TensorIndex> to_index(nb::handle key);

Shape to_shape(nb::handle obj);  // an int or a sequence of ints
// Typed results, for the stubs: tuple[int, ...], (tensor, tensor), ...
using IntTuple = nb::typed<nb::tuple, int, nb::ellipsis>;
template <class... T>
using TupleOf = nb::typed<nb::tuple, T...>;
IntTuple int_tuple(const std::vector<int64_t>& v);  // a shape or strides as Python's tuple
Axes to_axes(nb::handle obj);    // None (all axes), an int or a sequence of ints

// The GIL is released around Loom calls that can take long, so that other Python threads run
// meanwhile; a call on small operands keeps it (releasing and taking it back costs more than
// the op). Code that Loom calls back (fit's callbacks, a loss written in Python: train.cpp)
// takes the GIL back for the call and releases it again when it returns.
inline constexpr int64_t kReleaseGilElements = 1 << 14;
class MaybeRelease {
 public:
  explicit MaybeRelease(int64_t elements) {
    if (elements >= kReleaseGilElements) release_.emplace();
  }

 private:
  std::optional<nb::gil_scoped_release> release_;
};
inline int64_t elements_of(const Tensor& t) { return t.defined() ? t.numel() : 0; }
template <class... T>
int64_t elements_of(const Tensor& a, const T&... rest) {
  return elements_of(a) + elements_of(rest...);
}

void bind_errors(nb::module_& m);
void bind_tensor(nb::module_& m);
void bind_ops(nb::module_& m);
void bind_linalg_random_autograd(nb::module_& m);
void bind_nn(nb::module_& m);
void bind_layers(nb::module_& m);  // layers.cpp: Layer, Module, Graph, Plan, the zoo
void bind_train(nb::module_& m);   // train.cpp: Model, fit, callbacks
void bind_io(nb::module_& m);      // io.cpp: model, state, safetensors and ONNX files
void bind_sparse(nb::module_& m);  // sparse.cpp: SparseTensor, loom.sparse.mm

}  // namespace loom::python
