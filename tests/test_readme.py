"""README's ask/tell example runs as written (the first thing a new user copies)."""

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"


def ask_tell_block():
    """The Python block of README's "The ask/tell API" section."""
    text = README.read_text()
    section = text[text.index("## The ask/tell API") :]
    match = re.search(r"^```python\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)
    assert match is not None, "README's ask/tell section has no python block"
    return match.group(1)


def test_the_readme_ask_tell_example_runs_and_computes_its_regret(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # it saves policy.pt in the working folder
    namespace = {"__name__": "readme"}
    exec(compile(ask_tell_block(), str(README), "exec"), namespace)
    regrets = namespace["regrets"]
    assert len(regrets) == 8
    assert all(np.isfinite(r) and r >= 0.0 for r in regrets)
    assert (tmp_path / "policy.pt").is_file()
    # the example told the policy its three earlier measurements and its eight answers
    restored, policy = namespace["restored"], namespace["policy"]
    assert restored.name == policy.name == "wdbo"
    assert restored.dataset_size == policy.dataset_size
    assert restored.dataset_size >= 1
