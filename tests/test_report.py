"""Reports from a store: tables against a hand computation, figures, HTML (issue 11)."""

import math

import numpy as np
import pytest

from dynbo.harness import RunSpec, Store
from dynbo.harness.loop import RunResult
from dynbo.report.tables import OVERALL, build_table, policy_variants, summary_table

# (benchmark, policy, options, seed) -> average regret
VALUES = {
    ("A", "p", 0): 1.0,
    ("A", "p", 1): 3.0,
    ("A", "q", 0): 2.0,
    ("A", "q", 1): 2.2,
    ("A", "r", 0): 10.0,
    ("A", "r", 1): 12.0,
    ("B", "p", 0): 5.0,
    ("B", "p", 1): 7.0,
    ("B", "q", 0): 1.0,
    ("B", "q", 1): 1.0,
    ("B", "r", 0): 4.0,
    ("B", "r", 1): 6.0,
}


def row(k, t, regret, size):
    return {
        "k": k,
        "warmup": 0,
        "s": t,
        "t": t,
        "x": "[0.5]",
        "y": 0.0,
        "f": 0.0,
        "f_max": regret,
        "regret": regret,
        "dataset_size": size,
        "response_time": 0.1 * size,
    }


def build_store(path, values=VALUES, config=None):
    """A store with one run per entry; iterations whose mean regret is the entry's value."""
    store = Store(path)
    ids = []
    for (bench, policy, seed), value in values.items():
        options = {"acquisition_time": "response"} if policy == "r" else {}
        name = "wdbo" if policy == "r" else policy
        spec = RunSpec(
            benchmark="eggholder",
            label=bench,
            policy=name,
            seed=seed,
            policy_options=options,
            benchmark_options={"dim": 1 if bench == "A" else 2},  # two run identities
        )
        iterations = [row(k, float(k), value, k + 3) for k in range(1, 6)]
        summary = {"average_regret": value, "queries": 5, "mean_response_time": 0.4}
        store.save_run(RunResult(spec, "done", iterations, [], summary))
        ids.append(spec.run_id)
    store.add_campaign("c1", "demo", config or {"name": "demo"})
    store.link("c1", ids)
    return store


def hand_mean_se(values):
    values = np.asarray(values, float)
    return values.mean(), values.std(ddof=1) / math.sqrt(len(values))


def test_table_means_standard_errors_marks_and_overall_row_match_a_hand_computation(tmp_path):
    with build_store(tmp_path / "s.sqlite") as store:
        runs = store.runs("c1")
        table = build_table(runs)
    assert table.columns == ("p", "q", "wdbo")
    assert table.rows == ("A", "B", OVERALL)
    for bench in ("A", "B"):
        for column, policy in (("p", "p"), ("q", "q"), ("wdbo", "r")):
            mean, se = hand_mean_se([VALUES[(bench, policy, s)] for s in (0, 1)])
            cell = table.cells[(bench, column)]
            assert cell.mean == pytest.approx(mean) and cell.se == pytest.approx(se)
    # row A: p = 2 +- 1, q = 2.1 +- 0.1, wdbo = 11 +- 1: p bold, q overlaps it, wdbo not
    a = {c: table.cells[("A", c)] for c in table.columns}
    assert a["p"].bold and not a["p"].underline
    assert a["q"].underline and not a["q"].bold
    assert not a["wdbo"].bold and not a["wdbo"].underline
    # row B: q = 1 +- 0 bold; p = 6 +- 1 and wdbo = 5 +- 1 do not reach 1
    b = {c: table.cells[("B", c)] for c in table.columns}
    assert b["q"].bold and not b["p"].underline and not b["wdbo"].underline
    # OVERALL: min-max per benchmark over all runs (A: 1..12, B: 1..7), mean over
    # benchmarks per seed, then mean +- se over seeds
    norm = {
        (bench, pol, s): (v - lo) / (hi - lo)
        for (bench, pol, s), v in VALUES.items()
        for lo, hi in [{"A": (1.0, 12.0), "B": (1.0, 7.0)}[bench]]
    }
    for column, policy in (("p", "p"), ("q", "q"), ("wdbo", "r")):
        per_seed = [(norm[("A", policy, s)] + norm[("B", policy, s)]) / 2 for s in (0, 1)]
        mean, se = hand_mean_se(per_seed)
        cell = table.cells[(OVERALL, column)]
        assert cell.mean == pytest.approx(mean) and cell.se == pytest.approx(se)
    best = min(table.columns, key=lambda c: table.cells[(OVERALL, c)].mean)
    assert table.cells[(OVERALL, best)].bold and best == "q"


