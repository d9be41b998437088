"""cann_dist.CheckpointManager over the engine's checkpoint writer (src/elastic/checkpoint_store.h):
state dicts of every dtype round-trip, increments store only what changed, a corrupt newest file
is skipped with a warning naming it, and elastic.State resumes from it."""
import os

import pytest
import torch

cann_dist = pytest.importorskip("cann_dist")
from cann_dist import CheckpointManager  # noqa: E402
from cann_dist.elastic import State  # noqa: E402


def test_a_state_round_trips_with_every_dtype(tmp_path):
    state = {"f32": torch.randn(3, 4), "f16": torch.randn(5).half(), "bf16": torch.randn(2).bfloat16(),
             "i64": torch.arange(7), "u8": torch.tensor([1, 2, 255], dtype=torch.uint8),
             "scalar": torch.tensor(3.5), "empty": torch.empty(0, 3), "nested": {"list": [torch.ones(2), 4]},
             "step": 12, "name": "run"}
    m = CheckpointManager(tmp_path, backend="sync", compression="zstd", incremental=False)
    m.save(12, state)
    step, back = m.load_latest()
    assert step == 12 and back["step"] == 12 and back["name"] == "run"
    for k in ("f32", "f16", "bf16", "i64", "u8", "scalar", "empty"):
        assert back[k].dtype == state[k].dtype and torch.equal(back[k], state[k]), k
    assert torch.equal(back["nested"]["list"][0], torch.ones(2)) and back["nested"]["list"][1] == 4


def test_increments_store_only_the_chunks_that_changed(tmp_path):
    big = torch.nn.Linear(512, 512)  # 1 MiB of weights that stay put
    small = torch.nn.Linear(8, 8)
    m = CheckpointManager(tmp_path, compression="lz4", incremental=True, full_every=10)
    for step in range(3):
        with torch.no_grad():
            small.weight.add_(1.0)
        m.save(step, {"big": big.state_dict(), "small": small.state_dict(), "step": step})
    m.wait()
    full, *incr = m.records()
    assert full["full"] and not any(r["full"] for r in incr)
    for r in incr:
        assert r["chunks_unchanged"] >= r["chunks"] - 2, r  # the small layer and the metadata
        assert r["file_bytes"] < full["file_bytes"] / 10, r
    step, back = m.load_latest()
    assert step == 2 and torch.equal(back["small"]["weight"], small.weight.detach())


def test_a_corrupt_newest_checkpoint_is_skipped_and_named(tmp_path):
    m = CheckpointManager(tmp_path, backend="sync", incremental=False)
    m.save(1, {"w": torch.ones(1000)})
    m.save(2, {"w": torch.full((1000,), 2.0)})
    newest = sorted(p for p in os.listdir(tmp_path) if "000000000002" in p)[0]
    data = bytearray((tmp_path / newest).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (tmp_path / newest).write_bytes(bytes(data))
    step, back = m.load_latest()
    assert step == 1 and torch.equal(back["w"], torch.ones(1000))
    assert any(newest in w for w in m.warnings)


def test_elastic_state_checkpoints_and_resumes(tmp_path):
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    s = State(model=model, optimizer=opt, checkpoint=CheckpointManager(tmp_path), checkpoint_every=2,
              step=0)
    for _ in range(5):
        model(torch.randn(3, 4)).sum().backward()
        opt.step()
        s.step += 1
        s.commit()
    s.checkpoint_manager.wait()
    fresh_model = torch.nn.Linear(4, 2)
    fresh_opt = torch.optim.SGD(fresh_model.parameters(), lr=0.1, momentum=0.9)
    t = State(model=fresh_model, optimizer=fresh_opt, checkpoint=CheckpointManager(tmp_path), step=0)
    assert t.load_checkpoint() == 4 and t.step == 4
    assert "momentum_buffer" in fresh_opt.state_dict()["state"][0]


def test_a_health_warning_saves_the_last_commit_at_once(tmp_path):
    from cann_dist import HealthMonitor
    model = torch.nn.Linear(4, 2)
    s = State(model=model, checkpoint=CheckpointManager(tmp_path, backend="sync"), step=0)
    monitor = HealthMonitor(state=s, baseline_samples=5, slow_patience=3)
    seen = []
    monitor.on_warning = seen.append
    for i in range(20):
        s.step += 1
        s.commit()
        # steady 10 ms steps, then a device that slows to 40 ms (measured times handed in)
        monitor.step(step_time_s=0.01 if i < 10 else 0.04)
    assert [w["rule"] for w in seen] == ["slowdown"]
    assert monitor.checkpoints and monitor.checkpoints[0] > 10
    step, _ = s.checkpoint_manager.load_latest()
    assert step == monitor.checkpoints[0]
