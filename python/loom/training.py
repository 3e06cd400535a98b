"""loom.Model: a graph with a loss, an optimizer and metrics, trained by fit on NumPy arrays
(docs/python.md, "Training"), over train::Model."""
from __future__ import annotations

import typing
from collections.abc import Callable, Sequence

from . import _core
from . import callbacks as _callbacks
from . import schedules as _schedules

if typing.TYPE_CHECKING:  # the stubs' aliases (python/stubs.pat) exist for the type checker only
    from ._core import ArrayLike, Graph, Tensor
    from ._core.data import DataLoader
    from ._core.zoo import Network
    from .metrics import _Metric
    from .optimizers import _Optimizer

    LossArg = str | Callable[[Tensor, Tensor], Tensor]  # a name, a loom.losses object, a function
    MetricArg = str | _Metric | Callable[[Tensor, Tensor], float]
    CallbackArg = _callbacks.Callback | _callbacks._Native


class History(dict[str, list[float]]):
    """What fit returns: a dict of lists, one value per epoch ("loss", "accuracy", "val_loss",
    "val_accuracy", "lr"), over every epoch the model trained. As Keras' History object, it is
    also `.history` (itself) and `.epoch`."""

    @property
    def history(self) -> History:
        return self

    @property
    def epoch(self) -> list[int]:
        return list(range(max((len(v) for v in self.values()), default=0)))


def _loss_arg(loss):
    if isinstance(loss, str):
        return loss
    name = getattr(loss, "_loom_name", None)
    if name is not None:
        return name  # a loom.losses object: Loom's own loss, no call into Python per step
    if callable(loss):
        return loss
    raise TypeError("loom.Model: loss is a name ('sparse_categorical_crossentropy', ...), a loom.losses object "
                    "or a function (prediction, target) -> Tensor")


def _optimizer_arg(optimizer):
    """The optimizer's name or (name, kwargs), and the schedule given as its lr (or None)."""
    if isinstance(optimizer, str):
        return optimizer, None
    spec = getattr(optimizer, "_spec", None)
    if spec is None:
        raise TypeError("loom.Model: optimizer is a name ('adam', 'sgd', ...) or a loom.optimizers object")
    name, kwargs = spec()
    schedule = kwargs.get("lr")
    if not isinstance(schedule, _schedules._Schedule):
        return (name, kwargs), None
    # Keras' learning_rate=schedule: the optimizer is made with the schedule's base rate (or its
    # default lr), and the schedule, made over it, sets its rate from then on
    del kwargs["lr"]
    return (name, kwargs), schedule


def _metric_arg(metric):
    spec = getattr(metric, "_spec", None)
    return spec() if spec is not None else metric


