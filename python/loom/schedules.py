"""Learning-rate schedules (include/loom/train/schedules.h): StepLR(step_size, gamma=0.1),
ExponentialLR(gamma), CosineAnnealingLR(t_max, eta_min=0), LinearWarmup(warmup_steps,
start_factor=1/3, after=None).

A schedule is given as an optimizer's learning rate, Keras' way
(`loom.optimizers.Adam(lr=loom.schedules.CosineAnnealingLR(t_max=10))`: the model steps it), or
to loom.callbacks.LearningRateScheduler. Every schedule also takes, by keyword:

- base_lr: the rate of step 0 from which the schedule computes (None: the optimizer's lr, its
  default when lr is the schedule);
- interval: "epoch" (the default; Loom's C++ LearningRateScheduler: stepped at each epoch's end,
  so epoch e trains at lr_at(e)) or "step" (Keras' learning_rate=schedule: the model's optimizer
  step k, counted over every fit of the model, trains at lr_at(k)).

LinearWarmup(after=schedule) chains: the warmup's steps, then `after` from its own step 0
(torch's SequentialLR); base_lr and interval are the warmup's.
"""
from . import _core

_INTERVALS = ("epoch", "step")


class _Schedule:
    def __init__(self, base_lr=None, interval="epoch", **kwargs):
        if interval not in _INTERVALS:
            raise _core.ValueError(f"loom.schedules.{type(self).__name__}: interval {interval!r} is not one of "
                                   + ", ".join(repr(i) for i in _INTERVALS))
        self.kwargs = kwargs
        self.base_lr = None if base_lr is None else float(base_lr)
        self.interval = interval

    def _spec(self):
        """(kind, keyword arguments) as python/src/train.cpp's make_schedule reads them."""
        kwargs = dict(self.kwargs)
        if self.base_lr is not None:
            kwargs["base_lr"] = self.base_lr
        if isinstance(kwargs.get("after"), _Schedule):
            kwargs["after"] = kwargs["after"]._spec()
        return (type(self).__name__, kwargs)

    def __repr__(self):
        args = [f"{k}={v!r}" for k, v in self.kwargs.items()]
        if self.base_lr is not None:
            args.append(f"base_lr={self.base_lr!r}")
        if self.interval != "epoch":
            args.append(f"interval={self.interval!r}")
        return f"loom.schedules.{type(self).__name__}({', '.join(args)})"


class StepLR(_Schedule):
    """base_lr * gamma^(step // step_size)."""

    def __init__(self, step_size, gamma=0.1, *, base_lr=None, interval="epoch"):
        super().__init__(base_lr, interval, step_size=step_size, gamma=gamma)


class ExponentialLR(_Schedule):
    """base_lr * gamma^step."""

    def __init__(self, gamma, *, base_lr=None, interval="epoch"):
        super().__init__(base_lr, interval, gamma=gamma)


class CosineAnnealingLR(_Schedule):
    """eta_min + (base_lr - eta_min) (1 + cos(pi step / t_max)) / 2."""

    def __init__(self, t_max, eta_min=0.0, *, base_lr=None, interval="epoch"):
        super().__init__(base_lr, interval, t_max=t_max, eta_min=eta_min)


class LinearWarmup(_Schedule):
    """From start_factor * base_lr up to base_lr over warmup_steps steps; then base_lr, or the
    schedule `after` from its step 0."""

    def __init__(self, warmup_steps, start_factor=1.0 / 3.0, after=None, *, base_lr=None, interval="epoch"):
        kwargs = {"warmup_steps": warmup_steps, "start_factor": start_factor}
        if after is not None:
            if not isinstance(after, _Schedule):
                raise TypeError("loom.schedules.LinearWarmup: after is a loom.schedules object (or None)")
            # one base rate and one clock for the chain (C++'s LinearWarmup reads its base rate
            # when `after` has been made over the same optimizer)
            if after.base_lr is not None or after.interval != "epoch":
                raise _core.ValueError("loom.schedules.LinearWarmup: give base_lr and interval to the LinearWarmup, "
                                       "not to the schedule after it")
            kwargs["after"] = after
        super().__init__(base_lr, interval, **kwargs)
