import loom._core


class Generator:
    """
    A counter-based stream: the same seed draws the same values at any thread count.
    """

    def __init__(self, seed: int = 0) -> None: ...

    @property
    def seed(self) -> int:
        """The seed the generator was made with."""

    @property
    def counter(self) -> int:
        """How many draws the generator has made: with the seed, its state."""

    def set_state(self, seed: int, counter: int) -> None:
        """
        Puts the generator at (seed, counter), as saved from its seed and counter properties.
        """

def seed(seed: int) -> None:
    """Resets the process-wide stream."""

def default_rng(seed: int = 0) -> Generator:
    """A new Generator(seed), as numpy.random.default_rng."""

def uniform(low: float = 0.0, high: float = 1.0, size: loom._core.ShapeLike | None = None, dtype: loom._core.DTypeLike | None = None, generator: Generator | None = None) -> loom._core.Tensor:
    """
    Values drawn uniformly from [low, high) of shape size (None: one value), float32 unless dtype says.
    """

def random(size: loom._core.ShapeLike | None = None, dtype: loom._core.DTypeLike | None = None, generator: Generator | None = None) -> loom._core.Tensor:
    """Values drawn uniformly from [0, 1) of shape size (None: one value)."""

def normal(loc: float = 0.0, scale: float = 1.0, size: loom._core.ShapeLike | None = None, dtype: loom._core.DTypeLike | None = None, generator: Generator | None = None) -> loom._core.Tensor:
    """
    Values drawn from the normal distribution N(loc, scale**2) of shape size (None: one value).
    """

def standard_normal(size: loom._core.ShapeLike | None = None, dtype: loom._core.DTypeLike | None = None, generator: Generator | None = None) -> loom._core.Tensor:
    """Values drawn from N(0, 1) of shape size (None: one value)."""

def integers(low: int, high: int | None = None, size: loom._core.ShapeLike | None = None, dtype: loom._core.DTypeLike | None = None, generator: Generator | None = None) -> loom._core.Tensor:
    """Integers in [low, high)."""

def bernoulli(p: float, size: loom._core.ShapeLike | None = None, dtype: loom._core.DTypeLike | None = None, generator: Generator | None = None) -> loom._core.Tensor:
    """1 with probability p, 0 otherwise, of shape size (None: one value)."""

def permutation(n: int, generator: Generator | None = None) -> loom._core.Tensor:
    """The integers 0..n-1 in a random order."""
