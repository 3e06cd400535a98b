// The collectives on Tensors. Every call begins with the same MPI call, whatever the collective:
// one MPI_Allreduce (float32 sum) of a fixed-size "signature block" whose header carries a hash
// of the call's signature (which collective, dtype, shape, ...), so that every rank sees the
// same disagreement and throws the same error instead of hanging or mixing up buffers. The
// first 1 KiB of a float32 sum or mean travels in the same block (one MPI call in all when that
// is everything); other data then moves with one more MPI call on a contiguous buffer (the
// tensor itself when contiguous). docs/distributed.md, "Ranks that disagree", has the figures.
#include <algorithm>
#include <array>
#include <climits>
#include <string>
#include <string_view>
#include <vector>

#include "dist/comm.h"
#include "loom/autograd/autograd.h"
#include "loom/core/describe.h"
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

// What one rank passes to a collective; every field must agree across ranks (allgather's axis
// 0, which may differ, is not in it: the ranks exchange it once they agree).
struct Signature {
  enum Field { kKind, kArg, kDType, kDevice, kNdim, kNumel, kShapeHash, kCount };
  std::array<int64_t, kCount> v{};
};

// The signature block: float32 words, reduced with MPI_SUM as MPI reduces any float32 data.
// Its header holds a 64-bit hash of the signature in 16 digits of 4 bits, each digit d as d and
// d²; after the sum every rank holds S1 = Σd and S2 = Σd² over the p ranks, exact integers below
// 2^24 for p ≤ 65536, and the ranks agree on a digit iff its variance is 0: p·S2 = S1². Every
// rank sees the same sums, hence the same verdict. After the header, the data of a float32
// sum or mean allreduce of up to kInlineFloats elements rides in the same call. Every collective
// sends a whole block, so that ranks in different collectives still make the same MPI call.
constexpr int kDigits = 16, kDigitBits = 4;
constexpr int64_t kHeaderFloats = 2 * kDigits;
constexpr int64_t kInlineFloats = 256;  // 1 KiB
// Larger jobs exchange the signatures with an MPI_Allgather instead (and inline nothing).
int g_max_summed_ranks = 65536;
using Block = std::array<float, kHeaderFloats + kInlineFloats>;
// Zeros the block's data from element `from` on (only what the caller does not fill).
void clear_data(Block& block, int64_t from) {
  std::fill(block.begin() + kHeaderFloats + from, block.end(), 0.0f);
}

// float16 and bfloat16 have no MPI type: reduced in float32 and rounded once.
DType work_dtype(DType dtype) { return dtype == Float16 || dtype == BFloat16 ? Float32 : dtype; }

// The elements of an allreduce that travel inside the block (0: none): the first kInlineFloats
// of a float32 (work) sum or mean; the rest, if any, follows in a second call. A function of
// the signature alone, so that ranks that agree decide alike.
int64_t inline_elems(const Signature& s, int size) {
  const auto& f = s.v;
  if (f[Signature::kKind] != kAllreduce || f[Signature::kArg] == static_cast<int64_t>(ReduceOp::Max) ||
      f[Signature::kDType] < 0 || f[Signature::kDevice] != static_cast<int64_t>(DeviceType::CPU) ||
      size > g_max_summed_ranks)
    return 0;
  if (work_dtype(static_cast<DType>(f[Signature::kDType])) != Float32) return 0;
  const int64_t n = f[Signature::kNumel];
  return std::clamp<int64_t>(n, 0, kInlineFloats);
}

