"""Learning-rate schedules (include/loom/train/schedules.h), stepped at each epoch's end when
given to loom.callbacks.LearningRateScheduler: StepLR(step_size, gamma=0.1), ExponentialLR(gamma),
CosineAnnealingLR(t_max, eta_min=0), LinearWarmup(warmup_steps, start_factor=1/3). The schedule
starts from the optimizer's lr when the callback is first used with a model."""


class _Schedule:
    def __init__(self, **kwargs):
        self.kwargs = kwargs

    def _spec(self):
        return (type(self).__name__, dict(self.kwargs))

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        return f"loom.schedules.{type(self).__name__}({args})"


class StepLR(_Schedule):
    def __init__(self, step_size, gamma=0.1):
        super().__init__(step_size=step_size, gamma=gamma)


class ExponentialLR(_Schedule):
    def __init__(self, gamma):
        super().__init__(gamma=gamma)


class CosineAnnealingLR(_Schedule):
    def __init__(self, t_max, eta_min=0.0):
        super().__init__(t_max=t_max, eta_min=eta_min)


class LinearWarmup(_Schedule):
    def __init__(self, warmup_steps, start_factor=1.0 / 3.0):
        super().__init__(warmup_steps=warmup_steps, start_factor=start_factor)
