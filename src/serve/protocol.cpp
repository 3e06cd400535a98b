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

std::vector<Tensor> parse_inputs(const nlohmann::json& body, const std::vector<TensorSpec>& specs, std::string_view binary) {
  size_t binary_used = 0;  // the parts of `binary` taken by the inputs so far
  if (!body.is_object()) throw BadRequest("the request body must be a JSON object with \"inputs\"");
  const auto it = body.find("inputs");
  if (it == body.end() || !it->is_array())
    throw BadRequest("the request has no \"inputs\" array (each input: {\"name\", \"shape\", \"datatype\", \"data\"})");
  std::vector<std::string> names;
  for (const auto& s : specs) names.push_back("'" + s.name + "'");
  std::string valid;
  for (size_t i = 0; i < names.size(); ++i) valid += (i ? ", " : "") + names[i];

  std::vector<Tensor> out(specs.size());
  for (const auto& in : *it) {
    if (!in.is_object() || !in.contains("name") || !in["name"].is_string())
      throw BadRequest("each input must be an object with a string \"name\" (the model's inputs: " + valid + ")");
    const std::string name = in["name"].get<std::string>();
    size_t k = 0;
    while (k < specs.size() && specs[k].name != name) ++k;
    if (k == specs.size())
      throw BadRequest("unknown input " + loom::detail::quote_text(name) + " (the model's inputs: " + valid + ")");
    if (out[k].defined()) throw BadRequest("input '" + name + "' is given twice");
    const TensorSpec& spec = specs[k];

    if (!in.contains("datatype") || !in["datatype"].is_string())
      throw BadRequest("input '" + name + "' has no \"datatype\" (it takes " + datatype_name(spec.dtype) + ")");
    const std::string dt = in["datatype"].get<std::string>();
    if (dt != datatype_name(spec.dtype))
      throw BadRequest("input '" + name + "' has datatype " + loom::detail::quote_text(dt) + ", the model takes " +
                       datatype_name(spec.dtype));

    if (!in.contains("shape") || !in["shape"].is_array())
      throw BadRequest("input '" + name + "' has no \"shape\" array (it takes " + shape_text(spec.shape) + ", -1: any size)");
    Shape shape;
    int64_t count = 1;
    for (const auto& d : in["shape"]) {
      const auto v = loom::detail::json_to_int(d, 0, std::numeric_limits<int32_t>::max());
      if (!v) throw BadRequest("input '" + name + "' has a shape entry that is not an integer from 0 to 2^31-1");
      if (shape.size() >= 16) throw BadRequest("input '" + name + "' has more than 16 dimensions");
      shape.push_back(*v);
      if (*v != 0 && count > std::numeric_limits<int64_t>::max() / *v)
        throw BadRequest("input '" + name + "' has a shape with too many elements");
      count *= *v;
    }
    if (!shape_matches(spec.shape, shape))
      throw BadRequest("input '" + name + "' has shape " + shape_text(shape) + ", the model takes " + shape_text(spec.shape) +
                       " (-1: any size)");

    if (in.contains("parameters") && in["parameters"].is_object() && in["parameters"].contains("binary_data_size")) {
      const auto size = loom::detail::json_to_int(in["parameters"]["binary_data_size"], 0, std::numeric_limits<int64_t>::max());
      if (count > std::numeric_limits<int64_t>::max() / 8) throw BadRequest("input '" + name + "' has a shape with too many elements");
      const int64_t want = count * static_cast<int64_t>(itemsize(spec.dtype));
      if (!size || *size != want)
        throw BadRequest("input '" + name + "' has \"binary_data_size\" " + in["parameters"]["binary_data_size"].dump() + ", its shape " +
                         shape_text(shape) + " of " + datatype_name(spec.dtype) + " takes " + std::to_string(want) + " bytes");
      if (static_cast<uint64_t>(want) > binary.size() - binary_used)
        throw BadRequest("input '" + name + "' needs " + std::to_string(want) + " bytes of binary data, the body has " +
                         std::to_string(binary.size() - binary_used) + " left after the JSON and the inputs before it");
      std::string bytes(binary.substr(binary_used, static_cast<size_t>(want)));
      binary_used += static_cast<size_t>(want);
      if (spec.dtype == DType::Bool)  // a byte other than 0 or 1 would not be a valid bool
        for (char& c : bytes) c = c != 0 ? 1 : 0;
      out[k] = from_data(bytes.data(), shape, spec.dtype);  // Loom's dtypes are little-endian in memory, as the wire's
      continue;
    }
    if (!in.contains("data")) throw BadRequest("input '" + name + "' has no \"data\" (nor \"parameters\": {\"binary_data_size\"})");
    std::vector<const nlohmann::json*> values;
    // the body's size bounds the count: a shape claiming more than the data holds is refused below
    flatten(in["data"], values, static_cast<size_t>(count), name);
    if (static_cast<int64_t>(values.size()) != count)
      throw BadRequest("input '" + name + "' has " + std::to_string(values.size()) + " values in \"data\", its shape " +
                       shape_text(shape) + " holds " + std::to_string(count));

    auto bad_value = [&](size_t i, const char* what) {
      return BadRequest("input '" + name + "' value " + std::to_string(i) + " is not " + what);
    };
    switch (spec.dtype) {
      case DType::Bool: {
        std::vector<bool> v(values.size());
        for (size_t i = 0; i < values.size(); ++i) {
          if (!values[i]->is_boolean()) throw bad_value(i, "true or false");
          v[i] = values[i]->get<bool>();
        }
        out[k] = from_vector<bool>(v, shape);
        break;
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
        out[k] = from_vector<int64_t>(v, shape).astype(spec.dtype);
        break;
      }
      default: {
        std::vector<double> v(values.size());
        for (size_t i = 0; i < values.size(); ++i) {
          const auto x = loom::detail::json_to_float(*values[i]);
          if (!x) throw bad_value(i, loom::detail::json_float_help());
          v[i] = *x;
        }
        out[k] = spec.dtype == DType::Float64 ? from_vector<double>(v, shape) : from_vector<double>(v, shape).astype(spec.dtype);
      }
    }
  }
  for (size_t k = 0; k < specs.size(); ++k)
    if (!out[k].defined()) throw BadRequest("input '" + specs[k].name + "' is missing (the model's inputs: " + valid + ")");
  if (binary_used != binary.size())
    throw BadRequest("the body has " + std::to_string(binary.size() - binary_used) +
                     " bytes of binary data after the JSON that no input's \"binary_data_size\" takes");
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
