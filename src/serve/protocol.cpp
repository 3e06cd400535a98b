#include "protocol.h"

#include <nlohmann/json.hpp>

#include <limits>

#include "core/json_util.h"
#include "core/utf8.h"
#include "loom/ops/creation.h"

namespace loom::serve::detail {
namespace {

struct Name {
  DType dtype;
  const char* name;
};
constexpr Name kNames[] = {{DType::Bool, "BOOL"},     {DType::UInt8, "UINT8"},     {DType::Int32, "INT32"},
                           {DType::Int64, "INT64"},   {DType::Float16, "FP16"},    {DType::BFloat16, "BF16"},
                           {DType::Float32, "FP32"},  {DType::Float64, "FP64"}};

std::string shape_text(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Appends the scalars of `data` (flat or nested arrays) to `out`, refusing more than `limit`.
void flatten(const nlohmann::json& data, std::vector<const nlohmann::json*>& out, size_t limit, const std::string& input) {
  if (!data.is_array()) {
    if (out.size() >= limit)
      throw BadRequest("input '" + input + "' has more values in \"data\" than its shape holds (" + std::to_string(limit) + ")");
    out.push_back(&data);
    return;
  }
  for (const auto& d : data) flatten(d, out, limit, input);  // depth bounded by the parser's limit
}

}  // namespace

const char* datatype_name(DType dtype) {
  for (const auto& n : kNames)
    if (n.dtype == dtype) return n.name;
  return "UNKNOWN";
}

std::optional<DType> datatype_of(const std::string& name) {
  for (const auto& n : kNames)
    if (name == n.name) return n.dtype;
  return std::nullopt;
}

namespace {

// The request's "inputs" array.
const nlohmann::json& inputs_array(const nlohmann::json& body) {
  if (!body.is_object()) throw BadRequest("the request body must be a JSON object with \"inputs\"");
  const auto it = body.find("inputs");
  if (it == body.end() || !it->is_array())
    throw BadRequest("the request has no \"inputs\" array (each input: {\"name\", \"shape\", \"datatype\", \"data\"})");
  return *it;
}

// "'x', 'mask'": the model's inputs, for messages.
std::string spec_names(const std::vector<TensorSpec>& specs) {
  std::string valid;
  for (size_t i = 0; i < specs.size(); ++i) valid += (i ? ", '" : "'") + specs[i].name + "'";
  return valid;
}

// The model input an input names: unknown and repeated names are refused.
size_t input_index(const nlohmann::json& in, const std::vector<TensorSpec>& specs, const std::vector<Tensor>& given,
                   const std::string& valid) {
  if (!in.is_object() || !in.contains("name") || !in["name"].is_string())
    throw BadRequest("each input must be an object with a string \"name\" (the model's inputs: " + valid + ")");
  const std::string name = in["name"].get<std::string>();
  size_t k = 0;
  while (k < specs.size() && specs[k].name != name) ++k;
  if (k == specs.size()) throw BadRequest("unknown input " + loom::detail::quote_text(name) + " (the model's inputs: " + valid + ")");
  if (given[k].defined()) throw BadRequest("input '" + name + "' is given twice");
  return k;
}

void check_datatype(const nlohmann::json& in, const TensorSpec& spec) {
  if (!in.contains("datatype") || !in["datatype"].is_string())
    throw BadRequest("input '" + spec.name + "' has no \"datatype\" (it takes " + datatype_name(spec.dtype) + ")");
  const std::string dt = in["datatype"].get<std::string>();
  if (dt != datatype_name(spec.dtype))
    throw BadRequest("input '" + spec.name + "' has datatype " + loom::detail::quote_text(dt) + ", the model takes " +
                     datatype_name(spec.dtype));
}

// An input's shape and how many values it holds (which cannot overflow).
struct InputShape {
  Shape shape;
  int64_t count = 1;
};

InputShape input_shape(const nlohmann::json& in, const TensorSpec& spec) {
  const std::string& name = spec.name;
  if (!in.contains("shape") || !in["shape"].is_array())
    throw BadRequest("input '" + name + "' has no \"shape\" array (it takes " + shape_text(spec.shape) + ", -1: any size)");
  InputShape out;
  for (const auto& d : in["shape"]) {
    const auto v = loom::detail::json_to_int(d, 0, std::numeric_limits<int32_t>::max());
    if (!v) throw BadRequest("input '" + name + "' has a shape entry that is not an integer from 0 to 2^31-1");
    if (out.shape.size() >= 16) throw BadRequest("input '" + name + "' has more than 16 dimensions");
    out.shape.push_back(*v);
    if (*v != 0 && out.count > std::numeric_limits<int64_t>::max() / *v)
      throw BadRequest("input '" + name + "' has a shape with too many elements");
    out.count *= *v;
  }
  if (!shape_matches(spec.shape, out.shape))
    throw BadRequest("input '" + name + "' has shape " + shape_text(out.shape) + ", the model takes " + shape_text(spec.shape) +
                     " (-1: any size)");
  return out;
}

bool has_binary_data(const nlohmann::json& in) {
  return in.contains("parameters") && in["parameters"].is_object() && in["parameters"].contains("binary_data_size");
}

// The binary data after the request's JSON, taken by the inputs that say so, in order.
struct BinaryData {
  std::string_view bytes;
  size_t used = 0;
};

// An input whose values are its part of the binary data (binary_data_size bytes, which its shape
// and dtype must take exactly).
Tensor binary_input(const nlohmann::json& in, const TensorSpec& spec, const InputShape& s, BinaryData& binary) {
  const std::string& name = spec.name;
  const auto size = loom::detail::json_to_int(in["parameters"]["binary_data_size"], 0, std::numeric_limits<int64_t>::max());
  if (s.count > std::numeric_limits<int64_t>::max() / 8) throw BadRequest("input '" + name + "' has a shape with too many elements");
  const int64_t want = s.count * static_cast<int64_t>(itemsize(spec.dtype));
  if (!size || *size != want)
    throw BadRequest("input '" + name + "' has \"binary_data_size\" " + in["parameters"]["binary_data_size"].dump() + ", its shape " +
                     shape_text(s.shape) + " of " + datatype_name(spec.dtype) + " takes " + std::to_string(want) + " bytes");
  const size_t left = binary.bytes.size() - binary.used;
  if (static_cast<uint64_t>(want) > left)
    throw BadRequest("input '" + name + "' needs " + std::to_string(want) + " bytes of binary data, the body has " +
                     std::to_string(left) + " left after the JSON and the inputs before it");
  std::string bytes(binary.bytes.substr(binary.used, static_cast<size_t>(want)));
  binary.used += static_cast<size_t>(want);
  if (spec.dtype == DType::Bool)  // a byte other than 0 or 1 would not be a valid bool
    for (char& c : bytes) c = c != 0 ? 1 : 0;
  return from_data(bytes.data(), s.shape, spec.dtype);  // Loom's dtypes are little-endian in memory, as the wire's
}

// An input whose values are its "data" (flat or nested), each of the input's dtype.
Tensor json_input(const nlohmann::json& in, const TensorSpec& spec, const InputShape& s) {
  const std::string& name = spec.name;
  if (!in.contains("data")) throw BadRequest("input '" + name + "' has no \"data\" (nor \"parameters\": {\"binary_data_size\"})");
  std::vector<const nlohmann::json*> values;
  // the body's size bounds the count: a shape claiming more than the data holds is refused below
  flatten(in["data"], values, static_cast<size_t>(s.count), name);
  if (static_cast<int64_t>(values.size()) != s.count)
    throw BadRequest("input '" + name + "' has " + std::to_string(values.size()) + " values in \"data\", its shape " +
                     shape_text(s.shape) + " holds " + std::to_string(s.count));
  auto bad_value = [&](size_t i, const char* what) { return BadRequest("input '" + name + "' value " + std::to_string(i) + " is not " + what); };
  switch (spec.dtype) {
    case DType::Bool: {
      std::vector<bool> v(values.size());
      for (size_t i = 0; i < values.size(); ++i) {
        if (!values[i]->is_boolean()) throw bad_value(i, "true or false");
        v[i] = values[i]->get<bool>();
      }
      return from_vector<bool>(v, s.shape);
    }
    case DType::UInt8: case DType::Int32: case DType::Int64: {
      const int64_t lo = spec.dtype == DType::UInt8 ? 0 : spec.dtype == DType::Int32 ? INT32_MIN : INT64_MIN;
      const int64_t hi = spec.dtype == DType::UInt8 ? 255 : spec.dtype == DType::Int32 ? INT32_MAX : INT64_MAX;
      std::vector<int64_t> v(values.size());
      for (size_t i = 0; i < values.size(); ++i) {
        const auto x = loom::detail::json_to_int(*values[i], lo, hi);
        if (!x) throw bad_value(i, (std::string("an integer from ") + std::to_string(lo) + " to " + std::to_string(hi)).c_str());
        v[i] = *x;
      }
      return from_vector<int64_t>(v, s.shape).astype(spec.dtype);
    }
    default: {
      std::vector<double> v(values.size());
      for (size_t i = 0; i < values.size(); ++i) {
        const auto x = loom::detail::json_to_float(*values[i]);
        if (!x) throw bad_value(i, loom::detail::json_float_help());
        v[i] = *x;
      }
      return spec.dtype == DType::Float64 ? from_vector<double>(v, s.shape) : from_vector<double>(v, s.shape).astype(spec.dtype);
    }
  }
}

// Every model input given, and every byte of the binary data taken.
void check_complete(const std::vector<Tensor>& out, const std::vector<TensorSpec>& specs, const std::string& valid, const BinaryData& binary) {
  for (size_t k = 0; k < specs.size(); ++k)
    if (!out[k].defined()) throw BadRequest("input '" + specs[k].name + "' is missing (the model's inputs: " + valid + ")");
  if (binary.used != binary.bytes.size())
    throw BadRequest("the body has " + std::to_string(binary.bytes.size() - binary.used) +
                     " bytes of binary data after the JSON that no input's \"binary_data_size\" takes");
}

}  // namespace

std::vector<Tensor> parse_inputs(const nlohmann::json& body, const std::vector<TensorSpec>& specs, std::string_view binary) {
  const nlohmann::json& inputs = inputs_array(body);
  const std::string valid = spec_names(specs);
  std::vector<Tensor> out(specs.size());
  BinaryData data{binary};
  for (const auto& in : inputs) {
    const size_t k = input_index(in, specs, out, valid);
    check_datatype(in, specs[k]);
    const InputShape shape = input_shape(in, specs[k]);
    out[k] = has_binary_data(in) ? binary_input(in, specs[k], shape, data) : json_input(in, specs[k], shape);
  }
  check_complete(out, specs, valid, data);
  return out;
}

nlohmann::json output_json(const std::string& name, const Tensor& value) {
  nlohmann::json j{{"name", name}, {"datatype", datatype_name(value.dtype())}};
  j["shape"] = nlohmann::json::array();
  for (int64_t d : value.shape()) j["shape"].push_back(d);
  nlohmann::json data = nlohmann::json::array();
  if (value.dtype() == DType::Bool || value.dtype() == DType::UInt8 || value.dtype() == DType::Int32 ||
      value.dtype() == DType::Int64) {
    const auto v = value.astype(DType::Int64).to_vector<int64_t>();
    for (int64_t x : v) data.push_back(value.dtype() == DType::Bool ? nlohmann::json(x != 0) : nlohmann::json(x));
  } else {
    const auto v = value.astype(DType::Float64).to_vector<double>();
    for (double x : v) data.push_back(value.dtype() == DType::Float32 ? loom::detail::json_float(static_cast<float>(x))
                                                                     : loom::detail::json_float(x));
  }
  j["data"] = std::move(data);
  return j;
}

nlohmann::json output_binary(const std::string& name, const Tensor& value, std::string& binary) {
  const Tensor c = value.contiguous();
  const size_t n = c.nbytes();
  binary.append(static_cast<const char*>(c.data_ptr()), n);
  nlohmann::json j{{"name", name}, {"datatype", datatype_name(value.dtype())}};
  j["shape"] = nlohmann::json::array();
  for (int64_t d : value.shape()) j["shape"].push_back(d);
  j["parameters"] = {{"binary_data_size", n}};
  return j;
}

nlohmann::json spec_json(const TensorSpec& spec) {
  nlohmann::json shape = nlohmann::json::array();
  for (int64_t d : spec.shape) shape.push_back(d);
  return {{"name", spec.name}, {"datatype", datatype_name(spec.dtype)}, {"shape", shape}};
}

}  // namespace loom::serve::detail
