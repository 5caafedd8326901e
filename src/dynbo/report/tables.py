"""Paper-style tables from stored runs: mean +- standard error over seeds.

One row per benchmark (its label), one column per *policy variant*: the label a
campaign's policy entry gives, or, when one policy runs with several option sets in a
campaign, the policy name followed by the options that tell them apart
(``wdbo [acquisition_time=response]``). A cell is the mean over seeds of a run summary
metric with its standard error (``sd / sqrt(seeds)``). For the metrics where lower is
better (regrets, response time) the best mean of a row is **bold** and the cells whose
interval ``mean +- se`` overlaps the best one's are underlined, as in BOLT Table 3 and
W-DBO Table 2.

The OVERALL row (the papers' last row) normalizes each benchmark: every run's value
``v`` becomes ``(v - m_b) / (M_b - m_b)`` with ``m_b`` and ``M_b`` the smallest and largest
value of any run (any variant, any seed) on that benchmark; a variant's score for a seed
is the mean of its normalized values over the benchmarks, and the row shows the mean
+- standard error of that score over the seeds that ran every benchmark. 0 is the best
run of every benchmark, 1 the worst. Metrics that are neither better low nor high (the
number of queries, the dataset size) have no best: their tables have neither marks nor
OVERALL row.

A metric that sums over the queries (the cumulative regret) favors a policy that makes
fewer of them: when the best of a row made fewer queries on average than another variant
of that row, its cell carries a dagger and the caption says why.

A policy that asks for *additional* queries (SparQ-GP-UCB and W-SparQ-GP-UCB re-evaluate
past inputs: :mod:`dynbo.policies.sparq`) is scored on its main queries only, so in a
regret table each of its cells carries a double dagger whose note gives that benchmark's
mean number of additional queries per run, and the caption gives each such column's mean
over all its runs ("+N additional queries per run on average").

Reference players (``random``, ``oracle-lag``: :mod:`dynbo.harness.references`) get the
last columns. They are not contenders: the marks, the OVERALL normalization's ``m_b`` and
``M_b`` and the fewer-queries flag consider the policies only (a reference's OVERALL
value uses the policies' normalization, so it may fall outside ``[0, 1]``). With a
``random`` column, a SCORE row (Bayesmark's normalized score) places each benchmark
between two anchors: ``(v - a_b) / (r_b - a_b)`` with ``r_b`` the mean of ``random`` and
``a_b`` the mean of ``oracle-lag`` (or, without it, the best policy's mean); 0 is the
anchor, 1 playing at random, below 0 better than the anchor. A variant's score for a
seed is the mean over the benchmarks where ``r_b > a_b``; the row shows its mean +- se
over the seeds that ran all of them.
"""

from __future__ import annotations

import html
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from dynbo.harness.labels import OVERALL_ROW, REFERENCE_PLAYERS, SCORE_ROW
from dynbo.harness.store import policy_variants

__all__ = [
    "ADDITIONAL_QUERIES_MARK",
    "METRICS",
    "VIOLATION_METRIC",
    "Cell",
    "Table",
    "aggregate",
    "build_table",
    "policy_variants",
    "summary_table",
    "violation_table",
]

#: metric -> (caption text, True when lower is better, False when higher, None if neither)
METRICS: dict[str, tuple[str, bool | None]] = {
    "average_regret": ("average regret per query", True),
    "time_averaged_regret": ("time-averaged regret", True),
    "cumulative_regret": ("cumulative regret", True),
    "queries": ("number of queries", None),
    "mean_response_time": ("mean response time (s)", True),
    "final_dataset_size": ("final dataset size", None),
    "max_dataset_size": ("largest dataset size", None),
    "violation_rate": ("violation rate (fraction of queries violating a constraint)", True),
}

#: the metric shown beside the regret on constrained benchmarks (:mod:`dynbo.harness.constraints`)
VIOLATION_METRIC = "violation_rate"

#: what the violation-rate table's caption adds
_VIOLATION_NOTE = (
    " Only benchmarks with constraints have a row: a query violates when one of its "
    "noise-free constraint values at (x_k, t_k) is below 0, whether or not the policy "
    "models the constraints; warm-up points are not counted."
)

