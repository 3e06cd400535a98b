"""os.fork() after Loom's thread pool has run (docs/python.md, "Processes"): the child has none of
the parent's worker threads, and its parallel ops must still run (multiprocessing's "fork" start
method, a server that forks workers after loading a model)."""
import os
import signal

import numpy as np

import loom


def test_child_of_a_fork_runs_multithreaded_ops():
    previous = loom.get_num_threads()
    loom.set_num_threads(2)
    try:
        a = np.linspace(-1.0, 1.0, 1 << 20, dtype=np.float64)
        x = loom.asarray(a)
        # Large enough to be split over the pool, so that its worker exists before the fork.
        np.testing.assert_allclose((loom.exp(x) * 2.0).numpy(), np.exp(a) * 2.0)
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                # A hang (the parent's workers do not exist here) ends by SIGALRM's default action.
                signal.alarm(30)
                ok = loom.get_num_threads() == 2
                for _ in range(2):  # the first job makes the child's pool, the second reuses it
                    ok = ok and np.allclose((loom.tanh(x) + 1.0).numpy(), np.tanh(a) + 1.0)
                    ok = ok and np.isclose(float(loom.sum(x * x).numpy()), float(np.sum(a * a)), rtol=1e-12)
                status = 0 if ok else 3
            finally:
                os._exit(status)  # never back into pytest in the child
        _, status = os.waitpid(pid, 0)
        assert not os.WIFSIGNALED(status), (
            f"the child was killed by signal {os.WTERMSIG(status)} "
            f"(SIGALRM = {int(signal.SIGALRM)}: it hung in a parallel op)")
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, (
            f"the child's ops gave wrong values (exit status {os.WEXITSTATUS(status)})")
        # The parent's pool still works after the fork.
        np.testing.assert_allclose((loom.exp(x) * 2.0).numpy(), np.exp(a) * 2.0)
    finally:
        loom.set_num_threads(previous)
