#!/usr/bin/env python3
"""N training steps of one of bench/python_train.py's rows from Python, after its 3 warm-up
steps, at 1 thread, and nothing else: the Python side of an instruction count (docs/python.md,
"Training from Python"). Each side's whole process runs under callgrind at two step counts, and
the difference of the totals over the difference of the counts is one step's instructions:

    PY=$(pyenv which python3)   # the interpreter itself, not a shim (callgrind follows no exec)
    for n in 2 6; do
      PYTHONPATH=build/python valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
          $PY bench/python_steps.py step_mlp_autograd $n 2>&1 | grep Collected
      printf "step_mlp_autograd $n\\n" | valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
          build/bench/python_twin_bench --threads 1 2>&1 | grep Collected
    done

(train_mlp, train_cnn and train_ptb_lstm: their C++ side is `build/bench/train_bench --threads 1
--serve 1`.)

    python_steps.py ROW STEPS
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import loom  # noqa: E402

import python_train  # noqa: E402


def main():
    row, steps = sys.argv[1], int(sys.argv[2])
    loom.set_num_threads(1)
    python_train.loom = loom
    step = python_train.make_autograd_step() if row == "step_mlp_autograd" else python_train.make_train_step(row)
    for _ in range(3 + steps):  # the C++ sides warm up with 3 steps too
        step()


if __name__ == "__main__":
    main()
