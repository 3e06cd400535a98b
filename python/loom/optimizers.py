"""Optimizers as objects, with torch.optim's hyperparameter names (include/loom/train/optimizers.h):
loom.Model(graph, loss, optimizer=loom.optimizers.Adam(lr=1e-3)). The object is a description;
the model makes the optimizer over its graph's parameters. By name: "sgd", "adam", "adamw",
"rmsprop", "adagrad" (their defaults)."""


class _Optimizer:
    _name = ""

    def __init__(self, **kwargs):
        self.kwargs = kwargs

    def _spec(self):
        return (self._name, dict(self.kwargs))

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        return f"loom.optimizers.{type(self).__name__}({args})"


class SGD(_Optimizer):
    """lr=0.01, momentum=0, dampening=0, weight_decay=0, nesterov=False"""
    _name = "sgd"


class Adam(_Optimizer):
    """lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0, amsgrad=False"""
    _name = "adam"


class AdamW(_Optimizer):
    """lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=1e-2, amsgrad=False"""
    _name = "adamw"


class RMSProp(_Optimizer):
    """lr=0.01, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False"""
    _name = "rmsprop"


class Adagrad(_Optimizer):
    """lr=0.01, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10"""
    _name = "adagrad"


RMSprop = RMSProp  # Keras' spelling
