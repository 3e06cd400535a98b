#!/usr/bin/python3
"""Fixtures for tests/torch_weights: torchvision models' state_dicts as safetensors, an input and
torchvision's logits, for the C++ side (loom_torch_weights_tests) to reproduce through
io::torchvision_map.

make_fixtures.py OUT_DIR [MODEL ...]

For each model (default: resnet18 vgg16 vgg19 densenet121): torchvision's architecture with
random weights (weights=None, torch.manual_seed per model), batch norms given non-trivial
affine parameters, running statistics and num_batches_tracked, eval mode. Writes
OUT_DIR/<model>.safetensors (the state_dict as is, with PyTorch's keys and layouts),
<model>.input.npy and <model>.logits.npy. Debian's /usr/bin/python3 (python3-torch,
python3-torchvision) has no `safetensors` package, so the file is written here by the format's
specification: 8-byte little-endian header size, JSON header, packed little-endian data."""
import json
import os
import struct
import sys

import numpy as np
import torch
import torchvision

# input shapes: small where the model allows (VGG-16 at 64x64 ends on a 2x2 map that the adaptive
# pool spreads over 7x7 overlapping bins, VGG-19 at 32x32 on a 1x1 map it repeats; DenseNet-121
# at 64x64 ends on a 2x2 map)
INPUTS = {
    "resnet18": (2, 3, 64, 64),
    "vgg16": (1, 3, 64, 64),
    "vgg19": (1, 3, 32, 32),
    "densenet121": (2, 3, 64, 64),
}

DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64", torch.int32: "I32"}


def save_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().contiguous().cpu().numpy().tobytes()  # x86: little-endian
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def make(name, out_dir):
    torch.manual_seed(1000 + sorted(INPUTS).index(name))
    model = getattr(torchvision.models, name)(weights=None, num_classes=1000)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                c = m.num_features
                m.running_mean.copy_(torch.randn(c) * 0.1)
                m.running_var.copy_(torch.rand(c) + 0.5)
                m.weight.copy_(torch.rand(c) + 0.5)
                m.bias.copy_(torch.randn(c) * 0.1)
                m.num_batches_tracked.fill_(7)
    model.eval()
    x = torch.rand(INPUTS[name])
    with torch.no_grad():
        y = model(x)
    save_safetensors(os.path.join(out_dir, name + ".safetensors"), model.state_dict())
    np.save(os.path.join(out_dir, name + ".input.npy"), x.numpy())
    np.save(os.path.join(out_dir, name + ".logits.npy"), y.numpy())
    print(f"{name}: {len(model.state_dict())} tensors, input {tuple(x.shape)}, logits {tuple(y.shape)}, "
          f"max |logit| {float(y.abs().max()):.4g}")


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    torch.set_num_threads(2)
    for name in sys.argv[2:] or list(INPUTS):
        make(name, out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
