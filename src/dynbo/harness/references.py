"""Reference players: what a table of regrets is measured against.

A regret says little on its own: a policy may be no better than playing at random, or
already close to what any learner could reach. Two players bound a benchmark's numbers
and run in any campaign beside the policies, under the same protocol (clock, warm-up,
costs, seeds):

* ``random`` plays a uniform point of the domain (a uniform arm of a finite
  benchmark) at every query, from its own seeded stream. It keeps no data, so under the
  modeled clock it answers in ``R(0)``.
* ``oracle-lag`` plays the maximizer of the noiseless function at the time of its most
  recent observation (the previous query's time; before the first query, the last
  warm-up time, or the loop's start when there is no warm-up). It reads the benchmark's
  optimum, so it is a harness player, not a policy: it is the best a learner that only
  sees the past can do against pure drift, with perfect knowledge of that past and no
  learning cost (it also answers in ``R(0)``). A learner can beat it only by predicting
  the drift.

Both follow the part of the policy API that the run loop uses (``observe``,
``observe_additional``, ``suggest``, ``diagnostics``, ``dataset_size``), so the loop
times, records and scores them as it does a policy. Their names are listed by
:func:`reference_names`; a campaign adds them to every benchmark unless told otherwise
(``docs/campaigns.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from dynbo.benchmarks.base import Benchmark
from dynbo.harness.labels import REFERENCE_PLAYERS
from dynbo.policies.records import Diagnostics, Query

__all__ = ["OracleLagPlayer", "RandomPlayer", "make_reference", "reference_names"]


class _Player:
    """What the run loop needs of a policy, for a player that keeps no model."""

    name = ""

    def __init__(self, bench: Benchmark, seed: int) -> None:
        self._bench = bench
        self._seed = int(seed)
        self._iteration = 0
        self._last_time: float | None = None
        self._diagnostics = Diagnostics(iteration=0, time=0.0)

    @property
    def dataset_size(self) -> int:
        """Always 0: a reference player keeps no data (the modeled clock charges ``R(0)``)."""
        return 0

    @property
    def diagnostics(self) -> Diagnostics:
        """The last ``suggest``'s record (no fit, no acquisition: all times 0)."""
        return self._diagnostics

    def observe(self, x: Any, t: float, y: float) -> None:
        """Note the time of the newest observation (its value is not used)."""
        self._last_time = float(t)

    def observe_additional(self, x: Any, t: Any, y: Any) -> None:
        """Reference players never ask for additional queries; nothing to record."""

    def suggest(self, t: float) -> Query:
        """The next query for the clock time ``t`` (seconds or steps)."""
        self._iteration += 1
        self._diagnostics = Diagnostics(iteration=self._iteration, time=float(t))
        point = np.asarray(self._point(float(t)), dtype=float).reshape(-1)
        return Query(x=point, t=float(t), additional=np.zeros((0, self._bench.dim)))

    def _point(self, t: float) -> np.ndarray:
        raise NotImplementedError


class RandomPlayer(_Player):
    """Uniform queries over the domain (or over the benchmark's candidates).

    Args:
        bench: the run's benchmark (its bounds or candidates).
        seed: the run's seed; the player's stream is ``default_rng([seed, 2])``, apart from
            the loop's warm-up (``[seed, 0]``) and noise (``[seed, 1]``) streams.
    """

    name = "random"

    def __init__(self, bench: Benchmark, seed: int) -> None:
        super().__init__(bench, seed)
        self._rng = np.random.default_rng([self._seed, 2])

    def _point(self, t: float) -> np.ndarray:
        candidates = self._bench.candidates
        if candidates is not None:
            return candidates[self._rng.integers(0, len(candidates))]
        return self._rng.uniform(self._bench.bounds[0], self._bench.bounds[1])


class OracleLagPlayer(_Player):
    """The maximizer of ``f(., t_prev)``, ``t_prev`` the newest observation's time.

    Args:
        bench: the run's benchmark (its ``optimum``).
        seed: unused (the player is deterministic); kept for a uniform constructor.
    """

    name = "oracle-lag"

    def _point(self, t: float) -> np.ndarray:
        when = t if self._last_time is None else self._last_time
        x_star, _ = self._bench.optimum(when)
        return np.asarray(x_star, dtype=float)


_PLAYERS: dict[str, type[_Player]] = {p.name: p for p in (RandomPlayer, OracleLagPlayer)}
assert tuple(_PLAYERS) == REFERENCE_PLAYERS  # the names the reports read without this module


def reference_names() -> tuple[str, ...]:
    """The reference players' names, in table order: ``("random", "oracle-lag")``."""
    return tuple(_PLAYERS)


def make_reference(
    name: str, bench: Benchmark, seed: int, options: Mapping[str, Any] | None = None
) -> _Player:
    """The reference player ``name`` for one run.

    Args:
        name: one of :func:`reference_names`.
        bench: the run's benchmark.
        seed: the run's seed.
        options: must be empty (reference players have no settings).

    Raises:
        ValueError: an unknown name, or any option.
    """
    if name not in _PLAYERS:
        raise ValueError(f"unknown reference player {name!r}; available: {', '.join(_PLAYERS)}")
    if options:
        raise ValueError(
            f"reference player {name!r} takes no options, got {', '.join(map(str, options))}"
        )
    return _PLAYERS[name](bench, seed)
