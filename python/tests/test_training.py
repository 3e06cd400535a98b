"""Training from Python (docs/python.md, "Training"): Model.fit on NumPy arrays gives the history
the same C++ fit gives, bit for bit; Python callbacks with Keras' hooks and logs; an exception in
a callback arrives as itself; other Python threads run during fit; Ctrl-C stops fit within a
batch and leaves the model usable; losses, optimizers, metrics and schedules by name and as
objects; no reference cycle through a Python loss outlives the collector."""
import gc
import json
import math
import os
import signal
import subprocess
import threading
import time
import weakref

import numpy as np
import pytest

import loom

PEER = os.environ.get("LOOM_PY_PEER")
needs_peer = pytest.mark.skipif(not PEER, reason="LOOM_PY_PEER (the C++ peer program; ctest python_pytest sets it) is not set")


def data(n=200, features=20, classes=10, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, features)).astype(np.float32)
    y = rng.integers(0, classes, n).astype(np.int64)
    return x, y


def mlp_model(features=20, hidden=(32,), **kwargs):
    loom.random.seed(0)
    net = loom.zoo.mlp(features, list(hidden), 10)
    kwargs.setdefault("loss", "sparse_categorical_crossentropy")
    kwargs.setdefault("optimizer", "adam")
    kwargs.setdefault("metrics", ["accuracy"])
    return loom.Model(net.graph, **kwargs)


@needs_peer
def test_fit_gives_the_cpp_history_bit_for_bit(tmp_path):
    x, y = data()
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    subprocess.run([PEER, "fit", str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), str(tmp_path / "h.json")], check=True)
    cpp = json.loads((tmp_path / "h.json").read_text())
    # the peer's settings: seed 0 before the MLP, Adam, 3 epochs of 32, a quarter held out, shuffle seed 7
    history = mlp_model().fit(x, y, epochs=3, batch_size=32, validation_split=0.25, seed=7, verbose=0)
    assert set(history) == {"loss", "accuracy", "val_loss", "val_accuracy", "lr"}
    assert dict(history) == cpp  # float == float: the same bits
    assert history.history is history and history.epoch == [0, 1, 2]


FASHION = "/usr/share/datasets/fashion-mnist"


@needs_peer
@pytest.mark.skipif(not os.path.exists(os.path.join(FASHION, "train-images-idx3-ubyte.gz")),
                    reason="Fashion-MNIST is not in " + FASHION)
def test_fashion_mnist_fit_gives_the_cpp_history_bit_for_bit(tmp_path):
    # The first 4,000 training images as examples/python/fashion_mnist_mlp.py reads them: the
    # MLP (784-32-10) trained from Python and by the C++ peer, with the same seeds and threads.
    images = loom.data.read_idx(os.path.join(FASHION, "train-images-idx3-ubyte.gz")).numpy()[:4000]
    labels = loom.data.read_idx(os.path.join(FASHION, "train-labels-idx1-ubyte.gz")).numpy()[:4000]
    x = (images.reshape(len(images), 784) / np.float32(255)).astype(np.float32)
    y = labels.astype(np.int64)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    subprocess.run([PEER, "fit", str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), str(tmp_path / "h.json")], check=True)
    cpp = json.loads((tmp_path / "h.json").read_text())
    history = mlp_model(features=784).fit(x, y, epochs=3, batch_size=32, validation_split=0.25, seed=7, verbose=0)
    assert dict(history) == cpp
    assert history["val_accuracy"][-1] > 0.6  # it learned: a real run, not a degenerate one


