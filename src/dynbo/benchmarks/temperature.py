"""Intel Lab temperature benchmarks: a continuous field and sensor selection.

``temperature`` (BOLT / W-DBO "Temperature (3)", d = 2 plus time): the temperature field
of the lab floor during the first day of the ten-minute table, as a function of a position
``x`` on the floor (metres) and a time ``t in [0, T]`` seconds, the day mapped linearly
onto ``[0, T]``. Between bins, each sensor's value is linear in time; in space, the field is
the inverse-distance-weighted mean of the sensors' values (Shepard, power 2),

    f(x, t) = sum_i w_i(x) v_i(t),    w_i(x) = |x - s_i|^-2 / sum_j |x - s_j|^-2,

which passes through every reading at its mote's location and bin time, and is infinitely
differentiable (multiplied out, the ``w_i`` are ratios of polynomials with a positive
denominator). Its weights are non-negative and sum to one, so ``f(., t)`` never exceeds
the hottest sensor's value and reaches it at that sensor's location: the maximizer at
every ``t`` is a sensor location and the maximum a convex combination of two readings,
exact to rounding (no search).

``temperature-sensors`` (Bogunovic, Scarlett & Cevher 2016, Sec. 5.2; Brunzema et al.,
ET-GP-UCB, Sec. 5): the arms are the sensors (``x`` = sensor index), the step ``t`` reads
the test days, and the algorithms are given the empirical covariance of the training days
as their kernel over the arms (:attr:`Benchmark.arm_covariance`). Values are normalized
with the training data's overall mean and standard deviation (one scalar each, so that the
hottest sensor stays the hottest); the regret is the normalized hottest value minus the
chosen sensor's (``celsius_scale`` converts it back to degrees).
"""

from __future__ import annotations

import os

import numpy as np

from dynbo.benchmarks import intel_lab
from dynbo.benchmarks.base import Benchmark

__all__ = ["TemperatureField", "TemperatureSensors"]

_DAY_BINS = 144  # ten-minute bins in 24 h
_SOURCES = ("subsfin", "raw")
_TABLES = ("30min", "10min")


def _positive(name: str, value: float, benchmark: str) -> float:
    if not (isinstance(value, (int, float)) and np.isfinite(value) and value > 0):
        raise ValueError(f"{benchmark}: {name} must be positive, got {value!r}")
    return float(value)


def _non_negative(name: str, value: float, benchmark: str) -> float:
    if not (isinstance(value, (int, float)) and np.isfinite(value) and value >= 0):
        raise ValueError(f"{benchmark}: {name} must be >= 0, got {value!r}")
    return float(value)


def _first_day(
    source: str, data_dir: str | os.PathLike[str] | None
) -> tuple[np.ndarray, np.ndarray]:
    """``(locations (m, 2), values (m, 144))`` of the motes with a reading in every bin."""
    if source == "subsfin":
        table = intel_lab.ten_minute_table()
    else:
        table = intel_lab.read_raw(intel_lab.fetch_raw(data_dir, download=False))
    values = table.temperature[:, :_DAY_BINS]
    if values.shape[1] < _DAY_BINS:
        raise ValueError(f"temperature: the {source} data hold less than one day")
    keep = ~np.isnan(values).any(axis=1) & (table.motes >= 1)
    locations = intel_lab.mote_locations()[table.motes[keep] - 1]
    return locations, values[keep]


