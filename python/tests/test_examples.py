"""The Python examples (examples/python, docs/python.md "Examples") run: the graph tour trains
its graph to its asserted accuracy; the Fashion-MNIST example, whose data are optional, says so
and exits with status 2 when they are absent (its training is the C++ MLP's, tested elsewhere)."""
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run(script, *args):
    env = dict(os.environ)
    return subprocess.run([sys.executable, str(ROOT / "examples" / "python" / script), *args], env=env,
                          capture_output=True, text=True, timeout=300)


def test_graph_tour_runs():
    done = run("graph_tour.py")
    assert done.returncode == 0, done.stderr
    assert "Total params" in done.stdout and "val_accuracy by epoch" in done.stdout


def test_fashion_mnist_example_says_when_the_data_are_absent(tmp_path):
    done = run("fashion_mnist_mlp.py", "--data", str(tmp_path))
    assert done.returncode == 2
    assert "Fashion-MNIST is not in" in done.stderr and "--data" in done.stderr
