#pragma once
// loom::dist: processes that train together over Open MPI (docs/distributed.md). A program
// launched with `mpirun -np N` runs N processes ("ranks"); run directly it is one rank of one.
//
//   int main() {
//     loom::dist::Context dist;                   // MPI_Init ... MPI_Finalize
//     loom::Tensor g = ...;
//     loom::dist::allreduce(g, loom::dist::ReduceOp::Mean);  // every rank now holds the mean
//   }
//
// Collectives are called by every rank in the same order with the same dtype and shape (axis 0
// may differ for allgather); a rank that disagrees is named in the error every rank throws.
// They work on data only (no autograd) and on CPU tensors, from one thread at a time.
// Linked as loom::dist (a library of its own: programs without it need no MPI).
#include <cstdint>

#include "loom/core/api.h"
#include "loom/core/error.h"
#include "loom/core/tensor.h"

namespace loom::dist {

// An MPI call failed (the message names the collective, dtype, shape and MPI's error), or a
// Context is used wrongly (none alive, two at once, MPI already finalized).
class LOOM_API DistError : public Error { using Error::Error; };

enum class ReduceOp { Sum, Mean, Max };
LOOM_API const char* reduce_op_name(ReduceOp op);  // "sum", "mean", "max"

// Initializes MPI for the life of the object and finalizes it at the end. One per process, for
// the whole program: MPI cannot be initialized again once finalized (DistError). When the
// program initialized MPI itself, the Context uses it and leaves finalizing to the program.
// Collectives run on a duplicate of MPI_COMM_WORLD whose errors return (never abort).
class LOOM_API Context {
 public:
  Context();
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int rank() const { return rank_; }              // 0 .. size() - 1
  int size() const { return size_; }              // processes in the job (1 without mpirun)
  int local_rank() const { return local_rank_; }  // rank among the processes on this machine
  int local_size() const { return local_size_; }  // processes on this machine

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  bool owns_mpi_ = false;
};

// The live Context's values (DistError when none is alive).
LOOM_API int rank();
LOOM_API int size();
LOOM_API int local_rank();
LOOM_API int local_size();
LOOM_API bool is_initialized();  // a Context is alive

// Every rank's `t` becomes the reduction over ranks, in place (a contiguous tensor is reduced in
// its own memory; a view is copied in and out). All dtypes: Sum and Max of bool are logical or;
// integer sums wrap as MPI's C arithmetic does; float16/bfloat16 are reduced in float32 and
// rounded once. Mean is the sum divided by size() and needs a floating dtype (DTypeError).
LOOM_API Tensor& allreduce(Tensor& t, ReduceOp op = ReduceOp::Sum);
// Every rank's `t` becomes rank `root`'s, in place (same dtype and shape everywhere).
LOOM_API Tensor& broadcast(Tensor& t, int root = 0);
// The ranks' tensors concatenated along axis 0 in rank order (a 0-d tensor counts as shape
// (1,)): axis 0 may differ between ranks, the dtype and the other axes may not. To stack equal
// shapes instead, gather t.expand_dims(0).
LOOM_API Tensor allgather(const Tensor& t);
// Returns when every rank has called it.
LOOM_API void barrier();

}  // namespace loom::dist
