"""`dynbo serve` killed with SIGKILL at 10 random points of a 200-observation session.

Each time a new server process is started on the same store and port; the client
retries (with one idempotency key per observation). At the end no accepted observation
is lost or duplicated, and the dataset and the next suggestion are those of an
uninterrupted session.

Importing torch takes seconds, so the servers are forked from a launcher that imported
dynbo once and never opened the store: each server is a fresh process whose only
knowledge of the session is what it reads from the store, and it is the server process
itself that is killed.
"""

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch

from dynbo.client import Client
from dynbo.policies import make
from dynbo.service import ServiceStore

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

#: reads a line per server to start, forks it (dynbo serve ARGS) and prints its pid
LAUNCHER = """
import os, signal, sys
import dynbo.cli, dynbo.service.app
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # reap the killed servers
for line in sys.stdin:
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os._exit(dynbo.cli.main(sys.argv[1:]))
    print(pid, flush=True)
"""
OPTIONS = {
    "raw_samples": 32,
    "restarts": 1,
    "acquisition_iterations": 10,
    "learn_hyperparameters": False,
    "initial_hyperparameters": {"lengthscale_space": 0.15, "noise": 1e-3},
}
BOUNDS = [[0.0], [1.0]]
STEPS = 200
KILLS = 10


def f(x, t):
    """A drifting peak on [0, 1]."""
    return float(-((x[0] - 0.5 - 0.3 * np.sin(t / 25.0)) ** 2))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


GONE = set()  # server pids seen ended (never signalled again: the pid may be reused)


def end(pid, sig, timeout=60.0):
    """Send ``sig`` to the server ``pid`` and wait until the process is gone."""
    if pid in GONE:
        return
    if alive(pid):
        os.kill(pid, sig)
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + timeout
        time.sleep(0.01)
    GONE.add(pid)


class Launcher:
    def __init__(self, args, log):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", LAUNCHER, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
        )

    def start(self):
        """A new server process; returns its pid."""
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the launcher exited; see servers.log")
        return int(line)

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


def uninterrupted(steps):
    """The session without the service: the same policy calls, in this process."""
    dtype = torch.get_default_dtype()
    threads = torch.get_num_threads()
    torch.set_default_dtype(torch.float32)  # as in the server process
    torch.set_num_threads(1)
    try:
        policy = make("gp-ucb", bounds=BOUNDS, seed=11, **OPTIONS)
        for k in range(steps):
            q = policy.suggest(float(k))
            policy.observe(q.x, q.t, f(q.x, q.t))
        return policy.dataset, policy.suggest(float(steps)).x
    finally:
        torch.set_default_dtype(dtype)
        torch.set_num_threads(threads)


def test_sigkill_at_random_points_loses_and_duplicates_nothing(tmp_path):
    store, port = tmp_path / "s.sqlite", free_port()
    args = ["serve", "--store", str(store), "--port", str(port), "--checkpoint-every", "7"]
    rng = np.random.default_rng(20240611)
    kill_at = {
        int(k): float(d)
        for k, d in zip(
            rng.choice(np.arange(2, STEPS), size=KILLS, replace=False),
            rng.uniform(0.0, 0.06, size=KILLS),
        )
    }
    log = open(tmp_path / "servers.log", "wb")
    launcher = Launcher(args, log)
    server = []
    killed = []

    def kill_and_restart(delay):
        time.sleep(delay)
        end(server[-1], signal.SIGKILL)
        killed.append(server[-1])
        server.append(launcher.start())

    client = Client(f"http://127.0.0.1:{port}", retries=400, backoff=0.05, max_backoff=0.2)
    killer = None
    try:
        server.append(launcher.start())
        client.create_study("crash", "gp-ucb", BOUNDS, options=OPTIONS, seed=11, clock="client")
        for k in range(STEPS):
            if k in kill_at:
                if killer is not None:
                    killer.join()
                killer = threading.Thread(target=kill_and_restart, args=(kill_at[k],))
                killer.start()
            q = client.suggest("crash", t=float(k))
            assert q.t == float(k)
            client.observe("crash", f(q.x, q.t), query_id=q.query_id)
        killer.join()
        assert len(set(killed)) == KILLS and len(server) == KILLS + 1
        events = client.history("crash")
        observed = [e["query_id"] for e in events if e["kind"] == "observe"]
        suggested = [e["query_id"] for e in events if e["kind"] == "suggest"]
        assert observed == list(range(1, STEPS + 1))  # none lost, none twice
        assert suggested == list(range(1, STEPS + 1))
        data = client.dataset("crash")
        next_query = client.suggest("crash", t=float(STEPS))
        end(server[-1], signal.SIGTERM)  # a clean stop checkpoints the final state
    finally:
        if killer is not None:
            killer.join()
        for pid in server:
            end(pid, signal.SIGKILL)
        launcher.close()
        log.close()
    reference, reference_next = uninterrupted(STEPS)
    np.testing.assert_array_equal(np.asarray(data["x"]), reference.x)
    np.testing.assert_array_equal(np.asarray(data["t"]), reference.t)
    np.testing.assert_array_equal(np.asarray(data["y"]), reference.y)
    np.testing.assert_array_equal(next_query.x, reference_next)
    saved = ServiceStore(store)
    try:
        assert saved.checkpoint_seq("crash") == len(events) + 1
    finally:
        saved.close()