def test_table_formats_carry_the_marks_and_the_caption(tmp_path):
    with build_store(tmp_path / "s.sqlite") as store:
        table = build_table(store.runs("c1"))
        text = summary_table(store.runs("c1"))
    md = table.markdown()
    assert "| A | **2 ± 1** | <u>2.1 ± 0.1</u> | 11 ± 1 |" in md
    assert "Lower is better" in md and "standard error" in md
    tex = table.latex()
    assert r"\textbf{2 $\pm$ 1}" in tex and r"\underline{2.1 $\pm$ 0.1}" in tex
    assert tex.count(r"\begin{tabular}") == 1 and r"\caption{" in tex
    page = table.html()
    assert "<b>2 ± 1</b>" in page and "<u>2.1 ± 0.1</u>" in page and "<caption>" in page
    assert "2 ± 1*" in text and "OVERALL" in text


def test_latex_escapes_every_special_character_of_a_label(tmp_path):
    values = {("R^2 ~ {x} $y & 5% #1 a_b \\", "p", 0): 1.0, ("A", "p", 0): 2.0}
    with build_store(tmp_path / "s.sqlite", values=values) as store:
        tex = build_table(store.runs("c1")).latex()
    expected = r"R\textasciicircum{}2 \textasciitilde{} \{x\} \$y \& 5\% \#1 a\_b \textbackslash{}"
    assert expected in tex


def test_policy_entry_labels_name_the_variants(tmp_path):
    config = {
        "policies": [
            "p",
            "q",
            {"name": "wdbo", "options": {"acquisition_time": "response"}, "label": "aimed"},
        ]
    }
    with build_store(tmp_path / "s.sqlite", config=config) as store:
        runs = store.runs("c1")
        config_stored = store.campaigns()[0]["config"]
        frame = store.runs_frame("c1")
    variants = policy_variants(runs, config_stored)
    assert set(variants.values()) == {"p", "q", "aimed"}
    assert build_table(runs, config=config_stored).columns == ("aimed", "p", "q")
    # exports tell configurations apart
    assert {"campaign_id", "variant", "policy_options", "protocol", "benchmark"} <= set(frame)
    assert set(frame["variant"]) == {"p", "q", "aimed"}


def test_two_unlabelled_option_sets_of_one_policy_are_two_columns(tmp_path):
    values = {("A", "r", 0): 1.0, ("A", "wdbo", 0): 2.0}
    with build_store(tmp_path / "s.sqlite", values=values) as store:
        table = build_table(store.runs("c1"))
    assert table.columns == ("wdbo [acquisition_time=response]", "wdbo [defaults]")
    assert table.rows == ("A",)  # one benchmark: no OVERALL row


def test_a_metric_no_run_has_is_a_value_error(tmp_path):
    with build_store(tmp_path / "s.sqlite") as store:
        with pytest.raises(ValueError, match="no_such_metric"):
            build_table(store.runs("c1"), "no_such_metric")


# ---------------------------------------------------------------- figures and the HTML page
def loop_frame(store):
    frame = store.iterations_frame("c1")
    frame["variant"] = frame["run_id"].map(policy_variants(store.runs("c1")))
    return frame


def assert_png_not_blank(path, min_size=(300, 200)):
    from PIL import Image

    with Image.open(path) as image:
        image.load()
        assert image.format == "PNG" and image.size[0] >= min_size[0]
        assert image.size[1] >= min_size[1]
        colors = image.convert("L").getextrema()
    assert colors[1] - colors[0] > 100  # ink on the page, not one flat color