def test_keras_hooks_and_logs():
    calls = []

    class Recorder(loom.callbacks.Callback):
        def on_train_begin(self, logs=None):
            calls.append(("train_begin",))

        def on_epoch_begin(self, epoch, logs=None):
            calls.append(("epoch_begin", epoch))

        def on_batch_end(self, batch, logs=None):  # reached through on_train_batch_end, as in Keras
            calls.append(("batch_end", batch, sorted(logs)))

        def on_epoch_end(self, epoch, logs=None):
            calls.append(("epoch_end", epoch, sorted(logs)))
            assert self.model is model

        def on_train_end(self, logs=None):
            calls.append(("train_end", sorted(logs)))

    x, y = data(n=64)
    model = mlp_model()
    history = model.fit(x, y, epochs=2, batch_size=16, validation_split=0.25, callbacks=[Recorder()], verbose=0)
    epoch_keys = ["accuracy", "loss", "lr", "val_accuracy", "val_loss"]
    want = [("train_begin",)]
    for e in range(2):
        want += [("epoch_begin", e)] + [("batch_end", b, ["accuracy", "loss"]) for b in range(3)] + [("epoch_end", e, epoch_keys)]
    want.append(("train_end", epoch_keys))
    assert calls == want
    assert {k: len(v) for k, v in history.items()} == {k: 2 for k in epoch_keys}
    assert model.history == history and model.epochs_done == 2


