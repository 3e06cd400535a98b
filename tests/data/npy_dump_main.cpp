// Writes NPY and NPZ files with Loom for tests/data/check_npy.py to load with NumPy:
//   loom_npy_dump DIR
#include <loom/loom.h>

#include <cstdio>
#include <string>

using namespace loom;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  Tensor a = arange(12).reshape({3, 4});  // 0..11
  data::save_npy(dir + "/f4.npy", a.astype(Float32) * 0.5);
  data::save_npy(dir + "/f8.npy", a.astype(Float64) * 0.25);
  data::save_npy(dir + "/i4.npy", (a - 6).astype(Int32));
  data::save_npy(dir + "/i8.npy", a * int64_t{1000000000000});
  data::save_npy(dir + "/u1.npy", (a * 20).astype(UInt8));
  data::save_npy(dir + "/b1.npy", (a % scalar_tensor(3, Int64)) == 0.0);
  data::save_npy(dir + "/f2.npy", (a.astype(Float32) * 0.5).astype(Float16));
  data::save_npy(dir + "/transposed.npy", a.astype(Float32).T());  // a non-contiguous view
  data::save_npy(dir + "/scalar.npy", scalar_tensor(3.5, Float64));
  data::save_npy(dir + "/empty.npy", zeros({0, 5}, Float32));
  data::save_npy(dir + "/vec.npy", arange(7).astype(Int32));
  data::save_npz(dir + "/arrays.npz", {{"x", a.astype(Float32) * 0.5}, {"labels", arange(5)}});
  std::puts("ok");
  return 0;
}
