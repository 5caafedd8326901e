"""One self-contained HTML page per campaign: tables and figures, read from a store.

``write_report`` reads the store only (read-only connection): the tables of
:mod:`dynbo.report.tables` (average regret first, then the other metrics) and the
figures of :mod:`dynbo.report.figures`, embedded as base64 PNG so that the page needs
no network and no file beside it. The Markdown and LaTeX tables and the PNG files are
written beside the page too, for papers and READMEs.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from dynbo.harness.store import Store, policy_variants
from dynbo.report.figures import dataset_size_figure, overall_figure, regret_figure
from dynbo.report.tables import METRICS, OVERALL, build_table

__all__ = ["choose_campaign", "write_report"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; padding: 0 1.5em;
       max-width: 1200px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table.results { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
table.results th, table.results td { border: 1px solid #ccc; padding: 0.3em 0.6em; }
table.results td { text-align: right; font-variant-numeric: tabular-nums; }
table.results caption { caption-side: bottom; text-align: left; color: #555; padding-top: 0.5em; }
tr.overall th, tr.overall td { border-top: 2px solid #444; }
img { max-width: 100%; display: block; margin: 1em 0; }
code { background: #f3f3f3; padding: 0 0.2em; }
dl { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1em; }
"""


def choose_campaign(store: Store, campaign_id: str | None) -> dict[str, Any]:
    """The campaign record to report: the given id (or a unique prefix), else the newest.

    Raises:
        ValueError: if the store has no campaign, or the id matches none or several.
    """
    campaigns = store.campaigns()
    if not campaigns:
        raise ValueError("the store holds no campaign")
    if campaign_id is None:
        return campaigns[-1]
    matches = [c for c in campaigns if c["campaign_id"].startswith(campaign_id)]
    if len(matches) != 1:
        known = ", ".join(f"{c['campaign_id'][:12]} ({c['name']})" for c in campaigns)
        what = "matches no campaign" if not matches else "matches several campaigns"
        raise ValueError(f"campaign {campaign_id!r} {what}; the store has: {known}")
    return matches[0]


def _animations(
    finished: list[dict[str, Any]], variants: dict[str, str], out: Path
) -> list[tuple[str, Path]]:
    from dynbo.benchmarks import get
    from dynbo.harness.loop import Protocol, RunSpec
    from dynbo.report.animation import run_animation

    first: dict[tuple[str, str], dict[str, Any]] = {}
    for run in sorted(finished, key=lambda r: r["seed"]):
        if not (run.get("summary") or {}).get("queries"):
            continue  # a run that made no query after its warm-up has nothing to show
        first.setdefault((run["label"], variants[run["run_id"]]), run)
    made = []
    for index, ((label, variant), run) in enumerate(sorted(first.items())):
        if get(run["benchmark"], **run["benchmark_options"]).dim != 1:
            continue
        protocol = dict(run["protocol"])
        if protocol.get("response_time") is not None:
            protocol["response_time"] = tuple(protocol["response_time"])
        spec = RunSpec(
            benchmark=run["benchmark"],
            policy=run["policy"],
            seed=run["seed"],
            protocol=Protocol(**protocol),
            benchmark_options=run["benchmark_options"],
            policy_options=run["policy_options"],
            label=label,
        )
        path = run_animation(spec, out / f"animation_{index}.gif")
        made.append((f"A run of {variant} on {label} (seed {run['seed']})", path))
    return made


def _image(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}">'