OVERALL = OVERALL_ROW
SCORE = SCORE_ROW

#: metrics that add up one term per query: fewer queries alone make them smaller
SUMS_OVER_QUERIES = frozenset({"cumulative_regret"})

#: the mark of a best cell that made fewer queries than another variant of its row
FEWER_QUERIES_MARK = "†"

#: the mark of a regret cell whose runs also made additional queries (not in the regret)
ADDITIONAL_QUERIES_MARK = "‡"

#: the metrics that score the main queries only: additional queries are shown beside them
REGRET_METRICS = frozenset({"average_regret", "time_averaged_regret", "cumulative_regret"})

#: the footnote marks as LaTeX superscripts
_LATEX_MARKS = {FEWER_QUERIES_MARK: r"\dagger", ADDITIONAL_QUERIES_MARK: r"\ddagger"}

#: LaTeX's special characters in text, each as it is written (one pass: no character
#: of a replacement is replaced again)
_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "$": r"\$",
    "&": r"\&",
    "%": r"\%",
    "#": r"\#",
    "_": r"\_",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def _mean_se(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, float("nan")
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n)


def aggregate(
    runs: Sequence[dict[str, Any]],
    metric: str = "average_regret",
    config: Mapping[str, Any] | None = None,
) -> dict[tuple[str, str], tuple[float, float, int]]:
    """``(benchmark, variant) -> (mean, standard error, number of seeds)`` of a summary metric.

    Failed runs and runs without the metric are left out.
    """
    values = _values(runs, metric, config)
    return {
        key: (*_mean_se(list(per_seed.values())), len(per_seed)) for key, per_seed in values.items()
    }


def _values(
    runs: Sequence[dict[str, Any]], metric: str, config: Mapping[str, Any] | None
) -> dict[tuple[str, str], dict[int, float]]:
    variants = policy_variants(runs, config)
    values: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for run in runs:
        value = run["summary"].get(metric) if run["status"] == "done" else None
        if value is not None and math.isfinite(float(value)):
            values[(run["label"], variants[run["run_id"]])][int(run["seed"])] = float(value)
    return values


@dataclass(frozen=True)
class Cell:
    """One table entry: mean, standard error, seeds, and its marks.

    ``flag`` holds the footnote marks (:data:`FEWER_QUERIES_MARK`,
    :data:`ADDITIONAL_QUERIES_MARK`, both or none) and ``note`` the sentences they stand
    for in this cell (HTML shows it on hover).
    """

    mean: float
    se: float
    seeds: int
    bold: bool = False
    underline: bool = False
    flag: str = ""
    note: str = ""

    def text(self, digits: int = 3) -> str:
        """``mean ± se`` (``mean`` alone with one seed) with ``digits`` significant digits."""
        if math.isnan(self.se):
            return f"{self.mean:.{digits}g}"
        return f"{self.mean:.{digits}g} ± {self.se:.2g}"


