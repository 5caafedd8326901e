"""Tune a live, drifting system through `dynbo serve` (docs/live.md).

A simulated device runs in a separate process and talks to the service over HTTP: it
asks where to operate (``suggest``), measures its performance there, which drifts with
time, and reports it (``observe``). The service (W-DBO, the server's wall clock) follows
the moving optimum. By default this script starts a server on a free loopback port,
creates the study, runs the device for ``--seconds``, prints a summary and stops the
server (SIGTERM: it checkpoints every study); ``--url`` uses a running server instead.

    pip install 'dynbo[serve]'
    python examples/live_device.py --seconds 30
    DYNBO_TOKEN=... python examples/live_device.py --url http://127.0.0.1:8000

The device side needs only ``dynbo.client`` (standard library) and the math module.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dynbo.client import Client, ServiceError

STUDY = "pump-setpoints"
BOUNDS = [[0.0, 0.0], [1.0, 1.0]]
PERIOD = 60.0  # seconds for the optimum to go once around its circle


def optimum(t: float) -> tuple[float, float]:
    """Where the device performs best at time ``t`` (seconds since the study began)."""
    angle = 2 * math.pi * t / PERIOD
    return 0.5 + 0.3 * math.cos(angle), 0.5 + 0.3 * math.sin(angle)


def performance(x: list[float], t: float, rng: random.Random) -> float:
    """The device's measured performance at setting ``x`` and time ``t`` (noisy; max 0)."""
    cx, cy = optimum(t)
    return -((x[0] - cx) ** 2 + (x[1] - cy) ** 2) + rng.gauss(0.0, 0.005)


def device(url: str, token: str | None, seconds: float, cost: float) -> None:
    """The device's loop (its own process): ask, operate and measure, report."""
    client = Client(url, token)
    created = client.study(STUDY)["created_at"]  # the study's clock: seconds since then
    rng = random.Random(1)
    stop = time.time() + seconds
    while time.time() < stop:
        query = client.suggest(STUDY)
        time.sleep(cost)  # move to the setting and measure
        t = time.time() - created
        y = performance(query.x, t, rng)
        record = client.observe(STUDY, y, query_id=query.query_id, t=t)
        cx, cy = optimum(t)
        miss = math.dist(query.x, (cx, cy))
        print(
            f"t={t:6.1f}s  x=({query.x[0]:.3f}, {query.x[1]:.3f})  y={y:+.4f}  "
            f"distance to the optimum {miss:.3f}  dataset {record['dataset_size']}",
            flush=True,
        )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(store: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    command = [sys.executable, "-m", "dynbo", "serve", "--store", str(store), "--port", str(port)]
    server = subprocess.Popen(command)
    url = f"http://127.0.0.1:{port}"
    probe = Client(url, retries=0, timeout=5)
    deadline = time.monotonic() + 120
    while True:
        try:
            probe.health()
            return server, url
        except (OSError, ServiceError):
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise SystemExit("the server did not start") from None
            time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running `dynbo serve` (default: start one)")
    parser.add_argument(
        "--token",
        default=os.environ.get("DYNBO_TOKEN"),
        help="its bearer token (default: $DYNBO_TOKEN, which keeps it out of the process list)",
    )
    parser.add_argument("--store", help="the store of the server started here (default: temp)")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long the device runs")
    parser.add_argument("--cost", type=float, default=0.2, help="seconds per measurement")
    parser.add_argument("--device", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.device:  # the device process
        device(args.url, args.token, args.seconds, args.cost)
        return

    server = None
    url = args.url
    if url is None:
        store = Path(args.store or Path(tempfile.mkdtemp(prefix="dynbo-live-")) / "serve.sqlite")
        server, url = start_server(store)
        print(f"started dynbo serve at {url} (store {store}); dashboard: {url}/")
    try:
        client = Client(url, args.token)
        client.create_study(
            STUDY,
            "wdbo",
            BOUNDS,
            options={"raw_samples": 256, "restarts": 5},
            seed=0,
            clock="wall",
            exist_ok=True,
        )
        command = [sys.executable, __file__, "--device", "--url", url]
        command += ["--seconds", str(args.seconds), "--cost", str(args.cost)]
        env = dict(os.environ)  # the token goes to the device in its environment, not argv
        env.pop("DYNBO_TOKEN", None)
        if args.token:
            env["DYNBO_TOKEN"] = args.token
        subprocess.run(command, check=True, env=env)  # the device, in its own process
        info = client.study(STUDY)
        history = client.history(STUDY)
        suggests = [e for e in history if e["kind"] == "suggest"]
        print(
            f"\n{info['observations']} observations, dataset size {info['dataset_size']} "
            f"(W-DBO forgets stale ones), hyperparameters {info['hyperparameters']}"
        )
        if suggests:
            seconds = sorted(e["seconds"] for e in suggests)
            print(f"median suggest time in the service: {1000 * seconds[len(seconds) // 2]:.0f} ms")
        if server is None:
            print(f"history: {url}/studies/{STUDY}/history?format=csv; dashboard: {url}/")
        else:
            print(f"the store keeps it all: dynbo serve --store {store} (then open /)")
    finally:
        if server is not None:
            server.terminate()  # SIGTERM: the server checkpoints every study and exits
            server.wait(timeout=60)


if __name__ == "__main__":
    main()
