import loom._core


def read_idx(path: str) -> loom._core.Tensor:
    """
    An IDX file (MNIST's format), plain or gzip, as a tensor of its dtype and shape.
    """

def load_npy(path: str) -> loom._core.Tensor:
    """A NumPy .npy file as a tensor of its dtype and shape."""

class Dataset:
    """A dataset of Loom's (its examples are lists of tensors)."""

    def __len__(self) -> int: ...

class _TensorDataset(Dataset):
    pass

def TensorDataset(*arrays: loom._core.ArrayLike) -> Dataset:
    """
    Examples are the rows of the arrays (one field each, all with as many rows).
    """

class DataLoader:
    """
    Batches of a dataset, optionally shuffled per epoch (include/loom/data/loader.h).
    """

    def __init__(self, dataset: Dataset, batch_size: int = 1, shuffle: bool = False, seed: int = 0, drop_last: bool = False, n_jobs: int = 0) -> None: ...

    def __len__(self) -> int:
        """Batches per epoch."""

    def __iter__(self) -> DataLoader:
        """One epoch: iterating again gives the next."""

    def __next__(self) -> list[loom._core.Tensor]: ...

    @property
    def position(self) -> tuple[int, int]:
        """(epoch, batches delivered in it)."""

    def set_position(self, epoch: int, batch: int = 0) -> None:
        """
        Moves the loader to (epoch, batch): it then yields exactly the batches an uninterrupted run would have yielded next.
        """
