// The collectives on Tensors. Each call first exchanges a small signature (which collective,
// dtype, shape, ...) with one MPI_Allgather, so that every rank sees the same disagreement and
// throws the same error instead of hanging or mixing up buffers; the data then moves with one
// MPI call on a contiguous buffer (the tensor itself when contiguous).
#include <algorithm>
#include <array>
#include <climits>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "loom/autograd/autograd.h"
#include "loom/dist/dist.h"
#include "loom/ops/creation.h"

namespace loom::dist {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Mean: return "mean";
    case ReduceOp::Max: return "max";
  }
  return "?";
}

namespace {

enum Kind : int64_t { kAllreduce = 1, kBroadcast, kAllgather, kBarrier };

// What one rank passes to a collective. Fields 0..6 must agree across ranks; `first` (axis 0,
// which allgather lets differ) is only gathered.
struct Signature {
  enum Field { kKind, kArg, kDType, kDevice, kNdim, kNumel, kShapeHash, kFirst, kCount };
  std::array<int64_t, kCount> v{};
};

uint64_t hash_dims(const Shape& shape, size_t from) {  // FNV-1a over the extents
  uint64_t h = 1469598103934665603ull;
  for (size_t i = from; i < shape.size(); ++i) {
    h ^= static_cast<uint64_t>(shape[i]);
    h *= 1099511628211ull;
  }
  return h;
}

std::string call_name(int64_t kind, int64_t arg) {
  switch (kind) {
    case kAllreduce: return std::string("dist::allreduce(") + reduce_op_name(static_cast<ReduceOp>(arg)) + ")";
    case kBroadcast: return "dist::broadcast(root " + std::to_string(arg) + ")";
    case kAllgather: return "dist::allgather";
    case kBarrier: return "dist::barrier";
  }
  return "an unknown collective";
}

std::string tensor_text(const Signature& s, const Shape& dims) {
  if (s.v[Signature::kKind] == kBarrier) return "";
  if (s.v[Signature::kDType] < 0) return " of an undefined tensor";
  std::string text = std::string(" of ") + dtype_name(static_cast<DType>(s.v[Signature::kDType])) + " " + shape_str(dims);
  if (s.v[Signature::kDevice] != static_cast<int64_t>(DeviceType::CPU)) text += " on a non-CPU device";
  return text;
}

// Exchanges the signatures; returns every rank's, or throws the same error on every rank when
// they disagree (the shapes are then gathered too, to name them).
std::vector<Signature> agree(const Signature& mine, const Shape& dims, MPI_Comm comm, const std::string& what) {
  int size = 0;
  detail::check(MPI_Comm_size(comm, &size), "MPI_Comm_size", what);
  std::vector<Signature> all(static_cast<size_t>(size));
  detail::CollectiveWatch watch(what);  // where a rank waits for the others
  detail::check(MPI_Allgather(mine.v.data(), Signature::kCount, MPI_INT64_T, all.data(), Signature::kCount,
                              MPI_INT64_T, comm),
                "MPI_Allgather", what + " (exchanging shapes)");
  int bad = -1;
  for (int r = 1; r < size && bad < 0; ++r)
    for (int f = 0; f < Signature::kFirst; ++f)
      if (all[static_cast<size_t>(r)].v[f] != all[0].v[f]) bad = r;
  if (bad < 0) return all;

  std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  int total = 0;
  for (int r = 0; r < size; ++r) {
    counts[static_cast<size_t>(r)] = static_cast<int>(std::max<int64_t>(all[static_cast<size_t>(r)].v[Signature::kNdim], 0));
    displs[static_cast<size_t>(r)] = total;
    total += counts[static_cast<size_t>(r)];
  }
  std::vector<int64_t> every(static_cast<size_t>(total) + 1);
  detail::check(MPI_Allgatherv(dims.data(), static_cast<int>(dims.size()), MPI_INT64_T, every.data(), counts.data(),
                               displs.data(), MPI_INT64_T, comm),
                "MPI_Allgatherv", what + " (exchanging shapes)");
  auto rank_text = [&](int r) {
    const Signature& s = all[static_cast<size_t>(r)];
    const auto* d = every.data() + displs[static_cast<size_t>(r)];
    return "rank " + std::to_string(r) + " called " + call_name(s.v[Signature::kKind], s.v[Signature::kArg]) +
           tensor_text(s, Shape(d, d + counts[static_cast<size_t>(r)]));
  };
  const Signature& a = all[0];
  const Signature& b = all[static_cast<size_t>(bad)];
  const bool gather = a.v[Signature::kKind] == kAllgather;
  std::string msg = "dist: ranks disagree: " + rank_text(0) + ", " + rank_text(bad) +
                    "; every rank must make the same calls in the same order with the same dtype and shape" +
                    (gather ? " (axis 0 may differ for allgather)" : "");
  if (a.v[Signature::kKind] != b.v[Signature::kKind] || a.v[Signature::kArg] != b.v[Signature::kArg]) throw ValueError(msg);
  if (a.v[Signature::kDType] != b.v[Signature::kDType]) throw DTypeError(msg);
  if (a.v[Signature::kDevice] != b.v[Signature::kDevice]) throw DeviceError(msg);
  throw ShapeError(msg);
}

// The signature of `t` (undefined tensors are signed too, so that their rank does not skip
// the exchange and leave the others waiting).
Signature sign(int64_t kind, int64_t arg, const Tensor& t, const Shape& dims, size_t hash_from) {
  Signature s;
  s.v[Signature::kKind] = kind;
  s.v[Signature::kArg] = arg;
  s.v[Signature::kDType] = t.defined() ? static_cast<int64_t>(t.dtype()) : -1;
  s.v[Signature::kDevice] = t.defined() ? static_cast<int64_t>(t.device().type) : 0;
  s.v[Signature::kNdim] = static_cast<int64_t>(dims.size());
  int64_t n = 1;
  for (size_t i = hash_from; i < dims.size(); ++i) n *= dims[i];
  s.v[Signature::kNumel] = n;
  s.v[Signature::kShapeHash] = static_cast<int64_t>(hash_dims(dims, hash_from));
  s.v[Signature::kFirst] = hash_from > 0 && !dims.empty() ? dims[0] : 0;
  return s;
}

// Checks that hold on every rank alike once the signatures agree.
void check_agreed(const Tensor& t, const std::string& what) {
  if (!t.defined()) throw ValueError(what + ": the tensor is undefined; pass a tensor of the same shape on every rank");
  if (t.device().type != DeviceType::CPU) throw DeviceError(what + ": only CPU tensors are supported, got " + t.device().str());
}

void check_count(int64_t n, const std::string& what) {
  if (n > INT_MAX)
    throw ValueError(what + ": " + std::to_string(n) + " elements exceed MPI's count limit of " +
                     std::to_string(INT_MAX) + " per call; split the tensor");
}

MPI_Datatype transfer_type(DType dtype) {  // moves the bits, whatever they mean
  switch (itemsize(dtype)) {
    case 1: return MPI_UINT8_T;
    case 2: return MPI_UINT16_T;
    case 4: return MPI_UINT32_T;
    default: return MPI_UINT64_T;
  }
}

// `t` contiguous: itself, or a copy; `write_back` copies the result into the original.
struct Contiguous {
  Tensor original, buf;
  explicit Contiguous(const Tensor& t) : original(t), buf(t.is_contiguous() ? t : t.contiguous()) {
    if (buf.shares_storage_with(original)) original.storage()->bump_version();  // written in place
  }
  void write_back() {
    if (!buf.shares_storage_with(original)) original.copy_(buf);
  }
};

std::string describe(const std::string& call, const Tensor& t) {
  return call + " of " + dtype_name(t.dtype()) + " " + shape_str(t.shape());
}

}  // namespace

