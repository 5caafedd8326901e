"""A heavy study against `dynbo serve`'s cost bounds: time, memory and the light studies (JSON).

The request an outside probe found to take 85 s of CPU and 9.0 GB: a ``gp-ucb`` study in
``d = 64`` with every search setting at the service's ceiling (``raw_samples`` 65536,
``restarts`` 256, ``acquisition_iterations`` 10000), fixed hyperparameters and 1000
observations. A server (``python -m dynbo serve``, a subprocess on a free loopback port,
the given ``--suggest-timeout``) is filled with those observations, then:

* one heavy ``suggest``: its status (200, or 503 once the time budget ran out), its wall
  time, and the server's peak resident memory (``VmHWM``) before and after it;
* a light study (``gp-ucb``, ``d = 2``, default search, 50 observations): the median
  latency of 5 ``suggest`` calls (each after a new observation) alone, and again while
  ``--heavy-studies`` studies like the first (``n = 200``) each ask for a suggestion
  at once (the heavy lane takes them one after the other).

    python benchmarks/serve_heavy.py [--suggest-timeout 60] [--heavy-studies 4]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_load import Server  # noqa: E402

from dynbo.client import Client, ServiceError  # noqa: E402

HEAVY = {
    "raw_samples": 65536,
    "restarts": 256,
    "acquisition_iterations": 10000,
    "learn_hyperparameters": False,
}
DIM = 64


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set (``VmHWM``), MB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmHWM in /proc: Linux only")


def fill(client: Client, name: str, policy: str, dim: int, n: int, options: dict) -> None:
    client.create_study(name, policy, [[0.0] * dim, [1.0] * dim], options=options, clock="client")
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    for k in range(n):
        x = rng.uniform(0.0, 1.0, dim)
        client.observe(name, float(-np.sum((x - 0.5) ** 2)), x=x.tolist(), t=float(k))


def timed_suggest(
    client: Client, name: str, t: float, replace: bool = False
) -> tuple[int, float, str]:
    """(HTTP status, seconds, error message or '') of one suggest (``replace``: ask afresh
    even though a query is pending)."""
    start = time.perf_counter()
    try:
        query = client.suggest(name, t=t, replace=replace)
        return (
            200,
            time.perf_counter() - start,
            f"query {query.query_id}" + (" (repeated)" if query.repeated else ""),
        )
    except ServiceError as err:
        return err.status, time.perf_counter() - start, str(err)[:300]


def light_latencies(client: Client, name: str, start_t: float, count: int = 5) -> list[float]:
    seconds = []
    for k in range(count):
        t = start_t + k
        status, spent, message = timed_suggest(client, name, t)
        if status != 200:
            raise RuntimeError(f"light suggest failed: {status} {message}")
        seconds.append(spent)
        query = client.study(name)["pending"]
        client.observe(name, 0.0, query_id=query["query_id"], t=t)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suggest-timeout", type=float, default=60.0)
    parser.add_argument("--observations", type=int, default=1000)
    parser.add_argument("--heavy-studies", type=int, default=4)
    parser.add_argument("--out", help="also write the JSON here")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dynbo-serve-heavy-"))
    result: dict = {
        "script": "benchmarks/serve_heavy.py",
        "date": time.strftime("%Y-%m-%d"),
        "machine": {
            "python": platform.python_version(),
            "processor": platform.machine(),
            "cpus": __import__("os").cpu_count(),
        },
        "suggest_timeout_s": args.suggest_timeout,
        "heavy_options": HEAVY,
        "dim": DIM,
    }
    extra = ["--suggest-timeout", str(args.suggest_timeout), "--workers", "4"]
    server = Server(work / "s.sqlite", refit=False, log=work / "server.log", extra=extra)
    try:
        client = Client(server.url, retries=0, timeout=600)
        fill(client, "heavy", "gp-ucb", DIM, args.observations, HEAVY)
        fill(client, "light", "gp-ucb", 2, 50, {})
        rss_before = peak_rss_mb(server.proc.pid)
        status, seconds, message = timed_suggest(client, "heavy", float(args.observations))
        result["heavy_suggest"] = {
            "observations": args.observations,
            "status": status,
            "seconds": seconds,
            "error": message,
            "server_peak_rss_mb_before": rss_before,
            "server_peak_rss_mb_after": peak_rss_mb(server.proc.pid),
        }
        print(json.dumps(result["heavy_suggest"]), file=sys.stderr, flush=True)
        alone = light_latencies(client, "light", 100.0)
        names = [f"heavy{k}" for k in range(args.heavy_studies)]
        for name in names:
            fill(client, name, "gp-ucb", DIM, 200, HEAVY)
        # the lane follows the measured cost: one suggest each first (as they would have)
        outcomes: dict[str, list] = {name: [] for name in names}

        def heavy(name: str, t: float) -> None:
            outcomes[name].append(timed_suggest(client, name, t, replace=True))

        for name in names:
            heavy(name, 200.0)
        threads = [threading.Thread(target=heavy, args=(n, 201.0)) for n in names]
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        busy = light_latencies(client, "light", 200.0)
        for thread in threads:
            thread.join()
        result["light_suggest"] = {
            "median_seconds_alone": statistics.median(alone),
            "median_seconds_with_heavy_studies": statistics.median(busy),
            "seconds_alone": alone,
            "seconds_with_heavy_studies": busy,
            "heavy_studies": args.heavy_studies,
            "heavy_outcomes": {
                name: [{"status": s, "seconds": sec, "answer": what} for s, sec, what in outs]
                for name, outs in outcomes.items()
            },
        }
        result["server_peak_rss_mb_end"] = peak_rss_mb(server.proc.pid)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
