// dist::Context: MPI's lifetime and the process's place in the job.
#include <atomic>

#include "dist/comm.h"
#include "loom/core/parallel.h"
#include "loom/dist/dist.h"
#include "loom/nn/replicas.h"

namespace loom::dist {

namespace {
// The live Context and its communicators; set and cleared only by the Context on the thread
// that creates and destroys it (atomic: other threads may ask is_initialized()).
std::atomic<const Context*> g_context{nullptr};
MPI_Comm g_comm = MPI_COMM_NULL;
MPI_Comm g_node = MPI_COMM_NULL;
MPI_Comm g_grad = MPI_COMM_NULL;

// The ranks as nn's replica group (synchronized batch norm) while a Context is alive.
class Replicas final : public nn::ReplicaGroup {
 public:
  int size() const override { return dist::size(); }
  void sum(Tensor& t) override { allreduce(t, ReduceOp::Sum); }
};
Replicas g_replicas;

const Context& live(const char* what) {
  const Context* c = g_context.load();
  if (!c)
    throw DistError(std::string("dist::") + what +
                    ": no dist::Context is alive; create one at the start of main (it initializes MPI)");
  return *c;
}
}  // namespace

namespace detail {
MPI_Comm comm() {
  live("collective");
  return g_comm;
}

MPI_Comm grad_comm() {
  live("collective");
  return g_grad;
}

void check(int rc, const char* call, const std::string& what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  throw DistError(what + " failed in " + call + ": " +
                  (len > 0 ? std::string(text, static_cast<size_t>(len)) : "MPI error " + std::to_string(rc)));
}
}  // namespace detail

Context::Context() {
  if (g_context.load())
    throw DistError("dist::Context: one is already alive; a process has one Context for its whole run");
  int finalized = 0, initialized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    throw DistError("dist::Context: MPI was already finalized in this process and cannot be initialized again; "
                    "keep one Context alive for the whole program");
  MPI_Initialized(&initialized);
  if (!initialized) {
    // Serialized: MPI may be called from any thread, one at a time (Loom's collectives are
    // called from one thread at a time; overlapped gradient buckets start theirs from the
    // thread running backward).
    int provided = 0;
    detail::check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread",
                  "dist::Context");
    owns_mpi_ = true;
  }
  try {
    const std::string what = "dist::Context";
    detail::check(MPI_Comm_dup(MPI_COMM_WORLD, &g_comm), "MPI_Comm_dup", what);
    detail::check(MPI_Comm_set_errhandler(g_comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", what);
    detail::check(MPI_Comm_dup(g_comm, &g_grad), "MPI_Comm_dup", what);
    detail::check(MPI_Comm_set_errhandler(g_grad, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", what);
    detail::check(MPI_Comm_rank(g_comm, &rank_), "MPI_Comm_rank", what);
    detail::check(MPI_Comm_size(g_comm, &size_), "MPI_Comm_size", what);
    // The processes sharing this machine's memory: portable across launchers and hostfiles
    // (OMPI_COMM_WORLD_LOCAL_RANK is Open MPI's mpirun only).
    detail::check(MPI_Comm_split_type(g_comm, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &g_node),
                  "MPI_Comm_split_type", what);
    detail::check(MPI_Comm_rank(g_node, &local_rank_), "MPI_Comm_rank", what);
    detail::check(MPI_Comm_size(g_node, &local_size_), "MPI_Comm_size", what);
  } catch (...) {
    if (g_node != MPI_COMM_NULL) MPI_Comm_free(&g_node);
    if (g_grad != MPI_COMM_NULL) MPI_Comm_free(&g_grad);
    if (g_comm != MPI_COMM_NULL) MPI_Comm_free(&g_comm);
    if (owns_mpi_) MPI_Finalize();
    throw;
  }
  // processes on one machine split its cores (as torchrun's OMP_NUM_THREADS=1 does), unless
  // the program or LOOM_NUM_THREADS chose a thread count
  share_cores(local_size_);
  g_context.store(this);
  nn::set_replica_group(&g_replicas);
}

Context::~Context() {
  detail::stop_watchdog();
  nn::set_replica_group(nullptr);
  g_context.store(nullptr);
  MPI_Comm_free(&g_node);
  MPI_Comm_free(&g_grad);
  MPI_Comm_free(&g_comm);
  if (owns_mpi_) MPI_Finalize();
}

int rank() { return live("rank").rank(); }
int size() { return live("size").size(); }
int local_rank() { return live("local_rank").local_rank(); }
int local_size() { return live("local_size").local_size(); }
bool is_initialized() { return g_context.load() != nullptr; }

}  // namespace loom::dist