def test_stop_training_from_a_callback_stops_after_the_batch():
    class Stop(loom.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 2:
                self.model.stop_training = True

    x, y = data(n=128)
    model = mlp_model()
    model.fit(x, y, epochs=5, batch_size=16, callbacks=[Stop()], verbose=0)
    assert model.steps == 3 and model.epochs_done == 0


def test_an_exception_in_a_callback_arrives_as_itself_and_the_model_stays_usable():
    class Boom(Exception):
        pass

    raised = Boom("from the callback")

    def explode(batch, logs):
        if batch == 1:
            raise raised

    x, y = data(n=96)
    model = mlp_model()
    with pytest.raises(Boom) as info:
        model.fit(x, y, epochs=2, batch_size=16, callbacks=[loom.callbacks.LambdaCallback(on_batch_end=explode)], verbose=0)
    assert info.value is raised
    assert model.steps == 2
    history = model.fit(x, y, epochs=1, batch_size=16, verbose=0)  # trains on
    assert len(history["loss"]) == 1 and np.isfinite(history["loss"][0])
    assert model.predict(x[:5]).shape == (5, 10)


def test_another_python_thread_runs_during_fit():
    x, y = data(n=4096, features=256)
    model = mlp_model(features=256, hidden=(512, 512))
    ticks = []
    span = {}
    done = threading.Event()

    def count():
        while not done.is_set():
            ticks.append(time.perf_counter())

    thread = threading.Thread(target=count)
    thread.start()
    try:
        span["start"] = time.perf_counter()
        model.fit(x, y, epochs=1, batch_size=64, verbose=0)
        span["end"] = time.perf_counter()
    finally:
        done.set()
        thread.join()
    margin = 0.25 * (span["end"] - span["start"])
    assert sum(span["start"] + margin <= t <= span["end"] - margin for t in ticks) > 100


def test_ctrl_c_stops_fit_within_a_batch_and_leaves_the_model_usable():
    x, y = data(n=256)
    model = mlp_model()
    main = threading.main_thread().ident
    seen = {}

    def interrupt():
        signal.pthread_kill(main, signal.SIGINT)
        seen["steps"] = model.steps  # the signal is pending from here on

    timer = threading.Timer(0.3, interrupt)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        model.fit(x, y, epochs=10_000, batch_size=16, verbose=0)
    timer.join()
    assert seen["steps"] > 0
    assert model.steps - seen["steps"] <= 1  # the batch running when it came, no more
    assert model.epochs_done < 10_000
    history = model.fit(x, y, epochs=1, batch_size=16, verbose=0)  # usable: trains on
    assert np.isfinite(history["loss"][-1])


def test_objects_for_loss_optimizer_metrics_and_schedules():
    x, y = data(n=96)
    model = mlp_model(loss=loom.losses.sparse_categorical_crossentropy, optimizer=loom.optimizers.SGD(lr=0.1, momentum=0.9),
                      metrics=[loom.metrics.Accuracy(), loom.metrics.TopKAccuracy(k=3), "sparse_top_k_categorical_accuracy"])
    sched = loom.callbacks.LearningRateScheduler(loom.schedules.StepLR(step_size=1, gamma=0.5))
    history = model.fit(x, y, epochs=3, batch_size=32, callbacks=[sched], verbose=0)
    assert history["lr"] == [0.1, 0.05, 0.025]
    assert {"accuracy", "top3_accuracy", "top5_accuracy"} <= set(history)
    assert model.evaluate(x, y).keys() == {"loss", "accuracy", "top3_accuracy", "top5_accuracy"}
    # Keras' function form of a schedule: (epoch, lr) -> lr at each epoch's start; epochs count
    # from the model's first (this fit's are 3 and 4), as fit's callbacks see them
    model.fit(x, y, epochs=2, batch_size=32, callbacks=[loom.callbacks.LearningRateScheduler(lambda epoch, lr: 0.5 / (epoch + 1))],
              verbose=0)
    assert model.history["lr"][3:] == [0.5 / 4, 0.5 / 5]
    # a loss object is a function too
    p = loom.asarray(np.eye(3, dtype=np.float32))
    assert abs(loom.losses.mse(p, p).tolist()) == 0.0
    with pytest.raises(loom.ValueError, match="unknown argument 'learning_rate'.*lr"):
        mlp_model(optimizer=loom.optimizers.Adam(learning_rate=1e-3))
    with pytest.raises(ValueError, match="unknown loss 'msee'"):
        loom.losses.Loss("msee")
    with pytest.raises(loom.ValueError, match="sparse_categorical_crossentropy"):
        mlp_model(loss="no_such_loss")


def _cosine(base, eta_min, t_max, e):
    # CosineAnnealingLR::lr_at's expression, in its order of operations (the same bits)
    return eta_min + (base - eta_min) * (1.0 + math.cos(math.pi * e / t_max)) / 2.0


def _warmup_cosine(base, start_factor, warmup, t_max, eta_min, e):
    # LinearWarmup::lr_at with a CosineAnnealingLR after it
    if e < warmup:
        return base * (start_factor + (1.0 - start_factor) * e / warmup)
    return _cosine(base, eta_min, t_max, e - warmup)


class _LrSeen(loom.callbacks.Callback):
    """The optimizer's lr at each batch's start: the rate that batch's update uses."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def on_train_batch_begin(self, batch, logs=None):
        self.seen.append(self.model.lr)


def test_a_schedule_as_the_learning_rate_steps_per_batch_as_the_cpp_schedule():
    # Keras' learning_rate=schedule: a warmup chained with a cosine, stepped after every batch
    # (interval="step"); 96 samples in batches of 32 are 3 steps an epoch, 4 epochs 12 steps.
    x, y = data(n=96)
    sched = loom.schedules.LinearWarmup(warmup_steps=4, start_factor=0.25, base_lr=0.02, interval="step",
                                        after=loom.schedules.CosineAnnealingLR(t_max=6, eta_min=0.001))
    model = mlp_model(optimizer=loom.optimizers.Adam(lr=sched))
    assert model.lr == 0.02 * 0.25  # the schedule's step 0, set when the model is made
    seen = _LrSeen()
    history = model.fit(x, y, epochs=4, batch_size=32, shuffle=False, callbacks=[seen], verbose=0)
    expected = [_warmup_cosine(0.02, 0.25, 4, 6, 0.001, step) for step in range(12)]
    assert seen.seen == expected
    # the epoch's "lr" is the rate of its last batch (the schedule steps after the callbacks' hooks)
    assert history["lr"] == [expected[2], expected[5], expected[8], expected[11]]
    # a second fit goes on with the model's schedule
    seen.seen.clear()
    model.fit(x, y, epochs=1, batch_size=32, shuffle=False, callbacks=[seen], verbose=0)
    assert seen.seen == [_warmup_cosine(0.02, 0.25, 4, 6, 0.001, step) for step in range(12, 15)]


@pytest.mark.parametrize("optimizer", ["SGD", "Adam", "AdamW", "RMSProp", "Adagrad"])
def test_a_schedule_as_the_learning_rate_is_the_scheduler_callback(optimizer):
    # Every optimizer takes a schedule as lr; stepped per epoch (the default interval), the fit
    # is the same fit, bit for bit, as the optimizer's lr with LearningRateScheduler(schedule).
    x, y = data(n=96)
    opt = getattr(loom.optimizers, optimizer)
    by_lr = mlp_model(optimizer=opt(lr=loom.schedules.CosineAnnealingLR(t_max=3, eta_min=0.001, base_lr=0.05)))
    h_lr = by_lr.fit(x, y, epochs=4, batch_size=32, seed=3, verbose=0)
    by_callback = mlp_model(optimizer=opt(lr=0.05))
    h_cb = by_callback.fit(x, y, epochs=4, batch_size=32, seed=3, verbose=0,
                           callbacks=[loom.callbacks.LearningRateScheduler(loom.schedules.CosineAnnealingLR(t_max=3, eta_min=0.001))])
    assert h_lr["lr"] == [_cosine(0.05, 0.001, 3, e) for e in range(4)]
    assert dict(h_lr) == dict(h_cb)
    # per step too: the callback form with interval="step" is the same fit
    sched = loom.schedules.StepLR(step_size=2, gamma=0.5, interval="step")
    h_step = mlp_model(optimizer=opt(lr=sched)).fit(x, y, epochs=2, batch_size=32, seed=3, verbose=0)
    default_lr = mlp_model(optimizer=opt()).lr  # no base_lr: the optimizer's default lr
    h_step_cb = mlp_model(optimizer=opt()).fit(x, y, epochs=2, batch_size=32, seed=3, verbose=0,
                                              callbacks=[loom.callbacks.LearningRateScheduler(sched)])
    assert dict(h_step) == dict(h_step_cb)
    assert h_step["lr"] == [default_lr * 0.5 ** (2 // 2), default_lr * 0.5 ** (5 // 2)]


def test_a_schedule_as_the_learning_rate_checks_its_arguments():
    with pytest.raises(loom.ValueError, match="interval 'batch'.*'epoch', 'step'"):
        loom.schedules.StepLR(step_size=1, interval="batch")
    with pytest.raises(loom.ValueError, match="t_max must be >= 1"):
        mlp_model(optimizer=loom.optimizers.SGD(lr=loom.schedules.CosineAnnealingLR(t_max=0)))
    with pytest.raises(loom.ValueError, match="base_lr and interval.*LinearWarmup"):
        loom.schedules.LinearWarmup(warmup_steps=2, after=loom.schedules.ExponentialLR(gamma=0.9, base_lr=0.1))
    with pytest.raises(TypeError, match="after.*loom.schedules"):
        loom.schedules.LinearWarmup(warmup_steps=2, after=0.5)
    with pytest.raises(loom.ValueError, match="TrainStep.*schedule"):
        loom.TrainStep(loom.zoo.mlp(4, [4], 2).graph, "mse", loom.optimizers.SGD(lr=loom.schedules.ExponentialLR(gamma=0.9)))


def test_native_callbacks(tmp_path):
    x, y = data(n=96)
    model = mlp_model(optimizer=loom.optimizers.SGD(lr=0.0))  # nothing improves
    stop = loom.callbacks.EarlyStopping(monitor="val_loss", patience=1)
    log = tmp_path / "log.csv"
    best = tmp_path / "best.safetensors"
    model.fit(x, y, epochs=20, batch_size=32, validation_split=0.25, verbose=0,
              callbacks=[stop, loom.callbacks.CSVLogger(str(log)), loom.callbacks.ModelCheckpoint(str(best))])
    assert model.epochs_done == 2  # the first epoch sets the best; the second does not improve it
    assert log.read_text().splitlines()[0].split(",")[:2] == ["epoch", "accuracy"]
    assert best.exists()


def test_a_python_loss_and_metric_and_no_cycle_left_to_the_collector():
    x, y = data(n=64)

    class Loss:
        """A loss that refers to its model: model -> _Model -> this loss -> model, a cycle
        through the Python callable the _Model stores."""

        def __init__(self):
            self.model = None
            self.calls = 0

        def __call__(self, prediction, target):
            self.calls += 1
            assert self.model.epochs_done == 0
            return loom.cross_entropy(prediction, target)

    def mean_logit(prediction, target):
        return float(loom.mean(prediction).tolist())

    loss = Loss()
    model = mlp_model(loss=loss, metrics=[mean_logit])
    loss.model = model
    native = weakref.ref(model._native)
    history = model.fit(x, y, epochs=1, batch_size=32, verbose=0)
    assert loss.calls == 2 and "mean_logit" in history
    # the same training with the named loss gives the same losses: the Python loss was used
    named = mlp_model().fit(x, y, epochs=1, batch_size=32, verbose=0)
    np.testing.assert_allclose(history["loss"], named["loss"], rtol=1e-6)
    del model, loss
    gc.collect()
    assert native() is None  # _Model's tp_traverse showed the loss to the collector, tp_clear broke the cycle


def test_loaders_and_validation_data_give_the_arrays_history():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((100, 20)).astype(np.float32)
    y = rng.integers(0, 10, 100)
    split = mlp_model().fit(x, y, epochs=2, batch_size=16, seed=7, validation_split=0.2, verbose=0)
    given = mlp_model().fit(x[:80], y[:80], epochs=2, batch_size=16, seed=7, validation_data=(x[80:], y[80:]), verbose=0)
    train = loom.data.DataLoader(loom.data.TensorDataset(x[:80], y[:80]), batch_size=16, shuffle=True, seed=7)
    val = loom.data.DataLoader(loom.data.TensorDataset(x[80:], y[80:]), batch_size=16)
    model = mlp_model()
    loaded = model.fit(train, epochs=2, validation_data=val, verbose=0)
    assert dict(split) == dict(given) == dict(loaded)  # fit(x, y) batches as that loader does
    assert model.evaluate(val) == {"loss": loaded["val_loss"][-1], "accuracy": loaded["val_accuracy"][-1]}
    assert len(train) == 5 and train.position == (2, 0)
    batches = list(train)  # one epoch
    assert len(batches) == 5 and [t.shape for t in batches[0]] == [(16, 20), (16,)]
    with pytest.raises(TypeError, match="y must be None"):
        model.fit(train, y, verbose=0)


def test_a_train_step_by_hand_takes_fits_steps():
    x, y = data(n=64)
    seen = []
    recorder = loom.callbacks.LambdaCallback(on_batch_end=lambda batch, logs: seen.append(logs["loss"]))
    mlp_model().fit(x, y, epochs=1, batch_size=16, shuffle=False, callbacks=[recorder], verbose=0)
    loom.random.seed(0)
    net = loom.zoo.mlp(20, [32], 10)
    step = loom.TrainStep(net.graph, loom.losses.sparse_categorical_crossentropy, loom.optimizers.Adam())
    losses = [step(x[i:i + 16], y[i:i + 16]).tolist() for i in range(0, 64, 16)]
    assert step.steps == 4 and step.lr == 1e-3
    assert losses[0] == seen[0]  # the same first step, bit for bit
    np.testing.assert_allclose(np.cumsum(losses) / np.arange(1, 5), seen, rtol=1e-12)  # fit logs the running mean


def test_an_exception_in_a_python_loss_arrives_as_itself():
    x, y = data(n=64)
    raised = ZeroDivisionError("in the loss")
    calls = []

    def loss(prediction, target):
        calls.append(1)
        if len(calls) == 2:
            raise raised
        return loom.cross_entropy(prediction, target)

    model = mlp_model(loss=loss)
    with pytest.raises(ZeroDivisionError) as info:
        model.fit(x, y, epochs=1, batch_size=16, verbose=0)
    assert info.value is raised and model.steps == 1
    assert model.predict(x[:2]).shape == (2, 10)
    history = model.fit(x, y, epochs=1, batch_size=16, verbose=0)  # the step trains on after it
    assert np.isfinite(history["loss"][0]) and model.steps == 5


def test_the_progress_bar_draws_on_standard_output(capfd):
    x, y = data(n=64)
    mlp_model().fit(x, y, epochs=2, batch_size=16, validation_split=0.25, verbose=1)
    out = capfd.readouterr().out  # the C++ bar writes to file descriptor 1
    assert "Epoch 1/2" in out and "Epoch 2/2" in out and "val_accuracy" in out
    mlp_model().fit(x, y, epochs=1, batch_size=16, verbose=0)
    assert "Epoch" not in capfd.readouterr().out


def test_fit_on_another_thread():
    x, y = data(n=64)
    results = {}

    def train():
        results["history"] = mlp_model().fit(x, y, epochs=2, batch_size=16, verbose=0)

    thread = threading.Thread(target=train)
    thread.start()
    thread.join()
    same = mlp_model().fit(x, y, epochs=2, batch_size=16, verbose=0)
    assert dict(results["history"]) == dict(same)


@pytest.mark.parametrize("name, kwargs, torch_name, torch_kwargs", [
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True}, "SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
    ("Adam", {"lr": 0.01, "weight_decay": 0.1}, "Adam", {"lr": 0.01, "weight_decay": 0.1}),
    ("AdamW", {"lr": 0.01, "amsgrad": True}, "AdamW", {"lr": 0.01, "amsgrad": True}),
    ("RMSProp", {"lr": 0.01, "momentum": 0.5, "centered": True}, "RMSprop", {"lr": 0.01, "momentum": 0.5, "centered": True}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.01}, "Adagrad", {"lr": 0.1, "lr_decay": 0.01}),
])
def test_an_optimizer_over_tensors_steps_as_torch_optim(name, kwargs, torch_name, torch_kwargs):
    # A training step written by hand: loom.optimizers.X(tensors, ...) updates them as
    # torch.optim.X does the same tensors from the same gradients.
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 4))
    y = rng.standard_normal((8, 2))
    w0 = rng.standard_normal((4, 2))
    b0 = rng.standard_normal(2)
    w = loom.tensor(w0).requires_grad_()
    b = loom.tensor(b0).requires_grad_()
    opt = getattr(loom.optimizers, name)([w, b], **kwargs)
    tw = torch.tensor(w0, requires_grad=True)
    tb = torch.tensor(b0, requires_grad=True)
    topt = getattr(torch.optim, torch_name)([tw, tb], **torch_kwargs)
    for _ in range(4):
        (((loom.tensor(x) @ w + b) - loom.tensor(y)) ** 2).mean().backward()
        opt.step()
        opt.zero_grad()
        (((torch.tensor(x) @ tw + tb) - torch.tensor(y)) ** 2).mean().backward()
        topt.step()
        topt.zero_grad()
        assert w.grad is None
    np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(b.detach().numpy(), tb.detach().numpy(), rtol=1e-12, atol=1e-12)
    assert opt.steps == 4
    opt.lr = 0.5
    assert opt.lr == 0.5


def test_an_optimizer_description_refuses_to_step():
    with pytest.raises(loom.ValueError, match="description"):
        loom.optimizers.Adam(lr=0.1).step()
    with pytest.raises(loom.ValueError, match="schedule"):
        loom.optimizers.SGD([loom.ones((2,)).requires_grad_()], lr=loom.schedules.StepLR(2, 0.5))
    with pytest.raises(loom.ValueError, match="unknown argument 'betas'"):
        loom.optimizers.Adam([loom.ones((2,)).requires_grad_()], betas=(0.9, 0.99))