class Model:
    """model = loom.Model(graph, loss="sparse_categorical_crossentropy", optimizer="adam",
    metrics=["accuracy"]); history = model.fit(x, y, epochs=5, batch_size=64, validation_split=0.1).

    `graph` is a loom.Graph (or a loom.zoo network). `loss`, `optimizer` and each metric are
    names (Keras') or objects of loom.losses, loom.optimizers, loom.metrics; a loss may also be a
    Python function (prediction, target) -> Tensor and a metric a function -> float (called with
    the GIL taken back, each step)."""

    def __init__(self, graph: Graph | Network, loss: LossArg, optimizer: str | _Optimizer = "adam",
                 metrics: Sequence[MetricArg] | None = None) -> None:
        opt, schedule = _optimizer_arg(optimizer)
        self._native = _core._Model(graph, _loss_arg(loss), opt, None if metrics is None else [_metric_arg(m) for m in metrics])
        self._stop_training = False
        # the schedule given as the optimizer's lr: Loom's callback over this model's optimizer,
        # made now (the model's lr is the schedule's step 0 at once) and run by every fit
        self._schedule = None
        self._schedule_first = False
        if schedule is not None:
            self._schedule = _core._native_callback("LearningRateScheduler", self._native,
                                                    {"schedule": schedule._spec(), "interval": schedule.interval})
            self._schedule_first = schedule.interval == "step"

    @classmethod
    def load(cls, path: str, loss: LossArg, optimizer: str | _Optimizer = "adam",
             metrics: Sequence[MetricArg] | None = None) -> Model:
        """A model from a file save() (or loom.io.save_model, or C++'s io::save_model) wrote."""
        return cls(_core.io.load_model(path), loss, optimizer, metrics)

    def fit(self, x: ArrayLike | DataLoader, y: ArrayLike | None = None, epochs: int = 1, batch_size: int = 32,
            validation_split: float = 0.0, validation_data: tuple[ArrayLike, ArrayLike] | DataLoader | None = None,
            shuffle: bool = True, seed: int = 0, callbacks: Sequence[CallbackArg] | None = None, verbose: int = 1,
            progress_every: int = 100) -> History:
        """Trains on the samples (rows) of x and y: x one array per graph input (an array, or a
        list of them), y the targets; or on a loom.data.DataLoader x (y None), whose batches are
        the inputs then the target. validation_data is (x_val, y_val) or a DataLoader. Returns
        the History of every epoch the model trained. The GIL is released while it trains;
        Ctrl-C stops it after the batch running then (the model keeps that batch's update) and
        raises KeyboardInterrupt."""
        cbs = list(callbacks or [])
        natives = []
        for cb in cbs:
            if isinstance(cb, _callbacks._Native):
                natives.append(cb._native_for(self))
            else:
                if hasattr(cb, "set_model"):
                    cb.set_model(self)
                if hasattr(cb, "set_params"):
                    cb.set_params({"epochs": epochs, "batch_size": batch_size, "verbose": verbose})
                natives.append(cb)
        if self._schedule is not None:
            # per step, before the callbacks' batch hooks (they see the rate the batch trains at);
            # per epoch, after their epoch hooks (they see the rate the epoch trained at)
            if self._schedule_first:
                natives.insert(0, self._schedule)
            else:
                natives.append(self._schedule)
        validation = self._validation_loader(validation_data, batch_size)
        if isinstance(x, _core.data.DataLoader):
            if y is not None:
                raise TypeError("loom.Model.fit: with a DataLoader the targets are its batches' last field; y must be None")
        elif y is None:
            raise TypeError("loom.Model.fit: give the targets y (or a loom.data.DataLoader as x)")
        self._stop_training = False
        series = self._native._fit(x, y, int(epochs), int(batch_size), float(validation_split), bool(shuffle), int(seed),
                                   natives, bool(verbose), int(progress_every), validation)
        return History(series)

    @staticmethod
    def _validation_loader(validation_data: tuple[ArrayLike, ArrayLike] | DataLoader | None,
                           batch_size: int) -> DataLoader | None:
        if validation_data is None or isinstance(validation_data, _core.data.DataLoader):
            return validation_data
        xv, yv = validation_data
        fields = list(xv) if isinstance(xv, (list, tuple)) else [xv]
        return _core.data.DataLoader(_core.data.TensorDataset(*fields, yv), batch_size=int(batch_size))

    def evaluate(self, x: ArrayLike | DataLoader, y: ArrayLike | None = None, batch_size: int = 32) -> dict[str, float]:
        """{"loss": ..., metric: ...} over the samples (or a DataLoader's batches), in Eval mode."""
        if isinstance(x, _core.data.DataLoader):
            return self._native._evaluate_loader(x)
        if y is None:
            raise TypeError("loom.Model.evaluate: give the targets y (or a loom.data.DataLoader as x)")
        return self._native.evaluate(x, y, batch_size)

    def predict(self, x: ArrayLike, batch_size: int = 256) -> Tensor:
        return self._native.predict(x, batch_size)

    def save(self, path: str) -> None:
        self._native.save(path)

    def save_checkpoint(self, path: str) -> None:
        self._native.save_checkpoint(path)

    def load_checkpoint(self, path: str) -> None:
        self._native.load_checkpoint(path)

    def summary(self) -> str:
        return self._native.summary()

    @property
    def stop_training(self) -> bool:
        """Set it to True in a callback (Keras' idiom) to stop fit after the current batch."""
        return self._stop_training

    @stop_training.setter
    def stop_training(self, value: bool) -> None:
        self._stop_training = bool(value)
        if value:
            self._native.stop_training()

    @property
    def graph(self) -> Graph:
        return self._native.graph

    @property
    def history(self) -> History:
        return History(self._native.history)

    @property
    def epochs_done(self) -> int:
        return self._native.epochs_done

    @property
    def steps(self) -> int:
        """How many optimizer steps (batches) the model has trained."""
        return self._native.steps

    @property
    def lr(self) -> float:
        return self._native.lr

    @lr.setter
    def lr(self, value: float) -> None:
        self._native.lr = value

    def parameters(self) -> list[Tensor]:
        return self.graph.parameters()
