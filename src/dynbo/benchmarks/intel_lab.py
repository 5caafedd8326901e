"""The Intel Berkeley Research Lab temperature data (54 motes, 28 Feb - 5 Apr 2004).

Shipped with dynbo (``dynbo/benchmarks/data/intel_lab/``, 0.64 MB; provenance and
caveats in ``SOURCE.md`` there and in ``docs/temperature.md``):

* :func:`mote_locations`: ``(54, 2)`` mote coordinates in metres;
* :func:`ten_minute_table`: 52 motes x 288 ten-minute bins (48 h) of bin-mean temperatures
  (the ULB-preprocessed "subsfin" matrix);
* :func:`thirty_minute_tables`: 50 sensors x 144 training and 96 test half-hour readings
  (not mapped to mote ids, so without locations).

For users who fetch the original readings (``data.txt.gz``, ~34 MB, 2.3 million
readings every ~31 s, columns ``date time epoch moteid temperature humidity light
voltage``): :func:`fetch_raw` downloads it once into a cache directory
(``data_dir`` argument, else the ``DYNBO_DATA_DIR`` environment variable, else
``~/.cache/dynbo``) and :func:`read_raw` bins it per mote and interval, dropping
implausible readings. Nothing here touches the network unless :func:`fetch_raw` is asked
to download.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import shutil
import tempfile
import urllib.request
import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from importlib import resources
from pathlib import Path

import numpy as np

__all__ = [
    "DATA_DIR_ENV",
    "RAW_URL",
    "BinnedReadings",
    "cache_dir",
    "fetch_raw",
    "mote_locations",
    "read_raw",
    "ten_minute_table",
    "thirty_minute_tables",
]

#: where the data set's maintainers publish the raw readings
RAW_URL = "http://db.csail.mit.edu/labdata/data.txt.gz"
#: environment variable naming the cache directory of downloaded data
DATA_DIR_ENV = "DYNBO_DATA_DIR"
#: mote ids of the deployment (the raw file also holds corrupt ids such as 55-65)
MOTE_IDS = range(1, 55)
#: plausible temperatures, degrees Celsius (the raw file holds 122 C and -38 C glitches
#: of dying batteries; the shipped tables used the same filter)
PLAUSIBLE_CELSIUS = (0.0, 50.0)


def _shipped(name: str) -> str:
    return (resources.files("dynbo.benchmarks") / "data" / "intel_lab" / name).read_text(
        encoding="utf-8"
    )


def _rows(name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(_shipped(name))))


def mote_locations() -> np.ndarray:
    """``(54, 2)`` ``(x, y)`` of motes 1..54 (row ``i`` is mote ``i + 1``), in metres from
    the top-right corner of the lab (x 0.5..40.5, y 1..31)."""
    rows = _rows("mote_locations.csv")
    out = np.full((len(MOTE_IDS), 2), np.nan)
    for row in rows:
        out[int(row["moteid"]) - 1] = (float(row["x"]), float(row["y"]))
    return out


@dataclass(frozen=True)
class BinnedReadings:
    """Temperatures binned per mote and interval.

    Attributes:
        motes: ``(m,)`` mote ids (``-1`` where unknown).
        minutes: ``(b,)`` start of each bin, minutes since the first bin.
        temperature: ``(m, b)`` bin means in degrees Celsius (NaN: no reading kept).
        counts: ``(m, b)`` readings averaged in each bin.
        start: the first bin's start time (``None`` when the source does not say).
    """

    motes: np.ndarray
    minutes: np.ndarray
    temperature: np.ndarray
    counts: np.ndarray
    start: datetime | None = None


def ten_minute_table() -> BinnedReadings:
    """The shipped ten-minute table: 52 motes (1..54 without 5 and 15, inferred) x 288
    bins (48 h from an unknown start, about 01:00; ``start`` is ``None``)."""
    rows = _rows("temperature_10min_subsfin.csv")
    columns = sorted({int(r["column_index"]) for r in rows})
    bins = sorted({int(r["bin"]) for r in rows})
    temperature = np.full((len(columns), len(bins)), np.nan)
    counts = np.zeros((len(columns), len(bins)), dtype=int)
    motes = np.full(len(columns), -1, dtype=int)
    for r in rows:
        c, b = int(r["column_index"]), int(r["bin"])
        temperature[c, b] = float(r["temperature_c"])
        counts[c, b] = int(r["n_readings"])
        motes[c] = int(r["moteid_inferred"])
    return BinnedReadings(motes, 10.0 * np.asarray(bins, dtype=float), temperature, counts)


def thirty_minute_tables() -> tuple[np.ndarray, np.ndarray]:
    """``(train, test)``: ``(50, 144)`` and ``(50, 96)`` half-hourly temperatures (C) of 50
    sensors (indices 0..49, not mapped to motes), 3 days then the 2 days that follow."""

    def table(name: str) -> np.ndarray:
        rows = _rows(name)
        sensors = 1 + max(int(r["sensor_index"]) for r in rows)
        steps = 1 + max(int(r["step"]) for r in rows)
        out = np.full((sensors, steps), np.nan)
        for r in rows:
            out[int(r["sensor_index"]), int(r["step"])] = float(r["temperature_c"])
        return out

    return table("temperature_30min_train.csv"), table("temperature_30min_test.csv")


# ------------------------------------------------------------------ raw readings
def _parse_time(date: str, clock: str) -> datetime | None:
    try:
        return datetime.fromisoformat(f"{date}T{clock}")
    except ValueError:
        return None


def _parse_reading(line: str, low: float, high: float) -> tuple[int, datetime, float] | None:
    """``(mote, time, celsius)`` of one raw line, or ``None`` if :func:`read_raw` drops it."""
    fields = line.split()
    if len(fields) < 5:
        return None
    try:
        mote = int(fields[3])
        value = float(fields[4])
    except ValueError:
        return None
    if mote not in MOTE_IDS or not (low < value <= high):
        return None
    when = _parse_time(fields[0], fields[1])
    return None if when is None else (mote, when, value)


def read_raw(
    path: str | os.PathLike[str],
    *,
    interval_minutes: float = 10.0,
    celsius_range: tuple[float, float] = PLAUSIBLE_CELSIUS,
) -> BinnedReadings:
    """Bin a raw Intel Lab file (plain or gzipped) per mote and interval.

    Each line is ``date time epoch moteid temperature humidity light voltage``. Kept:
    lines with a parsable date and time, a mote id in 1..54 and a temperature in
    ``(celsius_range[0], celsius_range[1]]``; every other line is dropped (short lines,
    corrupt ids, the battery-failure readings above 100 C). Bins are ``interval_minutes``
    long and start at the first kept reading's time rounded down to a whole interval of
    the day.

    Args:
        path: the raw file (``.gz`` read as gzip).
        interval_minutes: bin length in minutes.
        celsius_range: ``(low, high)``: readings ``<= low`` or ``> high`` are dropped.

    Returns:
        :class:`BinnedReadings` over the motes with at least one kept reading.

    Raises:
        ValueError: non-positive interval, or no reading kept.
    """
    if not interval_minutes > 0:
        raise ValueError(f"interval_minutes must be positive, got {interval_minutes!r}")
    low, high = celsius_range
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    motes: list[int] = []
    times: list[datetime] = []
    values: list[float] = []
    with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
        for line in handle:
            reading = _parse_reading(line, low, high)
            if reading is not None:
                motes.append(reading[0])
                times.append(reading[1])
                values.append(reading[2])
    if not values:
        raise ValueError(f"{path}: no plausible temperature reading")
    first = min(times)
    midnight = first.replace(hour=0, minute=0, second=0, microsecond=0)
    offset = (first - midnight).total_seconds() / 60.0
    origin_minutes = interval_minutes * np.floor(offset / interval_minutes)
    minutes = np.array([(t - midnight).total_seconds() / 60.0 for t in times]) - origin_minutes
    bins = np.floor(minutes / interval_minutes).astype(int)
    mote_ids = np.array(sorted(set(motes)))
    rows = np.searchsorted(mote_ids, np.asarray(motes))
    shape = (len(mote_ids), int(bins.max()) + 1)
    counts = np.zeros(shape, dtype=int)
    sums = np.zeros(shape)
    np.add.at(counts, (rows, bins), 1)
    np.add.at(sums, (rows, bins), np.asarray(values))
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    start = midnight + timedelta(minutes=float(origin_minutes))
    return BinnedReadings(
        mote_ids, interval_minutes * np.arange(shape[1], dtype=float), means, counts, start
    )


def cache_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The cache directory of downloaded data: ``data_dir``, else ``$DYNBO_DATA_DIR``,
    else ``~/.cache/dynbo`` (not created here)."""
    if data_dir is not None:
        return Path(data_dir).expanduser()
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "dynbo"


