"""The GIL is released while Loom works on large operands (docs/python.md, "The GIL"): another
Python thread runs meanwhile. A C call that keeps the GIL lets no other thread run between its
start and its end (it never reaches the interpreter's switch points), so the main thread's loop
counts no iteration in the middle of such a call."""
import sys
import threading
import time

import loom


def iterations_during(work):
    """How many times the main thread's loop ran in the middle half of the time `work` took in
    another thread. A short switch interval keeps the moments around the call, when the
    interpreter hands the GIL over anyway, out of that middle."""
    span = {}
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)

    def worker():
        span["start"] = time.perf_counter()
        work()
        span["end"] = time.perf_counter()

    stamps = []
    thread = threading.Thread(target=worker)
    thread.start()
    while thread.is_alive():
        stamps.append(time.perf_counter())
    thread.join()
    sys.setswitchinterval(interval)
    margin = 0.25 * (span["end"] - span["start"])
    return sum(span["start"] + margin <= s <= span["end"] - margin for s in stamps)


def test_the_check_sees_a_call_that_keeps_the_gil():
    assert iterations_during(lambda: sum(range(3 * 10**7))) == 0  # builtin sum keeps the GIL


def test_a_large_matmul_lets_other_threads_run():
    a = loom.ones((1000, 1000))
    loom.matmul(a, a)  # warm: oneDNN's first call sets up
    assert iterations_during(lambda: loom.matmul(a, a)) > 100


def test_large_elementwise_ops_and_backward_let_other_threads_run():
    x = loom.ones((4_000_000,)).requires_grad_()
    assert iterations_during(lambda: loom.exp(x)) > 100
    y = loom.sum(loom.exp(x) * x)
    assert iterations_during(y.backward) > 100
