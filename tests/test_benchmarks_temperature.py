"""Intel Lab data, the temperature benchmarks, and a given covariance over finite arms."""

import gzip
import json
import subprocess
import sys
from datetime import datetime

import numpy as np
import pytest
import torch

import dynbo.benchmarks as benchmarks
from dynbo.benchmarks import intel_lab
from dynbo.cli import main
from dynbo.models import ArmCovariance, Hyperparameters, KernelSpec, SpatioTemporalGP
from dynbo.models.fit import NegativeLogMarginalLikelihood
from dynbo.policies import make

RAW_LINES = [
    # date time epoch moteid temperature humidity light voltage
    "2004-02-28 00:59:16.02785 3 1 19.9884 37.0933 45.08 2.69964",
    "2004-02-28 01:03:16.33393 11 1 20.0 37.0933 45.08 2.69964",
    "2004-02-28 01:08:45.12 13 1 20.3 37.09 45.08 2.69",  # bin 1 (01:00-01:10 -> bin 1)
    "2004-02-28 00:58:46.002832 2 2 18.0 36.9 45.0 2.7",
    "2004-02-28 01:12:00.0 40 2 18.6 36.9 45.0 2.7",
    "2004-02-28 01:13:00.0 41 2 122.153 -3.9 11.0 2.0",  # battery glitch: dropped
    "2004-02-28 01:14:00.0 42 2 0.0 36.9 45.0 2.7",  # not above 0 C: dropped
    "2004-02-28 01:14:30.0 43 60 20.0 36.9 45.0 2.7",  # corrupt mote id: dropped
    "2004-02-28 01:15:00.0 44 3",  # short line: dropped
    "2004-02-28 25:15:00.0 45 3 20.0 1 1 1",  # bad clock: dropped
    "garbage",
]


def write_raw(path, lines=RAW_LINES):
    text = "\n".join(lines) + "\n"
    if str(path).endswith(".gz"):
        with gzip.open(path, "wt") as handle:
            handle.write(text)
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize("name", ["data.txt", "data.txt.gz"])
def test_raw_reader_bins_per_mote_and_drops_implausible_readings(tmp_path, name):
    table = intel_lab.read_raw(write_raw(tmp_path / name))
    # first kept reading 00:58:46 -> bins start at 00:50
    assert table.start == datetime(2004, 2, 28, 0, 50)
    assert table.motes.tolist() == [1, 2]
    assert table.minutes.tolist() == [0.0, 10.0, 20.0]
    np.testing.assert_array_equal(table.counts, [[1, 2, 0], [1, 0, 1]])
    np.testing.assert_allclose(table.temperature[0, :2], [19.9884, (20.0 + 20.3) / 2])
    np.testing.assert_allclose(table.temperature[1, [0, 2]], [18.0, 18.6])
    assert np.isnan(table.temperature[0, 2]) and np.isnan(table.temperature[1, 1])
    half_hour = intel_lab.read_raw(tmp_path / name, interval_minutes=30)
    assert half_hour.start == datetime(2004, 2, 28, 0, 30)
    np.testing.assert_array_equal(half_hour.counts, [[1, 2], [1, 1]])  # 00:30, 01:00
    with pytest.raises(ValueError, match="interval_minutes"):
        intel_lab.read_raw(tmp_path / name, interval_minutes=0)
    with pytest.raises(ValueError, match="no plausible"):
        intel_lab.read_raw(write_raw(tmp_path / "bad.txt", RAW_LINES[5:]))


