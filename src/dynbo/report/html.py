"""One self-contained HTML page per campaign: tables and figures, read from a store.

``write_report`` reads the store only (read-only connection): the tables of
:mod:`dynbo.report.tables` (average regret first, then the other metrics) and the
figures of :mod:`dynbo.report.figures`, embedded as base64 PNG so that the page needs
no network and no file beside it. The Markdown and LaTeX tables and the PNG files are
written beside the page too, for papers and READMEs. The run animations (megabytes
each) are the exception: GIF files beside the page, named by benchmark, policy and seed,
that it links to and shows lazily.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dynbo.harness.store import Store, policy_variants
from dynbo.report.figures import dataset_size_figure, overall_figure, regret_figure
from dynbo.report.tables import METRICS, OVERALL, VIOLATION_METRIC, build_table

__all__ = [
    "animation_name",
    "choose_campaign",
    "stderr_progress",
    "write_report",
]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; padding: 0 1.5em;
       max-width: 1200px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table.results { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
table.results th, table.results td { border: 1px solid #ccc; padding: 0.3em 0.6em; }
table.results td { text-align: right; font-variant-numeric: tabular-nums; }
table.results caption { caption-side: bottom; text-align: left; color: #555; padding-top: 0.5em; }
tr.overall th, tr.overall td { border-top: 2px solid #444; }
th.reference { font-style: italic; color: #555; }
table.settings td { text-align: left; }
img { max-width: 100%; display: block; margin: 1em 0; }
code { background: #f3f3f3; padding: 0 0.2em; }
dl { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1em; }
dd { margin: 0; }
ul.protocol { list-style: none; margin: 0; padding: 0; }
ul.protocol li { display: inline-block; margin-right: 1.2em; }
ul.protocol span { color: #555; }
ul.protocol span::after { content: ":"; }
sup.flag { color: #b00020; }
.animations { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr));
              gap: 0 1.5em; }
.animations figure { margin: 1em 0; }
.animations figcaption { color: #555; font-size: 0.9em; }
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


def _spec(run: dict[str, Any]) -> Any:
    """The :class:`~dynbo.harness.loop.RunSpec` of a stored run row."""
    from dynbo.harness.loop import Protocol, RunSpec

    protocol = dict(run["protocol"])
    if protocol.get("response_time") is not None:
        protocol["response_time"] = tuple(protocol["response_time"])
    return RunSpec(
        benchmark=run["benchmark"],
        policy=run["policy"],
        seed=run["seed"],
        protocol=Protocol(**protocol),
        benchmark_options=run["benchmark_options"],
        policy_options=run["policy_options"],
        label=run["label"],
    )


def _benchmarks(finished: list[dict[str, Any]]) -> dict[str, Any]:
    """label -> the benchmark its first finished run was built with (``None`` where it
    cannot be rebuilt: the report then names the protocol's values only)."""
    from dynbo.benchmarks import get
    from dynbo.harness.loop import benchmark_options

    out: dict[str, Any] = {}
    for run in sorted(finished, key=lambda r: r["seed"]):
        if run["label"] in out:
            continue
        try:
            spec = _spec(run)
            out[run["label"]] = get(spec.benchmark, **benchmark_options(spec))
        except Exception:  # noqa: BLE001 - a report still shows what the store says
            out[run["label"]] = None
    return out


def _number(value: float) -> str:
    return f"{float(value):.6g}"


def _protocol_items(
    finished: list[dict[str, Any]], benchmarks: dict[str, Any]
) -> list[tuple[str, str]]:
    """(name, readable value) of each protocol setting the runs used, the horizon and the
    evaluation cost as they took effect (the benchmark's own when the protocol leaves them
    unset); a setting that differs between benchmarks lists each benchmark's value."""
    first: dict[str, dict[str, Any]] = {}
    for run in sorted(finished, key=lambda r: r["seed"]):
        first.setdefault(run["label"], run)
    per_label: dict[str, dict[str, str]] = {}
    for label, run in sorted(first.items()):
        protocol = run["protocol"]
        bench = benchmarks.get(label)
        items: dict[str, str] = {"clock": str(protocol.get("clock"))}
        unit = " steps" if bench is not None and bench.time_unit == "step" else " s"
        for key, name in (("horizon", "horizon T"), ("cost", "evaluation cost c")):
            value = protocol.get(key)
            if value is not None:
                items[name] = _number(value) + (unit if key == "horizon" else " s")
            elif bench is not None:
                items[name] = (
                    _number(getattr(bench, key))
                    + (unit if key == "horizon" else " s")
                    + " (the benchmark's)"
                )
            else:
                items[name] = "the benchmark's"
        warmup = int(protocol.get("warmup") or 0)
        fraction = float(protocol.get("warmup_fraction") or 0.0)
        items["warm-up"] = (
            f"{warmup} observations at times in [0, {_number(fraction)} T]" if warmup else "none"
        )
        items["threads"] = str(protocol.get("threads"))
        if protocol.get("response_time") is not None:
            terms = [
                f"{float(v):.3g}{power}"
                for v, power in zip(protocol["response_time"], ("", " n", " n^2", " n^3"))
                if float(v) != 0.0
            ]
            items["response time R(n)"] = " + ".join(terms or ["0"]) + " s"
        if protocol.get("max_iterations") is not None:
            items["iterations at most"] = str(protocol["max_iterations"])
        if protocol.get("additional_cost") is not None:
            items["additional query cost"] = _number(protocol["additional_cost"]) + " s"
        per_label[label] = items
    names = list(dict.fromkeys(name for items in per_label.values() for name in items))
    out = []
    for name in names:
        values = {label: items.get(name, "-") for label, items in per_label.items()}
        if len(set(values.values())) == 1:
            out.append((name, next(iter(values.values()))))
        else:
            out.append((name, "; ".join(f"{label}: {v}" for label, v in values.items())))
    return out


def _protocol_html(items: list[tuple[str, str]]) -> str:
    return (
        '<ul class="protocol">'
        + "".join(
            f"<li><span>{html.escape(name)}</span> {html.escape(value)}</li>"
            for name, value in items
        )
        + "</ul>"
    )


def _slug(text: str) -> str:
    """A file-name part: letters, digits, ``.`` and ``-`` kept, anything else ``-``."""
    return re.sub(r"[^A-Za-z0-9.]+", "-", str(text)).strip("-.") or "x"


def animation_name(label: str, variant: str, seed: int, taken: set[str] | None = None) -> str:
    """The file name of a run's animation: ``animation_<benchmark>_<policy>_seed<k>.gif``
    (names made file-safe; a ``-2``, ``-3``, ... suffix when ``taken`` has it already)."""
    stem = f"animation_{_slug(label)}_{_slug(variant)}_seed{int(seed)}"
    name, count = f"{stem}.gif", 1
    while taken is not None and name in taken:
        count += 1
        name = f"{stem}-{count}.gif"
    return name


def _animations(
    finished: list[dict[str, Any]],
    variants: dict[str, str],
    benchmarks: dict[str, Any],
    out: Path,
    progress: Callable[[str], None] | None,
) -> list[tuple[str, Path]]:
    from dynbo.report.animation import run_animation

    first: dict[tuple[str, str], dict[str, Any]] = {}
    for run in sorted(finished, key=lambda r: r["seed"]):
        if not (run.get("summary") or {}).get("queries"):
            continue  # a run that made no query after its warm-up has nothing to show
        first.setdefault((run["label"], variants[run["run_id"]]), run)
    chosen = [
        (label, variant, run)
        for (label, variant), run in sorted(first.items())
        if benchmarks.get(label) is not None and benchmarks[label].dim == 1
    ]
    made: list[tuple[str, Path]] = []
    taken: set[str] = set()
    started = time.perf_counter()
    for index, (label, variant, run) in enumerate(chosen, start=1):
        name = animation_name(label, variant, run["seed"], taken)
        taken.add(name)
        if progress is not None:
            progress(
                f"animation {index}/{len(chosen)}: {variant} on {label}, seed {run['seed']} "
                f"(re-run; {time.perf_counter() - started:.0f} s so far)"
            )
        path = run_animation(_spec(run), out / name)
        made.append((f"A run of {variant} on {label} (seed {run['seed']})", path))
    if progress is not None and chosen:
        progress(f"{len(chosen)} animations in {time.perf_counter() - started:.0f} s")
    return made


def stderr_progress(line: str) -> None:
    """Print a progress line to standard error (plain lines: fit for a terminal and a log
    file alike; one line per animation, each a few seconds or more apart)."""
    print(f"dynbo report: {line}", file=sys.stderr, flush=True)


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
    progress: Callable[[str], None] | None = stderr_progress,
) -> Path:
    """Write ``index.html`` (and ``table.md``, ``table.tex``, the PNGs) into ``out_dir``.

    Args:
        store_path: the SQLite store (opened read-only).
        out_dir: directory to write into (created if missing).
        campaign_id: the campaign (an id or a unique prefix); default: the newest.
        animate: add a GIF of the first finished seed of each variant on each 1-D
            benchmark (:func:`dynbo.report.animation.run_animation`, which re-runs it),
            written beside the page as ``animation_<benchmark>_<policy>_seed<k>.gif``
            (:func:`animation_name`) and linked from it, not embedded.
        extra_html: an HTML fragment inserted after the main table (``dynbo
            reproduce`` puts the paper's published numbers there).
        progress: called with one line before each animation's re-run and once at the
            end (the slow part: seconds to minutes each); default
            :func:`stderr_progress`, ``None`` for silence.

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
        _write_files(out, campaign, runs, finished, frame, variants, animate, extra_html, progress)
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


#: the files a report writes (with ``animation_*.gif``; ``paper_table.md`` is
#: ``dynbo reproduce``'s): a new report into the same folder removes the old ones
REPORT_FILES = frozenset(
    {"index.html", "table.md", "table.tex", "regret.png", "dataset_size.png", "overall.png"}
    | {"paper_table.md"}
)


def _settings_html(
    runs: list[dict[str, Any]],
    variants: dict[str, str],
    config: dict[str, Any],
    columns: tuple[str, ...],
) -> str:
    """The table of each column's policy options and how they were chosen: the
    ``tuned`` string of the campaign's policy entry (``dynbo tune`` writes it), else
    "set in the campaign" for an entry with options, "paper default" for one without."""
    from dynbo.harness.references import reference_names

    entries = [
        {"name": item} if isinstance(item, str) else dict(item)
        for item in config.get("policies", []) or []
        if isinstance(item, (str, dict))
    ]
    by_column: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        by_column.setdefault(variants[run["run_id"]], []).append(run)
    rows = []
    for column in [*columns, *sorted(set(by_column) - set(columns))]:
        group = by_column.get(column)
        if not group:
            continue
        policy = group[0]["policy"]
        texts = {k: json.dumps(v, sort_keys=True) for k, v in group[0]["policy_options"].items()}
        common = dict(texts)
        for run in group[1:]:
            options = run["policy_options"]
            common = {
                k: v
                for k, v in common.items()
                if k in options and json.dumps(options[k], sort_keys=True) == v
            }
        varying = sorted({k for run in group for k in run["policy_options"]} - set(common))
        shown = ", ".join(f"{k} = {v}" for k, v in sorted(common.items())) or "defaults"
        if varying:
            shown += f" (by benchmark: {', '.join(varying)})"
        # the entry whose options the column's runs carry (the most specific)
        options = group[0]["policy_options"]
        matches = [
            (entry.get("label") == column, len(entry.get("options") or {}), i)
            for i, entry in enumerate(entries)
            if entry.get("name") == policy
            and all(options.get(k) == v for k, v in (entry.get("options") or {}).items())
        ]
        entry = entries[max(matches)[2]] if matches else {}
        if policy in reference_names():
            how = "reference player (not tuned)"
        elif entry.get("tuned"):
            how = str(entry["tuned"])
        elif entry.get("options"):
            how = "set in the campaign"
        else:
            how = "paper default"
        if policy not in reference_names() and config.get("equal_exploration") is not None:
            how += (
                f"; sigma multiplier {config['equal_exploration']:g} for every policy "
                "(the campaign's equal_exploration)"
            )
        rows.append(
            f"<tr><th>{html.escape(column)}</th><td><code>{html.escape(shown)}</code></td>"
            f"<td>{html.escape(how)}</td></tr>"
        )
    return (
        '<table class="results settings"><tr><th>column</th><th>options</th>'
        "<th>how they were chosen</th></tr>" + "".join(rows) + "</table>"
    )


def _is_report_file(name: str) -> bool:
    # animation_<i>.gif of earlier versions, animation_<benchmark>_<policy>_seed<k>.gif now
    return name in REPORT_FILES or re.fullmatch(r"animation_[A-Za-z0-9._-]+\.gif", name) is not None


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
    progress: Callable[[str], None] | None,
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
    # beside the regret: the violation rate of the benchmarks with constraints
    violations = tables.get(VIOLATION_METRIC) if main.metric != VIOLATION_METRIC else None
    (out / "table.md").write_text(
        main.markdown() + ("\n" + violations.markdown() if violations else "")
    )
    (out / "table.tex").write_text(main.latex() + ("\n" + violations.latex() if violations else ""))

    figures = [
        ("Average regret against time", regret_figure(frame, out / "regret.png")),
        ("Dataset size and response time", dataset_size_figure(frame, out / "dataset_size.png")),
    ]
    if OVERALL in main.rows:
        figures.append(("Normalized overall score", overall_figure(main, out / "overall.png")))

    benchmarks = _benchmarks(finished)
    animations = _animations(finished, variants, benchmarks, out, progress) if animate else []
    failed = [r for r in runs if r["status"] != "done"]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>dynbo report: {html.escape(campaign['name'])}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>dynbo report: {html.escape(campaign['name'])}</h1>",
        "<dl>",
        f"<dt>campaign</dt><dd><code>{html.escape(cid)}</code></dd>",
        f"<dt>runs</dt><dd>{len(finished)} finished, {len(failed)} failed</dd>",
        f"<dt>protocol</dt><dd>{_protocol_html(_protocol_items(finished, benchmarks))}</dd>",
        f"<dt>written</dt><dd>{_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M UTC}</dd>",
        "</dl>",
        f"<h2>{html.escape(METRICS.get(main.metric, (main.metric,))[0].capitalize())}</h2>",
        main.html(),
    ]
    if violations is not None:
        parts += [
            '<h2 id="violations">Constraint violations</h2>',
            violations.html().replace('class="results"', 'class="results violations"', 1),
        ]
    if extra_html:
        parts.append(extra_html)
    parts += ["<h2>Settings</h2>", _settings_html(runs, variants, config, main.columns)]
    for title, path in figures:
        parts += [f"<h2>{html.escape(title)}</h2>", _image(path, title)]
    if animations:
        # beside the page, not inside it: the GIFs are megabytes each
        parts.append('<h2>Runs animated</h2><div class="animations">')
        for title, path in animations:
            href = html.escape(path.name)
            parts.append(
                f'<figure><a href="{href}"><img src="{href}" loading="lazy" '
                f'alt="{html.escape(title)}"></a><figcaption>{html.escape(title)} '
                f'(<a href="{href}">{href}</a>)</figcaption></figure>'
            )
        parts.append("</div>")
    for metric, table in tables.items():
        if table is main or table is violations:
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