class TemperatureField(Benchmark):
    """The lab's temperature field over its floor during one day (maximize: find the
    hottest spot).

    Args:
        source: ``"subsfin"`` (the shipped ten-minute table, 52 motes) or ``"raw"`` (the
            original readings, cached by ``dynbo data intel-lab``; the motes with a reading
            in every bin of the first day).
        data_dir: cache directory of the raw readings (``source="raw"`` only).
        noise_variance: ``sigma_0^2`` in squared degrees (BOLT Table 2: 0.16).
        cost: ``c`` in seconds per evaluation (BOLT Table 2: 1.0).
        horizon: ``T`` in seconds; the 24 h of data map linearly onto ``[0, T]``.
    """

    name = "temperature"
    time_unit = "s"
    temporal_kernel = "matern32"
    reference = (
        "Bardou & Thiran, Optimizing Through Change (BOLT), Sec. 5 and Table 2; Bardou, "
        "Thiran & Ranieri, This Too Shall Pass (W-DBO), Sec. 6: Temperature (3), Intel "
        "Berkeley Research Lab data"
    )

    def __init__(
        self,
        *,
        source: str = "subsfin",
        data_dir: str | None = None,
        noise_variance: float = 0.16,
        cost: float = 1.0,
        horizon: float = 600.0,
    ) -> None:
        if source not in _SOURCES:
            raise ValueError(f"temperature: source must be one of {_SOURCES}, got {source!r}")
        self.source = source
        self.noise_variance = _non_negative("noise_variance", noise_variance, self.name)
        self.cost = _non_negative("cost", cost, self.name)
        self.horizon = _positive("horizon", horizon, self.name)
        self.locations, self.values = _first_day(source, data_dir)
        self.dim = 2
        self.bounds = np.array([self.locations.min(axis=0), self.locations.max(axis=0)])
        #: ``(144,)`` times of the bins in ``[0, T]`` seconds
        self.bin_times = np.linspace(0.0, self.horizon, _DAY_BINS)

    def sensor_values(self, t: float | np.ndarray) -> np.ndarray:
        """``v(t)``: each sensor's value, linear in time between bins: ``(m,)`` for a scalar
        ``t``, ``(k, m)`` for ``(k,)`` times (seconds; clamped to ``[0, T]``)."""
        times = np.asarray(t, dtype=float)
        if not np.isfinite(times).all():
            raise ValueError(f"temperature: t must be finite, got {t!r}")
        position = np.clip(times, 0.0, self.horizon) * ((_DAY_BINS - 1) / self.horizon)
        low = np.minimum(np.floor(position).astype(int), _DAY_BINS - 2)
        weight = position - low
        return (1.0 - weight)[..., None] * self.values[:, low].T + weight[..., None] * (
            self.values[:, low + 1].T
        )

    def weights(self, x: np.ndarray) -> np.ndarray:
        """``(k, m)`` inverse-squared-distance weights of ``(k, 2)`` points (rows sum to 1;
        a point at a sensor weighs that sensor only)."""
        squared = ((np.asarray(x, dtype=float)[:, None, :] - self.locations[None]) ** 2).sum(-1)
        at_sensor = squared == 0.0
        inverse = np.where(at_sensor, 0.0, 1.0 / np.where(at_sensor, 1.0, squared))
        exact = at_sensor.any(axis=1)
        inverse[exact] = at_sensor[exact]
        return inverse / inverse.sum(axis=1, keepdims=True)

    def f(self, x: np.ndarray, t: float | np.ndarray) -> np.ndarray:
        """Temperature (C) at ``(k, 2)`` points (or one ``(2,)`` point), time(s) ``t`` (s)."""
        x, t = self.checked_input(x, t)
        points = np.asarray(x, dtype=float)
        single = points.ndim == 1
        points = points.reshape(-1, 2)
        times = np.broadcast_to(np.asarray(t, dtype=float), (len(points),))
        values = np.sum(self.weights(points) * self.sensor_values(times), axis=1)
        return values.reshape(()) if single else values

    def optimum(self, t: float) -> tuple[np.ndarray, float]:
        """The hottest sensor's location and value at ``t`` (exact, see the module)."""
        t = self.checked_time(t)
        values = self.sensor_values(float(t))
        best = int(np.argmax(values))
        return self.locations[best].copy(), float(values[best])


