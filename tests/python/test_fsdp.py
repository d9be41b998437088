"""FSDP on the "cdt" backend (PyTorch 2.x; Debian's 1.13 skips: `make test-torch2` runs it): a
small transformer sharded across 2 and 4 ranks, with FSDP's first API (FullyShardedDataParallel)
and its second (fully_shard), trains to the loss curve of the same model unsharded on the whole
batch in one process. Real processes over TCP and shared memory (tests/python/worker.py)."""
import pytest
import torch

from test_backend import run_job

pytestmark = pytest.mark.skipif(int(torch.__version__.split(".")[0]) < 2,
                                reason="FSDP on cdt needs PyTorch 2.x (make test-torch2)")


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("api", ["fsdp1", "fsdp2"])
def test_a_sharded_transformer_trains_as_the_unsharded_one(world, api):
    steps = 8
    results = run_job(world, "fsdp", "cdt", str(steps), api, timeout=240)
    for res, code, err in results:
        assert code == 0, err
    losses = results[0][0]["losses"]
    reference = results[0][0]["reference"]
    assert len(losses) == steps
    for step, (got, want) in enumerate(zip(losses, reference)):
        assert abs(got - want) <= 1e-4 * max(1.0, abs(want)), f"step {step}: fsdp {got}, unsharded {want}"
    assert losses[-1] < losses[0]
    for res, _, _ in results[1:]:
        assert res["losses"] == losses  # every rank saw the same mean
