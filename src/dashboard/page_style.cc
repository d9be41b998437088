#include "dashboard/page.h"

namespace cdt::dashboard {

const char kStyleCss[] = R"CSS(
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; background: #f5f6f8; color: #1d2330; }
header { display: flex; align-items: baseline; gap: 2em; padding: 10px 20px; background: #1d2330; color: #fff; }
header h1 { font-size: 18px; margin: 0; }
.status { font-size: 13px; opacity: .85; }
.status.stale { color: #ffb4a8; }
main { display: grid; grid-template-columns: repeat(auto-fit, minmax(660px, 1fr)); gap: 14px; padding: 14px; }
.panel { background: #fff; border-radius: 6px; padding: 10px 14px; box-shadow: 0 1px 3px rgba(0,0,0,.12); }
.panel.off { display: none; }
.panel h2 { font-size: 15px; margin: 2px 0 8px; }
.kpis { display: flex; flex-wrap: wrap; gap: 14px; margin-bottom: 6px; }
.kpis div { display: flex; flex-direction: column; min-width: 80px; }
.kpis label { font-size: 11px; color: #667; }
.kpis span { font-size: 18px; font-variant-numeric: tabular-nums; }
.charts { display: flex; flex-wrap: wrap; gap: 8px; }
figure { margin: 0; }
figcaption { font-size: 11px; color: #556; }
svg { background: #fbfbfd; border: 1px solid #e3e5ea; width: 100%; max-width: 640px; }
svg text { font-size: 10px; fill: #445; }
table { border-collapse: collapse; margin: 6px 12px 6px 0; font-size: 12px; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-size: 11px; color: #556; }
th, td { border-bottom: 1px solid #e6e8ec; padding: 2px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.tables { display: flex; flex-wrap: wrap; }
.note { font-size: 12px; color: #556; }
tr.gone td { color: #a33; }
tr.slowest td { background: #fff3d6; }
button { font-size: 12px; margin: 0 2px; cursor: pointer; }
button.kill { color: #a30000; }
)CSS";

}  // namespace cdt::dashboard
