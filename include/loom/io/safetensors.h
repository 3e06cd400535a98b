#pragma once
// The safetensors format (https://github.com/huggingface/safetensors), read and written
// exactly as specified:
//   8 bytes   N, the header size, unsigned little-endian
//   N bytes   a JSON object {"<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]},
//             ..., "__metadata__": {"<key>": "<string>"}}, padded with spaces so that N is a
//             multiple of 8
//   the rest  the data buffer: each tensor's bytes, C-contiguous, little-endian, at
//             [b, e) relative to the buffer's start; the tensors cover it without gaps
// Loom's dtypes map to BOOL U8 I32 I64 F16 BF16 F32 F64. Loom has no int8 dtype: a caller that
// asks (the `int8` arguments below) writes and reads I8 tensors as UInt8 tensors of their
// two's-complement bytes (int8 weights, docs/text.md). See docs/io.md for every check the reader
// makes.
#include <map>
#include <optional>
#include <set>
#include <string>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom::io {

using TensorMap = std::map<std::string, Tensor>;            // written in this (name) order
using Metadata = std::map<std::string, std::string>;        // the header's "__metadata__"

// Writes `tensors` (any device, layout or strides; copied to contiguous CPU bytes) and
// `metadata` to `path` through write_file_atomic: a failure leaves a previous file intact.
// Throws ValueError (before touching the file) for an undefined tensor, the reserved name
// "__metadata__", or names / metadata that are not valid UTF-8; IOError when writing fails.
// `int8` names UInt8 tensors of `tensors` that hold int8 bytes, written as I8 (ValueError for a
// name that is not a UInt8 tensor there).
LOOM_API void save_safetensors(const std::string& path, const TensorMap& tensors, const Metadata& metadata = {},
                               const std::set<std::string>& int8 = {});

// Reads every tensor of a safetensors file (CPU, contiguous). Fills *metadata when given.
// Throws IOError naming the file and the problem when the file cannot be read or breaks any
// rule of the format; it never reads past the end of the file. With `int8`, I8 tensors are read
// as UInt8 tensors of their bytes and *int8 gets their names; without it an I8 tensor is an
// IOError (a dtype Loom does not support).
LOOM_API TensorMap load_safetensors(const std::string& path, Metadata* metadata = nullptr, std::set<std::string>* int8 = nullptr);
// Only the header's metadata (the data are validated against the header but not read).
LOOM_API Metadata load_safetensors_metadata(const std::string& path);

// The same, to and from bytes in memory. `source` names the bytes in error messages.
LOOM_API std::string encode_safetensors(const TensorMap& tensors, const Metadata& metadata = {},
                                        const std::set<std::string>& int8 = {});
LOOM_API TensorMap decode_safetensors(const std::string& bytes, Metadata* metadata = nullptr,
                             const std::string& source = "<memory>", std::set<std::string>* int8 = nullptr);

// The safetensors name of a Loom dtype ("F32", "BF16", "BOOL", ...), and back (nullopt for a
// name Loom has no dtype for).
LOOM_API const char* safetensors_dtype_name(DType dtype);
LOOM_API std::optional<DType> dtype_from_safetensors(const std::string& name);

}  // namespace loom::io
