"""Start-up time of the ``dynbo`` command (JSON).

Each command runs ``--repeats`` times as a fresh ``python -m dynbo ...`` subprocess (after
one untimed run that warms the disk cache) and the median, min and max wall-clock
seconds are reported, beside the bare interpreter (``python -c pass``) and
``python -c "import torch"`` for scale. One more run of each command under
``python -X importtime`` records which heavy libraries it imported (torch, numpy,
pandas, matplotlib, ...): ``--version`` and every ``--help`` must import none of them.
The reading commands (``show``, ``export``) run on a one-run store made beforehand
(untimed).

    python benchmarks/cli_startup.py [--repeats 7] [--out docs/results/cli_startup.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "numpy", "scipy", "pandas", "botorch", "gpytorch", "matplotlib", "distributed")


def _env() -> dict[str, str]:
    src = str(ROOT / "src")
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": src if not path else src + os.pathsep + path}


def _time(argv: list[str], repeats: int, cwd: str) -> dict[str, float]:
    env = _env()

    def once() -> float:
        start = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, env=env, cwd=cwd, timeout=600)
        seconds = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"{argv} failed: {proc.stderr.decode(errors='replace')[-500:]}")
        return seconds

    once()  # untimed: the disk cache
    times = [once() for _ in range(repeats)]
    return {
        "median_s": round(statistics.median(times), 3),
        "min_s": round(min(times), 3),
        "max_s": round(max(times), 3),
    }


def _heavy_imports(argv: list[str], cwd: str) -> list[str]:
    """The heavy top-level packages the command imported (``-X importtime`` lists every
    imported module on stderr)."""
    proc = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=cwd,
        timeout=600,
    )
    names = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}
    return sorted({n.split(".")[0] for n in names} & set(HEAVY))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per command")
    parser.add_argument(
        "--out", default=str(ROOT / "docs" / "results" / "cli_startup.json"), help="JSON file"
    )
    args = parser.parse_args()
    python = sys.executable
    dynbo = [python, "-m", "dynbo"]
    with tempfile.TemporaryDirectory() as tmp:
        store = str(Path(tmp) / "one.sqlite")
        subprocess.run(
            [*dynbo, "run", "--benchmark", "eggholder", "--policy", "gp-ucb", "--clock", "step"]
            + ["--horizon", "3", "--warmup", "2", "--benchmark-option", "dim=1", "--quiet"]
            + ["--store", store],
            check=True,
            capture_output=True,
            env=_env(),
            cwd=tmp,
        )
        commands: list[tuple[str, list[str]]] = [
            ("python -c pass", [python, "-c", "pass"]),
            ('python -c "import torch"', [python, "-c", "import torch"]),
            ("dynbo --version", [*dynbo, "--version"]),
            ("dynbo --help", [*dynbo, "--help"]),
            ("dynbo run --help", [*dynbo, "run", "--help"]),
            ("dynbo bench --help", [*dynbo, "bench", "--help"]),
            ("dynbo export --help", [*dynbo, "export", "--help"]),
            ("dynbo list suites", [*dynbo, "list", "suites"]),
            ("dynbo list policies", [*dynbo, "list", "policies"]),
            ("dynbo list", [*dynbo, "list"]),
            ("dynbo show STORE", [*dynbo, "show", store]),
            (
                "dynbo export --store STORE",
                [*dynbo, "export", "--store", store, "--out", str(Path(tmp) / "x")],
            ),
        ]
        rows = []
        for name, argv in commands:
            row = {"command": name, **_time(argv, args.repeats, tmp)}
            row["imports"] = _heavy_imports(argv, tmp)
            rows.append(row)
            shown = ", ".join(row["imports"])
            print(f"{name:<28} {row['median_s']:7.3f} s  {shown}", file=sys.stderr)
    result = {
        "what": "wall-clock seconds of a fresh `python -m dynbo ...` subprocess",
        "load_average_1min": round(os.getloadavg()[0], 2),
        "repeats": args.repeats,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "commands": rows,
    }
    text = json.dumps(result, indent=2)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
