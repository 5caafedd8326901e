"""A paper's published table beside the measured one (``dynbo reproduce``).

The paper's numbers come as data (``dynbo.reproductions``: ``label -> policy -> [mean,
standard error or null]`` with the citation); the measured side is a
:class:`dynbo.report.tables.Table` of the same metric. Each policy gets two columns,
*paper* and *dynbo*; rows are the paper's benchmarks in its order (those this version
does not run say so), then any other measured benchmark, then OVERALL. Only the
measured cells carry the marks of the measured table (best of the row in bold, the
overlapping ones underlined).
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

from dynbo.report.tables import METRICS, OVERALL, SCORE, Cell, Table

__all__ = ["citation_text", "paper_table_html", "paper_table_markdown"]

NOT_RUN = "not run"
MISSING = "–"


def citation_text(paper: Mapping[str, Any]) -> str:
    """``Authors (year). Title. Table n.``"""
    c = paper.get("citation", {})
    parts = [f"{c.get('authors', '?')} ({c.get('year', '?')}). {c.get('title', '?')}."]
    if c.get("table"):
        parts.append(f"{c['table']}.")
    return " ".join(parts)


def _number(value: float | int) -> str:
    if isinstance(value, int):
        return str(value)
    return f"{value:g}"


def _plain(value: float, digits: int) -> str:
    """``digits`` significant digits, without the exponent ``g`` uses from 1000 on."""
    text = f"{value:.{digits}g}"
    if "e+" in text:
        return f"{value:.0f}"
    return text


def _measured_text(cell: Cell) -> str:
    """``mean ± se`` as the papers print them (``1235 ± 30``, not ``1.24e+03 ± 30``)."""
    if math.isnan(cell.se):
        return _plain(cell.mean, 3)
    return f"{_plain(cell.mean, 3)} ± {_plain(cell.se, 2)}"


def _paper_cell(entry: Sequence[Any] | None) -> str:
    if not entry or entry[0] is None:
        return MISSING
    mean, se = entry[0], entry[1] if len(entry) > 1 else None
    if se is None:
        return _number(mean)
    return f"{_number(mean)} ± {_number(se)}"


def _layout(paper: Mapping[str, Any], table: Table) -> tuple[list[str], list[str]]:
    numbers = paper.get("table", {})
    summaries = (OVERALL, SCORE)
    rows = [r for r in numbers if r not in summaries]
    rows += [r for r in table.rows if r not in summaries and r not in rows]
    rows += [r for r in summaries if r in numbers or r in table.rows]
    columns = list(paper.get("policies") or sorted({p for r in numbers.values() for p in r}))
    columns += [c for c in table.columns if c not in columns]
    return rows, columns


def _row_name(paper: Mapping[str, Any], row: str) -> str:
    shown = paper.get("paper_labels", {}).get(row)
    return row if not shown or shown.lower() == row.lower() else f"{row} [{shown}]"


def _caption(
    paper: Mapping[str, Any], table: Table, note: str | None, time_averaged: Table | None = None
) -> str:
    metric = paper.get("metric", table.metric)
    what = METRICS.get(metric, (metric, None))[0]
    text = (
        f"{what[0].upper()}{what[1:]}. paper: {citation_text(paper)} "
        f"{paper.get('statistic', '')}. dynbo: mean ± standard error over the seeds of "
        "this store (sd / sqrt(seeds)); the best measured mean of each row is in bold, "
        "the measured entries whose mean ± se interval overlaps the best one's are "
        f"underlined. '{NOT_RUN}': a benchmark this version does not implement."
    )
    if time_averaged is not None:
        text += (
            " 'dynbo, time-averaged': the same runs' regret held from each query to the next "
            "and averaged over the horizon (a policy that waits is scored on few queries by "
            "the per-query average)."
        )
    if note:
        text += f" {note}"
    return text


def _measured(paper: Mapping[str, Any], table: Table, row: str, column: str) -> Cell | str:
    if row in paper.get("not_run", {}):
        return NOT_RUN
    cell = table.cells.get((row, column))
    return MISSING if cell is None else cell


def paper_table_html(
    paper: Mapping[str, Any],
    table: Table,
    *,
    note: str | None = None,
    time_averaged: Table | None = None,
) -> str:
    """An HTML section: a heading, the side-by-side table and the paper's notes.

    Args:
        paper: the paper's data (:func:`dynbo.reproductions.load`).
        table: the measured table (:func:`dynbo.report.tables.build_table`).
        note: a sentence added to the caption (e.g. the cheaper overrides used).
        time_averaged: the measured time-averaged regret (the same runs), shown in a
            third column per policy: a policy that waits is scored on few queries by the
            per-query average, and on the whole horizon by this one.
    """
    rows, columns = _layout(paper, table)
    numbers = paper.get("table", {})
    not_run = paper.get("not_run", {})
    sides = ["paper", "dynbo"] + (["dynbo, time-averaged"] if time_averaged is not None else [])
    out = [
        '<section class="paper-comparison">',
        f"<h2>Published numbers beside the measured ones: {html.escape(citation_text(paper))}</h2>",
        '<table class="results paper-comparison">',
        f"<caption>{html.escape(_caption(paper, table, note, time_averaged))}</caption>",
        '<thead><tr><th rowspan="2">benchmark</th>'
        + "".join(f'<th colspan="{len(sides)}">{html.escape(c)}</th>' for c in columns)
        + "</tr><tr>"
        + "".join(f"<th>{html.escape(side)}</th>" for side in sides) * len(columns)
        + "</tr></thead><tbody>",
    ]
    for row in rows:
        cells = []
        for column in columns:
            entry = numbers.get(row, {}).get(column)
            value = "" if not entry or entry[0] is None else f' data-paper="{entry[0]!r}"'
            cells.append(
                f'<td class="paper" style="color:#555"{value}>'
                f"{html.escape(_paper_cell(entry))}</td>"
            )
            for measured_table in (table, time_averaged):
                if measured_table is None:
                    continue
                measured = _measured(paper, measured_table, row, column)
                if isinstance(measured, str):
                    cells.append(f'<td class="measured">{html.escape(measured)}</td>')
                    continue
                text = html.escape(_measured_text(measured))
                if measured.underline:
                    text = f"<u>{text}</u>"
                if measured.bold:
                    text = f"<b>{text}</b>"
                cells.append(f'<td class="measured" data-mean="{measured.mean!r}">{text}</td>')
        title = f' title="{html.escape(not_run[row])}"' if row in not_run else ""
        css = ' class="overall"' if row == OVERALL else ""
        out.append(
            f"<tr{css}><th{title}>{html.escape(_row_name(paper, row))}</th>{''.join(cells)}</tr>"
        )
    out.append("</tbody></table>")
    notes = [*(f"{r}: {why}" for r, why in not_run.items()), *paper.get("notes", [])]
    if notes:
        out.append("<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    out.append("</section>")
    return "\n".join(out)


def paper_table_markdown(
    paper: Mapping[str, Any],
    table: Table,
    *,
    note: str | None = None,
    time_averaged: Table | None = None,
) -> str:
    """The Markdown version of :func:`paper_table_html` (bold ``**``, underline ``<u>``)."""
    rows, columns = _layout(paper, table)
    numbers = paper.get("table", {})
    sides = ["paper", "dynbo"] + (["dynbo time-averaged"] if time_averaged is not None else [])
    head = ["benchmark"] + [f"{c} {side}" for c in columns for side in sides]
    lines = [
        f"Published numbers beside the measured ones: {citation_text(paper)}",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for row in rows:
        cells = [_row_name(paper, row)]
        for column in columns:
            cells.append(_paper_cell(numbers.get(row, {}).get(column)))
            for measured_table in (table, time_averaged):
                if measured_table is None:
                    continue
                measured = _measured(paper, measured_table, row, column)
                if isinstance(measured, str):
                    cells.append(measured)
                    continue
                text = _measured_text(measured)
                if measured.underline:
                    text = f"<u>{text}</u>"
                if measured.bold:
                    text = f"**{text}**"
                cells.append(text)
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", _caption(paper, table, note, time_averaged), ""]
    for row, why in paper.get("not_run", {}).items():
        lines.append(f"- {row}: {why}")
    for text in paper.get("notes", []):
        lines.append(f"- {text}")
    return "\n".join(lines) + "\n"