@dataclass(frozen=True)
class Table:
    """Rows (benchmarks, then OVERALL and SCORE), columns (variants) and their cells.

    ``references`` names the columns that are reference players (the last ones);
    ``additional_queries`` pairs each column whose runs made additional queries with their
    mean number per run (over all its finished runs).
    """

    metric: str
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    cells: dict[tuple[str, str], Cell]
    references: tuple[str, ...] = ()
    additional_queries: tuple[tuple[str, float], ...] = ()

    @property
    def caption(self) -> str:
        what, lower = METRICS.get(self.metric, (self.metric, None))
        text = f"{what[0].upper()}{what[1:]}: mean ± standard error over seeds (sd / sqrt(seeds))."
        if self.metric == VIOLATION_METRIC:
            text += _VIOLATION_NOTE
        if lower is not None:
            text += (
                f" {'Lower' if lower else 'Higher'} is better; the best of each row is in bold, "
                "the entries whose mean ± se interval overlaps the best one's are underlined."
            )
        if self.references:
            text += (
                f" Reference players ({', '.join(self.references)}) are not ranked: the marks "
                "and the normalizations consider the policies only."
            )
        if OVERALL in self.rows:
            text += (
                " OVERALL: each benchmark min-max normalized over all its policies' runs "
                "(0 = best run, 1 = worst), averaged over the benchmarks per seed; mean ± se "
                "over seeds."
            )
        if SCORE in self.rows:
            anchor = "oracle-lag" if "oracle-lag" in self.references else "the best policy"
            text += (
                f" SCORE: each benchmark normalized between {anchor} (0) and random (1), "
                "averaged over the benchmarks per seed; mean ± se over seeds."
            )
        if any(FEWER_QUERIES_MARK in cell.flag for cell in self.cells.values()):
            text += (
                f" {FEWER_QUERIES_MARK} The best of the row made fewer queries on average than "
                "another policy: a sum over queries favors querying less (compare the average "
                "regret per query)."
            )
        if self.additional_queries:
            counts = ", ".join(
                f"{column} +{_count(mean)}" for column, mean in self.additional_queries
            )
            text += (
                f" {ADDITIONAL_QUERIES_MARK} The policy also made additional queries "
                "(re-evaluations of past inputs, not scored): "
                f"{counts} additional queries per run on average."
            )
        return text

    @property
    def _first_summary_row(self) -> str | None:
        return next((r for r in self.rows if r in (OVERALL, SCORE)), None)

    def markdown(self) -> str:
        """A GitHub-flavored Markdown table (bold ``**``, underline ``<u>``)."""
        head = "| benchmark | " + " | ".join(self.columns) + " |"
        lines = [head, "|" + "---|" * (len(self.columns) + 1)]
        for row in self.rows:
            cells = []
            for column in self.columns:
                cell = self.cells.get((row, column))
                text = "-" if cell is None else cell.text()
                if cell is not None and cell.underline:
                    text = f"<u>{text}</u>"
                if cell is not None and cell.bold:
                    text = f"**{text}**"
                if cell is not None and cell.flag:
                    text += f" {cell.flag}"
                cells.append(text)
            lines.append(f"| {row} | " + " | ".join(cells) + " |")
        return "\n".join(lines) + f"\n\n{self.caption}\n"

    def latex(self) -> str:
        """A ``tabular`` in a ``table`` float (``\\textbf``, ``\\underline``; needs no package)."""

        def escape(text: str) -> str:
            return "".join(_LATEX_SPECIAL.get(c, c) for c in text)

        lines = [
            r"\begin{table}",
            r"\centering",
            r"\begin{tabular}{l" + "c" * len(self.columns) + "}",
            r"\hline",
            "benchmark & " + " & ".join(escape(c) for c in self.columns) + r" \\",
            r"\hline",
        ]
        for row in self.rows:
            cells = []
            for column in self.columns:
                cell = self.cells.get((row, column))
                if cell is None:
                    cells.append("-")
                    continue
                text = cell.text().replace("±", r"$\pm$")
                if cell.underline:
                    text = rf"\underline{{{text}}}"
                if cell.bold:
                    text = rf"\textbf{{{text}}}"
                if cell.flag:
                    symbols = "".join(_LATEX_MARKS[m] for m in cell.flag)
                    text += f"$^{symbols}$" if len(cell.flag) == 1 else f"$^{{{symbols}}}$"
                cells.append(text)
            if row == self._first_summary_row:
                lines.append(r"\hline")
            lines.append(escape(row) + " & " + " & ".join(cells) + r" \\")
        caption = escape(self.caption).replace("±", r"$\pm$")
        for mark, symbol in _LATEX_MARKS.items():
            caption = caption.replace(mark, f"$^{symbol}$")
        lines += [r"\hline", r"\end{tabular}", r"\caption{" + caption + "}", r"\end{table}"]
        return "\n".join(lines) + "\n"

    def html(self) -> str:
        """An HTML ``<table>`` (``<b>``, ``<u>``; cells carry ``data-mean``)."""
        out = ['<table class="results">', f"<caption>{html.escape(self.caption)}</caption>"]
        out.append(
            "<thead><tr><th>benchmark</th>"
            + "".join(
                f'<th class="reference">{html.escape(c)}</th>'
                if c in self.references
                else f"<th>{html.escape(c)}</th>"
                for c in self.columns
            )
            + "</tr></thead><tbody>"
        )
        for row in self.rows:
            cells = []
            for column in self.columns:
                cell = self.cells.get((row, column))
                if cell is None:
                    cells.append("<td>-</td>")
                    continue
                text = html.escape(cell.text())
                if cell.underline:
                    text = f"<u>{text}</u>"
                if cell.bold:
                    text = f"<b>{text}</b>"
                attrs = f' data-mean="{cell.mean!r}"'
                if cell.flag:
                    text += f' <sup class="flag">{html.escape(cell.flag)}</sup>'
                    attrs += f' title="{html.escape(cell.note)}"'
                cells.append(f"<td{attrs}>{text}</td>")
            css = ' class="overall"' if row in (OVERALL, SCORE) else ""
            out.append(f"<tr{css}><th>{html.escape(row)}</th>{''.join(cells)}</tr>")
        out.append("</tbody></table>")
        return "\n".join(out)