#: lines of a download read to see that it holds Intel Lab readings at all
CHECKED_LINES = 10_000


def _check_readings(path: str, url: str) -> None:
    """Refuse a gzip download with no Intel Lab reading in its first lines (a wrong file:
    an error page, another data set), which every later use would fail on."""
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as handle:
        for _, line in zip(range(CHECKED_LINES), handle):
            if _parse_reading(line, *PLAUSIBLE_CELSIUS) is not None:
                return
    raise ValueError(
        f"{url}: not the Intel Lab readings (no line 'date time epoch moteid temperature "
        f"...' with a plausible reading in its first {CHECKED_LINES} lines); nothing cached"
    )


def fetch_raw(
    data_dir: str | os.PathLike[str] | None = None,
    *,
    url: str = RAW_URL,
    download: bool = True,
    timeout: float = 60.0,
) -> Path:
    """The cached raw readings ``<cache>/intel-lab/data.txt.gz``, downloaded on first use.

    The download goes to a temporary file in the cache directory, is checked to be a
    complete gzip stream whose first lines hold Intel Lab readings, and only then renamed
    into place, so an interrupted, corrupt or wrong download never leaves a cached file
    that later calls would trust.

    Args:
        data_dir: cache directory (see :func:`cache_dir`).
        url: where to download from (any URL ``urllib`` opens, ``file://`` included).
        download: ``False`` to only look in the cache.
        timeout: seconds to wait for the server.

    Raises:
        FileNotFoundError: not cached and ``download`` is ``False``.
        OSError: the download failed (nothing is left in the cache).
        ValueError: the downloaded file is not a complete gzip stream, or holds no
            Intel Lab reading in its first :data:`CHECKED_LINES` lines.
    """
    target = cache_dir(data_dir) / "intel-lab" / "data.txt.gz"
    if target.is_file():
        return target
    if not download:
        raise FileNotFoundError(
            f"the raw Intel Lab readings are not cached at {target}; run "
            "`dynbo data intel-lab` (or pass --data-dir / set DYNBO_DATA_DIR)"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=target.parent, prefix=".data.", suffix=".part")
    try:
        with os.fdopen(handle, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as src:
            shutil.copyfileobj(src, out)
        try:
            with gzip.open(partial, "rb") as check:
                while check.read(1 << 20):
                    pass
        except (OSError, EOFError, zlib.error) as err:
            raise ValueError(f"{url}: not a complete gzip file ({err})") from None
        _check_readings(partial, url)
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return target
