"""Fashion-MNIST with an MLP from the zoo, trained by Model.fit on NumPy arrays (docs/python.md).

    PYTHONPATH=build/python /usr/bin/python3 examples/python/fashion_mnist_mlp.py [--epochs N] [--data DIR]

The data are the IDX files the C++ examples read (/usr/share/datasets/fashion-mnist by default);
when they are absent the example says so and exits with status 2.
"""
import argparse
import os
import sys

import numpy as np

import loom


def load(folder, split):
    x = loom.data.read_idx(os.path.join(folder, f"{split}-images-idx3-ubyte.gz")).numpy()
    y = loom.data.read_idx(os.path.join(folder, f"{split}-labels-idx1-ubyte.gz")).numpy()
    return (x.reshape(len(x), 784) / np.float32(255)).astype(np.float32), y.astype(np.int64)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--save", default="", help="write the trained model file here")
    args = parser.parse_args()
    if not os.path.exists(os.path.join(args.data, "train-images-idx3-ubyte.gz")):
        print(f"Fashion-MNIST is not in {args.data} (train-images-idx3-ubyte.gz and the others); "
              "give its folder with --data", file=sys.stderr)
        return 2
    x, y = load(args.data, "train")
    x_test, y_test = load(args.data, "t10k")

    loom.random.seed(0)
    net = loom.zoo.mlp(784, [256, 128], 10)
    print(net.summary())
    model = loom.Model(net.graph, loss="sparse_categorical_crossentropy", optimizer=loom.optimizers.Adam(lr=1e-3),
                       metrics=["accuracy"])
    history = model.fit(x, y, epochs=args.epochs, batch_size=64, validation_split=0.1,
                        callbacks=[loom.callbacks.EarlyStopping(monitor="val_accuracy", patience=2)])
    test = model.evaluate(x_test, y_test, batch_size=500)
    print(f"test accuracy {test['accuracy']:.4f} after {len(history['loss'])} epochs")
    if args.save:
        model.save(args.save)
    return 0


if __name__ == "__main__":
    sys.exit(main())
