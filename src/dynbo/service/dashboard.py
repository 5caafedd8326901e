"""The service's dashboard: one self-contained HTML page (no external assets).

The data is embedded in the page as JSON when it is served, and the page fetches it
again from ``GET /dashboard/data`` every few seconds (``?refresh=<seconds>`` in the
page's address sets the period, ``0`` turns it off). A refresh updates the studies in
place: the scroll position, the studies the user collapsed and the pause switch stay as
they were, and a study whose log did not change is not redrawn.

Inline JavaScript draws, for every study, four SVG charts against the time ``t``, each
as wide as half the study's box (one per row on a narrow window), with axes ticked at
round numbers: the observations ``y``, the queried points ``x`` (one color per
coordinate), the dataset size after every event (so that its last value is the one the
study's header gives) and the response time of each ``suggest``; under the study's
header, its newest health alarms (``dynbo.policies.health``). Every text goes through
``textContent``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dynbo.service.storage import Event

__all__ = [
    "DEFAULT_REFRESH_SECONDS",
    "EVENTS_SHOWN",
    "dashboard_data",
    "health_events",
    "render_dashboard",
]

#: seconds between two refreshes of the page's data (the page's ``?refresh=`` overrides)
DEFAULT_REFRESH_SECONDS = 5.0

#: the newest events of each study that the charts show (bounds the page's size)
EVENTS_SHOWN = 2000

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
.study summary { cursor: pointer; }
.study h2 { font-size: 1.1em; margin: .2em 0; display: inline; }
.meta { color: #555; font-size: .9em; }
.bar { display: flex; gap: 1.5em; align-items: baseline; }
.plots { display: grid; grid-template-columns: repeat(auto-fill, minmax(max(380px, 45%), 1fr));
         gap: .4em 1.2em; margin-top: .4em; }
svg.panel { display: block; width: 100%; height: 230px; }
svg text { font-size: 11px; fill: #444; }
svg text.title { font-weight: bold; font-size: 12px; fill: #222; }
.empty { color: #777; font-style: italic; }
.damaged { color: #b00020; }
ul.alarms { color: #8a4b00; font-size: .9em; margin: .2em 0 0 0; padding-left: 1.2em; }
</style>
</head>
<body>
<h1>dynbo serve</h1>
<div class="bar">
<div class="meta" id="summary"></div>
<label class="meta"><input type="checkbox" id="live"> refresh every
<span id="period"></span> s</label>
<div class="meta" id="updated"></div>
</div>
<div id="studies"></div>
<script type="application/json" id="data">__DATA__</script>
<script>
"use strict";
const SVG = "http://www.w3.org/2000/svg";
const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
const PANEL_HEIGHT = 230;
// seconds between refreshes: the address's ?refresh= if it is a number >= 0, else the
// server's default; 0 is off, and anything else at least half a second
function period() {
  const asked = parseFloat(new URLSearchParams(location.search).get("refresh"));
  if (!isFinite(asked) || asked < 0) return __REFRESH__;
  return asked === 0 ? 0 : Math.max(asked, 0.5);
}
const PERIOD = period();
let data = JSON.parse(document.getElementById("data").textContent);
const root = document.getElementById("studies");
const shown = new Map();  // study name -> {box, meta, plots, key}

function el(name, attrs, parent, text) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  if (parent) parent.appendChild(node);
  return node;
}

// round ticks (1, 2 or 5 times a power of ten) covering [lo, hi], about n of them
function niceTicks(lo, hi, n) {
  if (!(hi > lo)) { lo -= 0.5; hi += 0.5; }
  let step = Math.pow(10, Math.floor(Math.log10((hi - lo) / n)));
  const r = (hi - lo) / n / step;
  step *= r >= 7.5 ? 10 : r >= 3.5 ? 5 : r >= 1.5 ? 2 : 1;
  const start = Math.floor(lo / step + 1e-9), end = Math.ceil(hi / step - 1e-9);
  const ticks = [];
  for (let k = start; k <= end; k++) ticks.push(k * step);
  return {ticks: ticks, step: step, lo: start * step, hi: end * step};
}

function tickLabel(v, step) {
  const a = Math.max(Math.abs(v), step);
  if (a >= 1e6 || step < 1e-4) return v === 0 ? "0" : v.toExponential(1);
  const digits = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
  return (Math.abs(v) < step / 2 ? 0 : v).toFixed(digits);
}

function fmt(v) {
  const a = Math.abs(v);
  return (a !== 0 && (a < 1e-3 || a >= 1e5)) ? v.toExponential(3) : String(+v.toPrecision(5));
}

// one chart: series [{name, color, points: [[t, v], ...], line, dots}], x range shared
function panel(svg, spec, xRange) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const w = Math.max(svg.getBoundingClientRect().width, 200), h = PANEL_HEIGHT;
  svg.setAttribute("viewBox", "0 0 " + w + " " + h);
  el("text", {x: 4, y: 14, class: "title"}, svg, spec.title);
  const pts = spec.series.flatMap(s => s.points).filter(
    p => p[0] !== null && p[1] !== null && isFinite(p[0]) && isFinite(p[1]));
  const top = 26, bottom = h - 36, right = w - 10;
  if (pts.length === 0) {
    el("text", {x: w / 2, y: h / 2, "text-anchor": "middle", class: "empty"}, svg,
       "no data yet");
    return;
  }
  let ylo = Math.min(...pts.map(p => p[1])), yhi = Math.max(...pts.map(p => p[1]));
  if (spec.yRange) { ylo = Math.min(ylo, spec.yRange[0]); yhi = Math.max(yhi, spec.yRange[1]); }
  const yt = niceTicks(ylo, yhi, 5);
  // the left margin fits the widest y label (measured, not guessed)
  const labels = yt.ticks.map(v => el("text", {"text-anchor": "end", class: "tick y"}, svg,
                                        tickLabel(v, yt.step)));
  const left = 12 + Math.max(...labels.map(t => t.getComputedTextLength()));
  // time runs over the study's span exactly (no padding to a round number)
  const xt = niceTicks(xRange[0], xRange[1], Math.max(3, Math.round((right - left) / 90)));
  const [x0, x1] = xRange[1] > xRange[0] ? xRange : [xt.lo, xt.hi];
  xt.ticks = xt.ticks.filter(v => v >= x0 - 1e-9 * xt.step && v <= x1 + 1e-9 * xt.step);
  const sx = v => left + (v - x0) / (x1 - x0) * (right - left);
  const sy = v => bottom - (v - yt.lo) / (yt.hi - yt.lo) * (bottom - top);
  yt.ticks.forEach((v, i) => {
    labels[i].setAttribute("x", left - 5);
    labels[i].setAttribute("y", (sy(v) + 4).toFixed(1));
    el("line", {x1: left, x2: right, y1: sy(v).toFixed(1), y2: sy(v).toFixed(1),
                stroke: "#eee"}, svg);
  });
  for (const v of xt.ticks) {
    el("line", {x1: sx(v).toFixed(1), x2: sx(v).toFixed(1), y1: top, y2: bottom,
                stroke: "#eee"}, svg);
    // a label at the right edge ends there instead of running past the chart
    el("text", {x: sx(v).toFixed(1), y: bottom + 14, class: "tick x",
                "text-anchor": sx(v) > right - 15 ? "end" : "middle"}, svg,
       tickLabel(v, xt.step));
  }
  el("rect", {x: left, y: top, width: right - left, height: bottom - top, fill: "none",
              stroke: "#999"}, svg);
  el("text", {x: (left + right) / 2, y: h - 4, "text-anchor": "middle"}, svg, "time t");
  let legendX = right;
  for (const s of spec.series.slice(0, 10).reverse()) {  // the first ten coordinates
    if (!spec.legend) break;
    const t = el("text", {x: legendX, y: 14, "text-anchor": "end", fill: s.color,
                          style: "fill: " + s.color}, svg, s.name);
    legendX -= t.getComputedTextLength() + 8;
  }
  for (const s of spec.series) {
    const ok = s.points.filter(p => p[0] !== null && p[1] !== null &&
                                    isFinite(p[0]) && isFinite(p[1]));
    if (s.line && ok.length) {
      const d = ok.map((p, i) => (i ? "L" : "M") + sx(p[0]).toFixed(1) + "," +
                                 sy(p[1]).toFixed(1));
      el("path", {d: d.join(""), fill: "none", stroke: s.color, "stroke-width": 1.5,
                  "data-series": s.name, "data-last": ok[ok.length - 1][1]}, svg);
    }
    if (s.dots) {
      for (const p of ok) {
        const c = el("circle", {cx: sx(p[0]).toFixed(1), cy: sy(p[1]).toFixed(1), r: 2.2,
                                fill: s.color, "data-series": s.name}, svg);
        el("title", {}, c, s.name + " = " + fmt(p[1]) + " at t = " + fmt(p[0]));
      }
    }
  }
}

function panels(s) {
  const dim = s.bounds && s.bounds[0] ? s.bounds[0].length : 0;
  const xs = [];
  for (let i = 0; i < dim; i++) {
    xs.push({name: "x" + i, color: COLORS[i % COLORS.length], dots: true, line: false,
             points: s.queried.map(q => [q[0], q[1 + i]])});
  }
  return [
    {key: "observations", title: "observations y", legend: (s.violated || []).length > 0,
     series: [{name: "y", color: COLORS[0], dots: true, points: s.observed},
              {name: "constraint violated", color: "#d62728", dots: true,
               points: s.violated || []}]},
    {key: "queries", title: "queried x", legend: dim > 1, series: xs,
     yRange: dim ? [Math.min(...s.bounds[0]), Math.max(...s.bounds[1])] : null},
    {key: "dataset", title: "dataset size (after each event)",
     series: [{name: "dataset size", color: COLORS[2], line: true, points: s.sizes}]},
    {key: "response", title: "response time of suggest (ms)",
     series: [{name: "response ms", color: COLORS[3], line: true, dots: true,
               points: s.response.map(r => [r[0], 1000 * r[1]])}]},
  ];
}

function draw(entry, s) {
  const specs = panels(s);
  const times = specs.flatMap(p => p.series.flatMap(x => x.points.map(q => q[0])))
    .filter(v => v !== null && isFinite(v));
  const range = times.length ? [Math.min(...times), Math.max(...times)] : [0, 1];
  // every panel is in the grid before any is measured (a lone one would span the row)
  const svgs = specs.map(spec =>
    entry.plots.querySelector('svg[data-panel="' + spec.key + '"]') ||
    el("svg", {class: "panel", "data-panel": spec.key, role: "img",
               "aria-label": spec.title + " of study " + s.name}, entry.plots));
  specs.forEach((spec, i) => panel(svgs[i], spec, range));
}

function alarmList(entry, alarms) {
  // the newest health alarms, under the study's header (none: no list)
  let list = entry.box.querySelector("ul.alarms");
  if (!alarms.length) { if (list) list.remove(); return; }
  if (!list) {
    list = document.createElement("ul");
    list.className = "alarms";
    entry.box.querySelector("summary").after(list);
  }
  list.textContent = "";
  for (const [t, kind, message] of alarms) {
    const item = document.createElement("li");  // HTML, not el()'s SVG namespace
    item.dataset.kind = kind;
    item.textContent = "t = " + fmt(t) + ": " + kind + ": " + message;
    list.appendChild(item);
  }
}

function metaText(s) {
  return "policy " + s.policy + ", clock " + s.clock + ", " + s.observations +
    " observations, " + s.suggestions + " suggestions, dataset size " + s.dataset_size +
    (s.violations ? ", " + s.violations + " violated a constraint" : "");
}

function render(studies, force) {
  document.getElementById("summary").textContent =
    studies.length + " stud" + (studies.length === 1 ? "y" : "ies");
  const names = new Set(studies.map(s => s.name));
  for (const [name, entry] of shown) {
    if (!names.has(name)) { entry.box.remove(); shown.delete(name); }
  }
  let empty = document.getElementById("empty");
  if (studies.length === 0 && !empty) {
    empty = document.createElement("p");
    empty.id = "empty";
    empty.className = "empty";
    empty.textContent = "No study yet: POST /studies to create one.";
    root.appendChild(empty);
  } else if (studies.length > 0 && empty) {
    empty.remove();
  }
  for (const s of studies) {
    let entry = shown.get(s.name);
    if (!entry) {
      const box = document.createElement("details");
      box.className = "study";
      box.open = true;
      box.dataset.study = s.name;
      const head = document.createElement("summary");
      const title = document.createElement("h2");
      title.textContent = s.name;
      const meta = document.createElement("div");
      meta.className = "meta";
      head.append(title, meta);
      const plots = document.createElement("div");
      plots.className = "plots";
      box.append(head, plots);
      root.appendChild(box);  // in the order the server lists them (creation time)
      entry = {box: box, meta: meta, plots: plots, key: null};
      shown.set(s.name, entry);
    }
    entry.meta.textContent = metaText(s);
    const key = JSON.stringify([s.events, s.dataset_size, s.damaged || null]);
    if (!force && key === entry.key) continue;  // unchanged: leave it as the user sees it
    entry.key = key;
    if (s.damaged) {  // its log cannot be read: say so instead of plotting
      entry.plots.textContent = "";
      const note = document.createElement("p");
      note.className = "damaged";
      note.textContent = s.damaged;
      entry.plots.appendChild(note);
      continue;
    }
    if (entry.plots.querySelector("p.damaged")) entry.plots.textContent = "";
    draw(entry, s);
    alarmList(entry, s.alarms || []);
  }
}

const live = document.getElementById("live");
document.getElementById("period").textContent = PERIOD > 0 ? fmt(PERIOD) : "-";
live.checked = PERIOD > 0;
live.disabled = !(PERIOD > 0);
async function refresh() {
  if (!live.checked || document.hidden) return;
  try {
    const answer = await fetch("dashboard/data", {cache: "no-store"});
    if (!answer.ok) throw new Error("HTTP " + answer.status);
    data = (await answer.json()).studies;
    render(data, false);
    document.getElementById("updated").textContent =
      "updated " + new Date().toLocaleTimeString();
  } catch (err) {
    document.getElementById("updated").textContent = "refresh failed: " + err.message;
  }
}
render(data, true);
if (PERIOD > 0) setInterval(refresh, PERIOD * 1000);
let resizing = null;
window.addEventListener("resize", () => {
  clearTimeout(resizing);
  resizing = setTimeout(() => render(data, true), 150);
});
</script>
</body>
</html>
"""


