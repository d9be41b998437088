"""DDP communication hooks with the engine's gradient compressors and error feedback.

    model = DistributedDataParallel(net)
    model.register_comm_hook(None, cann_dist.hooks.compress("powersgd", powersgd_rank=4))

Every compressor of `cann-dist-train train --compress` (docs/compression.md): "none", "fp16",
"bf16", "int8", "topk", "randomk", "powersgd", "signsgd". Each bucket keeps what compression left
out and sends it in later steps (error feedback; DGC, PowerSGD). The state passed to
register_comm_hook is the process group (None: the default group): the "cdt" backend's, or any
other (Gloo's: the engine's compressors then run over it one collective at a time). `hook.state_dict()` / `hook.load_state_dict(d)` save and restore the residuals with the
model (call them between steps). Anchors: PyTorch's fp16_compress_hook and powerSGD_hook.
"""
import torch
import torch.distributed as dist

from . import _C

METHODS = ("none", "fp16", "bf16", "int8", "topk", "randomk", "powersgd", "signsgd")


def _shape(t):
    """(rows, cols) as the engine's compressors see a tensor (PowerSGD: rows x the rest)."""
    if t.dim() == 0:
        return (1, 1)
    rows = t.shape[0]
    return (rows, t.numel() // rows if rows else 0)


def compress(method="powersgd", *, ratio=0.0, powersgd_rank=2, seed=1, error_feedback=True,
             values="fp32", interval=50, high_rank=2, low_rank=4, min_exposed=0.05):
    """A DDP comm hook reducing each bucket with `method` (see the module's docstring).

    ratio: top-k / random-k share of elements (0: 0.01 for topk, 0.75 for randomk);
    powersgd_rank: PowerSGD's rank; values: the type top-k / random-k values travel in.
    "adaptive": every `interval` steps, each bucket goes uncompressed or with PowerSGD at
    `high_rank` (stable training) or `low_rank` (warm-up, a critical regime), as the measured
    communication and compute say (docs/compression.md; `min_exposed` 0: the phases alone);
    `hook.decisions()` lists what it chose and why.
    """
    if method not in METHODS + ("adaptive",):
        raise ValueError(f"cann_dist.hooks.compress: unknown method {method!r} "
                         f"(use adaptive, {', '.join(METHODS)})")
    if method == "adaptive" and (interval < 1 or high_rank < 1 or low_rank < 1 or min_exposed < 0):
        raise ValueError("cann_dist.hooks.compress('adaptive'): interval, high_rank and low_rank "
                         "must be at least 1, min_exposed at least 0")
    impl = {}

    def engine(process_group):
        pg = process_group if process_group is not None else dist.distributed_c10d._get_default_group()
        if "hook" in impl and impl["group"] is not pg:
            # Another group than the last bucket's: an elastic generation's (cann_dist.elastic
            # re-forms the default group after a failure). Rebind: new compressors over the new
            # group, with the old ones' state.
            impl["pending_state"] = impl.pop("hook").state_tensors()
            impl["pending_residuals"] = True
        if "hook" not in impl:
            impl["hook"] = _C.CompressionHook(pg, method, ratio, powersgd_rank, seed,
                                              error_feedback, values, interval, high_rank,
                                              low_rank, min_exposed)
            impl["group"] = pg
            if "pending_state" in impl:
                impl["hook"].set_state_tensors(impl.pop("pending_state"),
                                               impl.pop("pending_residuals", True))
        return impl["hook"]

    def hook(process_group, bucket):
        buffer = bucket.buffer()
        shapes = [_shape(g) for g in bucket.gradients()]
        fut = torch.futures.Future()

        def done(error):
            if error is None:
                fut.set_result(buffer)
            else:
                fut.set_exception(RuntimeError(error))

        engine(process_group).reduce(bucket.index(), buffer, shapes, done)
        if bucket.is_last():
            # The engine reduces buckets on its own thread, and DDP's own collectives of this
            # backward (find_unused_parameters' allreduce of the used map, right after this
            # call) go to the same group: every rank must submit them after the hook's, or the
            # ranks pair unlike collectives. Backward is over here (no compute left to overlap):
            # wait for the bucket queue. An error stays in the future, where DDP raises it.
            try:
                fut.wait()
            except RuntimeError:
                pass
        return fut

    def state_dict():
        """{"method": ..., "buckets": {bucket index: float32 tensor}} (torch.save keeps it)."""
        if "hook" in impl:
            state = impl["hook"].state_tensors()
        else:
            state = {int(b): torch.as_tensor(v, dtype=torch.float32).clone()
                     for b, v in impl.get("pending_state", {}).items()}
        return {"method": method, "buckets": state}

    def load_state_dict(d, residuals=True):
        """residuals=False: all but the error-feedback residuals, which start from zero (a rank
        joining a group takes another rank's state so: cann_dist.elastic.State)."""
        if d.get("method") != method:
            raise ValueError(f"cann_dist.hooks.compress: a state of {d.get('method')!r}, not {method!r}")
        state = {int(b): torch.as_tensor(v, dtype=torch.float32) for b, v in d["buckets"].items()}
        if "hook" in impl:
            return impl["hook"].set_state_tensors(state, residuals)
        impl["pending_state"], impl["pending_residuals"] = state, residuals
        return ""

    def decisions():
        return impl["hook"].decisions() if "hook" in impl else []

    hook.decisions = decisions
    hook.state_dict = state_dict
    hook.load_state_dict = load_state_dict
    hook.__name__ = f"cann_dist_compress_{method}"
    return hook


class GradientCompressor:
    """The seed's name for a compression hook: GradientCompressor("adaptive").register(ddp)
    registers cann_dist.hooks.compress(method, **options) on a DistributedDataParallel model;
    state_dict() / load_state_dict() carry the residuals, decisions() the adaptive choices."""

    def __init__(self, method="adaptive", **options):
        self.method = method
        self.hook = compress(method, **options)

    def register(self, ddp_model, process_group=None):
        ddp_model.register_comm_hook(process_group, self.hook)
        return ddp_model

    def state_dict(self):
        return self.hook.state_dict()

    def load_state_dict(self, d, residuals=True):
        return self.hook.load_state_dict(d, residuals)

    def decisions(self):
        return self.hook.decisions()