def _mark(cells: dict[str, Cell], lower: bool | None) -> dict[str, Cell]:
    finite = {k: c for k, c in cells.items() if math.isfinite(c.mean)}
    if lower is None or not finite:
        return cells
    sign = 1.0 if lower else -1.0
    best_key = min(finite, key=lambda k: sign * finite[k].mean)
    best = finite[best_key]
    best_se = 0.0 if math.isnan(best.se) else best.se
    out = {}
    for key, cell in cells.items():
        se = 0.0 if math.isnan(cell.se) else cell.se
        overlaps = abs(cell.mean - best.mean) <= se + best_se
        out[key] = Cell(
            cell.mean,
            cell.se,
            cell.seeds,
            bold=key == best_key,
            underline=key != best_key and overlaps and key in finite,
        )
    return out


def build_table(
    runs: Sequence[dict[str, Any]],
    metric: str = "average_regret",
    config: Mapping[str, Any] | None = None,
    *,
    overall: bool = True,
) -> Table:
    """The table of ``metric`` over the finished runs (see the module docstring).

    Args:
        runs: run rows of :meth:`dynbo.harness.Store.runs`.
        metric: a run summary key (:data:`METRICS` lists the usual ones).
        config: the campaign's configuration (policy entry labels).
        overall: add the OVERALL row (only with two or more benchmarks, and only for a
            metric with a better direction: a count such as ``queries`` has no best run).

    Raises:
        ValueError: if no finished run has the metric.
    """
    values = _values(runs, metric, config)
    if not values:
        raise ValueError(f"no finished run has the metric {metric!r}")
    _, lower = METRICS.get(metric, (metric, None))
    if lower is None:
        overall = False  # no best run to normalize against
    rows = sorted({b for b, _ in values})
    present = {v for _, v in values}
    references = _reference_columns(runs, config, present)
    policies = sorted(present - set(references))
    columns = [*policies, *references]
    cells: dict[tuple[str, str], Cell] = {}
    for row in rows:
        line = {
            column: Cell(*_mean_se(list(per_seed.values())), len(per_seed))
            for column in columns
            if (per_seed := values.get((row, column)))
        }
        ranked = _mark({c: cell for c, cell in line.items() if c in policies}, lower)
        for column, cell in {**line, **ranked}.items():
            cells[(row, column)] = cell
    if metric in SUMS_OVER_QUERIES:
        queries = _values(runs, "queries", config)
        _flag_fewer_queries(cells, {k: v for k, v in queries.items() if k[1] in policies}, rows)
    additional: dict[str, float] = {}
    if metric in REGRET_METRICS:
        additional = _flag_additional_queries(cells, _values(runs, "additional_queries", config))
    summaries = []
    if overall and len(rows) > 1:
        summaries.append((OVERALL, _overall_scores(values, rows, columns, policies)))
    if lower and "random" in references:
        summaries.append((SCORE, _normalized_scores(values, rows, columns, policies)))
    for name, scores in summaries:
        line = {
            column: Cell(*_mean_se(per_seed), len(per_seed))
            for column, per_seed in scores.items()
            if per_seed
        }
        # the normalized scores are lower-is-better whenever the metric is
        ranked = _mark({c: cell for c, cell in line.items() if c in policies}, lower)
        for column, cell in {**line, **ranked}.items():
            cells[(name, column)] = cell
        if line:
            rows = [*rows, name]
    return Table(
        metric=metric,
        rows=tuple(rows),
        columns=tuple(columns),
        cells=cells,
        references=tuple(references),
        additional_queries=tuple((c, additional[c]) for c in columns if c in additional),
    )


