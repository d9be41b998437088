"""The dashboard end to end (docs/dashboard.md): a real 4-worker elastic job, `cann-dashboard
cluster` reading it, and the page opened in headless Chromium (Debian `chromium`) driven over the
DevTools protocol (Debian `python3-websocket`). Every panel must show live data of that job;
a fault request without the dashboard token, or with the job's secret itself, is refused and the
job goes on; clicking "kill 2" with the token (`cann-dist-train secret --dashboard-token`) kills
worker 2 and the page shows the recovery with the RTO the job measured; at the end,
/metrics passes a strict parser (Debian `python3-prometheus-client`'s, beside our own in
tests/unit/dashboard_test.cc) and its counters agree with the job's JSON.

CDT_DASHBOARD_SCREENSHOTS=DIR keeps one PNG per panel there (docs/dashboard.md shows them)."""
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import pytest

websocket = pytest.importorskip("websocket")
prom_parser = pytest.importorskip("prometheus_client.parser")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.environ.get("CDT_CLI", os.path.join(ROOT, "build", "bin", "cann-dist-train"))
DASHBOARD = os.environ.get("CDT_DASHBOARD", os.path.join(ROOT, "build", "bin", "cann-dashboard"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DATA = "/usr/share/datasets/fashion-mnist"

pytestmark = [
    pytest.mark.skipif(not os.path.exists(CLI), reason="no cann-dist-train binary (set CDT_CLI)"),
    pytest.mark.skipif(not os.path.exists(DASHBOARD), reason="no cann-dashboard (CDT_DASHBOARD)"),
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium (scripts/install-deps.sh installs it)"),
    pytest.mark.skipif(not os.path.isdir(DATA), reason="no dataset-fashion-mnist"),
]


def wait_for(what, predicate, timeout, interval=0.25):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except Exception as e:  # the page or job not there yet
            last = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


class Browser:
    """Headless Chromium over the DevTools protocol: evaluate, click, screenshot."""

    def __init__(self, tmp):
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--remote-debugging-port=0", f"--user-data-dir={tmp}/chrome",
             "--window-size=1400,2400", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        port = None
        deadline = time.time() + 60
        while port is None and time.time() < deadline:
            line = self.proc.stderr.readline()
            m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if m:
                port = int(m.group(1))
            elif not line and self.proc.poll() is not None:
                raise AssertionError(f"chromium exited ({self.proc.returncode})")
        assert port, "chromium did not say where DevTools listens"
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=10))
        page = next(t for t in targets if t["type"] == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30,
                                              suppress_origin=True)
        self.next_id = 0

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise AssertionError(f"{method}: {msg['error']}")
                return msg["result"]

    def eval(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                      awaitPromise=True)
        if "exceptionDetails" in r:
            raise AssertionError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def screenshot(self, selector, path):
        rect = self.eval(f"(() => {{ const r = document.querySelector('{selector}')"
                         ".getBoundingClientRect(); return [r.x, r.y + window.scrollY, r.width, r.height]; })()")
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                         clip={"x": rect[0], "y": rect[1], "width": rect[2], "height": rect[3],
                               "scale": 1})
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))

    def close(self):
        try:
            self.ws.close()
        finally:
            self.proc.kill()
            self.proc.wait()


