"""Metrics as objects (include/loom/train/metrics.h): Accuracy(threshold=0.5), TopKAccuracy(k=5),
MeanSquaredError(), MeanAbsoluteError(); by name, every name of names() ("accuracy", "mse",
"sparse_top_k_categorical_accuracy", "precision", ...)."""
from . import _core


class _Metric:
    def __init__(self, **kwargs):
        self.kwargs = kwargs

    def _spec(self):
        return (type(self).__name__, dict(self.kwargs))

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        return f"loom.metrics.{type(self).__name__}({args})"


class Accuracy(_Metric):
    def __init__(self, threshold=0.5):
        super().__init__(threshold=threshold)


class TopKAccuracy(_Metric):
    def __init__(self, k=5):
        super().__init__(k=k)


class MeanSquaredError(_Metric):
    pass


class MeanAbsoluteError(_Metric):
    pass


def names():
    return list(_core._metric_names())
