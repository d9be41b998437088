"""`cann-dist-train launch` runs what torchrun runs: a torch script that never imports cann_dist
gets torch's own TCPStore at MASTER_ADDR:MASTER_PORT (rank 0 hosts it, as with no launcher),
while cann_dist and the engine's workers meet at the launcher's authenticated store
(CDT_STORE_ENDPOINT). Before, such a script aborted inside torch's TCPStore client
(std::length_error): MASTER_PORT was the launcher's store."""
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.environ.get("CDT_CLI", os.path.join(ROOT, "build", "bin", "cann-dist-train"))
needs_cli = pytest.mark.skipif(not os.path.exists(CLI), reason="no cann-dist-train (set CDT_CLI)")

PLAIN = textwrap.dedent("""
    import os, sys
    import torch, torch.distributed as dist
    dist.init_process_group("gloo")   # env:// from the launcher's variables; no cann_dist here
    assert "cann_dist" not in sys.modules
    t = torch.full((4096,), float(dist.get_rank() + 1))
    dist.all_reduce(t)
    n = dist.get_world_size()
    assert torch.all(t == n * (n + 1) / 2), t[:4]
    dist.barrier()
    line = "rank {} of {} ok {} {} {}\\n".format(dist.get_rank(), n, os.environ["MASTER_ADDR"],
                                                os.environ["MASTER_PORT"], os.environ["CDT_STORE_ENDPOINT"])
    os.write(1, line.encode())   # one write: the ranks share the launcher's stdout (print may split a line)
    dist.destroy_process_group()
""")

MIXED = textwrap.dedent("""
    import os
    import torch, torch.distributed as dist
    import cann_dist  # noqa: F401
    dist.init_process_group("cdt")    # the launcher's store, through CDT_STORE_ENDPOINT
    gloo = dist.new_group(backend="gloo")
    t = torch.ones(1000)
    dist.all_reduce(t)
    dist.all_reduce(t, group=gloo)
    n = dist.get_world_size()
    assert torch.all(t == n * n), t[:4]
    os.write(1, "rank {} ok\\n".format(dist.get_rank()).encode())   # one write: a shared stdout
    dist.destroy_process_group()
""")


def launch(tmp_path, source, nproc, drop=()):
    script = tmp_path / "script.py"
    script.write_text(source)
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT") + drop}
    env["OMP_NUM_THREADS"] = "1"
    return subprocess.run([CLI, "launch", "--nproc-per-node", str(nproc), "--", sys.executable, str(script)],
                          capture_output=True, text=True, timeout=120, env=env)


@needs_cli
def test_a_plain_torch_script_runs_under_launch(tmp_path):
    p = launch(tmp_path, PLAIN, 3, drop=("PYTHONPATH",))  # it could not import cann_dist if it tried
    assert p.returncode == 0, p.stdout + p.stderr
    lines = [line for line in p.stdout.splitlines() if " ok " in line]
    assert len(lines) == 3, p.stdout + p.stderr
    # torch's store and the launcher's are different ports of the same job
    _, _, _, _, _, addr, port, store = lines[0].split()
    assert store != f"{addr}:{port}"


@needs_cli
def test_cann_dist_and_gloo_groups_share_the_launchers_store(tmp_path):
    pytest.importorskip("cann_dist")
    p = launch(tmp_path, MIXED, 2)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count(" ok") == 2, p.stdout + p.stderr


def test_store_endpoint_reads_the_launcher_first():
    cann_dist = pytest.importorskip("cann_dist")
    endpoint = cann_dist._launcher.store_endpoint
    assert endpoint({"CDT_STORE_ENDPOINT": "10.0.0.1:29400", "MASTER_ADDR": "10.0.0.1",
                     "MASTER_PORT": "41000"}) == ("10.0.0.1", 29400)
    assert endpoint({"CDT_STORE_ENDPOINT": "[fd00::1]:29400"}) == ("fd00::1", 29400)
    assert endpoint({"MASTER_ADDR": "10.0.0.2", "MASTER_PORT": "29500"}) == ("10.0.0.2", 29500)
