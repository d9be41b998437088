"""The seed's four steps as runnable scripts (examples/python), each run here as documented:
step 1 (topology) and step 2 (compression) under `cann-dist-train launch`, step 3 (elastic) in
test_elastic.py, step 4 (green: scheduler and signed report; the tracker in test_green.py)."""
import json
import os
import subprocess
import sys

import pytest

cann_dist = pytest.importorskip("cann_dist")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples", "python")
CLI = os.environ.get("CDT_CLI", os.path.join(ROOT, "build", "bin", "cann-dist-train"))

pytestmark = pytest.mark.skipif(not os.path.isdir("/usr/share/datasets/fashion-mnist"),
                                reason="no dataset-fashion-mnist")
needs_cli = pytest.mark.skipif(not os.path.exists(CLI), reason="no cann-dist-train (set CDT_CLI)")


def launch(script, *args, nproc=2, timeout=240):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([CLI, "launch", "--nproc-per-node", str(nproc), "--", sys.executable,
                           os.path.join(EXAMPLES, script), *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


@needs_cli
def test_step1_maps_the_cluster_and_plans(tmp_path):
    out = tmp_path / "topo.json"
    p = launch("step1_topology.py", "--cache-dir", "none", "--json", str(out))
    assert p.returncode == 0, p.stderr
    r = json.loads(out.read_text())
    assert r["topology"]["world_size"] == 2 and r["topology"]["plan"]
    assert r["recommended"] in [c["method"] for c in r["topology"].get("gradient_compress", {}).get(
        "candidates", [{"method": r["recommended"]}])]
    assert "allreduce:" in p.stdout and "compress :" in p.stdout


@needs_cli
def test_step2_trains_with_adaptive_compression(tmp_path):
    out = tmp_path / "train.json"
    p = launch("step2_compression.py", "--steps", "60", "--interval", "10", "--json", str(out))
    assert p.returncode == 0, p.stderr
    r = json.loads(out.read_text())
    assert r["steps"] == 60 and r["world_size"] == 2
    assert r["decisions"] and r["decisions"][0]["from_step"] == 2
    assert r["test_accuracy"] > 0.5


def test_step4_runs_green_and_signs_the_report(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", CDT_SIGNING_KEY=str(tmp_path / "signing.key"),
               XDG_CONFIG_HOME=str(tmp_path / "config"))
    p = subprocess.run([sys.executable, os.path.join(EXAMPLES, "step4_green.py"), "--steps", "80",
                        "--time-scale", "0.25", "--output-dir", str(tmp_path / "run")],
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr
    assert "verified: True" in p.stdout
    assert (tmp_path / "run" / "green_report.json.cert").exists()
    assert (tmp_path / "run" / "emissions.csv").exists()
