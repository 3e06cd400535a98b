// loom::dist from the installed package, run as a job of one (no mpirun): MPI initializes, the
// collectives work, and the program needs no MPI flags of its own.
#include <loom/dist/dist.h>
#include <loom/loom.h>

#include <cstdio>

int main() {
  loom::dist::Context dist;
  loom::Tensor g = loom::arange(0, 4, 1);
  loom::dist::allreduce(g, loom::dist::ReduceOp::Mean);
  const bool ok = dist.size() == 1 && dist.rank() == 0 && loom::sum(g).item<float>() == 6.0f;
  std::printf("%s\n", ok ? "dist ok" : "dist wrong");
  return ok ? 0 : 1;
}