uint64_t hash_signature(const Signature& s) {  // FNV-1a over the fields, then splitmix64's finalizer
  uint64_t h = 1469598103934665603ull;
  for (int64_t v : s.v) {
    h ^= static_cast<uint64_t>(v);
    h *= 1099511628211ull;
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

uint64_t hash_dims(const Shape& shape, size_t from) {  // FNV-1a over the extents
  uint64_t h = 1469598103934665603ull;
  for (size_t i = from; i < shape.size(); ++i) {
    h ^= static_cast<uint64_t>(shape[i]);
    h *= 1099511628211ull;
  }
  return h;
}

const char* allreduce_call(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "dist::allreduce(sum)";
    case ReduceOp::Mean: return "dist::allreduce(mean)";
    case ReduceOp::Max: return "dist::allreduce(max)";
  }
  return "dist::allreduce(?)";
}

std::string call_name(int64_t kind, int64_t arg) {
  switch (kind) {
    case kAllreduce: return allreduce_call(static_cast<ReduceOp>(arg));
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

// MPI's error as DistError; the text of the call is only made when there is one.
template <typename What>
void check_lazy(int rc, const char* call, const What& what) {
  if (rc != MPI_SUCCESS) detail::check(rc, call, what());
}

// Gathers the signatures and shapes, and throws the same error on every rank, naming rank 0 and
// the first that differs. Called when the block showed a disagreement, or with `check_only` in
// jobs too large for the block's sums, where it returns when the ranks agree.
void name_disagreement(const Signature& mine, const Shape& dims, MPI_Comm comm, const std::string& what,
                       bool check_only) {
  const int size = dist::size();
  std::vector<Signature> all(static_cast<size_t>(size));
  detail::CollectiveWatch watch(what);
  detail::check(MPI_Allgather(mine.v.data(), Signature::kCount, MPI_INT64_T, all.data(), Signature::kCount,
                              MPI_INT64_T, comm),
                "MPI_Allgather", what + " (exchanging shapes)");
  int bad = -1;
  for (int r = 1; r < size && bad < 0; ++r)
    if (all[static_cast<size_t>(r)].v != all[0].v) bad = r;
  if (bad < 0) {
    if (check_only) return;
    bad = std::min(1, size - 1);  // the hashes differ where the signatures do not: cannot happen
  }
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

// Sums this call's signature block over the ranks (with `block`'s data, which the caller filled
// as inline_elems() says, and zeros after it); returns when every rank made the same call, and
// throws the same error on every rank otherwise.
void agree(const Signature& mine, const Shape& dims, MPI_Comm comm, std::string_view what, Block& block) {
  const uint64_t h = hash_signature(mine);
  for (int i = 0; i < kDigits; ++i) {
    const auto d = static_cast<float>((h >> (i * kDigitBits)) & ((1u << kDigitBits) - 1));
    block[static_cast<size_t>(2 * i)] = d;
    block[static_cast<size_t>(2 * i + 1)] = d * d;
  }
  const int size = dist::size();
  if (size > g_max_summed_ranks) {  // the same on every rank: a plain exchange of the signatures
    name_disagreement(mine, dims, comm, std::string(what), true);
    return;
  }
  {
    detail::CollectiveWatch watch(what);  // where a rank waits for the others
    check_lazy(MPI_Allreduce(MPI_IN_PLACE, block.data(), static_cast<int>(block.size()), MPI_FLOAT, MPI_SUM, comm),
               "MPI_Allreduce", [&] { return std::string(what) + " (exchanging shapes)"; });
  }
  for (int i = 0; i < kDigits; ++i) {
    const auto s1 = static_cast<int64_t>(block[static_cast<size_t>(2 * i)]);
    const auto s2 = static_cast<int64_t>(block[static_cast<size_t>(2 * i + 1)]);
    if (size * s2 != s1 * s1) name_disagreement(mine, dims, comm, std::string(what), false);
  }
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
  return s;
}

const Shape& dims_of(const Tensor& t) {
  static const Shape none;
  return t.defined() ? t.shape() : none;
}

// Checks that hold on every rank alike once the signatures agree.
void check_agreed(const Tensor& t, std::string_view what) {
  if (!t.defined())
    throw ValueError(std::string(what) + ": the tensor is undefined; pass a tensor of the same shape on every rank");
  if (t.device().type != DeviceType::CPU)
    throw DeviceError(std::string(what) + ": only CPU tensors are supported, got " + t.device().str());
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

// "allreduce of float32 (2, 3)": a collective call and its tensor, for error messages.
std::string describe_call(std::string_view call, const Tensor& t) { return std::string(call) + " of " + describe(t); }

void divide(void* data, DType work, int64_t n, int size) {  // the mean from the sum
  if (work == Float64) {
    auto* p = static_cast<double*>(data);
    for (int64_t i = 0; i < n; ++i) p[i] /= size;
  } else {
    auto* p = static_cast<float*>(data);
    for (int64_t i = 0; i < n; ++i) p[i] /= static_cast<float>(size);
  }
}

}  // namespace

void detail::set_max_summed_ranks(int ranks) { g_max_summed_ranks = ranks; }

Tensor& allreduce(Tensor& t, ReduceOp op) {
  MPI_Comm comm = detail::comm();
  NoGrad no_grad;
  const char* call = allreduce_call(op);
  const Shape& dims = dims_of(t);
  const Signature sig = sign(kAllreduce, static_cast<int64_t>(op), t, dims, 0);
  Block block;
  const int64_t inlined = inline_elems(sig, dist::size());
  clear_data(block, inlined);
  float* const head = block.data() + kHeaderFloats;
  // The float32 data whose head rides in the block: the tensor itself when it is contiguous
  // float32 (reduced in its own memory), else a contiguous float32 copy written back at the end.
  Tensor flat;
  if (inlined > 0) {
    flat = t.dtype() == Float32 && t.is_contiguous() ? t : t.astype(Float32).contiguous();
    std::copy_n(static_cast<const float*>(flat.data_ptr()), inlined, head);
  }
  agree(sig, dims, comm, call, block);
  check_agreed(t, call);
  const DType dtype = t.dtype();
  if (op == ReduceOp::Mean && !is_floating(dtype))
    throw DTypeError(describe_call(call, t) +
                     ": mean needs a floating dtype (float16, bfloat16, float32, float64); reduce integers "
                     "with sum and divide as they should round");
  if (t.numel() > INT_MAX) check_count(t.numel(), describe_call(call, t));
  if (t.numel() == 0) return t;
  const int size = dist::size();

  if (inlined > 0) {  // the head is reduced already, in the block
    auto* data = static_cast<float*>(flat.data_ptr());
    if (const int64_t rest = t.numel() - inlined; rest > 0)
      check_lazy(MPI_Allreduce(MPI_IN_PLACE, data + inlined, static_cast<int>(rest), MPI_FLOAT, MPI_SUM, comm),
                 "MPI_Allreduce", [&] { return describe_call(call, t); });
    std::copy_n(head, inlined, data);
    if (op == ReduceOp::Mean) divide(data, Float32, t.numel(), size);
    if (flat.shares_storage_with(t)) t.storage()->bump_version();  // written in place
    else t.copy_(flat.reshape(t.shape()));
    return t;
  }

  Contiguous c(t);
  const bool widen = work_dtype(dtype) != dtype;
  Tensor w = widen ? c.buf.astype(Float32) : c.buf;
  MPI_Datatype type = MPI_FLOAT;
  switch (w.dtype()) {
    case DType::Bool: case DType::UInt8: type = MPI_UINT8_T; break;
    case DType::Int32: type = MPI_INT32_T; break;
    case DType::Int64: type = MPI_INT64_T; break;
    case DType::Float64: type = MPI_DOUBLE; break;
    default: break;
  }
  // bool holds 0 or 1: or is max, for sum and max alike
  MPI_Op mpi_op = op == ReduceOp::Max || w.dtype() == Bool ? MPI_MAX : MPI_SUM;
  check_lazy(MPI_Allreduce(MPI_IN_PLACE, w.data_ptr(), static_cast<int>(w.numel()), type, mpi_op, comm),
             "MPI_Allreduce", [&] { return describe_call(call, t); });
  if (op == ReduceOp::Mean) divide(w.data_ptr(), w.dtype(), w.numel(), size);
  if (widen) c.buf.copy_(w);
  c.write_back();
  return t;
}

Tensor& broadcast(Tensor& t, int root) {
  MPI_Comm comm = detail::comm();
  NoGrad no_grad;
  const std::string call = call_name(kBroadcast, root);
  const Shape& dims = dims_of(t);
  Block block;
  clear_data(block, 0);
  agree(sign(kBroadcast, root, t, dims, 0), dims, comm, call, block);
  check_agreed(t, call);
  const std::string what = describe_call(call, t);
  const int size = dist::size();
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
  const Shape& dims = dims_of(rows);
  const Signature sig = sign(kAllgather, 0, rows, dims, 1);
  Block block;
  clear_data(block, 0);
  agree(sig, dims, comm, call, block);
  check_agreed(t, call);
  const std::string what = describe_call(call, t);
  // the ranks agree on everything but axis 0: each rank's now
  std::vector<int64_t> firsts(static_cast<size_t>(dist::size()));
  detail::check(MPI_Allgather(&dims[0], 1, MPI_INT64_T, firsts.data(), 1, MPI_INT64_T, comm), "MPI_Allgather",
                what + " (exchanging axis 0)");
  const int64_t row = sig.v[Signature::kNumel];  // elements per index of axis 0
  std::vector<int> counts(firsts.size()), displs(firsts.size());
  int64_t first = 0, total = 0;
  for (size_t r = 0; r < firsts.size(); ++r) {
    const int64_t n = firsts[r] * row;
    check_count(total + n, what);
    counts[r] = static_cast<int>(n);
    displs[r] = static_cast<int>(total);
    first += firsts[r];
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
  static const Shape none;
  Block block;
  clear_data(block, 0);
  agree(sign(kBarrier, 0, Tensor(), none, 0), none, detail::comm(), "dist::barrier", block);
}

}  // namespace loom::dist
