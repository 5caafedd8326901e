"""The documentation's screenshots of the HTML report and of the service's dashboard.

    python benchmarks/screenshots.py --store results/quick.sqlite --out docs/figures

Writes ``report.png`` (``dynbo report`` of the store's newest campaign, as headless
Chromium renders its top) and ``dashboard.png`` (``dynbo serve`` on a fresh store with
three studies fed by simulated drifting devices under the client's clock, so that the
picture does not depend on this machine's speed, apart from the response times). Needs
Debian's ``chromium`` and ``chromium-driver`` and Selenium. Prints a JSON summary: the
files written and the counts the dashboard showed.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dynbo.client import Client, ServiceError

CHEAP = {"raw_samples": 64, "restarts": 2}


def _driver(width: int, height: int):  # noqa: ANN202 - a selenium WebDriver
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"):
        options.add_argument(flag)
    options.add_argument(f"--window-size={width},{height}")
    try:
        return webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))
    except Exception:  # noqa: BLE001 - a browser start can time out on a loaded machine
        return webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))


def _shrink(path: Path, width: int) -> None:
    """Scale the PNG down to ``width`` pixels and quantize it (documentation size)."""
    from PIL import Image

    with Image.open(path) as image:
        image.load()
    if image.width > width:
        image = image.resize((width, round(image.height * width / image.width)), Image.LANCZOS)
    image.convert("RGB").quantize(colors=128).save(path, optimize=True)


def report_screenshot(store: Path, out: Path) -> Path:
    """``report.png``: the top of the report of the store's newest campaign."""
    from dynbo.report.html import write_report

    folder = Path(tempfile.mkdtemp(prefix="dynbo-report-"))
    try:
        page = write_report(store, folder / "report", progress=None)
        driver = _driver(1200, 1700)
        try:
            driver.get(page.as_uri())
            path = out / "report.png"
            driver.save_screenshot(str(path))
        finally:
            driver.quit()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    _shrink(path, 1000)
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _feed(client: Client, name: str, dim: int, steps: int, seed: int) -> None:
    """``steps`` suggest/observe rounds of a device whose optimum circles (or sweeps)."""
    rng = random.Random(seed)
    for k in range(steps):
        query = client.suggest(name, t=float(k))
        t = query.t
        centre = [0.5 + 0.3 * math.cos(2 * math.pi * t / 60 + i) for i in range(dim)]
        y = -sum((a - c) ** 2 for a, c in zip(query.x, centre)) + rng.gauss(0.0, 0.01)
        client.observe(name, y, query_id=query.query_id)


def dashboard_screenshot(out: Path) -> tuple[Path, dict]:
    """``dashboard.png``: three studies after 40-70 rounds each."""
    folder = Path(tempfile.mkdtemp(prefix="dynbo-serve-"))
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "dynbo", "serve", "--store", str(folder / "s.sqlite")]
    server = subprocess.Popen([*command, "--port", str(port)], stdout=subprocess.DEVNULL)
    try:
        client = Client(url, retries=2)
        for _ in range(600):
            try:
                client.health()
                break
            except (OSError, ServiceError):
                time.sleep(0.1)
        studies = (
            ("pump-setpoints", "wdbo", 2, 70),
            ("antenna-tilt", "bolt", 1, 60),
            ("cache-size", "gp-ucb", 1, 40),
        )
        for seed, (name, policy, dim, steps) in enumerate(studies):
            bounds = [[0.0] * dim, [1.0] * dim]
            client.create_study(name, policy, bounds, options=CHEAP, clock="client", seed=seed)
            _feed(client, name, dim, steps, seed)
        counts = {s["name"]: s["dataset_size"] for s in client.studies()}
        driver = _driver(1400, 1500)
        try:
            driver.get(url + "/")
            path = out / "dashboard.png"
            driver.save_screenshot(str(path))
        finally:
            driver.quit()
    finally:
        server.terminate()
        server.wait(timeout=60)
        shutil.rmtree(folder, ignore_errors=True)
    _shrink(path, 1000)
    return path, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True, help="the store to report")
    parser.add_argument("--out", type=Path, default=Path("docs/figures"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    report = report_screenshot(args.store, args.out)
    dashboard, counts = dashboard_screenshot(args.out)
    print(
        json.dumps(
            {"report": str(report), "dashboard": str(dashboard), "dataset_sizes": counts},
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