def _count(value: float) -> str:
    """A mean count as read: ``1,714``, ``12``, ``0.5``."""
    return f"{value:,.0f}" if value >= 10 else f"{value:.2g}"


def _flag_additional_queries(
    cells: dict[tuple[str, str], Cell], additional: dict[tuple[str, str], dict[int, float]]
) -> dict[str, float]:
    """Mark, in place, the cells whose runs made additional queries (the double dagger).

    Returns:
        ``column -> mean additional queries per run`` over all its runs, for the columns
        with any.
    """
    per_column: dict[str, list[float]] = defaultdict(list)
    for (row, column), per_seed in additional.items():
        mean = sum(per_seed.values()) / len(per_seed)
        per_column[column].extend(per_seed.values())
        if mean > 0 and (row, column) in cells:
            cell = cells[(row, column)]
            note = (
                f"{column} also made {_count(mean)} additional queries per run on average "
                "(re-evaluations of past inputs, not scored)"
            )
            cells[(row, column)] = replace(
                cell,
                flag=cell.flag + ADDITIONAL_QUERIES_MARK,
                note=f"{cell.note}; {note}" if cell.note else note,
            )
    return {c: sum(v) / len(v) for c, v in per_column.items() if sum(v) > 0}


def _reference_columns(
    runs: Sequence[dict[str, Any]], config: Mapping[str, Any] | None, present: set[str]
) -> list[str]:
    """The columns of reference players' runs, in :func:`reference_names` order."""
    variants = policy_variants(runs, config)
    by_player = {
        run["policy"]: variants[run["run_id"]]
        for run in runs
        if run["policy"] in REFERENCE_PLAYERS and variants[run["run_id"]] in present
    }
    return [by_player[name] for name in REFERENCE_PLAYERS if name in by_player]


def _flag_fewer_queries(
    cells: dict[tuple[str, str], Cell],
    queries: dict[tuple[str, str], dict[int, float]],
    rows: list[str],
) -> None:
    """Flag, in place, each row's bold cell whose variant made fewer queries on average
    than another variant of that row (their mean number of queries over seeds)."""
    for row in rows:
        counts = {
            column: sum(per_seed.values()) / len(per_seed)
            for (bench, column), per_seed in queries.items()
            if bench == row and per_seed and (row, column) in cells
        }
        best = next((c for (r, c), cell in cells.items() if r == row and cell.bold), None)
        if best is None or best not in counts or not counts:
            continue
        most = max(counts, key=counts.__getitem__)
        if counts[best] < counts[most]:
            note = (
                f"{best} made {counts[best]:.3g} queries on average, "
                f"{most} {counts[most]:.3g}: a sum over queries favors querying less"
            )
            cells[(row, best)] = replace(cells[(row, best)], flag=FEWER_QUERIES_MARK, note=note)


def _overall_scores(
    values: dict[tuple[str, str], dict[int, float]],
    rows: list[str],
    columns: list[str],
    ranked: list[str],
) -> dict[str, list[float]]:
    """Per column, the per-seed mean over ``rows`` of the values min-max normalized by
    the runs of the ``ranked`` columns (all columns when none is ranked)."""
    basis = ranked or columns
    anchors = {}
    for row in rows:
        everything = [v for c in basis for v in values.get((row, c), {}).values()]
        if not everything:  # only reference players ran this benchmark
            everything = [v for c in columns for v in values.get((row, c), {}).values()]
        anchors[row] = (min(everything), max(everything))
    return _per_seed_means(values, rows, columns, anchors)


