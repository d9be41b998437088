#!/usr/bin/python3
"""What libtorch's matrix products cost on this machine's BLAS, one thread (docs/benchmarks.md).

Times fc1's forward product at batch 128 and the cnn's backward (fc1 as row blocks, as
`train --linear-blocks`), printing when each parameter's gradient is ready. Run it under another
BLAS with LD_LIBRARY_PATH, e.g. /usr/lib/x86_64-linux-gnu/blas (netlib's reference BLAS) or
/usr/lib/x86_64-linux-gnu/openblas-openmp.

    /usr/bin/python3 bench/blas_probe.py [--blocks 4] [--batch-size 128]
"""
import argparse
import time

import torch


class Cnn(torch.nn.Module):
    """The cnn of docs/training.md, fc1's weight stored as row blocks."""

    def __init__(self, blocks):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(32, 64, 3, padding=1)
        rows = 128 // blocks
        self.w = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(rows, 3136) * 0.01) for _ in range(blocks)])
        self.b = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(rows)) for _ in range(blocks)])
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        h = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        h = torch.max_pool2d(torch.relu(self.conv2(h)), 2).flatten(1)
        h = torch.relu(torch.cat([torch.nn.functional.linear(h, w, b) for w, b in zip(self.w, self.b)], 1))
        return self.fc2(h)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=128)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    x = torch.randn(a.batch_size, 3136)
    w = torch.randn(128, 3136)
    x @ w.t()
    t = time.perf_counter()
    for _ in range(20):
        x @ w.t()
    print("fc1 forward product %dx3136 . 3136x128: %.2f ms" % (a.batch_size, (time.perf_counter() - t) / 20 * 1e3))
    net = Cnn(a.blocks)
    images = torch.randn(a.batch_size, 1, 28, 28)
    labels = torch.randint(0, 10, (a.batch_size,))
    ready = []
    for name, p in net.named_parameters():
        p.register_hook(lambda g, name=name: ready.append((name, time.perf_counter())))
    for rep in range(6):  # the last of six, after warm-up
        ready.clear()
        loss = torch.nn.functional.cross_entropy(net(images), labels)
        t = time.perf_counter()
        loss.backward()
        end = time.perf_counter()
    print("backward %.1f ms; gradient ready after (ms):" % ((end - t) * 1e3))
    for name, when in ready:
        print("  %-14s %6.1f" % (name, (when - t) * 1e3))


if __name__ == "__main__":
    main()
