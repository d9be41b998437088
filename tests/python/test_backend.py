"""The torch.distributed backend "cdt" (src/python, python/cann_dist): every collective DDP and
common code call against the closed form, DDP's loss curve against Gloo's, a dead rank named in
the others' errors, unsupported calls refused with a clear error. Real processes over TCP, started
with torchrun's variables; run by `make test` (ctest python.backend) with /usr/bin/python3."""
import json
import os
import socket
import subprocess
import sys
import time

import pytest

cann_dist = pytest.importorskip("cann_dist")
WORKER = os.path.join(os.path.dirname(__file__), "worker.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(world, *args, timeout=120, env_extra=None):
    """Starts `world` ranks of worker.py; returns each rank's JSON line (None where it printed
    none) and exit code."""
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   OMP_NUM_THREADS="1", **(env_extra or {}))
        procs.append(subprocess.Popen([sys.executable, WORKER, *args], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = []
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            out, err = p.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail(f"job {args} hung past {timeout} s")
        lines = [l for l in out.splitlines() if l.startswith("{")]
        results.append((json.loads(lines[-1]) if lines else None, p.returncode, err))
    return results


# CDT_INLINE_MAX_BYTES: the default (small collectives on the caller's thread), 0 (every one on
# the communicator's thread) and 1 GiB (every one on the caller's): the same results.
@pytest.mark.parametrize("world,inline", [(2, None), (3, None), (3, "0"), (3, "1073741824")])
def test_collectives_match_the_closed_form(world, inline):
    env = {"CDT_INLINE_MAX_BYTES": inline} if inline is not None else None
    results = run_job(world, "collectives", "cdt", env_extra=env)
    ranks = range(world)
    for r, (res, code, err) in enumerate(results):
        assert code == 0, err
        assert res["sum"] == [world * k + sum(ranks) for k in range(6)]
        assert res["avg"] == [sum(q + 1 for q in ranks) / world] * 3
        assert res["max"] == [float(world)] * 3
        assert res["min"] == [1.0] * 3
        assert res["int64"] == [sum(q + 1 for q in ranks), 10 * sum(q + 1 for q in ranks)]
        expect_nc = [[(4 * j + i) * world + sum(ranks) for j in range(3)] for i in range(4)]
        assert res["noncontiguous"] == expect_nc
        assert res["broadcast"] == [float(world - 1)] * 4
        assert res["all_gather"] == [[float(q)] * 2 for q in ranks]
        assert res["reduce_scatter"] == [float(sum(q * world + r for q in ranks))] * 2
        assert res["all_gather_object"] == [{"rank": q} for q in ranks]
        if r == 1:
            assert res["recv"] == [42.0]


@pytest.mark.parametrize("name,value,limits", [("CDT_INLINE_MAX_BYTES", "lots", "0 to"),
                                               ("CDT_INLINE_MAX_BYTES", "-1", "0 to"),
                                               ("CDT_SHM_SINGLE_COPY", "2", "0 to 1")])
def test_a_bad_setting_is_refused_naming_the_variable(name, value, limits):
    for res, code, err in run_job(2, "collectives", "cdt", env_extra={name: value}):
        assert code != 0 and res is None
        assert f"{name}={value!r}: must be a whole number from {limits}" in err


def test_ddp_gives_the_same_loss_curve_as_gloo():
    steps = 30
    curves = {}
    for backend in ("gloo", "cdt"):
        results = run_job(2, "ddp", backend, str(steps))
        for rank, (res, code, err) in enumerate(results):
            assert code == 0, f"{backend} rank {rank} exited {code}: {err}"
        curves[backend] = results[0][0]["losses"]
    assert len(curves["cdt"]) == steps
    for s, (a, b) in enumerate(zip(curves["gloo"], curves["cdt"])):
        assert abs(a - b) <= 1e-5, f"step {s}: gloo {a}, cdt {b}"
    assert curves["cdt"][-1] < curves["cdt"][0]


def test_a_dead_rank_is_named_in_the_others_errors():
    results = run_job(3, "die", "cdt", env_extra={"TEST_TIMEOUT": "5"}, timeout=60)
    assert results[1][1] == 3
    for r in (0, 2):
        res, code, err = results[r]
        assert res is not None, err
        assert res["raised"] is not None, "the collective with a dead peer returned"
        assert "rank 1" in res["raised"], res["raised"]
        assert res["seconds"] < 6, res


def test_unsupported_calls_raise_clearly_and_do_not_hang():
    results = run_job(2, "unsupported", "cdt", timeout=60)
    for res, code, err in results:
        assert code == 0, err
        assert "'band' is not defined on f32" in res["band"], res["band"]
        assert "sum, avg, max, min, prod" in res["band"], res["band"]
        if res["rank"] == 1:
            assert "recv of 8 bytes with tag 7 matched a message of 16 bytes from rank 0" \
                in res["size"], res["size"]
        assert "sparse tensors are not supported" in res["sparse"], res["sparse"]


def test_comm_hooks_compress_with_error_feedback_and_keep_the_ranks_equal():
    steps = 40
    plain = [res for res, code, err in run_job(2, "ddp", "cdt", str(steps))]
    none_hook = run_job(2, "ddp", "cdt", str(steps), "none")
    for res, code, err in none_hook:
        assert code == 0, err
    # "none" through the hook: the plain allreduce (sum, then / world) — DDP's own path divides
    # first; the curves agree to rounding.
    for a, b in zip(plain[0]["losses"], none_hook[0][0]["losses"]):
        assert abs(a - b) <= 1e-4, (a, b)
    for method in ("powersgd", "topk", "int8", "fp16", "signsgd"):
        results = run_job(2, "ddp", "cdt", str(steps), method)
        for res, code, err in results:
            assert code == 0, f"{method}: {err}"
        r0, r1 = results[0][0], results[1][0]
        assert r0["params"] == r1["params"], f"{method}: the ranks' parameters differ"
        first, last = r0["losses"][0], sum(r0["losses"][-5:]) / 5
        assert last < 0.8 * first, f"{method}: loss {first} -> {last}"
        if method != "fp16":  # the others leave a residual behind
            assert r0["residual_buckets"] >= 1 and r0["residual_norm"] > 0, (method, r0)


@pytest.mark.parametrize("backend", ["cdt", "gloo"])
def test_every_hook_composes_with_every_ddp_option(backend):
    """Every compressor x plain, find_unused_parameters (a branch unused on odd steps),
    static_graph, gradient_as_bucket_view, no_sync, on the new user's model (embedding,
    BatchNorm): no hang, no error, the ranks' parameters identical (issue 42: topk with
    find_unused_parameters deadlocked, its gathers racing DDP's used-map allreduce)."""
    results = run_job(2, "hook_matrix", backend, timeout=300)
    for res, code, err in results:
        assert code == 0 and res is not None, err[-3000:]
    r0, r1 = results[0][0]["cases"], results[1][0]["cases"]
    expected = len(cann_dist.hooks.METHODS + ("adaptive",)) * 5
    for case, params in r0.items():
        assert isinstance(params, list), f"{backend} {case}: {params}"
        assert params == r1[case], f"{backend} {case}: the ranks' parameters differ"
    assert len(r0) == expected, sorted(r0)


def test_the_node_address_comes_from_the_route_to_the_rendezvous_endpoint():
    node_address = cann_dist.node_address
    assert node_address({"CDT_NODE_ADDR": "10.1.2.3", "MASTER_ADDR": "127.0.0.1"}) == "10.1.2.3"
    assert node_address({}) == "127.0.0.1"
    many = {"WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4", "MASTER_PORT": "29500"}
    assert node_address(dict(many, MASTER_ADDR="127.0.0.1")) == "127.0.0.1"
    assert node_address(dict(many, MASTER_ADDR="localhost")) == "127.0.0.1"
    # This machine's own non-loopback address, if it has one: the route to it starts at it.
    ips = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()
    ipv4 = [ip for ip in ips if ip.count(".") == 3 and not ip.startswith("127.")]
    if ipv4:
        assert node_address(dict(many, MASTER_ADDR=ipv4[0])) == ipv4[0]
        # Every rank on one node: loopback, whatever MASTER_ADDR says (no secret needed).
        one = {"WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4", "MASTER_ADDR": ipv4[0]}
        assert node_address(one) == "127.0.0.1"
    with pytest.raises(RuntimeError, match="set CDT_NODE_ADDR"):
        node_address(dict(many, MASTER_ADDR="no-such-host.invalid"))


def test_comm_hooks_run_on_gloo_too():
    steps = 40
    for method in ("powersgd", "topk"):
        results = run_job(2, "ddp", "gloo", str(steps), method)
        for res, code, err in results:
            assert code == 0, f"{method}: {err}"
        r0, r1 = results[0][0], results[1][0]
        assert r0["params"] == r1["params"], f"{method} on gloo: the ranks' parameters differ"
        assert sum(r0["losses"][-5:]) / 5 < 0.8 * r0["losses"][0], method
        assert r0["residual_norm"] > 0, (method, r0)


@pytest.mark.parametrize("backend", ["cdt", "gloo"])
def test_the_adaptive_hook_decides_the_same_on_every_rank(backend):
    steps = 30
    # min_exposed 0: the phases alone — warm-up (low rank), then stable (high rank) or a
    # critical regime (low rank); every rank must take every decision alike.
    results = run_job(2, "ddp", backend, str(steps), "adaptive:0")
    for res, code, err in results:
        assert code == 0, err
    r0, r1 = results[0][0], results[1][0]
    assert r0["decisions"] == r1["decisions"]
    assert r0["params"] == r1["params"]
    first = r0["decisions"][0]
    assert first["from_step"] == 2 and first["phase"] == "warmup"
    assert all(b == "powersgd:4" for b in first["buckets"])
    assert len(r0["decisions"]) == 1 + (steps - 2 - 1) // 5
    assert any(d["phase"] == "stable" for d in r0["decisions"])
    assert sum(r0["losses"][-5:]) / 5 < 0.8 * r0["losses"][0]
    # With the bandwidth rules on, loopback leaves little communication exposed: it may send
    # uncompressed, but every rank still decides alike.
    results = run_job(2, "ddp", backend, str(steps), "adaptive")
    assert results[0][0]["decisions"] == results[1][0]["decisions"]


def test_topology_mapper_scans_the_group_and_the_optimizer_plans():
    results = run_job(2, "topology", "cdt", timeout=180)
    for res, code, err in results:
        assert code == 0, err
    r0, r1 = results[0][0], results[1][0]
    assert r0["plan"] == r1["plan"]  # every rank builds the same planner
    # Two ranks of one node share memory: the TCP level and the shared-memory one, which the
    # plan uses (hier at every size).
    assert r0["nodes"] == 1 and r0["ranks_per_node"] == [2] and r0["levels"] == ["intra", "shm"]
    assert {e[2] for e in r0["plan"]} == {"hier"}
    assert r0["alpha_us"][0] > 0 and r0["beta"][0] > 0
    assert r0["plan"][0][0] == 0 and r0["algorithm_1MiB"] in {e[2] for e in r0["plan"]}
    assert r0["sum"] == 2.0
    assert r0["gradient_bytes"] == 4 * (1000 * 1000 + 1000)
    assert r0["recommended"] in r0["candidates"]
    refused = run_job(2, "topology", "gloo")
    for res, code, err in refused:
        assert code == 0, err
        assert "use the \"cdt\" backend" in res["refused"]


def test_comm_hooks_refuse_bad_methods():
    with pytest.raises(ValueError, match="unknown method"):
        cann_dist.hooks.compress("zip")
    with pytest.raises(ValueError, match="interval"):
        cann_dist.hooks.compress("adaptive", interval=0)
