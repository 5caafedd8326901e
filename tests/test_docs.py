"""The getting-started page runs as written: its Python blocks, its campaign and commands.

The page is the first thing a new user copies; these tests execute its code blocks in
order, in a fresh folder, so a change of the API or the command line that breaks the
page fails here.
"""

import re
import shlex
from pathlib import Path

from dynbo.cli import main

PAGE = Path(__file__).resolve().parents[1] / "docs" / "getting-started.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks(language):
    """The page's fenced code blocks of ``language``, in order."""
    return [body for lang, body in FENCE.findall(PAGE.read_text()) if lang == language]


def dynbo_commands():
    """The ``dynbo ...`` lines of the page's bash blocks, as argument lists."""
    commands = []
    for body in blocks("bash"):
        for line in body.splitlines():
            words = shlex.split(line, comments=True)
            if words and words[0] == "dynbo":
                commands.append(words[1:])
    return commands


def test_the_page_has_the_blocks_these_tests_run():
    assert len(blocks("python")) == 2
    assert len(blocks("toml")) == 1
    assert [c[0] for c in dynbo_commands()] == ["bench", "show", "report"]


def test_the_python_blocks_run_and_the_regret_is_computed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "getting_started"}
    for body in blocks("python"):
        exec(compile(body, str(PAGE), "exec"), namespace)
    # the loop made its ten queries and scored each against the moving optimum
    regrets = namespace["regrets"]
    assert len(regrets) == 10 and all(r >= 0.0 for r in regrets)
    assert namespace["t"] > 2.0 + 10 * namespace["cost"]
    assert (tmp_path / "policy.pt").is_file()


def test_the_campaign_runs_and_is_reported(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (toml,) = blocks("toml")
    name = toml.splitlines()[0].removeprefix("#").strip()
    (tmp_path / name).write_text(toml)
    for args in dynbo_commands():
        code = main(args)
        assert code == 0, (args, capsys.readouterr().err)
    out = capsys.readouterr().out
    # every run finished, and both of the page's policies head a column of the table
    assert re.search(r"\b[1-9]\d* done, 0 failed", out)
    header = next(line for line in out.splitlines() if line.startswith("average_regret"))
    assert "gp-ucb" in header.split() and "wdbo" in header.split()
    assert (tmp_path / "results" / "first-report" / "index.html").is_file()
