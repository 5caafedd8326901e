"""The ``dynbo`` command line as a package (issue 26, items 3, 4, 5, 8 and 12): lazy
imports, one module per command, the store argument, exports that name their campaign,
and progress without carriage returns where the output is not a terminal."""

import csv
import importlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dynbo.cli import main
from dynbo.harness import Store, build_campaign, execute, run_campaign

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
FAST = {"raw_samples": 16, "restarts": 2, "fit_iterations": 10}
HEAVY = ("torch", "numpy", "scipy", "pandas", "botorch", "gpytorch", "matplotlib")


def _python(code_or_args, **kwargs):
    args = ["-c", code_or_args] if isinstance(code_or_args, str) else code_or_args
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
        **kwargs,
    )


# ---------------------------------------------------------------- item 3: lazy imports
PROBE = """
import contextlib, io, sys
from dynbo.cli import main
from dynbo.cli.commands import COMMANDS
from dynbo.cli.app import command_modules

calls = [["--version"], ["--help"]] + [[name, "--help"] for name in command_modules()]
for argv in calls:
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            main(argv)
        except SystemExit as stop:
            assert stop.code == 0, (argv, stop.code)
    assert out.getvalue(), argv
print(" ".join(sorted(m for m in sys.modules if m.split(".")[0] in {heavy!r})))
"""