Tensor& allreduce(Tensor& t, ReduceOp op) {
  MPI_Comm comm = detail::comm();
  NoGrad no_grad;
  const std::string call = call_name(kAllreduce, static_cast<int64_t>(op));
  const Shape dims = t.defined() ? t.shape() : Shape{};
  agree(sign(kAllreduce, static_cast<int64_t>(op), t, dims, 0), dims, comm, call);
  check_agreed(t, call);
  const std::string what = describe(call, t);
  const DType dtype = t.dtype();
  if (op == ReduceOp::Mean && !is_floating(dtype))
    throw DTypeError(what + ": mean needs a floating dtype (float16, bfloat16, float32, float64); reduce integers "
                            "with sum and divide as they should round");
  check_count(t.numel(), what);
  if (t.numel() == 0) return t;
  int size = 0;
  detail::check(MPI_Comm_size(comm, &size), "MPI_Comm_size", what);

  Contiguous c(t);
  // float16/bfloat16 have no MPI type: reduced in float32 and rounded once at the end.
  const bool widen = dtype == Float16 || dtype == BFloat16;
  Tensor work = widen ? c.buf.astype(Float32) : c.buf;
  MPI_Datatype type = MPI_FLOAT;
  switch (work.dtype()) {
    case DType::Bool: case DType::UInt8: type = MPI_UINT8_T; break;
    case DType::Int32: type = MPI_INT32_T; break;
    case DType::Int64: type = MPI_INT64_T; break;
    case DType::Float64: type = MPI_DOUBLE; break;
    default: break;
  }
  // bool holds 0 or 1: or is max, for sum and max alike
  MPI_Op mpi_op = op == ReduceOp::Max || work.dtype() == Bool ? MPI_MAX : MPI_SUM;
  detail::check(MPI_Allreduce(MPI_IN_PLACE, work.data_ptr(), static_cast<int>(work.numel()), type, mpi_op, comm),
                "MPI_Allreduce", what);
  if (op == ReduceOp::Mean) {
    const int64_t n = work.numel();
    if (work.dtype() == Float64) {
      auto* p = work.data<double>();
      for (int64_t i = 0; i < n; ++i) p[i] /= size;
    } else {
      auto* p = work.data<float>();
      for (int64_t i = 0; i < n; ++i) p[i] /= static_cast<float>(size);
    }
  }
  if (widen) c.buf.copy_(work);
  c.write_back();
  return t;
}