def dashboard_data(manager: Any) -> list[dict[str, Any]]:
    """The studies as the dashboard shows them (the page's embedded JSON and
    ``GET /dashboard/data``).

    Each is :meth:`~dynbo.service.studies.StudyManager.studies`'s summary (``name``,
    ``policy``, ``bounds`` ``(2, d)``, ``clock``, counts, ``dataset_size``) with, from its
    newest :data:`EVENTS_SHOWN` events up to the summary's last one (so that the charts
    and the counts describe the same moment): ``observed`` ``[[t, y], ...]``, of which
    ``violated`` (a measured constraint value below 0),
    ``queried`` ``[[t, x_0, ..., x_{d-1}], ...]`` (each suggestion), ``sizes``
    ``[[t, dataset_size], ...]`` (after every event, in order: its last value is
    ``dataset_size``) and ``response`` ``[[t, seconds], ...]`` (each suggestion); or
    ``damaged``: the message that its log cannot be read.
    """
    from dynbo.service.storage import DamagedLog

    studies = manager.studies()
    for study in studies:
        try:
            events = manager.store.events(study["name"], limit=EVENTS_SHOWN)
        except DamagedLog as err:  # one damaged study does not hide the others
            study["damaged"] = str(err)
            continue
        # an event committed after the summary was read waits for the next refresh
        events = [e for e in events if e.seq <= study["events"]]
        suggests = [e for e in events if e.kind == "suggest"]
        # a retracted observation is not shown; a forget has no time of its own (its t
        # is the retracted observation's), so the size chart skips it
        retracted = {e.forgets for e in events if e.kind == "forget"}
        kept = [e for e in events if e.kind == "observe" and e.seq not in retracted]
        study["observed"] = [[e.t, e.y] for e in kept]
        # observations whose measured constraint values were not all >= 0
        study["violated"] = [
            [e.t, e.y] for e in kept if e.constraints and min(e.constraints.values()) < 0
        ]
        study["queried"] = [[e.t, *e.x] for e in suggests]
        study["sizes"] = [[e.t, e.dataset_size] for e in events if e.kind != "forget"]
        study["alarms"] = [
            [e.t, alarm["kind"], alarm["message"]] for e in events for alarm in health_events(e)
        ][-ALARMS_SHOWN:]
        study["response"] = [[e.t, e.seconds] for e in suggests]
    return studies


