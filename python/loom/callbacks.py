"""Callbacks of Model.fit (docs/python.md, "Training").

A Python callback has Keras' hooks, each optional: on_train_begin(logs), on_train_end(logs),
on_epoch_begin(epoch, logs), on_epoch_end(epoch, logs), on_train_batch_begin(batch, logs),
on_train_batch_end(batch, logs) (Callback's defaults call on_batch_begin / on_batch_end, as
Keras'). `logs` are Keras' keys: "loss", the metrics, and at epoch end "val_loss",
"val_<metric>" and "lr". Epochs and batches count from 0. `self.model` is the loom.Model;
`self.model.stop_training = True` stops fit after the current batch. An exception raised in a
hook stops fit and reaches the caller of fit as itself.

EarlyStopping, ModelCheckpoint, CSVLogger, JSONLinesLogger, TerminateOnNaN, ReduceLROnPlateau and
LearningRateScheduler with a loom.schedules object are Loom's own (C++, no call into Python).
"""
import weakref

from . import _core


class Callback:
    """Keras' base class: every hook does nothing."""

    def __init__(self):
        self.model = None
        self.params = {}

    def set_model(self, model):
        self.model = model

    def set_params(self, params):
        self.params = params

    def on_train_begin(self, logs=None):
        pass

    def on_train_end(self, logs=None):
        pass

    def on_epoch_begin(self, epoch, logs=None):
        pass

    def on_epoch_end(self, epoch, logs=None):
        pass

    def on_batch_begin(self, batch, logs=None):
        pass

    def on_batch_end(self, batch, logs=None):
        pass

    def on_train_batch_begin(self, batch, logs=None):
        self.on_batch_begin(batch, logs)

    def on_train_batch_end(self, batch, logs=None):
        self.on_batch_end(batch, logs)


class LambdaCallback(Callback):
    """Keras' LambdaCallback: functions for some hooks, by Keras' argument names."""

    def __init__(self, on_epoch_begin=None, on_epoch_end=None, on_batch_begin=None, on_batch_end=None,
                 on_train_begin=None, on_train_end=None):
        super().__init__()
        for hook, fn in (("on_epoch_begin", on_epoch_begin), ("on_epoch_end", on_epoch_end),
                         ("on_batch_begin", on_batch_begin), ("on_batch_end", on_batch_end),
                         ("on_train_begin", on_train_begin), ("on_train_end", on_train_end)):
            if fn is not None:
                setattr(self, hook, fn)


class _Native:
    """One of Loom's C++ callbacks, made for a model on its first fit and kept (its state, such
    as EarlyStopping's wait count, lasts across fit calls of that model)."""

    def __init__(self, kind, **kwargs):
        self._kind = kind
        self._kwargs = kwargs
        # per model, dropped with it (a schedule holds the model's optimizer)
        self._made: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def _native_for(self, model):
        if model not in self._made:
            self._made[model] = _core._native_callback(self._kind, model._native, self._kwargs)
        return self._made[model]

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self._kwargs.items())
        return f"loom.callbacks.{self._kind}({args})"


def EarlyStopping(monitor="val_loss", patience=3, min_delta=0.0, mode="auto", restore_best_weights=False):
    return _Native("EarlyStopping", monitor=monitor, patience=patience, min_delta=min_delta, mode=mode,
                   restore_best_weights=restore_best_weights)


def ModelCheckpoint(filepath, last_path="", monitor="val_loss", mode="auto"):
    """Saves the model file to `filepath` when `monitor` improves; a full checkpoint to
    `last_path` after every epoch."""
    return _Native("ModelCheckpoint", filepath=filepath, last_path=last_path, monitor=monitor, mode=mode)


def CSVLogger(filename):
    return _Native("CSVLogger", filename=filename)


def JSONLinesLogger(filename):
    return _Native("JSONLinesLogger", filename=filename)


def TerminateOnNaN():
    return _Native("TerminateOnNaN")


def ReduceLROnPlateau(monitor="val_loss", factor=0.1, patience=10, mode="min", threshold=1e-4, cooldown=0, min_lr=0.0):
    return _Native("ReduceLROnPlateau", monitor=monitor, factor=factor, patience=patience, mode=mode,
                   threshold=threshold, cooldown=cooldown, min_lr=min_lr)


class _PythonSchedule(Callback):
    def __init__(self, schedule):
        super().__init__()
        self.schedule = schedule

    def on_epoch_begin(self, epoch, logs=None):
        model = self.model
        assert model is not None, "fit sets the model before it calls a hook"
        model.lr = float(self.schedule(epoch, model.lr))


def LearningRateScheduler(schedule):
    """A loom.schedules object (Loom's schedule, stepped at each epoch's end, or with
    interval="step" set for each optimizer step), or Keras' form: a function (epoch, lr) -> lr
    called at each epoch's start."""
    spec = getattr(schedule, "_spec", None)
    if spec is not None:
        return _Native("LearningRateScheduler", schedule=spec(), interval=schedule.interval)
    if callable(schedule):
        return _PythonSchedule(schedule)
    raise TypeError("LearningRateScheduler: a loom.schedules object or a function (epoch, lr) -> lr")
