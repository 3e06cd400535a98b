"""Optimizers as objects, with torch.optim's hyperparameter names (include/loom/train/optimizers.h).

Without tensors the object is a description, and the model makes the optimizer over its graph's
parameters: loom.Model(graph, loss, optimizer=loom.optimizers.Adam(lr=1e-3)). By name: "sgd",
"adam", "adamw", "rmsprop", "adagrad" (their defaults). Given tensors first, as torch.optim's
are, it updates them: opt = loom.optimizers.Adam([w, b], lr=1e-3); ... loss.backward();
opt.step(); opt.zero_grad()."""
from . import _core
from .schedules import _Schedule


class _Optimizer:
    _name = ""

    def __init__(self, params=None, **kwargs):
        self.kwargs = kwargs
        self._native = None
        if params is not None:
            if isinstance(kwargs.get("lr"), _Schedule):
                raise _core.ValueError(
                    f"loom.optimizers.{type(self).__name__}(params, lr=schedule): a schedule as lr is stepped by "
                    "loom.Model; over tensors, set opt.lr yourself (or give the schedule to a Model)")
            self._native = _core._param_optimizer(self._name, dict(kwargs), list(params))

    def _spec(self):
        return (self._name, dict(self.kwargs))

    def _over_tensors(self, what):
        if self._native is None:
            raise _core.ValueError(
                f"loom.optimizers.{type(self).__name__}.{what}: this optimizer is a description (made without "
                "tensors); give the tensors first, loom.optimizers." + type(self).__name__ + "([w, b], lr=...), "
                "or give it to loom.Model")
        return self._native

    def step(self):
        """One update of every tensor that has a gradient (the tensors given first)."""
        self._over_tensors("step()").step()

    def zero_grad(self):
        """Drops every tensor's gradient (grad becomes None), as torch's zero_grad(set_to_none=True)."""
        self._over_tensors("zero_grad()").zero_grad()

    @property
    def lr(self):
        """The learning rate; settable on an optimizer over tensors."""
        return self._native.lr if self._native is not None else self.kwargs.get("lr")

    @lr.setter
    def lr(self, value):
        self._over_tensors("lr").lr = value

    @property
    def steps(self):
        """Updates taken (0 for a description)."""
        return self._native.steps if self._native is not None else 0

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