Tensor& broadcast(Tensor& t, int root) {
  MPI_Comm comm = detail::comm();
  NoGrad no_grad;
  const std::string call = call_name(kBroadcast, root);
  const Shape dims = t.defined() ? t.shape() : Shape{};
  agree(sign(kBroadcast, root, t, dims, 0), dims, comm, call);
  check_agreed(t, call);
  const std::string what = describe(call, t);
  int size = 0;
  detail::check(MPI_Comm_size(comm, &size), "MPI_Comm_size", what);
  if (root < 0 || root >= size)
    throw ValueError(what + ": root " + std::to_string(root) + " is not a rank; valid: 0 to " + std::to_string(size - 1));
  check_count(t.numel(), what);
  if (t.numel() == 0) return t;
  Contiguous c(t);
  detail::check(MPI_Bcast(c.buf.data_ptr(), static_cast<int>(t.numel()), transfer_type(t.dtype()), root, comm),
                "MPI_Bcast", what);
  c.write_back();
  return t;
}

Tensor allgather(const Tensor& t) {
  MPI_Comm comm = detail::comm();
  NoGrad no_grad;
  const std::string call = call_name(kAllgather, 0);
  const Tensor rows = t.defined() && t.ndim() == 0 ? t.reshape({1}) : t;
  const Shape dims = rows.defined() ? rows.shape() : Shape{};
  std::vector<Signature> all = agree(sign(kAllgather, 0, rows, dims, 1), dims, comm, call);
  check_agreed(t, call);
  const std::string what = describe(call, t);
  const int64_t row = all[0].v[Signature::kNumel];  // elements per index of axis 0
  std::vector<int> counts(all.size()), displs(all.size());
  int64_t first = 0, total = 0;
  for (size_t r = 0; r < all.size(); ++r) {
    const int64_t n = all[r].v[Signature::kFirst] * row;
    check_count(total + n, what);
    counts[r] = static_cast<int>(n);
    displs[r] = static_cast<int>(total);
    first += all[r].v[Signature::kFirst];
    total += n;
  }
  Shape out_shape = dims;
  out_shape[0] = first;
  Tensor out = empty(out_shape, t.dtype(), t.device());
  if (total == 0) return out;
  const Tensor buf = rows.contiguous();
  MPI_Datatype type = transfer_type(t.dtype());
  detail::check(MPI_Allgatherv(buf.data_ptr(), static_cast<int>(buf.numel()), type, out.data_ptr(), counts.data(),
                               displs.data(), type, comm),
                "MPI_Allgatherv", what);
  return out;
}

void barrier() {
  // The signature exchange synchronizes every rank, and also catches a rank that called
  // another collective meanwhile.
  agree(sign(kBarrier, 0, Tensor(), {}, 0), {}, detail::comm(), call_name(kBarrier, 0));
}

}  // namespace loom::dist