def post_fault(port, token, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/fault", method="POST",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json",
                                          **({"X-CDT-Token": token} if token else {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_the_page_shows_a_live_elastic_job_and_kills_a_rank_on_request(tmp_path):
    job = f"dash-{os.getpid()}"
    runtime = tempfile.mkdtemp(prefix="cdt-run-")
    env = dict(os.environ, OMP_NUM_THREADS="1", XDG_RUNTIME_DIR=runtime, CDT_JOB_ID=job)
    env.pop("CDT_JOB_SECRET", None)
    # The cluster's links measured first, as a user would with topo-scan: the topology panel
    # shows the levels of the strategy cache entry of the job's shape.
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    scan = subprocess.run([CLI, "topo-scan", "--nproc-per-node", "4", "--job-id", job + "-scan"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert scan.returncode == 0, scan.stdout + scan.stderr
    out = tmp_path / "job.json"
    train = subprocess.Popen(
        [CLI, "elastic", "--nproc-per-node", "4", "--job-id", job, "--", "--model", "cnn",
         "--steps", "900", "--batch-size", "16", "--compress", "adaptive", "--energy-windows",
         "--json", str(out)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    dash = subprocess.Popen([DASHBOARD, "cluster", "--job-id", job, "--port", "0", "--topology-view",
                             "--carbon-timeline", "--fault-sim"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    browser = None
    shots = os.environ.get("CDT_DASHBOARD_SCREENSHOTS", str(tmp_path))
    try:
        first = dash.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", first)
        assert m, first
        port = int(m.group(1))
        defaults = dash.stdout.readline()
        assert "defaults used" in defaults and "CISO_2022.csv" in defaults, defaults

        def state():
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/state", timeout=5) as r:
                return json.load(r)

        # The job is live: all four workers have reported, rank 0 a few steps in.
        wait_for("four live workers", lambda: len(state()["workers"]) == 4 and
                 state()["rank0"]["step"] >= 20, timeout=240)

        # Without the token, nothing changes: refused, and worker 2 trains on. The job's secret
        # (from its job file) is no token either: it keys the store and the mesh, never the page.
        assert post_fault(port, None, {"kind": "kill", "rank": 2}) == 403
        assert post_fault(port, "not-the-token", {"kind": "kill", "rank": 2}) == 403
        with open(os.path.join(runtime, "cann-dist-train", job + ".job")) as f:
            secret = f.read().split("\n")[3]
        assert post_fault(port, secret, {"kind": "kill", "rank": 2}) == 403
        got = subprocess.run([CLI, "secret", "--dashboard-token", "--job-id", job], env=env,
                             capture_output=True, text=True, timeout=30)
        assert got.returncode == 0, got.stderr
        token = got.stdout.strip()
        assert re.fullmatch(r"[0-9a-f]{64}", token) and token != secret, got.stdout

        browser = Browser(str(tmp_path))
        browser.call("Page.enable")
        browser.call("Page.navigate", url=f"http://127.0.0.1:{port}/")
        wait_for("the page's first update", lambda: browser.eval("document.body.dataset.updated"),
                 timeout=30)
        # Every panel shows data of this job.
        wait_for("training", lambda: browser.eval(
            "document.querySelectorAll('#chart-loss path.series').length") == 1 and
            browser.eval("document.querySelectorAll('#chart-breakdown rect.bar').length") == 16,
            timeout=30)
        assert re.match(r"\d+ / 900", browser.eval("document.getElementById('train-step').textContent"))
        assert browser.eval("document.getElementById('train-world').textContent") == "4"
        assert float(browser.eval("document.getElementById('train-sps').textContent").replace(",", "")) > 0
        assert browser.eval("document.querySelectorAll('#topo-graph circle.rank').length") == 4
        assert browser.eval("document.querySelectorAll('#topo-algos tbody tr').length") >= 5
        wait_for("the measured levels", lambda: browser.eval(
            "document.querySelectorAll('#topo-levels tbody tr').length") >= 2, timeout=10)
        assert "strategy-" in browser.eval("document.getElementById('topo-source').textContent")
        wait_for("communication", lambda: browser.eval(
            "[...document.querySelectorAll('#comm-matrix rect.cell')].filter(c => +c.dataset.bytes > 0).length") > 0 or
            browser.eval("document.querySelectorAll('#comm-algos tbody tr').length") >= 1, timeout=20)
        assert browser.eval("document.querySelectorAll('#comm-matrix rect.cell').length") == 16
        assert browser.eval("document.querySelectorAll('#comm-buckets rect.bucket-comm').length") >= 1
        assert browser.eval("document.querySelectorAll('#carbon-chart path.series').length") == 1
        assert float(browser.eval("document.getElementById('carbon-now').textContent").replace(",", "")) > 0
        wait_for("energy", lambda: float(browser.eval(
            "document.getElementById('carbon-energy').textContent").replace(",", "")) > 0, timeout=20)
        assert browser.eval("document.querySelectorAll('#fault-ranks tbody tr').length") == 4
        # A few seconds of history on the charts before the pictures.
        wait_for("step 200", lambda: state()["rank0"]["step"] >= 200, timeout=240)
        time.sleep(1.5)
        for panel in ["training", "topology", "comm", "carbon"]:
            browser.screenshot(f"#panel-{panel}", os.path.join(shots, f"dashboard-{panel}.png"))

        # The page's own button without the token: refused, shown on the page.
        browser.eval("document.querySelector('button.kill[data-rank=\"2\"]').click()")
        wait_for("the refusal", lambda: browser.eval(
            "document.getElementById('fault-result').dataset.status") == "403", timeout=10)
        assert state()["rank0"]["world"] == 4

        # With the dashboard token (as a user would paste it): kill 2.
        browser.eval(f"(() => {{ const s = document.getElementById('token'); s.value = {json.dumps(token)};"
                     " s.dispatchEvent(new Event('change')); })()")
        browser.eval("document.querySelector('button.kill[data-rank=\"2\"]').click()")
        wait_for("the request queued", lambda: browser.eval(
            "document.getElementById('fault-result').dataset.status") == "200", timeout=10)
        clicked = time.time()
        rto = wait_for("the recovery on the page", lambda: browser.eval(
            "(() => { const r = document.querySelector('#recoveries tbody tr'); "
            "return r ? r.cells[4].textContent : null; })()"), timeout=60)
        shown_after = time.time() - clicked
        assert float(rto) > 0
        assert browser.eval("document.getElementById('train-world').textContent") == "3"
        browser.screenshot("#panel-faults", os.path.join(shots, "dashboard-faults.png"))
        print(f"recovery shown {shown_after:.1f} s after the click, RTO {rto} s")

        assert train.wait(timeout=400) == 0, train.stdout.read()
        result = json.loads(out.read_text())
        (rec,) = result["recoveries"]
        assert rec["lost_workers"] == [2]
        assert abs(rec["rto_s"] - float(rto)) < 1e-3

        # The final documents: /metrics agrees with the job's JSON.
        def final_metrics():
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            fams = {f.name: f for f in prom_parser.text_string_to_metric_families(text)}
            return fams if state()["rank0"]["finished"] else None
        assert dash.poll() is None, f"the dashboard exited ({dash.returncode}): {dash.stdout.read()}"
        fams = wait_for("rank 0's final document", final_metrics, timeout=30)

        def value(name, **labels):
            for f in fams.values():
                for s in f.samples:
                    if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                        return s.value
            raise AssertionError(f"no {name} {labels}")
        assert value("cdt_samples_total") == result["samples"]
        assert value("cdt_rank_steps_total", rank="0") == result["steps"]
        assert value("cdt_recoveries_total") == len(result["recoveries"])
        assert value("cdt_last_recovery_rto_seconds") == pytest.approx(rec["rto_s"], abs=1e-9)
        assert value("cdt_world_size") == result["world_size"] == 3
        assert value("cdt_energy_joules_total") == pytest.approx(result["energy"]["joules"], rel=1e-9)
        assert value("cdt_dashboard_fault_requests_total") == 1
        assert value("cdt_dashboard_refused_requests_total") >= 4
    finally:
        if browser:
            browser.close()
        dash.send_signal(signal.SIGTERM)
        try:
            dash.wait(timeout=10)
        except subprocess.TimeoutExpired:
            dash.kill()
        if train.poll() is None:
            train.kill()
        train.wait()
        shutil.rmtree(runtime, ignore_errors=True)