class TemperatureSensors(Benchmark):
    """Pick the hottest of the lab's sensors at each step (finite arms, given kernel).

    Args:
        table: ``"30min"`` (50 sensors; 3 training days, 2 test days of 96 steps) or
            ``"10min"`` (52 motes; day 1 trains, day 2 tests: 144 steps).
        noise_variance: ``sigma^2`` in normalized units (ET-GP-UCB Table 5: 0.01;
            Bogunovic et al. use 5 % of the signal variance).
        horizon: the last step ``T`` (default and maximum: the number of test steps minus
            one). Step ``t`` reads test step ``floor(t)`` (0-based): the step clock's
            queries at ``t = 1 .. T`` read test steps 1 to the last, and warm-up queries
            (at ``t = 0``) the first.
    """

    name = "temperature-sensors"
    time_unit = "step"
    cost = 0.0
    temporal_kernel = "matern12"  # TV-GP-UCB's (1 - eps)^{|i-j|/2} in steps
    reference = (
        "Bogunovic, Scarlett & Cevher (2016), Time-Varying Gaussian Process Bandit "
        "Optimization, Sec. 5.2; Brunzema, von Rohr, Solowjow & Trimpe, Event-Triggered "
        "Time-Varying Bayesian Optimization, Sec. 5 and Table 5"
    )

    def __init__(
        self, *, table: str = "30min", noise_variance: float = 0.01, horizon: float | None = None
    ) -> None:
        if table not in _TABLES:
            raise ValueError(f"temperature-sensors: table must be one of {_TABLES}, got {table!r}")
        self.table = table
        if table == "30min":
            train, test = intel_lab.thirty_minute_tables()
        else:
            day = intel_lab.ten_minute_table().temperature
            train, test = day[:, :_DAY_BINS], day[:, _DAY_BINS : 2 * _DAY_BINS]
        #: the training data's mean and standard deviation (C): ``C = mean + scale * f``
        self.celsius_offset = float(train.mean())
        self.celsius_scale = float(train.std())
        train_normalized = (train - self.celsius_offset) / self.celsius_scale
        #: ``(N, steps)`` normalized test values: ``f(sensor i, step s)``
        self.test = (test - self.celsius_offset) / self.celsius_scale
        sensors, steps = self.test.shape
        self.noise_variance = _non_negative("noise_variance", noise_variance, self.name)
        if horizon is None:
            horizon = steps - 1
        horizon = _positive("horizon", horizon, self.name)
        if horizon > steps - 1:
            raise ValueError(
                f"temperature-sensors: horizon must be at most {steps - 1} (the last of "
                f"{steps} test steps, counted from 0), got {horizon!r}"
            )
        self.horizon = horizon
        self.dim = 1
        self.bounds = np.array([[0.0], [float(sensors - 1)]])
        self.candidates = np.arange(sensors, dtype=float).reshape(-1, 1)
        #: ``(N, N)`` empirical covariance of the normalized training readings
        self.arm_covariance = np.cov(train_normalized)

    def _steps(self, t: float | np.ndarray) -> np.ndarray:
        times = np.asarray(t, dtype=float)
        if not np.isfinite(times).all():
            raise ValueError(f"temperature-sensors: t must be finite, got {t!r}")
        return np.clip(np.floor(times).astype(int), 0, self.test.shape[1] - 1)

    def f(self, x: np.ndarray, t: float | np.ndarray) -> np.ndarray:
        """Normalized temperature of sensors ``round(x)`` (``(k, 1)`` or ``(1,)``) at step(s)
        ``t`` (``floor``; steps past the test data read its last step)."""
        x, t = self.checked_input(x, t)
        points = np.asarray(x, dtype=float)
        single = points.ndim == 1
        sensors = np.clip(np.rint(points.reshape(-1)).astype(int), 0, self.test.shape[0] - 1)
        steps = np.broadcast_to(self._steps(t), sensors.shape)
        values = self.test[sensors, steps]
        return values.reshape(()) if single else values

    def optimum(self, t: float) -> tuple[np.ndarray, float]:
        """The hottest sensor at step ``floor(t)`` and its normalized value."""
        t = self.checked_time(t)
        column = self.test[:, int(self._steps(float(t)))]
        best = int(np.argmax(column))
        return np.array([float(best)]), float(column[best])