def write_report(
    store_path: str | Path,
    out_dir: str | Path,
    campaign_id: str | None = None,
    *,
    animate: bool = False,
    extra_html: str | None = None,
) -> Path:
    """Write ``index.html`` (and ``table.md``, ``table.tex``, the PNGs) into ``out_dir``.

    Args:
        store_path: the SQLite store (opened read-only).
        out_dir: directory to write into (created if missing).
        campaign_id: the campaign (an id or a unique prefix); default: the newest.
        animate: add a GIF of the first finished seed of each variant on each 1-D
            benchmark (:func:`dynbo.report.animation.run_animation`, which re-runs it).
        extra_html: an HTML fragment inserted after the main table (``dynbo
            reproduce`` puts the paper's published numbers there).

    Returns:
        The path of ``index.html``.

    Raises:
        ValueError: no such store or campaign, or a campaign with no finished run.
    """
    target = Path(out_dir)
    check_report_folder(target)
    with Store(store_path, read_only=True) as store:
        campaign = choose_campaign(store, campaign_id)
        cid = campaign["campaign_id"]
        runs = store.runs(cid)
        frame = store.iterations_frame(cid)
    finished = [r for r in runs if r["status"] == "done"]
    if not finished:
        raise ValueError(f"campaign {cid[:12]} ({campaign['name']}) has no finished run yet")
    if not bool((frame["warmup"] == 0).any()):
        raise ValueError(
            f"campaign {cid[:12]} ({campaign['name']}): none of its {len(finished)} finished "
            "runs made a query after the warm-up (the horizon ends before the first "
            "response); there is nothing to tabulate or plot"
        )
    config = campaign["config"]
    variants = policy_variants(runs, config)
    frame["variant"] = frame["run_id"].map(variants)
    # everything is written to a staging folder beside the target and moved in at the
    # end: a report that fails half-way leaves the previous one whole
    created = not target.exists()
    target.mkdir(parents=True, exist_ok=True)
    out = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        _write_files(out, campaign, runs, finished, frame, variants, animate, extra_html)
        written = {path.name for path in out.iterdir()}
        for path in out.iterdir():
            os.replace(path, target / path.name)
        # a previous report's files this one does not have (its overall figure, its
        # animations) would be read as this one's; anything else in the folder stays
        for path in target.iterdir():
            if path.is_file() and _is_report_file(path.name) and path.name not in written:
                path.unlink()
    except BaseException:
        if created:  # nor an empty folder of ours
            shutil.rmtree(target, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return target / "index.html"


#: the files a report writes (with ``animation_<i>.gif``; ``paper_table.md`` is
#: ``dynbo reproduce``'s): a new report into the same folder removes the old ones
REPORT_FILES = frozenset(
    {"index.html", "table.md", "table.tex", "regret.png", "dataset_size.png", "overall.png"}
    | {"paper_table.md"}
)


def _is_report_file(name: str) -> bool:
    return name in REPORT_FILES or re.fullmatch(r"animation_\d+\.gif", name) is not None


def check_report_folder(target: Path) -> None:
    """``ValueError`` unless a report can be written into the folder ``target``: it is a
    folder or can be made one (no file in its place or in the place of a parent)."""
    for place in (target, *target.parents):
        if place.exists():
            if not place.is_dir():
                what = (
                    "exists and is not a directory"
                    if place == target
                    else (f"cannot be made: {place} is not a directory")
                )
                raise ValueError(f"report output {target} {what}")
            return


def _write_files(
    out: Path,
    campaign: dict[str, Any],
    runs: list[dict[str, Any]],
    finished: list[dict[str, Any]],
    frame: Any,
    variants: dict[str, str],
    animate: bool,
    extra_html: str | None,
) -> None:
    """The report's files (:func:`write_report`) into the folder ``out``."""
    cid = campaign["campaign_id"]
    config = campaign["config"]

    tables = {}
    for metric in METRICS:
        try:
            tables[metric] = build_table(runs, metric, config)
        except ValueError:
            continue  # no run has this metric (e.g. response times of a step clock)
    main = tables["average_regret"] if "average_regret" in tables else next(iter(tables.values()))
    (out / "table.md").write_text(main.markdown())
    (out / "table.tex").write_text(main.latex())

    figures = [
        ("Average regret against time", regret_figure(frame, out / "regret.png")),
        ("Dataset size and response time", dataset_size_figure(frame, out / "dataset_size.png")),
    ]
    if OVERALL in main.rows:
        figures.append(("Normalized overall score", overall_figure(main, out / "overall.png")))

    animations = _animations(finished, variants, out) if animate else []
    failed = [r for r in runs if r["status"] != "done"]
    protocol = finished[0]["protocol"]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>dynbo report: {html.escape(campaign['name'])}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>dynbo report: {html.escape(campaign['name'])}</h1>",
        "<dl>",
        f"<dt>campaign</dt><dd><code>{html.escape(cid)}</code></dd>",
        f"<dt>runs</dt><dd>{len(finished)} finished, {len(failed)} failed</dd>",
        f"<dt>protocol</dt><dd><code>{html.escape(json.dumps(protocol))}</code></dd>",
        f"<dt>written</dt><dd>{_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M UTC}</dd>",
        "</dl>",
        f"<h2>{html.escape(METRICS.get(main.metric, (main.metric,))[0].capitalize())}</h2>",
        main.html(),
    ]
    if extra_html:
        parts.append(extra_html)
    for title, path in figures:
        parts += [f"<h2>{html.escape(title)}</h2>", _image(path, title)]
    for title, path in animations:
        data = base64.b64encode(path.read_bytes()).decode()
        parts += [
            f"<h2>{html.escape(title)}</h2>",
            f'<img src="data:image/gif;base64,{data}" alt="{html.escape(title)}">',
        ]
    for metric, table in tables.items():
        if table is main:
            continue
        parts += [f"<h2>{html.escape(METRICS[metric][0].capitalize())}</h2>", table.html()]
    if failed:
        parts.append("<h2>Failed runs</h2><ul>")
        for run in failed:
            first_line = (run["error"] or "").splitlines()[0] if run["error"] else ""
            parts.append(
                f"<li>{html.escape(run['label'])} / {html.escape(variants[run['run_id']])} / "
                f"seed {run['seed']}: {html.escape(first_line)}</li>"
            )
        parts.append("</ul>")
    parts.append("</body></html>")
    (out / "index.html").write_text("\n".join(parts), encoding="utf-8")