def _normalized_scores(
    values: dict[tuple[str, str], dict[int, float]],
    rows: list[str],
    columns: list[str],
    ranked: list[str],
) -> dict[str, list[float]]:
    """Bayesmark's normalized score (module docstring): per column, the per-seed mean over
    the benchmarks of ``(v - a_b) / (r_b - a_b)``."""

    def mean(row: str, column: str) -> float | None:
        per_seed = values.get((row, column))
        return sum(per_seed.values()) / len(per_seed) if per_seed else None

    anchors = {}
    for row in rows:
        high = mean(row, "random")
        low = mean(row, "oracle-lag") if "oracle-lag" in columns else None
        if low is None:
            found = [m for c in ranked if (m := mean(row, c)) is not None]
            low = min(found) if found else None
        if high is not None and low is not None and high > low:
            anchors[row] = (low, high)
    return _per_seed_means(values, [r for r in rows if r in anchors], columns, anchors)


def _per_seed_means(
    values: dict[tuple[str, str], dict[int, float]],
    rows: list[str],
    columns: list[str],
    anchors: Mapping[str, tuple[float, float]],
) -> dict[str, list[float]]:
    """Per column, ``(v - low) / (high - low)`` of each row averaged over ``rows``, for
    every seed that ran all of them (0 where ``high == low``)."""
    scores: dict[str, list[float]] = {}
    if not rows:
        return scores
    for column in columns:
        normalized = []
        for row in rows:
            low, high = anchors[row]
            span = high - low
            normalized.append(
                {
                    seed: (v - low) / span if span > 0 else 0.0
                    for seed, v in values.get((row, column), {}).items()
                }
            )
        seeds = set.intersection(*(set(n) for n in normalized))
        scores[column] = [sum(n[seed] for n in normalized) / len(rows) for seed in sorted(seeds)]
    return scores


def violation_table(
    runs: Sequence[dict[str, Any]], config: Mapping[str, Any] | None = None
) -> Table | None:
    """The violation-rate table, shown beside the regret: ``None`` when no finished run
    was on a constrained benchmark (only those runs' summaries have a violation rate)."""
    try:
        return build_table(runs, VIOLATION_METRIC, config)
    except ValueError:
        return None


def summary_table(
    runs: Sequence[dict[str, Any]],
    metric: str = "average_regret",
    config: Mapping[str, Any] | None = None,
) -> str:
    """The table as aligned plain text (the terminal's view), with the caption; a regret
    table is followed by the violation-rate table when some benchmark has constraints."""
    text = _text_table(runs, metric, config)
    if metric in REGRET_METRICS and violation_table(runs, config) is not None:
        text += "\n\n" + _text_table(runs, VIOLATION_METRIC, config)
    return text


def _text_table(
    runs: Sequence[dict[str, Any]], metric: str, config: Mapping[str, Any] | None
) -> str:
    """:func:`summary_table` of one metric."""
    try:
        table = build_table(runs, metric, config)
    except ValueError:
        finished = [r for r in runs if r.get("status") == "done"]
        if not finished:
            return "(no finished runs)"
        empty = sum(1 for r in finished if not (r.get("summary") or {}).get("queries"))
        reason = (
            f": {empty} of them made no query after the warm-up (the horizon ends first)"
            if empty
            else ""
        )
        return f"(none of the {len(finished)} finished runs has a value of {metric}{reason})"
    texts = {}
    # a column of its own for the flag, so that the marks stay aligned
    flag_width = max(len(cell.flag) for cell in table.cells.values())
    for key, cell in table.cells.items():
        mark = "*" if cell.bold else ("_" if cell.underline else " ")
        texts[key] = cell.text() + mark + cell.flag.ljust(flag_width)
    width = max([len(c) for c in table.columns] + [len(t) for t in texts.values()]) + 2
    first = max(len(r) for r in [*table.rows, metric]) + 2
    lines = [f"{metric:<{first}}" + "".join(f"{c:>{width}}" for c in table.columns)]
    for row in table.rows:
        lines.append(
            f"{row:<{first}}"
            + "".join(f"{texts.get((row, c), '-'):>{width}}" for c in table.columns)
        )
    note = table.caption.replace("in bold", "marked *").replace("are underlined", "marked _")
    return "\n".join(lines) + "\n" + note
