"""Writes torchvision models whose torch.onnx exports need the importer's torch patterns (issue 46), each
random-init (weights=None, seeded), in eval mode with randomized batch-norm statistics, exported at opset 17
with a dynamic batch axis, with an input and torch's output for it: <name>.onnx, <name>_input.npy,
<name>_output.npy, into the folder given.
  densenet121         nn.AvgPool2d: an all-zero Pad before each AveragePool
  mobilenet_v2        ReLU6: Clip(0, 6)
  mnasnet0_5          x.mean([2, 3]): ReduceMean
  mobilenet_v3_small  Hardswish, Hardsigmoid
  shufflenet_v2_x0_5  channel shuffle: Reshape to a shape computed by Shape, Gather, Unsqueeze, Concat
  channel_shuffle     that channel shuffle alone, between two convolutions
  encoder2            a 2-layer nn.TransformerEncoder: the layers' equal initial weights shared through Identity nodes
Images are 64 x 64 (the whole networks at a small size: the test runs in seconds).
Run with Debian's python3 (python3-torch, python3-torchvision); onnx_import_tests compares Loom's outputs."""
import os
import sys

import numpy as np
import torch
import torchvision

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def randomize_bn(model):
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                if m.weight is not None:
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-0.2, 0.2)


def export(name, model, x, trace=None):
    with torch.no_grad():
        y = model(x)
    torch.onnx.export(model, x if trace is None else trace, os.path.join(out, name + ".onnx"), opset_version=17, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    np.save(os.path.join(out, name + "_input.npy"), x.numpy())
    np.save(os.path.join(out, name + "_output.npy"), y.numpy())
    print(name + ".onnx written; output", tuple(y.shape))


for name in ["densenet121", "mobilenet_v2", "mnasnet0_5", "mobilenet_v3_small", "shufflenet_v2_x0_5"]:
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None, num_classes=10).eval()
    randomize_bn(model)
    image = torch.randn(3, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    export(name, model, image, torch.randn(2, 3, 64, 64))

# nn.TransformerEncoder deep-copies its layer: torch.onnx finds the copies' equal weights and
# writes them once, the second layer reading them through Identity nodes
torch.manual_seed(7)
encoder = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True), 2).eval()
seq = torch.randn(3, 5, 16, generator=torch.Generator().manual_seed(8))
export("encoder2", encoder, seq, torch.randn(2, 5, 16))

# shufflenet's channel shuffle alone, at a dynamic batch: x.view(n, groups, c // groups, h, w) with
# n, c, h, w from x.size() (torch.onnx: Shape, Gather, Unsqueeze, Concat, Reshape), transposed and
# viewed back


class ChannelShuffle(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 4, 1)

    def forward(self, x):
        x = self.conv1(x)
        n, c, h, w = x.size()
        x = x.view(n, 2, c // 2, h, w).transpose(1, 2).contiguous().view(n, -1, h, w)
        return self.conv2(x)


torch.manual_seed(9)
export("channel_shuffle", ChannelShuffle().eval(), torch.randn(3, 3, 6, 6, generator=torch.Generator().manual_seed(10)), torch.randn(2, 3, 6, 6))
