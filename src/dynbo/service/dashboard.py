"""The service's dashboard: one self-contained HTML page (no external assets).

The data is embedded in the page as JSON when it is served (reload to update); inline
JavaScript draws, for every study, one SVG with three panels: the observations ``y``
against their time ``t``, and the dataset size and the response time of each
``suggest`` against the query number. Every text goes through ``textContent``.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["render_dashboard"]

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>dynbo serve</title>
<link rel="icon" href="data:,">
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; margin-bottom: .2em; }
.study { border: 1px solid #ddd; border-radius: 6px; padding: .6em 1em; margin: 1em 0; }
.study h2 { font-size: 1.1em; margin: .2em 0; }
.meta { color: #555; font-size: .9em; }
svg.study-plot { display: block; margin-top: .4em; }
svg text { font-size: 11px; fill: #444; }
.empty { color: #777; font-style: italic; }
.damaged { color: #b00020; }
</style>
</head>
<body>
<h1>dynbo serve</h1>
<div class="meta" id="summary"></div>
<div id="studies"></div>
<script type="application/json" id="data">__DATA__</script>
<script>
"use strict";
const SVG = "http://www.w3.org/2000/svg";
const data = JSON.parse(document.getElementById("data").textContent);

function el(name, attrs, parent, text) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  if (parent) parent.appendChild(node);
  return node;
}

function fmt(v) {
  if (!isFinite(v)) return "";
  const a = Math.abs(v);
  return (a !== 0 && (a < 1e-3 || a >= 1e5)) ? v.toExponential(2) : String(+v.toPrecision(4));
}

function panel(svg, x0, title, xlabel, points, color, line) {
  const w = 300, h = 170, left = 52, top = 22, pw = w - left - 12, ph = h - top - 34;
  const g = el("g", {transform: "translate(" + x0 + ",0)"}, svg);
  el("text", {x: left, y: 14, "font-weight": "bold"}, g, title);
  el("rect", {x: left, y: top, width: pw, height: ph, fill: "none", stroke: "#999"}, g);
  el("text", {x: left + pw / 2, y: h - 4, "text-anchor": "middle"}, g, xlabel);
  const pts = points.filter(p => p[0] !== null && p[1] !== null &&
                                 isFinite(p[0]) && isFinite(p[1]));
  if (pts.length === 0) {
    el("text", {x: left + pw / 2, y: top + ph / 2, "text-anchor": "middle"}, g, "no data yet");
    return;
  }
  let [xmin, xmax] = [Math.min(...pts.map(p => p[0])), Math.max(...pts.map(p => p[0]))];
  let [ymin, ymax] = [Math.min(...pts.map(p => p[1])), Math.max(...pts.map(p => p[1]))];
  if (xmax === xmin) { xmin -= 0.5; xmax += 0.5; }
  if (ymax === ymin) { ymin -= 0.5; ymax += 0.5; }
  const sx = v => left + (v - xmin) / (xmax - xmin) * pw;
  const sy = v => top + ph - (v - ymin) / (ymax - ymin) * ph;
  el("text", {x: left - 4, y: top + 4, "text-anchor": "end"}, g, fmt(ymax));
  el("text", {x: left - 4, y: top + ph, "text-anchor": "end"}, g, fmt(ymin));
  el("text", {x: left, y: top + ph + 13, "text-anchor": "start"}, g, fmt(xmin));
  el("text", {x: left + pw, y: top + ph + 13, "text-anchor": "end"}, g, fmt(xmax));
  if (line) {
    const d = pts.map((p, i) => (i ? "L" : "M") + sx(p[0]).toFixed(1) + "," + sy(p[1]).toFixed(1));
    el("path", {d: d.join(""), fill: "none", stroke: color, "stroke-width": 1.5}, g);
  } else {
    for (const p of pts) {
      el("circle", {cx: sx(p[0]).toFixed(1), cy: sy(p[1]).toFixed(1), r: 2, fill: color}, g);
    }
  }
}

const root = document.getElementById("studies");
document.getElementById("summary").textContent =
  data.length + " stud" + (data.length === 1 ? "y" : "ies") + " (reload to update)";
if (data.length === 0) {
  const p = document.createElement("p");
  p.className = "empty";
  p.textContent = "No study yet: POST /studies to create one.";
  root.appendChild(p);
}
for (const s of data) {
  const box = document.createElement("section");
  box.className = "study";
  const title = document.createElement("h2");
  title.textContent = s.name;
  const meta = document.createElement("div");
  meta.className = "meta";
  meta.textContent = "policy " + s.policy + ", clock " + s.clock + ", " + s.observations +
    " observations, " + s.suggestions + " suggestions, dataset size " + s.dataset_size;
  box.append(title, meta);
  if (s.damaged) {  // its log cannot be read: say so instead of plotting
    const note = document.createElement("p");
    note.className = "damaged";
    note.textContent = s.damaged;
    box.appendChild(note);
    root.appendChild(box);
    continue;
  }
  const svg = el("svg", {class: "study-plot", width: 900, height: 170, viewBox: "0 0 900 170",
                         role: "img", "aria-label": "plots of study " + s.name});
  panel(svg, 0, "observations y", "time t", s.observed, "#1f77b4", false);
  panel(svg, 300, "dataset size", "query", s.suggested.map(r => [r[0], r[1]]), "#2ca02c", true);
  panel(svg, 600, "response time (ms)", "query", s.suggested.map(r => [r[0], 1000 * r[2]]),
        "#d62728", true);
  box.appendChild(svg);
  root.appendChild(box);
}
</script>
</body>
</html>
"""


def render_dashboard(studies: list[dict[str, Any]]) -> str:
    """The page for ``studies``: each a study summary with ``observed`` ``[[t, y], ...]``
    and ``suggested`` ``[[query_id, dataset_size, seconds], ...]``, or ``damaged``: the
    message that its log cannot be read (shown instead of the plots)."""
    payload = json.dumps(studies, allow_nan=False, default=str)
    # inside <script>: no "</script>", "<!--" or "&" can end or change the element
    payload = payload.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return _PAGE.replace("__DATA__", payload)
