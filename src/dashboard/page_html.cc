// index.html of the dashboard (docs/dashboard.md). The panels fill from /api/state once a second.
#include "dashboard/page.h"

namespace cdt::dashboard {

const char kIndexHtml[] = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>cann-dashboard</title>
<link rel="stylesheet" href="/style.css">
</head>
<body data-panels="">
<header>
  <h1>cann-dashboard <span id="job"></span></h1>
  <div id="status" class="status">connecting…</div>
</header>
<main>
<section id="panel-training" class="panel">
  <h2>Training</h2>
  <div class="kpis">
    <div><label>step</label><span id="train-step">–</span></div>
    <div><label>world</label><span id="train-world">–</span></div>
    <div><label>generation</label><span id="train-generation">–</span></div>
    <div><label>samples/s</label><span id="train-sps">–</span></div>
    <div><label>loss</label><span id="train-loss">–</span></div>
    <div><label>test accuracy</label><span id="train-acc">–</span></div>
    <div><label>compression</label><span id="train-compress">–</span></div>
  </div>
  <div class="charts">
    <figure><figcaption>loss by step</figcaption><svg id="chart-loss" viewBox="0 0 420 160"></svg></figure>
    <figure><figcaption>samples/s over time</figcaption><svg id="chart-sps" viewBox="0 0 420 160"></svg></figure>
    <figure><figcaption>time per step by part, each rank (ms)</figcaption><svg id="chart-breakdown" viewBox="0 0 420 160"></svg></figure>
  </div>
  <p id="train-phases" class="note"></p>
</section>
<section id="panel-topology" class="panel">
  <h2>Topology</h2>
  <svg id="topo-graph" viewBox="0 0 640 220"></svg>
  <div class="tables">
    <table id="topo-levels"><caption>link levels (measured)</caption><thead><tr><th>level</th><th>α (µs)</th><th>β (GB/s)</th><th>node (GB/s)</th></tr></thead><tbody></tbody></table>
    <table id="topo-algos"><caption>allreduce algorithm by message size (the job's choice)</caption><thead><tr><th>bytes</th><th>algorithm</th></tr></thead><tbody></tbody></table>
  </div>
  <p id="topo-source" class="note"></p>
</section>
<section id="panel-comm" class="panel">
  <h2>Communication pattern</h2>
  <div class="charts">
    <figure><figcaption>bytes sent, rank → peer (network transport)</figcaption><svg id="comm-matrix" viewBox="0 0 320 240"></svg></figure>
    <figure><figcaption>per gradient bucket: communicator time vs exposed wait (rank 0, s)</figcaption><svg id="comm-buckets" viewBox="0 0 420 200"></svg></figure>
  </div>
  <table id="comm-algos"><caption>allreduce by algorithm (all ranks)</caption><thead><tr><th>algorithm</th><th>ops</th><th>bytes</th><th>seconds</th><th>algbw GB/s</th></tr></thead><tbody></tbody></table>
  <p id="comm-summary" class="note"></p>
</section>
<section id="panel-carbon" class="panel">
  <h2>Carbon timeline</h2>
  <div class="kpis">
    <div><label>grid now (g/kWh)</label><span id="carbon-now">–</span></div>
    <div><label>energy (kJ)</label><span id="carbon-energy">–</span></div>
    <div><label>carbon (g CO₂e)</label><span id="carbon-grams">–</span></div>
    <div><label>budget (g)</label><span id="carbon-budget">–</span></div>
  </div>
  <figure><figcaption>grid carbon intensity, a day back and two ahead (g/kWh); the line marks now</figcaption><svg id="carbon-chart" viewBox="0 0 640 180"></svg></figure>
  <p id="carbon-source" class="note"></p>
</section>
<section id="panel-faults" class="panel">
  <h2>Fault simulation</h2>
  <p class="note">Kill, hang, slow or cut a worker of the running job (by the rank it started as). The dashboard token is needed
  (the link cann-dashboard printed, or <code>cann-dist-train secret --dashboard-token</code>; never the job's secret):
  <input id="token" type="password" placeholder="dashboard token" autocomplete="off"></p>
  <table id="fault-ranks"><thead><tr><th>worker</th><th>rank</th><th>step</th><th>state</th><th></th></tr></thead><tbody></tbody></table>
  <p id="fault-result" class="note"></p>
  <table id="recoveries"><caption>recoveries (measured by the job)</caption><thead><tr><th>generation</th><th>cause</th><th>lost</th><th>detected after (s)</th><th>RTO (s)</th><th>lost steps</th><th>world</th></tr></thead><tbody></tbody></table>
  <table id="events"><caption>requests to this dashboard</caption><thead><tr><th>time</th><th>what</th></tr></thead><tbody></tbody></table>
</section>
</main>
<script src="/app.js"></script>
</body>
</html>
)HTML";

}  // namespace cdt::dashboard