def test_every_figure_renders_a_png_that_decodes_and_is_not_blank(tmp_path):
    from dynbo.report.figures import dataset_size_figure, overall_figure, regret_figure

    with build_store(tmp_path / "s.sqlite") as store:
        frame = loop_frame(store)
        table = build_table(store.runs("c1"))
    for path in (
        regret_figure(frame, tmp_path / "regret.png"),
        dataset_size_figure(frame, tmp_path / "size.png"),
        overall_figure(table, tmp_path / "overall.png"),
    ):
        assert_png_not_blank(path)
    one = build_table(store_runs_one_benchmark(tmp_path))
    with pytest.raises(ValueError, match="OVERALL"):
        overall_figure(one, tmp_path / "none.png")


def store_runs_one_benchmark(tmp_path):
    values = {k: v for k, v in VALUES.items() if k[0] == "A"}
    with build_store(tmp_path / "one.sqlite", values=values) as store:
        return store.runs("c1")


def test_report_and_show_commands_read_the_store_only(tmp_path, capsys):
    from dynbo.cli import main

    path = tmp_path / "s.sqlite"
    build_store(path).close()
    before = path.read_bytes()
    assert main(["report", str(path), "--out", str(tmp_path / "rep")]) == 0
    page = tmp_path / "rep" / "index.html"
    assert capsys.readouterr().out.strip() == str(page)
    text = page.read_text()
    assert text.count("data:image/png;base64,") == 3 and "<b>2 ± 1</b>" in text
    assert (tmp_path / "rep" / "table.md").read_text().startswith("| benchmark |")
    assert main(["show", str(path), "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert "c1" in out and "| A | **2 ± 1** |" in out
    assert path.read_bytes() == before
    assert main(["show", str(tmp_path / "missing.sqlite")]) == 2
    capsys.readouterr()
    # a misspelled metric is an error, not "(no finished runs)"
    assert main(["show", str(path), "--metric", "zzz"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "unknown metric 'zzz'" in captured.err
    assert "average_regret" in captured.err and len(captured.err.strip().splitlines()) == 1
    assert main(["report", str(path), "--campaign", "zz", "--out", str(tmp_path / "x")]) == 2
    assert "matches no campaign" in capsys.readouterr().err


def test_the_html_report_in_a_real_headless_browser(tmp_path, headless_chromium):
    from dynbo.report.html import write_report

    path = tmp_path / "s.sqlite"
    build_store(path).close()
    page = write_report(path, tmp_path / "rep")
    driver = headless_chromium(1200, 1600)
    driver.get(page.as_uri())
    assert driver.execute_script("return document.readyState") == "complete"
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
    sizes = driver.execute_script(
        "return Array.from(document.images).map(i => [i.naturalWidth, i.naturalHeight])"
    )
    assert len(sizes) == 3 and all(w > 0 and h > 0 for w, h in sizes)
    # in every row of the first table, the bold cell holds the row's smallest mean
    rows = driver.execute_script(
        "return Array.from(document.querySelector('table.results').tBodies[0].rows).map("
        "r => Array.from(r.querySelectorAll('td')).filter(c => c.dataset.mean).map("
        "c => [parseFloat(c.dataset.mean), c.querySelector('b') !== null]))"
    )
    assert len(rows) == 3
    for cells in rows:
        bold = [mean for mean, is_bold in cells if is_bold]
        assert bold == [min(mean for mean, _ in cells)]
    driver.save_screenshot(str(tmp_path / "report.png"))
    assert_png_not_blank(tmp_path / "report.png")


def test_labels_with_dollar_signs_are_text_in_figures_and_animations(tmp_path):
    from dynbo.report.html import write_report

    # mathtext would fail on the unknown symbol, and the whole report with it
    values = {("cost $\\bogus$", "p", 0): 1.0, ("B", "p", 0): 2.0}
    path = tmp_path / "s.sqlite"
    build_store(path, values=values).close()
    page = write_report(path, tmp_path / "rep")
    assert "cost $\\bogus$" in page.read_text()


def test_only_the_labels_are_escaped_not_the_axes_math():
    import matplotlib

    from dynbo.report.figures import literal

    assert literal("cost $x$ & more") == r"cost \$x\$ & more"
    # the axes' own tick labels (log-scale exponents) stay mathtext
    assert matplotlib.rcParams["text.parse_math"] is True


def test_a_new_report_removes_the_previous_reports_files_and_nothing_else(tmp_path):
    from dynbo.report.html import write_report

    two = tmp_path / "two.sqlite"
    build_store(two).close()  # two benchmarks: an OVERALL figure
    one = tmp_path / "one.sqlite"
    build_store(one, values={k: v for k, v in VALUES.items() if k[0] == "A"}).close()
    out = tmp_path / "rep"
    write_report(two, out)
    (out / "animation_3.gif").write_bytes(b"GIF89a")  # as an --animate report leaves
    (out / "notes.txt").write_text("mine")
    assert (out / "overall.png").exists()
    write_report(one, out)
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "dataset_size.png",
        "index.html",
        "notes.txt",
        "regret.png",
        "table.md",
        "table.tex",
    ]


def test_a_report_folder_below_a_file_is_refused_before_anything_runs(tmp_path, capsys):
    from dynbo.cli import main

    (tmp_path / "afile").write_text("x")
    args = ["reproduce", "et-gp-ucb-temperature", "--seeds", "1", "--horizon", "3"]
    args += ["--store", str(tmp_path / "r.sqlite"), "--out", str(tmp_path / "afile" / "report")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "is not a directory" in err and err.count("\n") == 1
    assert not (tmp_path / "r.sqlite").exists()  # nothing ran, nothing stored


def test_the_run_animation_is_a_gif_with_several_frames(tmp_path):
    from PIL import Image

    from dynbo.harness import Protocol
    from dynbo.report.animation import run_animation

    spec = RunSpec(
        benchmark="eggholder",
        benchmark_options={"dim": 1, "horizon": 6.0, "cost": 0.5},
        policy="wdbo",
        seed=0,
        protocol=Protocol(clock="measured", warmup=4),  # replayed under the modeled clock
        policy_options={"raw_samples": 16, "restarts": 1},
    )
    path = run_animation(spec, tmp_path / "run.gif", frames=4, grid=12)
    with Image.open(path) as gif:
        assert gif.format == "GIF" and gif.n_frames > 1 and gif.size[0] > 300
    spec2 = RunSpec(benchmark="hartmann3", benchmark_options={"dim": 2}, policy="wdbo", seed=0)
    with pytest.raises(ValueError, match="1-D"):
        run_animation(spec2, tmp_path / "no.gif")


def test_a_report_that_fails_half_way_leaves_the_previous_one_whole(tmp_path, monkeypatch):
    import dynbo.report.html as report_html

    path = tmp_path / "s.sqlite"
    build_store(path).close()
    out = tmp_path / "rep"
    report_html.write_report(path, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def broken(*args, **kwargs):
        raise ValueError("figure failed")

    monkeypatch.setattr(report_html, "dataset_size_figure", broken)
    with pytest.raises(ValueError, match="figure failed"):
        report_html.write_report(path, out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep", "s.sqlite"]  # no staging left
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="not a directory"):
        report_html.write_report(path, tmp_path / "file")


# ------------------------------------------------- neutral metrics, the fewer-queries flag
def test_neutral_metrics_have_no_overall_row_no_marks_and_no_best_run_caption(tmp_path):
    with build_store(tmp_path / "s.sqlite") as store:
        runs = store.runs("c1")
    table = build_table(runs, "queries")
    assert table.rows == ("A", "B")  # two benchmarks, still no OVERALL
    assert not any(cell.bold or cell.underline for cell in table.cells.values())
    assert "0 = best run" not in table.caption and "OVERALL" not in table.caption
    assert "better" not in table.caption
    assert "OVERALL" not in summary_table(runs, "queries")
    # a metric with a direction keeps its OVERALL row
    assert OVERALL in build_table(runs, "average_regret").rows


def cumulative_store(path, queries, additional=None):
    """Runs whose cumulative regret and number of queries are given per (bench, policy);
    ``additional``: (bench, policy) -> additional queries of seeds 0 and 1."""
    store = Store(path)
    ids = []
    for (bench, policy), (cumulative, count) in queries.items():
        for seed in (0, 1):
            spec = RunSpec(
                benchmark="eggholder",
                label=bench,
                policy=policy,
                seed=seed,
                benchmark_options={"dim": 1, "horizon": 7.0 if bench == "A" else 8.0},
            )
            summary = {
                "cumulative_regret": cumulative + seed,
                "queries": count,
                "average_regret": (cumulative + seed) / count,
            }
            if additional and (bench, policy) in additional:
                summary["additional_queries"] = additional[(bench, policy)][seed]
            iterations = [row(k, float(k), 1.0, k + 3) for k in range(1, 4)]
            store.save_run(RunResult(spec, "done", iterations, [], summary))
            ids.append(spec.run_id)
    store.add_campaign("c1", "demo", {"name": "demo"})
    store.link("c1", ids)
    return store


def test_a_cumulative_regret_crown_won_by_querying_less_is_flagged(tmp_path):
    from dynbo.report.tables import FEWER_QUERIES_MARK

    # on A the smallest sum (p) comes from 20 queries against q's 60: flagged; on B the
    # best (q) made the most queries: not flagged
    values = {("A", "p"): (10.0, 20), ("A", "q"): (24.0, 60), ("B", "p"): (30.0, 20)}
    values[("B", "q")] = (12.0, 60)
    with cumulative_store(tmp_path / "s.sqlite", values) as store:
        runs = store.runs("c1")
    table = build_table(runs, "cumulative_regret")
    flagged = {key for key, cell in table.cells.items() if cell.flag}
    assert flagged == {("A", "p")}
    cell = table.cells[("A", "p")]
    assert cell.bold and cell.flag == FEWER_QUERIES_MARK
    assert "20 queries" in cell.note and "q 60" in cell.note
    assert "fewer queries" in table.caption
    assert f"**10.5 ± 0.5** {FEWER_QUERIES_MARK}" in table.markdown()
    assert r"\textbf{10.5 $\pm$ 0.5}$^\dagger$" in table.latex()
    assert FEWER_QUERIES_MARK not in table.latex()  # the caption's mark is LaTeX too
    page = table.html()
    assert '<sup class="flag">†</sup>' in page and 'title="p made 20 queries' in page
    assert f"10.5 ± 0.5*{FEWER_QUERIES_MARK}" in summary_table(runs, "cumulative_regret")
    # the average per query is not a sum: no flag, whoever made fewer queries
    assert not any(c.flag for c in build_table(runs, "average_regret").cells.values())
    # equal numbers of queries: nothing to say
    even = {key: (value, 30) for key, (value, _) in values.items()}
    with cumulative_store(tmp_path / "even.sqlite", even) as store:
        table = build_table(store.runs("c1"), "cumulative_regret")
    assert not any(c.flag for c in table.cells.values())
    assert "fewer queries" not in table.caption


def test_regret_cells_of_runs_with_additional_queries_carry_their_count(tmp_path):
    from dynbo.report.html import write_report
    from dynbo.report.tables import ADDITIONAL_QUERIES_MARK, FEWER_QUERIES_MARK

    # s re-queries past inputs: 1000 + 1020 per run on A (mean 1010), 90 + 110 on B (100);
    # p reports 0 additional queries, q none at all (a policy without them)
    values = {("A", "p"): (30.0, 60), ("A", "s"): (10.0, 20), ("B", "p"): (30.0, 60)}
    values[("B", "s")] = (40.0, 60)
    values[("A", "q")] = (50.0, 60)
    extra = {("A", "s"): (1000, 1020), ("B", "s"): (90, 110), ("A", "p"): (0, 0)}
    extra[("B", "p")] = (0, 0)
    path = tmp_path / "s.sqlite"
    with cumulative_store(path, values, extra) as store:
        runs = store.runs("c1")
    table = build_table(runs, "average_regret")
    flagged = {key for key, cell in table.cells.items() if cell.flag}
    assert flagged == {("A", "s"), ("B", "s")}  # every benchmark row, no summary row
    assert "1,010 additional queries per run" in table.cells[("A", "s")].note
    assert "100 additional queries per run" in table.cells[("B", "s")].note
    # the caption: the column's mean over all its runs, (1010 + 100) / 2
    assert table.additional_queries == (("s", 555.0),)
    assert "s +555 additional queries per run on average" in table.caption
    assert f"{ADDITIONAL_QUERIES_MARK}" in table.markdown()
    latex = table.latex()
    assert r"$^\ddagger$" in latex and ADDITIONAL_QUERIES_MARK not in latex
    assert 'title="s also made 1,010 additional queries' in table.html()
    assert ADDITIONAL_QUERIES_MARK in summary_table(runs, "average_regret")
    # beside the cumulative regret too, after the fewer-queries mark of the same cell
    cumulative = build_table(runs, "cumulative_regret").cells[("A", "s")]
    assert cumulative.flag == FEWER_QUERIES_MARK + ADDITIONAL_QUERIES_MARK
    assert "20 queries" in cumulative.note and "1,010 additional" in cumulative.note
    assert r"$^{\dagger\ddagger}$" in build_table(runs, "cumulative_regret").latex()
    # not a regret: no mark
    assert not any(c.flag for c in build_table(runs, "queries").cells.values())
    # the HTML report's regret tables carry it
    write_report(path, tmp_path / "rep")
    page = (tmp_path / "rep" / "index.html").read_text()
    assert "s +555 additional queries per run on average" in page
    # runs without additional queries: no mark, no sentence
    with cumulative_store(tmp_path / "none.sqlite", values) as store:
        plain = build_table(store.runs("c1"), "average_regret")
    assert not any(c.flag for c in plain.cells.values()) and not plain.additional_queries
    assert "additional queries" not in plain.caption


# ------------------------------------------------------------ figures: styles, legend, ticks
def captured_figure(monkeypatch, draw):
    """The matplotlib figure ``draw(path)`` saves (drawn, not closed)."""
    import dynbo.report.figures as figures

    figs = []

    def keep(fig, path):
        fig.canvas.draw()
        figs.append(fig)
        return path

    monkeypatch.setattr(figures, "_save", keep)
    draw()
    return figs[-1]


def test_curves_that_coincide_stay_distinct_by_line_style_and_marker(tmp_path, monkeypatch):
    from dynbo.report.figures import dataset_size_figure, series_styles

    styles = series_styles(["d", "c", "b", "a"])
    assert list(styles) == ["a", "b", "c", "d"]
    looks = {(s["color"], s["linestyle"], s["marker"]) for s in styles.values()}
    assert len({s["linestyle"] for s in styles.values()}) == 4 and len(looks) == 4
    assert len({s["markevery"][0] for s in styles.values()}) == 4  # markers not on top
    # p and q have the same dataset sizes (identical curves) in the test store
    with build_store(tmp_path / "s.sqlite") as store:
        frame = loop_frame(store)
    fig = captured_figure(monkeypatch, lambda: dataset_size_figure(frame, tmp_path / "d.png"))
    ax = fig.axes[0]
    lines = [(line.get_linestyle(), line.get_marker()) for line in ax.get_lines()]
    assert len(lines) == 3 and len(set(lines)) == 3
    p, q = ax.get_lines()[:2]
    assert list(p.get_ydata()) == list(q.get_ydata())  # they do coincide


def test_the_legend_sits_beside_the_panels_not_below(tmp_path, monkeypatch):
    from dynbo.report.figures import dataset_size_figure, regret_figure

    with build_store(tmp_path / "s.sqlite") as store:
        frame = loop_frame(store)
    for draw in (regret_figure, dataset_size_figure):
        fig = captured_figure(monkeypatch, lambda draw=draw: draw(frame, tmp_path / "f.png"))
        renderer = fig.canvas.get_renderer()
        legends = [a.get_legend() for a in fig.axes if a.get_legend() is not None]
        assert len(legends) == 1 and not fig.legends
        box = legends[0].get_window_extent(renderer)
        right = max(a.get_window_extent(renderer).x1 for a in fig.axes)
        top = max(a.get_window_extent(renderer).y1 for a in fig.axes)
        assert box.x0 >= right  # to the right of every panel
        assert abs(box.y1 - top) < 0.1 * fig.bbox.height  # level with the top row
        assert [t.get_text() for t in legends[0].get_texts()] == ["p", "q", "wdbo"]


def test_log_axes_have_plain_tick_labels(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dynbo.report.figures import dataset_size_figure, plain_log_ticks

    with build_store(tmp_path / "s.sqlite") as store:
        frame = loop_frame(store)  # response times 0.4 to 0.8 s: less than a decade
    fig = captured_figure(monkeypatch, lambda: dataset_size_figure(frame, tmp_path / "d.png"))
    ax = fig.axes[len(fig.axes) // 2]  # the first response-time panel
    assert ax.get_yscale() == "log"
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert len(labels) >= 3 and [float(v) for v in labels] == sorted(float(v) for v in labels)
    assert all("10^" not in v and "$" not in v and "times" not in v for v in labels)
    assert not [t.get_text() for t in ax.get_yticklabels(minor=True) if t.get_text()]
    plt.close(fig)
    # spans of several decades: powers of ten, written out
    for low, high, expected in ((0.003, 40.0, ["0.01", "0.1", "1", "10"]), (2, 30, None)):
        fig, ax = plt.subplots()
        ax.plot([0, 1], [low, high])
        ax.set_yscale("log")
        plain_log_ticks(ax)
        fig.canvas.draw()
        labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
        assert labels == expected if expected else labels == ["2", "5", "10", "20"]
        plt.close(fig)


# --------------------------------------------------- the page: protocol, animations linked
def test_the_protocol_shows_the_horizon_and_cost_that_took_effect(tmp_path):
    from dynbo.report.html import write_report

    values = {("A", "p"): (10.0, 20), ("B", "p"): (12.0, 30)}
    path = tmp_path / "s.sqlite"
    cumulative_store(path, values).close()  # horizons 7 (A) and 8 (B) from the benchmark
    text = write_report(path, tmp_path / "rep").read_text()
    protocol = text[text.index("<dt>protocol</dt>") : text.index("<dt>written</dt>")]
    assert "null" not in protocol and "{" not in protocol
    assert "A: 7 s (the benchmark&#x27;s); B: 8 s (the benchmark&#x27;s)" in protocol
    assert "evaluation cost c</span> 0.05 s (the benchmark&#x27;s)" in protocol
    assert "clock</span> measured" in protocol
    assert "15 observations at times in [0, 0.025 T]" in protocol


def test_animations_are_files_named_by_benchmark_policy_and_seed_linked_not_inlined(
    tmp_path, monkeypatch
):
    import dynbo.report.animation as animation
    from dynbo.report.html import animation_name, write_report

    made = []

    def fake(spec, path, **_):  # the real re-run is tested above; here only the page
        made.append((spec.label, spec.policy, spec.seed))
        path.write_bytes(b"GIF89a" + bytes(100))
        return path

    monkeypatch.setattr(animation, "run_animation", fake)
    values = {("A", "p"): (10.0, 20), ("A", "wdbo"): (12.0, 30), ("B b/c", "p"): (1.0, 3)}
    path = tmp_path / "s.sqlite"
    cumulative_store(path, values).close()
    lines = []
    out = tmp_path / "rep"
    (out).mkdir()
    (out / "animation_7.gif").write_bytes(b"GIF89a")  # an older report's name
    page = write_report(path, out, animate=True, progress=lines.append)
    names = sorted(p.name for p in out.glob("animation_*"))
    assert names == [
        "animation_A_p_seed0.gif",
        "animation_A_wdbo_seed0.gif",
        "animation_B-b-c_p_seed0.gif",
    ]
    assert sorted(made) == [("A", "p", 0), ("A", "wdbo", 0), ("B b/c", "p", 0)]
    text = page.read_text()
    assert "data:image/gif" not in text
    for name in names:
        assert f'<a href="{name}"><img src="{name}" loading="lazy"' in text
    assert [line.split(":")[0] for line in lines[:3]] == [
        "animation 1/3",
        "animation 2/3",
        "animation 3/3",
    ]
    assert "p on A, seed 0" in lines[0] and lines[-1].startswith("3 animations in")
    # names that would collide once made file-safe stay apart
    taken = {animation_name("a b", "p", 1)}
    assert animation_name("a-b", "p", 1, taken) == "animation_a-b_p_seed1-2.gif"
    # without animate: nothing re-run, nothing printed, the old GIFs removed
    write_report(path, out, progress=lines.append)
    assert not list(out.glob("animation_*")) and len(lines) == 4


def test_the_default_progress_goes_to_stderr_as_plain_lines(capsys):
    from dynbo.report.html import stderr_progress

    stderr_progress("animation 1/2: p on A, seed 0")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "dynbo report: animation 1/2: p on A, seed 0\n"
