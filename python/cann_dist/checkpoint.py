"""cann_dist.checkpoint: the engine's checkpoints for Python state (docs/python.md, "Checkpoints";
the seed's CheckpointManager).

    from cann_dist import CheckpointManager

    ckpt = CheckpointManager("ckpt", backend="async_io", compression="lz4", incremental=True)
    ckpt.save(step, {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step})
    ...
    step, state = ckpt.load_latest()       # (None, None) when there is none

save() turns the state into bytes (the tensors' raw bytes first, in a layout that stays put while
their shapes do, then the rest pickled) and hands them to the engine's writer
(src/elastic/checkpoint_store.h), which writes on a thread of its own — save() returns at once,
waiting only for a write still in flight (CheckFreq's rule). Every `full_every`-th checkpoint is
full, the others store only the 64 KiB chunks that changed, as their XOR with the last full one
(byte planes shuffled), compressed with lz4 or zstd; every record is CRC-32 checked, files are
written atomically, and load_latest() falls back past a corrupt or incomplete file, saying which
(docs/checkpoint-format.md). quantize="int8" stores the float32 tensors of increments as int8
differences (lossy, after Check-N-Run). backend="sync": save() returns once the file is written.
"""
import io
import pickle
import struct

import torch

from . import _C

__all__ = ["CheckpointManager"]

_TRAILER = struct.Struct("<Q")  # the metadata's length, at the very end


class _TensorRef:
    def __init__(self, index):
        self.index = index


def _strip(obj, tensors):
    """`obj` with each tensor replaced by a _TensorRef (the tensors collected in order)."""
    if isinstance(obj, torch.Tensor):
        tensors.append(obj.detach().cpu().contiguous())
        return _TensorRef(len(tensors) - 1)
    if isinstance(obj, dict):
        return type(obj)((k, _strip(v, tensors)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_strip(v, tensors) for v in obj)
    return obj


def _dress(obj, tensors):
    if isinstance(obj, _TensorRef):
        return tensors[obj.index]
    if isinstance(obj, dict):
        return type(obj)((k, _dress(v, tensors)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_dress(v, tensors) for v in obj)
    return obj


def encode_state(state):
    """(bytes, float32 spans): the tensors' raw bytes first (each padded to 8 bytes), then the
    pickled rest and a trailer (its length)."""
    tensors = []
    skeleton = _strip(state, tensors)
    parts, layout, spans, offset = [], [], [], 0
    for t in tensors:
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        if t.dtype == torch.float32 and t.numel():
            spans.append((offset, t.numel()))
        layout.append((str(t.dtype).replace("torch.", ""), tuple(t.shape), len(raw)))
        pad = -len(raw) % 8  # every tensor starts 8-byte aligned (float spans must be)
        parts.append(raw + b"\0" * pad)
        offset += len(raw) + pad
    meta = pickle.dumps((skeleton, layout), protocol=pickle.HIGHEST_PROTOCOL)
    return b"".join(parts) + meta + _TRAILER.pack(len(meta)), spans


def decode_state(data):
    (meta_len,) = _TRAILER.unpack_from(data, len(data) - _TRAILER.size)
    meta_start = len(data) - _TRAILER.size - meta_len
    skeleton, layout = pickle.loads(data[meta_start:meta_start + meta_len])
    tensors, offset = [], 0
    buf = bytearray(data[:meta_start])
    for dtype, shape, nbytes in layout:
        dt = getattr(torch, dtype)
        if nbytes:
            t = torch.frombuffer(buf, dtype=torch.uint8, count=nbytes, offset=offset).clone()
            t = t.view(dt).reshape(shape)
        else:
            t = torch.empty(shape, dtype=dt)
        tensors.append(t)
        offset += nbytes + (-nbytes % 8)
    return _dress(skeleton, tensors)


class CheckpointManager:
    """Asynchronous, incremental, compressed, checksummed checkpoints of any state dict of tensors
    and picklable values (see the module's docstring)."""

    def __init__(self, directory, backend="async_io", compression="lz4", incremental=True,
                 full_every=10, keep=2, quantize="none"):
        if backend not in ("async_io", "sync"):
            raise ValueError("CheckpointManager: backend is 'async_io' or 'sync'")
        self.directory, self.backend = str(directory), backend
        self._writer = _C.CheckpointWriter(self.directory, compression, incremental, full_every,
                                           keep, quantize)

    def save(self, step, state):
        data, spans = encode_state(state)
        self._writer.submit(int(step), data, spans)
        if self.backend == "sync":
            self._writer.flush()

    def save_snapshot(self, step, snapshot):
        """cann_dist.elastic's hook: a committed State snapshot, written and flushed; the file."""
        self.save(step, snapshot)
        self._writer.flush()
        records = self._writer.records()
        return records[-1]["path"] if records else ""

    def wait(self):
        """Until nothing is in flight; raises a write's error."""
        self._writer.flush()

    def load_latest(self):
        """(step, state) of the newest checkpoint that verifies, or (None, None)."""
        step, data, path, warnings = _C.load_newest_checkpoint(self.directory)
        self.warnings = list(warnings)
        if step is None:
            return None, None
        return step, decode_state(data)

    def records(self):
        """What each completed write did: step, path, full, state_bytes, file_bytes, chunks,
        chunks_unchanged, encode_s, write_s."""
        return self._writer.records()

    def blocked_seconds(self):
        """Seconds save() waited for a write in flight."""
        return self._writer.blocked_seconds()
