#pragma once
// The Open Inference Protocol v2's JSON tensors: a request's inputs checked against the graph's
// Input layers and turned into tensors, and tensors turned into a response's outputs.
#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loom/core/dtype.h"
#include "loom/core/error.h"
#include "loom/core/shape.h"
#include "loom/core/tensor.h"

namespace loom::serve::detail {

// A request the client got wrong: answered 400 with the message.
class BadRequest : public ValueError { using ValueError::ValueError; };

// The protocol's datatype name of a dtype ("FP32", "INT64", "BOOL", ...), and back.
const char* datatype_name(DType dtype);
std::optional<DType> datatype_of(const std::string& name);

// A graph input as the protocol describes it.
struct TensorSpec {
  std::string name;
  DType dtype;
  Shape shape;  // -1: any size (the batch)
};

// The inputs of an infer request's JSON body, in the order of `specs`, each checked: present
// once, its datatype the spec's, its shape matching (rank and every fixed size), its data (flat
// or nested, row-major) exactly shape's element count of valid values. BadRequest naming the
// input and what would be valid otherwise.
//
// The binary tensor extension (Triton's, tritonclient's default): an input whose "parameters"
// hold "binary_data_size": N takes its data as N raw little-endian bytes, row-major, from
// `binary` (what follows the JSON in the body), the inputs' parts in the order the request lists
// them; N must be the shape's element count times the datatype's size, and the parts must use
// `binary` exactly.
std::vector<Tensor> parse_inputs(const nlohmann::json& body, const std::vector<TensorSpec>& specs, std::string_view binary = {});

// An output in the binary extension: {"name", "datatype", "shape", "parameters":
// {"binary_data_size": N}}, its N raw bytes (row-major, little-endian; BOOL one byte each)
// appended to `binary`.
nlohmann::json output_binary(const std::string& name, const Tensor& value, std::string& binary);

// {"name", "datatype", "shape", "data"} of one output (data flat, row-major; NaN and infinities
// as "NaN", "Infinity", "-Infinity", as in every Loom JSON).
nlohmann::json output_json(const std::string& name, const Tensor& value);

// {"name", "datatype", "shape"} of a spec, for model metadata.
nlohmann::json spec_json(const TensorSpec& spec);

}  // namespace loom::serve::detail
