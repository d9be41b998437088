"""Fashion-MNIST from Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist), read
with the standard library (gzip, struct) into float tensors scaled to [0, 1]; and the small
user-defined CNN the examples train. Shared by the scripts of examples/python."""
import gzip
import os
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

DATA_DIR = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")


def _read_idx(stem, data_dir):
    for suffix in (".gz", ""):
        path = os.path.join(data_dir, stem + suffix)
        if os.path.exists(path):
            break
    else:
        raise FileNotFoundError(
            f"no {stem}[.gz] in {data_dir}: install Debian's dataset-fashion-mnist "
            "(scripts/install-deps.sh) or set FASHION_MNIST_DIR")
    with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as f:
        data = f.read()
    (magic,) = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8).reshape(dims)


def load(split="train", data_dir=DATA_DIR):
    """(images N x 1 x 28 x 28 float32, labels N int64) of the train or test split."""
    prefix = "train" if split == "train" else "t10k"
    images = _read_idx(f"{prefix}-images-idx3-ubyte", data_dir).float().div_(255).unsqueeze(1)
    labels = _read_idx(f"{prefix}-labels-idx1-ubyte", data_dir).long()
    return images, labels


class SmallCnn(nn.Module):
    """A user's model: two convolutions and two linear layers."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 7 * 7, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def accuracy(model, images, labels, batch=1000):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(labels), batch):
            correct += (model(images[i:i + batch]).argmax(1) == labels[i:i + batch]).sum().item()
    model.train()
    return correct / len(labels)
