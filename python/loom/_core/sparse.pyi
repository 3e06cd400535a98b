import loom._core


def mm(sparse: loom._core.SparseTensor, dense: loom._core.ArrayLike) -> loom._core.Tensor:
    """
    torch.sparse.mm: a (m, k) SparseTensor (COO or CSR, duplicates adding up) times a (k, n) float32/float64 dense tensor or array gives the (m, n) dense product of the promoted dtype; differentiable in the dense operand and in the sparse operand's values (each stored entry, duplicates each getting the full gradient).
    """
