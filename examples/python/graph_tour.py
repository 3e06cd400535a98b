"""A TensorX-style graph from Python (docs/python.md, "Layers and graphs"): layers on layers,
a layer made without input and called twice (shared weights), reuse_with, a Module, Graph.build,
summary, DOT, compile, and training the graph with Model.fit.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/graph_tour.py
"""
import numpy as np

import loom
from loom import layers as L


def main():
    loom.random.seed(0)
    # two inputs, one encoder shared by both (a siamese pair), their squared difference classified
    a, b = loom.Input(16, name="a"), loom.Input(16, name="b")
    encoder_in = loom.Input(16, name="encoder_in")
    hidden = L.Activation(L.Linear(encoder_in, n_units=32, name="enc_dense"), fn="relu", name="enc_relu")
    encoder = loom.Module([encoder_in], [L.LayerNorm(hidden, name="enc_norm")], name="encoder")
    ea = encoder.reuse_with(a, name="encode_a")
    eb = encoder.reuse_with(b, name="encode_b")
    head = L.Linear(n_units=2, name="head")  # made without input: its first call builds it
    difference = L.Subtract(ea, eb, name="difference")
    logits = head(L.Multiply(difference, difference, name="squared"))
    graph = loom.Graph.build(logits, [a, b])
    print(graph.summary())
    print(graph.to_dot().splitlines()[0], "...")

    # data: the label says whether the two vectors are close
    rng = np.random.default_rng(0)
    xa = rng.standard_normal((2048, 16)).astype(np.float32)
    close = rng.integers(0, 2, 2048)
    xb = np.where(close[:, None] == 1, xa + 0.1 * rng.standard_normal((2048, 16)), rng.standard_normal((2048, 16))).astype(np.float32)
    model = loom.Model(graph, loss="sparse_categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
    history = model.fit([xa, xb], close, epochs=5, batch_size=64, validation_split=0.2, verbose=0)
    print("val_accuracy by epoch:", [round(v, 3) for v in history["val_accuracy"]])

    plan = graph.compile(input_shapes=[(4, 16), (4, 16)])
    with loom.no_grad():
        print("plan output:", plan(xa[:4], xb[:4]).numpy().round(3).tolist())
    assert history["val_accuracy"][-1] > 0.85  # 0.927 on the machine of docs/python.md


if __name__ == "__main__":
    main()
