"""benchmarks/et_collapse.py: where an ET-GP-UCB run's dataset collapses for good."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "et_collapse.py"


def _script():
    spec = importlib.util.spec_from_file_location("et_collapse", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_collapse_is_the_last_reset_after_which_the_dataset_stays_small():
    step = _script().collapse_step
    # grows, resets at index 3, grows past 2 again, resets at 6 and alternates to the end
    sizes = [1, 2, 3, 1, 2, 3, 1, 2, 1, 1]
    resets = [False, False, False, True, False, False, True, False, True, True]
    assert step(sizes, resets) == 6
    # a run that ends with more than 2 observations, or never resets, has none
    assert step([1, 2, 3, 4], [False, True, False, False]) is None
    assert step([1, 2], [False, False]) is None
    # collapsed from the first steps on
    assert step([1, 1, 2, 1], [True, True, False, True]) == 0
