"""Files from Python (docs/python.md, "Files"): model files written in Python load in C++ and the
other way round, safetensors dicts, state files, checkpoints that resume training exactly, ONNX
export and import."""
import os
import subprocess

import numpy as np
import pytest

import loom

PEER = os.environ.get("LOOM_PY_PEER")
needs_peer = pytest.mark.skipif(not PEER, reason="LOOM_PY_PEER (the C++ peer program; ctest python_pytest sets it) is not set")


def output(graph, x):
    with loom.no_grad():
        return graph.compile()(x).numpy()


def mlp(seed):
    loom.random.seed(seed)
    return loom.zoo.mlp(4, [8], 3)


@needs_peer
def test_a_model_saved_in_python_loads_in_cpp(tmp_path):
    net = mlp(5)
    model = loom.Model(net.graph, loss="sparse_categorical_crossentropy")
    model.save(str(tmp_path / "m.safetensors"))
    x = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    subprocess.run([PEER, "load", str(tmp_path / "m.safetensors"), str(tmp_path / "x.npy"), str(tmp_path / "y.npy")], check=True)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), output(net.graph, x))


@needs_peer
def test_a_model_saved_in_cpp_loads_in_python(tmp_path):
    path = str(tmp_path / "cpp.safetensors")
    subprocess.run([PEER, "save", path], check=True)
    graph = loom.load_model(path)
    same = mlp(3)  # the peer's seed: the same initial weights, built here
    for a, b in zip(graph.parameters(), same.graph.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    subprocess.run([PEER, "load", path, str(tmp_path / "x.npy"), str(tmp_path / "y.npy")], check=True)
    np.testing.assert_array_equal(output(graph, x), np.load(tmp_path / "y.npy"))
    model = loom.Model.load(path, loss="sparse_categorical_crossentropy", optimizer="sgd")
    np.testing.assert_array_equal(model.predict(x).numpy(), np.load(tmp_path / "y.npy"))


def test_safetensors_dicts(tmp_path):
    path = str(tmp_path / "t.safetensors")
    tensors = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "ids": np.array([1, -2], np.int64),
               "mask": np.array([True, False]), "t": loom.ones((2,), dtype=loom.float64)}
    loom.io.save_safetensors(path, tensors, metadata={"who": "python"})
    back = loom.io.load_safetensors(path)
    assert set(back) == set(tensors)
    for k, v in tensors.items():
        got = back[k].numpy()
        want = np.asarray(v)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    assert loom.io.load_safetensors_metadata(path) == {"who": "python"}
    with pytest.raises(loom.IOError):
        (tmp_path / "bad.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{nope")
        loom.io.load_safetensors(str(tmp_path / "bad.safetensors"))


def test_state_files_and_graph_state(tmp_path):
    a, b = mlp(1), mlp(2)
    loom.io.save_state(str(tmp_path / "s.safetensors"), a.graph, extra={"step": np.array([7])}, metadata={"note": "x"})
    extra, meta = loom.io.load_state(str(tmp_path / "s.safetensors"), b.graph)
    assert extra["step"].tolist() == [7] and meta == {"note": "x"}
    x = np.ones((2, 4), np.float32)
    np.testing.assert_array_equal(output(a.graph, x), output(b.graph, x))
    state = loom.io.graph_state(b.graph)
    assert len(state) == 4
    with pytest.raises(loom.ValueError):
        loom.io.load_graph_state(b.graph, {k: v for k, v in list(state.items())[1:]})  # one missing: refused


def test_a_checkpoint_resumes_training_exactly(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((96, 4)).astype(np.float32)
    y = rng.integers(0, 3, 96)

    def model(seed):
        return loom.Model(mlp(seed).graph, loss="sparse_categorical_crossentropy", optimizer="adam", metrics=["accuracy"])

    first = model(1)
    first.fit(x, y, epochs=1, batch_size=16, verbose=0)
    first.save_checkpoint(str(tmp_path / "c.safetensors"))
    straight = first.fit(x, y, epochs=1, batch_size=16, verbose=0)
    resumed = model(9)  # other initial weights, all replaced by the checkpoint's
    resumed.load_checkpoint(str(tmp_path / "c.safetensors"))
    assert resumed.epochs_done == 1
    again = resumed.fit(x, y, epochs=1, batch_size=16, verbose=0)
    assert again["loss"][-1] == straight["loss"][-1]


def test_onnx_export_and_import(tmp_path):
    net = mlp(4)
    path = str(tmp_path / "m.onnx")
    loom.io.export_onnx(net.graph, path)
    graph = loom.io.import_onnx(path)
    x = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(output(graph, x), output(net.graph, x), rtol=1e-5, atol=1e-6)
