"""Violations in a run, the store and the report: exact counts from a scripted player."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

import dynbo.harness.loop as loop_module
from dynbo.benchmarks.constrained import MovingHazard
from dynbo.harness import Protocol, RunSpec, execute
from dynbo.harness.constraints import constraint_options, violation_summary
from dynbo.harness.store import _OLDER_SCHEMAS, Store
from dynbo.policies.records import Diagnostics, Query

HORIZON = 8.0


class Scripted:
    """A player that queries the disc's centre at the script's ``True`` steps (always a
    violation: ``c = -r^2``) and the corner ``(0.1, 0.1)`` otherwise (always safe), and
    records what it is told."""

    def __init__(self, bench, script):
        self.bench, self.script = bench, list(script)
        self.told: list[tuple] = []
        self._diagnostics = Diagnostics(iteration=0, time=0.0)

    dataset_size = 0

    @property
    def diagnostics(self):
        return self._diagnostics

    def observe(self, x, t, y, constraints=None):
        self.told.append((np.asarray(x, dtype=float).copy(), t, y, constraints))

    def observe_additional(self, x, t, y):
        pass

    def suggest(self, t):
        unsafe = self.script.pop(0)
        x = self.bench.hazard_centre(t) if unsafe else np.array([0.1, 0.1])
        self._diagnostics = Diagnostics(iteration=len(self.told), time=float(t))
        return Query(x=np.asarray(x, dtype=float), t=float(t), additional=np.zeros((0, 2)))


SCRIPT = [True, False, False, True, True, False, True, False]  # 4 of 8 violate


def run(monkeypatch, options=None, warmup=2, script=SCRIPT, benchmark="moving-hazard"):
    players = []

    def make(spec, bench, horizon):
        players.append(Scripted(bench, script))
        return players[0]

    monkeypatch.setattr(loop_module, "make_run_policy", make)
    spec = RunSpec(
        benchmark=benchmark,
        policy="gp-ucb",
        seed=3,
        protocol=Protocol(clock="step", horizon=HORIZON, warmup=warmup),
        policy_options=options or {},
    )
    result = execute(spec)
    assert result.status == "done", result.error
    return result, players[0]


def test_a_run_counts_violations_exactly_without_modeling_constraints(monkeypatch):
    result, player = run(monkeypatch)
    loop = [r for r in result.iterations if not r["warmup"]]
    assert [r["violation"] for r in loop] == [int(v) for v in SCRIPT]
    for row in loop:
        values = json.loads(row["constraints"])
        expected = -0.04 if row["violation"] else None
        if expected is not None:
            assert values["hazard"] == pytest.approx(expected, abs=1e-12)
        else:
            assert values["hazard"] > 0
    summary = result.summary
    assert summary["violations"] == 4
    assert summary["violation_rate"] == 0.5
    # the warm-up draws uniform points: its flags are the noise-free truth at its times
    bench = MovingHazard(horizon=HORIZON)
    warm = [r for r in result.iterations if r["warmup"]]
    expected_warm = sum(int(not bench.feasible(np.array(json.loads(r["x"])), r["t"])) for r in warm)
    assert summary["warmup_violations"] == expected_warm
    # an unconstrained player is told (x, t, y) only
    assert all(told[3] is None for told in player.told)


def test_a_constrained_run_tells_noisy_constraints_and_keeps_the_objective_noise(monkeypatch):
    plain, _ = run(monkeypatch)
    result, player = run(monkeypatch, {"constraint_mode": "feasibility"})
    assert result.summary["violations"] == plain.summary["violations"] == 4
    # the objective's noise does not depend on whether constraints are observed
    assert [r["y"] for r in result.iterations] == [r["y"] for r in plain.iterations]
    bench = MovingHazard(horizon=HORIZON)
    sd = np.sqrt(bench.constraint_noise_variance)
    assert len(player.told) == 2 + len(SCRIPT) - 1  # the last answer is never told
    for x, t, _, constraints in player.told:
        assert set(constraints) == {"hazard"}
        exact = float(bench.constraints(x, t)["hazard"])
        assert constraints["hazard"] != exact
        assert abs(constraints["hazard"] - exact) < 5 * sd


def test_safe_mode_warms_up_on_the_safe_points(monkeypatch):
    result, player = run(monkeypatch, {"constraint_mode": "safe"}, warmup=6)
    safe = MovingHazard().safe_points()
    warm = [r for r in result.iterations if r["warmup"]]
    assert [json.loads(r["x"]) for r in warm] == [safe[i % 4].tolist() for i in range(6)]
    assert result.summary["warmup_violations"] == 0
    assert all(told[3] is not None for told in player.told)


def test_constraint_options_fill_and_refuse():
    bench = MovingHazard()
    filled = constraint_options({"constraint_mode": "safe", "beta_c": 2.0}, bench)
    assert filled["constraints"] == ["hazard"]
    assert filled["safe_points"] == bench.safe_points().tolist()
    assert constraint_options({}, bench) == {}
    assert "safe_points" not in constraint_options({"constraint_mode": "feasibility"}, bench)
    from dynbo.benchmarks import get

    with pytest.raises(ValueError, match="has no constraints"):
        constraint_options({"constraint_mode": "safe"}, get("hartmann3"))
    with pytest.raises(ValueError, match="constraint_mode must be"):
        constraint_options({"constraint_mode": "careful"}, bench)
    with pytest.raises(ValueError, match="no constraint"):
        constraint_options({"constraints": ["speed"]}, bench)
    with pytest.raises(ValueError, match="knows no safe point"):
        constraint_options({"constraint_mode": "safe"}, get("wlan-min-rate", horizon=60.0))


def test_an_unconstrained_benchmark_has_no_violation_fields():
    spec = RunSpec(
        benchmark="hartmann3",
        policy="random",
        seed=0,
        protocol=Protocol(clock="step", horizon=4.0, warmup=1),
    )
    result = execute(spec)
    assert result.status == "done", result.error
    assert all(r["violation"] is None for r in result.iterations)
    assert "violation_rate" not in result.summary
    assert violation_summary([], []) == {}


def test_the_store_keeps_violations_and_migrates_an_old_store(monkeypatch, tmp_path):
    result, _ = run(monkeypatch)
    path = tmp_path / "runs.sqlite"
    with Store(path) as store:
        store.save_run(result)
        rows = store.iteration_rows()
        runs = store.runs()
    flags = [r[-2] for r in rows if r[2] == 0]
    assert flags == [int(v) for v in SCRIPT]
    assert runs[0]["summary"]["violation_rate"] == 0.5

    # a store of schema 1 (no violation columns) with one row
    old = tmp_path / "old.sqlite"
    conn = sqlite3.connect(old)
    for statement in _OLDER_SCHEMAS[1].split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.execute("INSERT INTO meta VALUES ('schema', '1')")
    conn.execute(
        "INSERT INTO runs VALUES ('r1', 'b', 'b', '{}', 'p', '{}', 0, '{}', 'done', NULL, "
        "'{}', 1.0, 0.0)"
    )
    conn.execute(
        "INSERT INTO iterations(run_id, k, warmup, s, t, x, y, f, f_max, regret) "
        "VALUES ('r1', 1, 0, 1.0, 1.0, '[0.5]', 0.1, 0.2, 0.3, 0.1)"
    )
    conn.commit()
    conn.close()
    with Store(old, read_only=True) as store:  # read as it is
        (row,) = store.iteration_rows()
        assert row[-2:] == (None, None)
    with Store(old) as store:  # migrated in place
        (row,) = store.iteration_rows()
        assert row[:3] == ("r1", 1, 0) and row[-2:] == (None, None)
        store.save_run(result)
    conn = sqlite3.connect(old)
    assert conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone() == ("2",)
    count = 4 + result.summary["warmup_violations"]
    assert conn.execute("SELECT COUNT(*) FROM iterations WHERE violation = 1").fetchone() == (
        count,
    )
    conn.close()


def _report_store(monkeypatch, path):
    """A campaign of two scripted players on moving-hazard (4 and 2 violations of 8) and
    a random player on hartmann3 (no constraints)."""
    constrained, _ = run(monkeypatch)
    fewer, _ = run(
        monkeypatch, {"constraint_mode": "feasibility"}, script=[True, True] + [False] * 6
    )
    monkeypatch.undo()
    plain = execute(
        RunSpec(
            benchmark="hartmann3",
            policy="random",
            seed=0,
            protocol=Protocol(clock="step", horizon=8.0, warmup=2),
        )
    )
    with Store(path) as store:
        for result in (constrained, fewer, plain):
            assert result.status == "done", result.error
            store.save_run(result)
        store.add_campaign("c1", "safety", {})
        store.link("c1", [r.spec.run_id for r in (constrained, fewer, plain)])
    return constrained, fewer


def test_tables_and_the_html_report_show_the_violation_rate(monkeypatch, tmp_path):
    from dynbo.report.html import write_report
    from dynbo.report.tables import summary_table, violation_table

    path = tmp_path / "runs.sqlite"
    _report_store(monkeypatch, path)
    with Store(path, read_only=True) as store:
        runs = store.runs("c1")
    table = violation_table(runs)
    assert table.rows == ("moving-hazard",)  # hartmann3 has no constraints: no row
    cells = {column: table.cells[("moving-hazard", column)].mean for column in table.columns}
    assert cells == {"gp-ucb [defaults]": 0.5, "gp-ucb [constraint_mode=feasibility]": 0.25}
    text = summary_table(runs)
    assert "violation_rate" in text and "noise-free constraint values" in text
    page = write_report(path, tmp_path / "report", progress=None)
    html = page.read_text()
    main = html.index("<table")
    violations = html.index('<h2 id="violations">Constraint violations</h2>')
    assert main < violations < html.index("<h2>Settings</h2>")
    section = html[violations : html.index("</table>", violations)]
    assert 'data-mean="0.5"' in section and 'data-mean="0.25"' in section
    assert "hartmann3" not in section
    assert "Violation rate" in (tmp_path / "report" / "table.md").read_text()


def test_the_violation_table_in_a_real_headless_browser(monkeypatch, tmp_path, headless_chromium):
    from dynbo.report.html import write_report
    from tests.test_report import assert_png_not_blank

    path = tmp_path / "runs.sqlite"
    _report_store(monkeypatch, path)
    page = write_report(path, tmp_path / "report", progress=None)
    driver = headless_chromium(1200, 1400)
    driver.get(page.as_uri())
    assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []
    rows = driver.execute_script(
        "const t = document.querySelector('table.violations');"
        "const r = t.getBoundingClientRect();"
        "return [r.width, r.height, Array.from(t.tBodies[0].rows).map("
        "row => [row.querySelector('th').textContent, "
        "Array.from(row.querySelectorAll('td')).map(c => c.textContent)])]"
    )
    width, height, body = rows
    assert width > 100 and height > 30
    assert body == [["moving-hazard", ["0.25", "0.5"]]]
    driver.save_screenshot(str(tmp_path / "violations.png"))
    assert_png_not_blank(tmp_path / "violations.png")
