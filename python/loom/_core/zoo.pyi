from collections.abc import Sequence

import loom._core


class Network:
    """
    A zoo model: its graph, its Input layers and its output layer; called on a tensor, its output.
    """

    @property
    def name(self) -> str:
        """The network's name."""

    @property
    def graph(self) -> loom._core.Graph:
        """The network's graph."""

    @property
    def inputs(self) -> list[loom._core.Layer]:
        """The network's Input layers, in the order its graph takes them."""

    @property
    def output(self) -> loom._core.Layer:
        """The network's output layer."""

    def parameters(self) -> list[loom._core.Tensor]:
        """The trainable tensors of every layer of the graph, each once."""

    def parameter_count(self) -> int:
        """The number of elements of the trainable tensors, each counted once."""

    def summary(self) -> str:
        """A Keras-like table of the graph's layers, shapes and parameter counts."""

    def __call__(self, arg: loom._core.ArrayLike, /) -> loom._core.Tensor: ...

def mlp(in_units: int, hidden: Sequence[int], out_units: int, activation: str = 'relu', dropout: float = 0.0) -> Network:
    """
    Input (batch, in_units) -> [Linear(h) -> activation -> Dropout(dropout)] per hidden width -> Linear(out_units); no Dropout layers when dropout is 0.
    """

def lenet(num_classes: int = 10) -> Network:
    """
    LeNet-5 for (batch, 1, 28, 28) images: 61,706 parameters for 10 classes.
    """

def fashion_cnn(num_classes: int = 10, widths: Sequence[int] = [32, 64, 128], convs_per_block: int = 1, hidden: int = 256) -> Network:
    """
    The Fashion-MNIST CNN for (N, 1, 28, 28): per width a block of convs_per_block 3x3 convolutions with BatchNorm and ReLU and a 2x2 max pool, then Linear(hidden) and Linear(num_classes), with Dropout(0.25).
    """

def vgg(config: Sequence[int], num_classes: int = 1000, batch_norm: bool = False, dropout: float = 0.5, in_channels: int = 3, classifier_units: int = 4096, name: str = 'vgg') -> Network:
    """
    VGG from a torchvision configuration: integers are 3x3 conv + ReLU widths, 0 a 2x2 max pool; batch_norm adds BatchNorm after each conv.
    """

def vgg11(num_classes: int = 1000, batch_norm: bool = False) -> Network:
    """VGG-11 (configuration A), torchvision's layout."""

def vgg16(num_classes: int = 1000, batch_norm: bool = False) -> Network:
    """VGG-16 (configuration D), torchvision's layout."""

def vgg19(num_classes: int = 1000, batch_norm: bool = False) -> Network:
    """VGG-19 (configuration E), torchvision's layout."""

def resnet(blocks_per_stage: Sequence[int], num_classes: int = 1000, in_channels: int = 3, name: str = 'resnet') -> Network:
    """
    ResNet with torchvision's BasicBlock, blocks_per_stage blocks in each of its four stages.
    """

def resnet18(num_classes: int = 1000) -> Network:
    """ResNet-18 (blocks 2, 2, 2, 2), torchvision's layout."""

def resnet34(num_classes: int = 1000) -> Network:
    """ResNet-34 (blocks 3, 4, 6, 3), torchvision's layout."""

def densenet(growth_rate: int, block_config: Sequence[int], num_init_features: int, bn_size: int = 4, compression: float = 0.5, num_classes: int = 1000, in_channels: int = 3, name: str = 'densenet') -> Network:
    """
    DenseNet-BC as torchvision's: dense blocks of block_config layers growing by growth_rate channels, with transitions.
    """

def densenet121(num_classes: int = 1000) -> Network:
    """
    DenseNet-121 (growth 32, blocks 6, 12, 24, 16, 64 initial features), torchvision's layout.
    """

def unet(in_channels: int = 1, num_classes: int = 2, base_width: int = 64, depth: int = 4, batch_norm: bool = False) -> Network:
    """
    U-Net with same-padded convolutions, depth down and up steps; height and width must be multiples of 2 ** depth.
    """

def lstm_lm(vocab_size: int, embedding: int, hidden: int, n_layers: int = 2, dropout: float = 0.0) -> Network:
    """
    An LSTM language model: ids (batch, time) int64 -> embedding -> n_layers LSTM layers of hidden units -> logits (batch, time, vocab).
    """

def transformer_classifier(vocab_size: int, seq_len: int, d_model: int, n_heads: int, ff_units: int, n_layers: int, num_classes: int, dropout: float = 0.1) -> Network:
    """
    A transformer encoder classifier: ids (batch, seq_len) int64 -> embedding + learned positions -> n_layers post-norm encoder layers -> mean over time -> Linear(num_classes).
    """
