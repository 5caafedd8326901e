"""Load on `dynbo serve`: 8 studies, 32 concurrent clients, loopback only (JSON).

For each dataset size (50, 200) and each setting of the background refit (off, on), a
server (``python -m dynbo serve``, a subprocess on a free 127.0.0.1 port) serves 8
studies whose policies already hold that many observations (filled beforehand with
free observations through a server without refits, then copied, so that both settings
start from the same store), and 32 client threads (4 per study, ``dynbo.client.Client``
without retries, so that every failure counts) run for ``--seconds`` each:

    suggest -> (a pending query of another client: wait --pause, ask again)
            -> wait --evaluation (the measurement) -> observe -> wait --pause

Printed: requests served and errors (non-2xx answers or connection failures; must be
0) per cell and in total, and the client-side p50/p99 latency (milliseconds) of the
fresh ``suggest`` calls (those that ran the policy) and of ``observe``, with the range
of dataset sizes seen while measuring (the studies grow as they are told). With the
background refit, a ``suggest`` that comes after the refit finished only cleans and
maximizes the acquisition. The setup (server starts, filling) is not timed; the run is
bounded by ``--seconds`` per cell and ``--max-requests``, and stops by itself.

    python benchmarks/serve_load.py [--seconds 60] [--policy st-gp-ucb] [--dim 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dynbo.client import Client, ServiceError

STUDIES = 8
CLIENTS = 32
SIZES = (50, 200)
OPTIONS = {"raw_samples": 128, "restarts": 4, "acquisition_iterations": 50, "fit_iterations": 20}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``dynbo serve`` on a free loopback port (stopped with SIGTERM: it checkpoints)."""

    def __init__(self, store: Path, refit: bool, log: Path, extra: Sequence[str] = ()) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "dynbo", "serve", "--store", str(store)]
        command += ["--host", "127.0.0.1", "--port", str(self.port), *extra]
        if not refit:
            command.append("--no-refit")
        self._log = open(log, "ab")
        self.proc = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)
        probe = Client(self.url, retries=0, timeout=5)
        deadline = time.monotonic() + 180
        while True:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the server did not start; see {log}")
            try:
                probe.health()
                break
            except (OSError, ServiceError):
                time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def f(x: list[float], t: float) -> float:
    """A peak drifting on a circle, with a little noise."""
    centre = 0.5 + 0.25 * np.array([np.cos(t / 30.0), np.sin(t / 30.0)] + [0.0] * (len(x) - 2))
    return float(-np.sum((np.asarray(x) - centre[: len(x)]) ** 2) + 0.01 * np.random.randn())


def fill(store: Path, work: Path, names: list[str], size: int, dim: int, policy: str) -> None:
    """Bring every study to ``size`` free observations (a server without refits)."""
    server = Server(store, refit=False, log=work / "fill.log")
    try:
        client = Client(server.url, retries=0)

        def one(index: int) -> None:
            name = names[index]
            rng = np.random.default_rng([size, index])
            client.create_study(
                name, policy, [[0.0] * dim, [1.0] * dim], options=OPTIONS, exist_ok=True
            )
            have = client.study(name)["observations"]
            for _ in range(size - have):
                x = rng.uniform(0.0, 1.0, dim).tolist()
                client.observe(name, f(x, 0.0), x=x)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(names))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        server.stop()


def copy_store(source: Path, target: Path) -> None:
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)


def run_cell(
    store: Path, work: Path, names: list[str], refit: bool, args: argparse.Namespace
) -> dict:
    server = Server(store, refit=refit, log=work / "cell.log")
    lock = threading.Lock()
    suggest_ms: list[float] = []
    observe_ms: list[float] = []
    sizes: list[int] = []
    counts = {"served": 0, "errors": 0, "repeated": 0}
    error_messages: list[str] = []
    stop_at = time.monotonic() + args.seconds
    budget = [args.max_requests]

    def request(kind: str, call):  # noqa: ANN001, ANN202
        with lock:
            if budget[0] <= 0:
                return None
            budget[0] -= 1
        start = time.perf_counter()
        try:
            result = call()
        except (OSError, ServiceError) as err:
            with lock:
                counts["errors"] += 1
                error_messages.append(f"{kind}: {err}")
            return None
        elapsed = 1000 * (time.perf_counter() - start)
        with lock:
            counts["served"] += 1
            if kind == "suggest" and not result.repeated:
                suggest_ms.append(elapsed)
            elif kind == "suggest":
                counts["repeated"] += 1
            else:
                observe_ms.append(elapsed)
                sizes.append(result["dataset_size"])
        return result

    def client_loop(index: int) -> None:
        name = names[index % len(names)]
        client = Client(server.url, retries=0, timeout=120)
        while time.monotonic() < stop_at:
            query = request("suggest", lambda: client.suggest(name))
            if query is None:
                return
            if query.repeated:  # another client's query is pending
                time.sleep(args.pause)
                continue
            time.sleep(args.evaluation)
            y, answered = f(query.x, query.t), query.query_id
            if request("observe", lambda: client.observe(name, y, query_id=answered)) is None:  # noqa: B023
                return
            time.sleep(args.pause)

    threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(CLIENTS)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - started
    server.stop()

    def percentiles(values: list[float]) -> dict:
        if not values:
            return {"count": 0}
        return {
            "count": len(values),
            "p50_ms": round(float(np.percentile(values, 50)), 1),
            "p99_ms": round(float(np.percentile(values, 99)), 1),
        }

    return {
        "seconds": round(wall, 1),
        "requests_served": counts["served"],
        "errors": counts["errors"],
        "error_examples": error_messages[:5],
        "suggest_repeated_pending": counts["repeated"],
        "suggest": percentiles(suggest_ms),
        "observe": percentiles(observe_ms),
        "dataset_size_range": [min(sizes), max(sizes)] if sizes else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seconds", type=float, default=60.0, help="measured time per cell (4 cells)"
    )
    parser.add_argument("--policy", default="st-gp-ucb")
    parser.add_argument("--dim", type=int, default=2)
    parser.add_argument("--evaluation", type=float, default=0.05, help="seconds per measurement")
    parser.add_argument("--pause", type=float, default=0.25, help="seconds between samples")
    parser.add_argument("--max-requests", type=int, default=200_000, help="cap per cell")
    args = parser.parse_args()
    if not 0 < args.seconds <= 3600:
        parser.error("--seconds must be in (0, 3600]")
    names = [f"load-{i}" for i in range(STUDIES)]
    work = Path(tempfile.mkdtemp(prefix="dynbo-serve-load-"))
    cells = []
    try:
        base = work / "base.sqlite"
        for size in SIZES:
            fill(base, work, names, size, args.dim, args.policy)
            for refit in (False, True):
                store = work / f"n{size}-{'refit' if refit else 'plain'}.sqlite"
                copy_store(base, store)
                cells.append(
                    {"dataset_size": size, "background_refit": refit}
                    | run_cell(store, work, names, refit, args)
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        json.dumps(
            {
                "studies": STUDIES,
                "clients": CLIENTS,
                "policy": args.policy,
                "dim": args.dim,
                "options": OPTIONS,
                "evaluation_seconds": args.evaluation,
                "pause_seconds": args.pause,
                "requests_served": sum(c["requests_served"] for c in cells),
                "errors": sum(c["errors"] for c in cells),
                "cells": cells,
                "cpus": os.cpu_count(),
                "load_average": [round(v, 2) for v in os.getloadavg()],
                "python": platform.python_version(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
