"""Every torch.distributed operation on "cdt" against Gloo and against the closed form, on world
sizes 1 to 5 (issue 42): reductions for every dtype and ReduceOp they apply to (bitwise for
integers and bool, to rounding for floats, whose ring adds in another order than the fold),
data movement bitwise, subgroups and complex sums too. Where Gloo refuses a case (AVG; bfloat16,
int16 and bool reductions; the list all_to_all) "cdt" is checked against the closed form alone.
Cases: tests/python/ops_cases.py."""
import math
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from test_backend import run_job  # noqa: E402

torch = pytest.importorskip("torch")
import ops_cases  # noqa: E402

TOLERANCE = {"f64": 1e-12, "f32": 1e-5, "f16": 4e-3, "bf16": 3e-2}


def flat(x):
    if isinstance(x, list):
        return [v for item in x for v in flat(item)]
    return [x]


def close(got, want, dt):
    g, w = flat(got), flat(want)
    if len(g) != len(w):
        return False
    if dt not in TOLERANCE:
        return g == w
    rel = TOLERANCE[dt]
    return all(math.isclose(a, b, rel_tol=rel, abs_tol=rel * 4) for a, b in zip(g, w))


def expected_movement(rank, world):
    v, code = ops_cases.value, ops_cases.code
    cat = torch.cat
    even = [(torch.arange(world * 3, dtype=torch.int32) + 1000 * p)[rank * 3:rank * 3 + 3]
            for p in range(world)]
    rs = sum(q + 1 for q in range(world))
    return {
        "gather": [ops_cases.tolist(v(r, "bf16").view(7, 1)) for r in range(world)]
        if rank == 0 else None,
        "scatter": v(rank, "i64").tolist(),
        "all_to_all_single_uneven": cat([code(p, rank, (p + rank) % 3)
                                         for p in range(world)]).tolist(),
        "all_to_all_single_even": cat(even).tolist(),
        "all_to_all_single_large": True,
        "all_to_all_list": [code(p, rank, rank + 1).tolist() for p in range(world)],
        "all_gather_into_tensor": cat([torch.arange(4, dtype=torch.int8) + q
                                       for q in range(world)]).tolist(),
        "reduce_scatter_tensor": (torch.arange(rank * 3, rank * 3 + 3, dtype=torch.float32)
                                  * rs).tolist(),
        "all_gather_coalesced": [[[q, q], [q, q + 1, q + 2]] for q in range(world)],
        "all_reduce_coalesced": [[[float(sum(range(world)))] * 2] * 2,
                                 [0.0, float(sum(range(world))), 2.0 * sum(range(world))]],
        "subgroup": [[float(sum(m + 1 for m in range(0, world, 2)))],
                     [[float(m)] for m in range(0, world, 2)]] if rank % 2 == 0 else None,
        "p2p_tags_any_source": None if world == 1 else [
            [[[p, [p, 2]] for p in range(1, world)], [[p, 1] for p in reversed(range(1, world))]]
            if rank == 0 else None, [(rank - 1) % world] * 3, [float((rank + 1) % world)] * 2],
        "objects": [[{"r": q} for q in range(world)] if rank == 0 else None, [{"to": rank}],
                    [f"from {world - 1}"]],
    }


@pytest.mark.parametrize("world", [1, 2, 3, 4, 5])
def test_every_operation_matches_gloo_and_the_closed_form(world):
    runs = {}
    for backend in ("cdt", "gloo"):
        results = run_job(world, "ops", backend, timeout=240)
        for res, code, err in results:
            assert code == 0 and res is not None, err[-3000:]
        runs[backend] = [res["cases"] for res, _, _ in results]
    checked, against_gloo = 0, 0
    for rank in range(world):
        cdt, gloo = runs["cdt"][rank], runs["gloo"][rank]
        moved = expected_movement(rank, world)
        for name, case in cdt.items():
            assert "error" not in case, f"rank {rank} {name}: {case['error']}"
            dt = name.split("/")[1] if "/" in name else None
            want = case["oracle"] if "oracle" in case else moved[name]
            assert close(case["out"], want, dt), \
                f"world {world} rank {rank} {name}: cdt {case['out']}, expected {want}"
            checked += 1
            off_root = name.startswith("reduce/") and rank != world - 1
            # Gloo 2.11 gathers a coalesced list of two dtypes wrong ([[0, 1, 2, 3], [5, 5, 5]]
            # comes back as [[0, 0, 0, 0], [0, 0, -128]]): the closed form alone decides there.
            gloo_wrong = name == "all_gather_into_tensor_coalesced_two_dtypes"
            if "out" in gloo.get(name, {}) and not off_root and not gloo_wrong:  # off the root torch leaves it unspecified
                assert close(case["out"], gloo[name]["out"], dt), \
                    f"world {world} rank {rank} {name}: cdt {case['out']}, gloo {gloo[name]['out']}"
                against_gloo += 1
    assert checked == world * len(runs["cdt"][0])
    # Gloo reduces 40 of the 67 (dtype, op) pairs here (not AVG, bfloat16, int16 or bool): all compared.
    assert against_gloo >= world * 40, against_gloo