def test_fetch_caches_once_checks_the_download_and_honours_the_environment(tmp_path, monkeypatch):
    source = write_raw(tmp_path / "served.txt.gz")
    cache = tmp_path / "cache"
    with pytest.raises(FileNotFoundError, match="dynbo data intel-lab"):
        intel_lab.fetch_raw(cache, download=False)
    path = intel_lab.fetch_raw(cache, url=source.as_uri())
    assert path == cache / "intel-lab" / "data.txt.gz"
    assert path.read_bytes() == source.read_bytes()
    source.unlink()  # a second call must not download again
    assert intel_lab.fetch_raw(cache, url=source.as_uri()) == path
    # an incomplete download leaves nothing behind
    broken = tmp_path / "broken.gz"
    broken.write_bytes(gzip.compress(b"x" * 10_000)[:-20])
    other = tmp_path / "other"
    with pytest.raises(ValueError, match="gzip"):
        intel_lab.fetch_raw(other, url=broken.as_uri())
    assert list((other / "intel-lab").iterdir()) == []
    flipped = bytearray(gzip.compress(b"2004-02-28 00:59:16 3 1 19.9 37 45 2.7\n" * 500))
    flipped[len(flipped) // 2] ^= 0xFF  # a corrupt deflate stream, not a short one
    (tmp_path / "flipped.gz").write_bytes(bytes(flipped))
    with pytest.raises(ValueError, match="gzip"):
        intel_lab.fetch_raw(other, url=(tmp_path / "flipped.gz").as_uri())
    with pytest.raises(OSError):
        intel_lab.fetch_raw(other, url=(tmp_path / "missing.gz").as_uri())
    assert list((other / "intel-lab").iterdir()) == []
    # a complete gzip file of something else (an error page): refused, not cached
    page = tmp_path / "page.gz"
    page.write_bytes(gzip.compress(b"<html><body>502 Bad Gateway</body></html>\n" * 50))
    with pytest.raises(ValueError, match="not the Intel Lab readings"):
        intel_lab.fetch_raw(other, url=page.as_uri())
    assert list((other / "intel-lab").iterdir()) == []
    monkeypatch.setenv(intel_lab.DATA_DIR_ENV, str(cache))
    assert intel_lab.cache_dir() == cache
    assert intel_lab.fetch_raw(download=False) == path
    assert intel_lab.cache_dir(tmp_path / "x") == tmp_path / "x"


def test_cli_data_downloads_into_the_data_dir(tmp_path, capsys):
    source = write_raw(tmp_path / "served.txt.gz")
    code = main(["data", "intel-lab", "--data-dir", str(tmp_path / "c"), "--url", source.as_uri()])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["motes"] == 2 and out["readings_kept"] == 5
    assert out["start"] == "2004-02-28T00:50:00"
    code = main(
        ["data", "intel-lab", "--data-dir", str(tmp_path / "d"), "--url", "file:///nonexistent.gz"]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("dynbo: error:") and err.count("\n") == 1


def test_shipped_tables_have_the_documented_shapes():
    locations = intel_lab.mote_locations()
    assert locations.shape == (54, 2) and not np.isnan(locations).any()
    table = intel_lab.ten_minute_table()
    assert table.temperature.shape == (52, 288)
    assert 5 not in table.motes and 15 not in table.motes
    assert 13.0 < np.nanmin(table.temperature) and np.nanmax(table.temperature) < 37.0
    train, test = intel_lab.thirty_minute_tables()
    assert train.shape == (50, 144) and test.shape == (50, 96)


def test_temperature_field_passes_through_the_readings_and_its_maximum_is_exact():
    bench = benchmarks.get("temperature")
    assert bench.dim == 2 and bench.locations.shape == (52, 2)
    table = intel_lab.ten_minute_table()
    for k in (0, 1, 77, 143):
        t = bench.bin_times[k]
        np.testing.assert_allclose(
            bench.f(bench.locations, np.full(52, t)), table.temperature[:, k], rtol=0, atol=1e-12
        )
    # linear in time between bins, at any point
    rng = np.random.default_rng(0)
    x = rng.uniform(bench.bounds[0], bench.bounds[1], (5, 2))
    t0, t1 = bench.bin_times[10], bench.bin_times[11]
    mid = bench.f(x, 0.3 * t0 + 0.7 * t1)
    np.testing.assert_allclose(mid, 0.3 * bench.f(x, t0) + 0.7 * bench.f(x, t1), atol=1e-12)
    for t in (0.0, 123.4, 333.3, 600.0):
        x_star, f_star = bench.optimum(t)
        assert bench.f(x_star, t) == pytest.approx(f_star, abs=1e-12)
        dense = rng.uniform(bench.bounds[0], bench.bounds[1], (100_000, 2))
        assert bench.f(dense, t).max() <= f_star + 1e-12
        assert f_star == pytest.approx(bench.sensor_values(t).max(), abs=0)
    # smooth: the finite-difference slope at a sensor is zero (no cusp)
    s = bench.locations[7]
    h = 1e-4
    slope = (bench.f(s + [h, 0], 50.0) - bench.f(s - [h, 0], 50.0)) / (2 * h)
    assert abs(slope) < 1e-3


def test_temperature_from_cached_raw_readings(tmp_path):
    lines = []
    for minute in range(0, 24 * 60, 10):
        stamp = f"2004-03-01 {minute // 60:02d}:{minute % 60:02d}:05.0"
        for mote, base in ((1, 18.0), (2, 20.0), (3, 22.0)):
            lines.append(f"{stamp} 1 {mote} {base + minute / 1000:.4f} 40 40 2.7")
    lines.append("2004-03-01 03:00:05.0 1 4 25.0 40 40 2.7")  # mote 4: one bin only
    raw = write_raw(tmp_path / "raw.txt.gz", lines)
    (tmp_path / "intel-lab").mkdir()
    raw.rename(tmp_path / "intel-lab" / "data.txt.gz")
    bench = benchmarks.get("temperature", source="raw", data_dir=str(tmp_path))
    np.testing.assert_array_equal(bench.locations, intel_lab.mote_locations()[:3])
    x_star, f_star = bench.optimum(600.0)
    np.testing.assert_array_equal(x_star, intel_lab.mote_locations()[2])
    assert f_star == pytest.approx(22.0 + 1430 / 1000)
    with pytest.raises(FileNotFoundError):
        benchmarks.get("temperature", source="raw", data_dir=str(tmp_path / "none"))
    with pytest.raises(ValueError, match="source"):
        benchmarks.get("temperature", source="web")
    with pytest.raises(ValueError, match="finite"):
        bench.optimum(float("nan"))


@pytest.mark.parametrize("table,sensors,steps", [("30min", 50, 96), ("10min", 52, 144)])
def test_sensor_benchmark_kernel_normalization_and_regret(table, sensors, steps):
    bench = benchmarks.get("temperature-sensors", table=table)
    assert bench.horizon == steps - 1 and bench.candidates.shape == (sensors, 1)
    K = bench.arm_covariance
    assert K.shape == (sensors, sensors)
    np.testing.assert_array_equal(K, K.T)
    assert np.linalg.eigvalsh(K)[0] > -1e-12
    if table == "30min":
        train, test = intel_lab.thirty_minute_tables()
    else:
        day = intel_lab.ten_minute_table().temperature
        train, test = day[:, :144], day[:, 144:]
    z = (train - train.mean()) / train.std()
    np.testing.assert_allclose(K, np.cov(z), atol=1e-14)
    for t in (0, 17.5, steps - 1):
        x_star, f_star = bench.optimum(t)
        hottest = int(np.argmax(test[:, int(t)]))
        assert x_star.tolist() == [hottest]
        assert bench.f(x_star, t) - f_star == 0.0  # the hottest sensor has zero regret
        celsius = bench.celsius_offset + bench.celsius_scale * bench.f(bench.candidates, t)
        np.testing.assert_allclose(celsius, test[:, int(t)], atol=1e-12)
    with pytest.raises(ValueError, match="horizon"):
        benchmarks.get("temperature-sensors", table=table, horizon=steps)
    with pytest.raises(ValueError, match="finite"):
        bench.f(bench.candidates, float("nan"))
    with pytest.raises(ValueError, match="table"):
        benchmarks.get("temperature-sensors", table="1h")


# ---------------------------------------------------------------- the arm kernel
def _arms(n=6, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, n))
    return np.arange(n, dtype=float).reshape(-1, 1), a @ a.T / n


def test_gp_with_a_given_arm_covariance_equals_a_dense_hadamard_computation():
    points, K = _arms()
    arms = ArmCovariance(torch.as_tensor(points / 5.0), torch.as_tensor(K))
    spec = KernelSpec(dim=1, temporal="matern12", arms=arms)
    h = Hyperparameters(outputscale=1.7, lengthscale_space=(0.3,), lengthscale_time=4.0, noise=0.05)
    gp = SpatioTemporalGP(spec, h, standardize=False)
    rng = np.random.default_rng(1)
    idx = rng.integers(0, 6, 15)
    times = np.sort(rng.uniform(0, 20, 15))
    z = torch.as_tensor(np.column_stack([points[idx, 0] / 5.0, times]))
    y = torch.as_tensor(rng.normal(size=15))
    gp.set_data(z, y)
    test_idx = np.arange(6)
    zt = torch.as_tensor(np.column_stack([test_idx / 5.0, np.full(6, 21.0)]))

    def k(i1, t1, i2, t2):
        return 1.7 * K[np.ix_(i1, i2)] * np.exp(-np.abs(t1[:, None] - t2[None]) / 4.0)

    Kxx = k(idx, times, idx, times) + 0.05 * np.eye(15)
    Kzx = k(test_idx, np.full(6, 21.0), idx, times)
    mean = Kzx @ np.linalg.solve(Kxx, y.numpy())
    var = 1.7 * np.diag(K) - np.einsum("ij,ji->i", Kzx, np.linalg.solve(Kxx, Kzx.T))
    got_mean, got_var = gp.predict(zt)
    np.testing.assert_allclose(got_mean.numpy(), mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_var.numpy(), var, rtol=1e-9, atol=1e-12)
    # the likelihood has no spatial lengthscale slot; its gradient matches finite differences
    objective = NegativeLogMarginalLikelihood(gp)
    theta = objective.pack(h)
    assert theta.size == 3  # outputscale, lengthscale_time, noise
    value, grad = objective(theta)
    for j in range(3):
        step = np.zeros(3)
        step[j] = 1e-6
        fd = (objective(theta + step)[0] - objective(theta - step)[0]) / 2e-6
        assert grad[j] == pytest.approx(fd, rel=1e-5, abs=1e-7)


def test_every_policy_takes_a_given_arm_covariance_and_validates_it():
    cand, K = _arms()
    policy = make("tv-gp-ucb", bounds=[[0], [5]], candidates=cand, arm_covariance=K, seed=3)
    rng = np.random.default_rng(0)
    for step in range(8):
        query = policy.suggest(float(step))
        assert query.x.tolist() in cand.tolist()
        policy.observe(query.x, query.t, float(rng.normal()))
    assert policy.hyperparameters.lengthscale_space == (0.2,)  # never fitted
    clone = type(policy).from_state_dict(policy.state_dict())
    np.testing.assert_array_equal(clone.suggest(8.0).x, policy.suggest(8.0).x)
    bad = {
        "needs candidates": dict(arm_covariance=K),
        r"shape \(6, 6\)": dict(candidates=cand, arm_covariance=K[:5, :5]),
        "symmetric": dict(candidates=cand, arm_covariance=K + np.triu(np.ones((6, 6)), 1)),
        "semi-definite": dict(candidates=cand, arm_covariance=K - 10 * np.eye(6)),
        "NaN": dict(candidates=cand, arm_covariance=np.full((6, 6), np.nan)),
        "distinct": dict(candidates=np.zeros((6, 1)), arm_covariance=K),
    }
    for message, options in bad.items():
        with pytest.raises(ValueError, match=message):
            make("gp-ucb", bounds=[[0], [5]], **options)
    for name in ("wdbo", "bolt"):
        with pytest.raises(ValueError, match="arm_covariance"):
            make(name, bounds=[[0], [5]], candidates=cand, arm_covariance=K)


def test_sensors_suite_runs_end_to_end_from_the_cli():
    result = subprocess.run(
        [
            sys.executable, "-m", "dynbo", "run", "--benchmark", "temperature-sensors",
            "--policy", "et-gp-ucb", "--clock", "step", "--warmup", "0", "--quiet",
            "--horizon", "20",
            "--policy-option", "learn_hyperparameters=false",
            "--policy-option", "standardize=false",
        ],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    summary = json.loads(result.stdout)
    assert summary["queries"] == 20 and summary["average_regret"] >= 0
    suite = benchmarks.suite("sensors")
    assert [e.label for e in suite.entries] == ["temperature-30min", "temperature-10min"]
    assert suite.entries[0].policy_options["r-gp-ucb"]["reset_every"] == 15


def test_ridge_sandwich_width_uses_the_arms_prior_variance():
    # with unit weights the sandwich width is the GP's posterior variance, whose prior
    # part is K[a, a] (not the outputscale) under a given arm covariance
    from dynbo.models import WeightedRidgeView

    points, K = _arms(4, seed=2)
    K = K + 3.0 * np.eye(4)
    arms = ArmCovariance(torch.as_tensor(points / 3.0), torch.as_tensor(K))
    spec = KernelSpec(dim=1, temporal=None, arms=arms)
    gp = SpatioTemporalGP(spec, Hyperparameters(noise=0.01), standardize=False)
    gp.set_data(torch.as_tensor(points[:3] / 3.0), torch.tensor([0.3, -0.2, 0.5]))
    test = torch.as_tensor(points / 3.0)
    _, variance = gp.predict(test, standardized=True)
    _, sandwich = WeightedRidgeView(gp, "sandwich").predict(test)
    np.testing.assert_allclose(sandwich.numpy(), variance.numpy(), rtol=1e-8, atol=1e-12)
    assert variance[3] > 3.0  # the unobserved arm keeps most of its prior variance K[3, 3]


def test_r_gp_ucb_estimates_epsilon_under_the_given_arm_covariance(monkeypatch):
    from dynbo.models import gp as gp_module

    cand, K = _arms()
    policy = make("r-gp-ucb", bounds=[[0], [5]], candidates=cand, arm_covariance=K, seed=0)
    seen = []
    original = gp_module.SpatioTemporalGP.__init__

    def spy(self, kernel, *args, **kwargs):
        seen.append(kernel)
        original(self, kernel, *args, **kwargs)

    monkeypatch.setattr(gp_module.SpatioTemporalGP, "__init__", spy)
    rng = np.random.default_rng(0)
    for step in range(8):
        query = policy.suggest(float(step))
        policy.observe(query.x, query.t, float(rng.normal()))
    estimates = [k for k in seen if k.temporal is not None]
    assert estimates and all(k.arms is policy.kernel.arms for k in estimates)