def test_version_and_every_help_import_no_heavy_module():
    """``--version``, ``--help`` and ``dynbo <cmd> --help`` import neither torch nor numpy,
    pandas, matplotlib (checked in ``sys.modules`` of a fresh interpreter; not timed)."""
    proc = _python(PROBE.format(heavy=set(HEAVY)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""


@pytest.mark.parametrize("entry", [["-m", "dynbo"], ["-m", "dynbo.cli"]])
def test_python_m_dynbo_version_imports_no_torch(entry):
    # -X importtime lists every module the interpreter imported, on stderr
    proc = _python(["-X", "importtime", *entry, "--version"])
    assert proc.returncode == 0 and proc.stdout.strip() == "dynbo 0.1.0"
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}
    assert "dynbo.cli" in imported
    assert not {m for m in imported if m.split(".")[0] in HEAVY}


def test_importing_the_package_and_dynbo_imports_nothing_heavy():
    proc = _python(
        "import sys, dynbo, dynbo.cli, dynbo.cli.app, dynbo.cli.common\n"
        "from dynbo.cli.app import command_modules\n"
        "command_modules()\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {set(HEAVY)!r}))"
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stderr


def test_list_suites_does_not_import_the_policies():
    proc = _python(
        "import contextlib, io, sys\n"
        "from dynbo.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['list', 'suites']) == 0\n"
        "print('dynbo.policies' in sys.modules, 'dynbo.harness' in sys.modules)"
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "False False", proc.stderr


# ---------------------------------------------------------------- item 12: one module each
def test_every_command_is_one_module_with_the_same_interface():
    from dynbo.cli.app import build_parser, command_modules
    from dynbo.cli.commands import COMMANDS

    modules = command_modules()
    assert len(modules) == len(COMMANDS)
    assert set(modules) == {
        "run",
        "bench",
        "tune",
        "list",
        "calibrate",
        "export",
        "report",
        "show",
        "theory",
        "reproduce",
        "data",
        "serve",
    }
    for name, module in modules.items():
        assert module.__name__.startswith("dynbo.cli.commands.")
        assert isinstance(module.SUMMARY, str) and isinstance(module.DESCRIPTION, str)
        assert callable(module.add_arguments) and callable(module.run), name
    assert build_parser().prog == "dynbo"


def test_a_registered_command_module_is_all_a_new_command_needs(monkeypatch, capsys):
    """One new module (here a fake one) plus its name in COMMANDS: parsed, dispatched,
    with the shared error handling."""
    import types

    from dynbo.cli import commands
    from dynbo.cli.common import CliError

    module = types.ModuleType("dynbo.cli.commands.hello")
    module.NAME, module.SUMMARY, module.DESCRIPTION = "hello", "say hello", "Say hello."
    module.add_arguments = lambda parser: parser.add_argument("--to", default="world")

    def run(args):
        if args.to == "nobody":
            raise CliError("nobody to greet")
        print(f"hello {args.to}")
        return 0

    module.run = run
    monkeypatch.setitem(sys.modules, "dynbo.cli.commands.hello", module)
    monkeypatch.setattr(commands, "COMMANDS", (*commands.COMMANDS, "hello"))
    assert main(["hello", "--to", "you"]) == 0
    assert capsys.readouterr().out == "hello you\n"
    assert main(["hello", "--to", "nobody"]) == 2
    assert capsys.readouterr().err == "dynbo: error: nobody to greet\n"


def test_the_old_entry_points_still_work():
    import dynbo.__main__  # noqa: F401  (python -m dynbo)
    import dynbo.cli

    for name in ("main", "console_main", "REPRODUCTION_NAMES", "CliError", "Interrupted"):
        assert hasattr(dynbo.cli, name)
    # the console script of pyproject.toml
    text = (ROOT / "pyproject.toml").read_text()
    assert 'dynbo = "dynbo.cli:console_main"' in text
    module, _, attribute = "dynbo.cli:console_main".partition(":")
    assert callable(getattr(importlib.import_module(module), attribute))


# ---------------------------------------------------------------- a small store
def _config(name, label, seeds):
    return {
        "name": name,
        "benchmarks": [{"name": "eggholder", "options": {"dim": 1}, "label": label}],
        "policies": [{"name": "gp-ucb", "options": FAST}],
        "seeds": seeds,
        "protocol": {"clock": "step", "horizon": 4, "warmup": 2},
    }


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory):
    """Campaign "first" (seeds 0, 1), campaign "second" (seeds 0, 2, under another label:
    seed 0 is the same run, stored once) and one run that no campaign links."""
    path = tmp_path_factory.mktemp("store") / "s.sqlite"
    first = build_campaign(_config("first", "egg", [0, 1]))
    second = build_campaign(_config("second", "egg, again", [0, 2]))
    lone = build_campaign(_config("lone", "egg", [3])).specs[0]
    with Store(path) as store:
        assert run_campaign(first, store, progress=False).done == 2
        b = run_campaign(second, store, progress=False)
        assert b.skipped == 1 and b.done == 1
        store.save_run(execute(lone))
    return path, first, second, lone


# ---------------------------------------------------------------- item 4: campaign_id
def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_export_fills_campaign_id_one_row_per_campaign(shared_store, tmp_path, capsys):
    path, first, second, lone = shared_store
    out = tmp_path / "all"
    assert main(["export", str(path), "--out", str(out)]) == 0
    rows = _rows(out / "runs.csv")
    pairs = sorted((r["campaign_id"], r["run_id"], r["benchmark"]) for r in rows)
    expected = sorted(
        [(first.campaign_id, s.run_id, "egg") for s in first.specs]
        + [(second.campaign_id, s.run_id, "egg, again") for s in second.specs]
        + [("", lone.run_id, "egg")]
    )
    assert pairs == expected
    shared = first.specs[0].run_id
    assert shared == second.specs[0].run_id
    assert {r["campaign_id"] for r in rows if r["run_id"] == shared} == {
        first.campaign_id,
        second.campaign_id,
    }
    # every run linked to a campaign names it; the lone run (Store.save_run alone) cannot
    assert all(r["campaign_id"] for r in rows if r["run_id"] != lone.run_id)
    # each campaign's rows are what `export --campaign` gives for it
    for campaign in (first, second):
        one = tmp_path / campaign.name
        assert (
            main(["export", str(path), "--campaign", campaign.campaign_id[:8], "--out", str(one)])
            == 0
        )
        alone = _rows(one / "runs.csv")
        assert alone == [r for r in rows if r["campaign_id"] == campaign.campaign_id]
    # iterations: one row per iteration of every stored run, joined to runs by run_id
    iterations = _rows(out / "iterations.csv")
    assert {r["run_id"] for r in iterations} == {r["run_id"] for r in rows}


def test_a_cli_run_exports_with_its_campaign(tmp_path, capsys):
    store = tmp_path / "run.sqlite"
    argv = ["run", "--benchmark", "eggholder", "--policy", "gp-ucb", "--clock", "step"]
    argv += ["--horizon", "3", "--warmup", "2", "--benchmark-option", "dim=1", "--quiet"]
    assert main([*argv, "--store", str(store)]) == 0
    assert main(["export", "--store", str(store), "--out", str(tmp_path / "x")]) == 0
    (row,) = _rows(tmp_path / "x" / "runs.csv")
    with Store(store, read_only=True) as s:
        (campaign,) = s.campaigns()
    assert row["campaign_id"] == campaign["campaign_id"]


# ---------------------------------------------------------------- item 5: the store argument
@pytest.mark.parametrize("command", ["show", "export", "report"])
def test_every_reading_command_takes_the_store_both_ways(command, shared_store, tmp_path, capsys):
    path = str(shared_store[0])
    extra = [] if command == "show" else ["--out", str(tmp_path / "out")]
    # a store that is not there: the same message whichever form names it
    for form in (["missing.sqlite"], ["--store", "missing.sqlite"]):
        assert main([command, *form, *extra]) == 2
        assert "no result store at missing.sqlite" in capsys.readouterr().err
    # two different stores: an error, before anything is read or written
    assert main([command, path, "--store", str(tmp_path / "other.sqlite"), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dynbo: error: the store is given twice") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()
    if command == "report":
        return  # writing a report is tested in test_report.py; the forms parse alike
    printed = []
    for form in ([path], ["--store", path], [path, "--store", path]):
        assert main([command, *form, *extra]) == 0
        printed.append(capsys.readouterr().out)
    assert printed[0] == printed[1] == printed[2]


def test_without_a_store_the_reading_commands_open_the_default(tmp_path, capsys, monkeypatch):
    from dynbo.cli import DEFAULT_STORE

    monkeypatch.chdir(tmp_path)
    for argv in (["show"], ["export", "--out", "x"], ["report", "--out", "x"]):
        assert main(argv) == 2
        assert f"no result store at {DEFAULT_STORE}" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- item 8: progress
class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_run_progress_is_plain_lines_off_a_terminal():
    from dynbo.cli.common import RunProgress

    rows = [{"t": t / 10, "k": t, "dataset_size": t, "regret": 1.0} for t in range(1, 1001)]
    log = io.StringIO()
    progress = RunProgress("gp-ucb on eggholder", 100.0, log)
    for row in rows:
        progress(row)
    progress.close()
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue() and 10 <= len(lines) <= 12
    assert "t=     0.10/100" in lines[0] and "t=   100.00/100" in lines[-1]
    terminal = _Terminal()
    progress = RunProgress("gp-ucb on eggholder", 100.0, terminal)
    for row in rows[:5]:
        progress(row)
    progress.close()
    assert terminal.getvalue().count("\r") == 5 and terminal.getvalue().endswith("\n")


def test_run_into_a_log_file_has_no_carriage_return(tmp_path):
    log = tmp_path / "run.log"
    argv = ["-m", "dynbo", "run", "--benchmark", "eggholder", "--policy", "gp-ucb"]
    argv += ["--clock", "step", "--horizon", "20", "--warmup", "2"]
    argv += ["--benchmark-option", "dim=1", "--policy-option", "raw_samples=16"]
    with open(log, "w") as f:
        proc = subprocess.run(
            [sys.executable, *argv], stdout=f, stderr=subprocess.STDOUT, env=ENV, timeout=300
        )
    text = log.read_text()
    assert proc.returncode == 0, text
    assert "\r" not in text
    progress = [line for line in text.splitlines() if line.startswith("[gp-ucb on eggholder]")]
    assert 2 <= len(progress) <= 12 and "t=    20.00/20" in progress[-1]
    assert '"average_regret"' in text


def test_bench_into_a_log_file_has_no_carriage_return(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(
        'name = "logged"\n'
        'benchmarks = [{name = "eggholder", options = {dim = 1}}]\n'
        'policies = [{name = "gp-ucb", options = {raw_samples = 16, restarts = 2}}]\n'
        "seeds = 2\n"
        '[protocol]\nclock = "step"\nhorizon = 4\nwarmup = 2\n'
    )
    log = tmp_path / "bench.log"
    argv = ["-m", "dynbo", "bench", str(config), "--store", str(tmp_path / "s.sqlite")]
    with open(log, "w") as f:
        proc = subprocess.run(
            [sys.executable, *argv], stdout=f, stderr=subprocess.STDOUT, env=ENV, timeout=300
        )
    text = log.read_text()
    assert proc.returncode == 0, text
    assert "\r" not in text
    # one plain line per finished run: "[logged] k/N done: eggholder gp-ucb seed s (t s)"
    lines = [line for line in text.splitlines() if line.startswith("[logged] ")]
    total = len(lines)
    assert [line.split()[1] for line in lines] == [f"{k}/{total}" for k in range(1, total + 1)]
    for seed in (0, 1):
        assert any(f"done: eggholder gp-ucb seed {seed} (" in line for line in lines)
    assert f"{total} done, 0 failed" in text


@pytest.mark.parametrize("command", ["show", "export"])
def test_commands_that_only_read_a_store_import_no_torch(tmp_path, command):
    from dynbo.harness import Store, build_campaign, run_campaign

    store_path = tmp_path / "s.sqlite"
    campaign = build_campaign(
        {
            "benchmarks": [{"name": "ackley", "options": {"dim": 1}}],
            "policies": ["random"],
            "references": ["oracle-lag"],
            "seeds": 2,
            "protocol": {"clock": "step", "horizon": 4, "warmup": 1},
        }
    )
    with Store(store_path) as store:
        run_campaign(campaign, store, progress=False)
    argv = [command, str(store_path)]
    if command == "export":
        argv += ["--format", "csv", "--out", str(tmp_path / "x")]
    proc = _python(["-X", "importtime", "-m", "dynbo", *argv], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}
    assert "dynbo.harness.store" in imported
    assert not {m for m in imported if m.split(".")[0] in {"torch", "botorch", "gpytorch"}}
