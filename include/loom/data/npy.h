#pragma once
// NumPy's .npy and .npz files.
//
// NPY: format versions 1.0, 2.0 and 3.0 are read, 1.0 written (2.0 when the header needs it).
// dtypes: '<f4' float32, '<f8' float64, '<i4' int32, '<i8' int64, '|u1' uint8, '|b1' bool,
// '<f2' float16 ('>' big-endian variants are read and byte-swapped). fortran_order True is read
// (the result is C-ordered); writes are always C order. bfloat16 has no NumPy dtype and is
// refused with a DTypeError.
//
// NPZ: a ZIP archive of .npy members (keys are member names without '.npy', as numpy.load
// gives them). Reads stored and deflated members (np.savez, np.savez_compressed), ZIP64
// records included, and checks each member's CRC-32; writes stored members.
//
// Every read is bounds-checked against the data (never past the file, never trusting a
// declared size); a malformed file throws IOError naming the file (and member) and the problem.
// Saves go through write_file_atomic: a failed save leaves any previous file intact.
#include <map>
#include <string>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom::data {

LOOM_API Tensor load_npy(const std::string& path);
LOOM_API void save_npy(const std::string& path, const Tensor& array);

LOOM_API std::map<std::string, Tensor> load_npz(const std::string& path);
LOOM_API void save_npz(const std::string& path, const std::map<std::string, Tensor>& arrays);

// The same formats in memory; `name` is used in error messages.
LOOM_API Tensor npy_from_bytes(const std::string& bytes, const std::string& name = "<memory>");
LOOM_API std::string npy_to_bytes(const Tensor& array);
LOOM_API std::map<std::string, Tensor> npz_from_bytes(const std::string& bytes, const std::string& name = "<memory>");
LOOM_API std::string npz_to_bytes(const std::map<std::string, Tensor>& arrays);

}  // namespace loom::data