#: the newest health alarms a study's panel lists
ALARMS_SHOWN = 5


def health_events(event: Event) -> list[dict[str, Any]]:
    """The health events a logged suggestion reported (``diagnostics.extra["health"]``)."""
    if event.kind != "suggest" or not event.diagnostics:
        return []
    found = (event.diagnostics.get("extra") or {}).get("health") or []
    return [a for a in found if isinstance(a, dict) and "kind" in a and "message" in a]


def dashboard_json(value: Any) -> str:
    """``value`` (:func:`dashboard_data`'s list, or a dict holding it) as strict JSON."""
    return json.dumps(value, allow_nan=False, default=str)


def render_dashboard(
    studies: list[dict[str, Any]], refresh_seconds: float = DEFAULT_REFRESH_SECONDS
) -> str:
    """The page for ``studies`` (:func:`dashboard_data`'s list), refreshing its data
    every ``refresh_seconds`` (``0``: never)."""
    if not (refresh_seconds >= 0 and refresh_seconds < float("inf")):
        raise ValueError(f"refresh_seconds must be a finite number >= 0, got {refresh_seconds}")
    payload = dashboard_json(studies)
    # inside <script>: no "</script>", "<!--" or "&" can end or change the element
    payload = payload.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return _PAGE.replace("__REFRESH__", repr(float(refresh_seconds))).replace("__DATA__", payload)
