import loom._core


def norm(x: loom._core.ArrayLike, ord: float | str | None = None, axis: loom._core.AxesLike | None = None, keepdims: bool = False) -> loom._core.Tensor:
    """
    The vector or matrix norm of x (torch.linalg.norm's rules): vector norms (one axis, or a 1-d x) with ord = p, inf, -inf or 0; matrix norms (two axes) with ord = 1, -1, 2, -2, inf, -inf, "fro" or "nuc"; no ord and no axis: the 2-norm of the flattened x.
    """

def svd(a: loom._core.ArrayLike, full_matrices: bool = True) -> tuple[loom._core.Tensor, loom._core.Tensor, loom._core.Tensor]:
    """(U, S, Vh) with a = U @ diag(S) @ Vh."""

def svdvals(a: loom._core.ArrayLike) -> loom._core.Tensor:
    """The singular values of a, descending."""

def qr(a: loom._core.ArrayLike) -> tuple[loom._core.Tensor, loom._core.Tensor]:
    """(Q, R), reduced."""

def eigh(a: loom._core.ArrayLike, UPLO: str = 'L') -> tuple[loom._core.Tensor, loom._core.Tensor]:
    """(eigenvalues ascending, eigenvectors)."""

def eigvalsh(a: loom._core.ArrayLike, UPLO: str = 'L') -> loom._core.Tensor:
    """
    The eigenvalues of the symmetric matrix a, ascending (UPLO: the triangle read).
    """

def cholesky(a: loom._core.ArrayLike, upper: bool = False) -> loom._core.Tensor:
    """
    The Cholesky factor of the symmetric positive-definite a: lower L with a = L @ L.T, or upper U with a = U.T @ U (upper=True).
    """

def solve(a: loom._core.ArrayLike, b: loom._core.ArrayLike) -> loom._core.Tensor:
    """x with a @ x = b, for square non-singular a (LinAlgError otherwise)."""

def inv(a: loom._core.ArrayLike) -> loom._core.Tensor:
    """The inverse of the square non-singular a (LinAlgError otherwise)."""

def det(a: loom._core.ArrayLike) -> loom._core.Tensor:
    """The determinant of a (batched over leading axes)."""

def slogdet(a: loom._core.ArrayLike) -> tuple[loom._core.Tensor, loom._core.Tensor]:
    """(sign, logabsdet)."""

def lstsq(a: loom._core.ArrayLike, b: loom._core.ArrayLike, rcond: float | None = None) -> loom._core.Tensor:
    """
    The minimum-norm least-squares solution x alone (NumPy returns (x, residuals, rank, s)).
    """

def matmul(x1: loom._core.ArrayLike, x2: loom._core.ArrayLike) -> loom._core.Tensor:
    """x1 @ x2 (numpy.linalg.matmul)."""
