#pragma once
// What the collectives share with the Context: the communicator and MPI error checks.
// MPI's C API only: Open MPI's mpi.h otherwise declares its deprecated C++ bindings, whose
// library Loom does not link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <string>
#include <string_view>

#include "loom/core/api.h"

namespace loom::dist::detail {

// The live Context's communicator (a duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN);
// DistError when no Context is alive.
LOOM_INTERNAL MPI_Comm comm();
// Another duplicate, for gradient buckets only: their non-blocking allreduces may be in flight
// while other collectives (a synchronized batch norm's) run on comm().
LOOM_INTERNAL MPI_Comm grad_comm();

// Throws DistError "<what> failed in <call>: <MPI's error string>" unless rc is MPI_SUCCESS.
// `what` names the collective and its tensor ("dist::allreduce(sum) of float32 (2, 3)").
LOOM_INTERNAL void check(int rc, const char* call, const std::string& what);

// While alive, `what` (a collective) waits for the other ranks: the watchdog ends the process
// when that lasts longer than the collective timeout (src/dist/watchdog.cpp).
class LOOM_INTERNAL CollectiveWatch {
 public:
  explicit CollectiveWatch(std::string_view what);
  ~CollectiveWatch();
  CollectiveWatch(const CollectiveWatch&) = delete;
  CollectiveWatch& operator=(const CollectiveWatch&) = delete;
};
// The exit status of a process the watchdog ends (as timeout(1)'s).
constexpr int kTimeoutExitStatus = 124;
// Seconds a collective may wait from now on (0: forever); starts the watchdog thread when > 0.
LOOM_INTERNAL void set_collective_timeout(double seconds, int rank);
// Stops and joins the watchdog thread (the Context's end).
LOOM_INTERNAL void stop_watchdog();

// Jobs of more ranks than this (65536; the float32 sums of the collectives' signature block are
// exact up to it) check signatures with an MPI_Allgather instead (src/dist/collectives.cpp).
// For tests: every rank must set the same value, between collectives.
LOOM_INTERNAL void set_max_summed_ranks(int ranks);

}  // namespace loom::dist::detail
