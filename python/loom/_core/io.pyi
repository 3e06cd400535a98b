from collections.abc import Mapping

import loom._core
import loom._core.zoo


def save_model(path: str, graph: loom._core.Graph | loom._core.zoo.Network, extra: Mapping[str, loom._core.ArrayLike] | None = None, metadata: Mapping[str, str] | None = None) -> None:
    """
    The graph's architecture and weights in one safetensors file, written atomically.
    """

def load_model(path: str) -> loom._core.Graph:
    """The graph rebuilt from a model file, with its weights."""

def save_state(path: str, graph: loom._core.Graph | loom._core.zoo.Network, extra: Mapping[str, loom._core.ArrayLike] | None = None, metadata: Mapping[str, str] | None = None) -> None:
    """
    Writes the graph's weights (and extra tensors and string metadata, when given) to a safetensors file, atomically.
    """

def load_state(path: str, graph: loom._core.Graph | loom._core.zoo.Network) -> tuple[dict[str, loom._core.Tensor], dict[str, str]]:
    """
    Loads the weights into the graph (strictly); returns (extra tensors, metadata).
    """

def graph_state(arg: loom._core.Graph | loom._core.zoo.Network, /) -> dict[str, loom._core.Tensor]:
    """
    Every parameter and buffer by its key (the graph's own tensors, not copies).
    """

def load_graph_state(graph: loom._core.Graph | loom._core.zoo.Network, tensors: Mapping[str, loom._core.ArrayLike]) -> None:
    """
    Sets the graph's parameters and buffers from a dict by key, strictly: every one of them, nothing else.
    """

def save_safetensors(path: str, tensors: Mapping[str, loom._core.ArrayLike], metadata: Mapping[str, str] | None = None) -> None:
    """A dict of tensors (or arrays) as a safetensors file."""

def load_safetensors(path: str) -> dict[str, loom._core.Tensor]:
    """The tensors of a safetensors file as a dict."""

def load_safetensors_metadata(path: str) -> dict[str, str]:
    """The string metadata of a safetensors file's header, as a dict."""

def export_onnx(graph: loom._core.Graph | loom._core.zoo.Network, path: str, dynamic_batch: bool = True, batch_size: int = 1, fold_batch_norm: bool = False) -> None:
    """
    Writes the graph as an ONNX model (dynamic_batch: the batch axis open, else batch_size; fold_batch_norm: batch norm folded into the preceding convolution).
    """

def import_onnx(path: str) -> loom._core.Graph:
    """An ONNX model as a graph of Loom's layers."""
