"""`dynbo serve` over real HTTP: uvicorn in a subprocess on a free loopback port.

The client, raw HTTP (bad requests: 4xx with a JSON error and nothing changed), the
token (401), the body limit (413), the OpenAPI description, the CLI's argument errors,
concurrency (an in-process uvicorn with a deliberately slow policy), and the dashboard
in a real headless browser.
"""

import base64
import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from dynbo.client import Client, ServiceError
from dynbo.policies import GPUCB, register

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

TOKEN = "s3cret-token"
CHEAP = {"raw_samples": 32, "restarts": 2, "acquisition_iterations": 20, "fit_iterations": 10}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """``python -m dynbo serve`` in a subprocess; ``stop`` ends it (SIGTERM, then SIGKILL)."""

    def __init__(self, store, *args, token=None, log=None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "dynbo", "serve", "--store", str(store)]
        command += ["--port", str(self.port), *args]
        if token:
            command += ["--token", token]
        self.log = log
        self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        self.token = token

    def wait_ready(self, timeout=120):
        deadline = time.monotonic() + timeout
        probe = Client(self.url, self.token, retries=0, timeout=5)
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with status {self.proc.returncode}")
            try:
                probe.health()
                return self
            except (OSError, ServiceError):
                time.sleep(0.1)
        raise TimeoutError("the server did not start")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = tmp_path_factory.mktemp("serve")
    with open(path / "server.log", "wb") as log:
        process = ServerProcess(path / "s.sqlite", token=TOKEN, log=log)
        try:
            yield process.wait_ready()
        finally:
            process.stop()


@pytest.fixture
def client(server):
    return Client(server.url, TOKEN, retries=2)


def raw(server, method, path, body=None, *, headers=None, token=TOKEN):
    """(status, parsed JSON or text) of one HTTP request; ``body`` bytes or JSON-able."""
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.url + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    for k, v in (headers or {}).items():
        request.add_header(k, v)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            status, payload = response.status, response.read()
    except urllib.error.HTTPError as err:
        status, payload = err.code, err.read()
    try:
        return status, json.loads(payload)
    except ValueError:
        return status, payload.decode()


def f(x, t):
    return float(-np.sum((np.asarray(x) - 0.3) ** 2) + 0.01 * t)


def test_the_full_ask_tell_cycle_with_the_client(client):
    created = client.create_study("cycle", "gp-ucb", [[0.0, -1.0], [1.0, 1.0]], options=CHEAP)
    assert created["clock"] == "wall" and created["dataset_size"] == 0
    assert client.create_study("cycle", "wdbo", [[0.0], [1.0]], exist_ok=True)["policy"] == "gp-ucb"
    times = []
    for _ in range(4):
        q = client.suggest("cycle")
        assert q.additional == [] and not q.repeated and len(q.x) == 2
        record = client.observe("cycle", f(q.x, q.t), query_id=q.query_id)
        assert record["x"] == q.x and record["t"] == q.t and not record["repeated"]
        times.append(q.t)
    assert times == sorted(times) and times[0] >= 0
    info = client.study("cycle")
    assert (info["observations"], info["suggestions"], info["dataset_size"]) == (4, 4, 4)
    assert info["hyperparameters"]["lengthscale_space"] and info["diagnostics"]["iteration"] == 4
    assert info["pending"] is None
    assert info["last_refit_seconds"] is not None  # the background refit ran
    # a free observation with the server's clock, then the history as JSON and CSV
    client.observe("cycle", 0.5, x=[0.5, 0.0])
    events = client.history("cycle")
    assert [e["kind"] for e in events] == ["suggest", "observe"] * 4 + ["observe"]
    assert events[0]["diagnostics"]["iteration"] == 1 and events[1]["y"] is not None
    csv = client.history("cycle", format="csv").splitlines()
    assert csv[0].startswith("seq,kind,query_id,asked_t,t,y,dataset_size,seconds,wall,x0,x1")
    assert len(csv) == 10
    data = client.dataset("cycle")
    assert len(data["y"]) == 5 and len(data["x"][0]) == 2
    assert "cycle" in [s["name"] for s in client.studies()]
    client.delete_study("cycle")
    with pytest.raises(ServiceError) as err:
        client.study("cycle")
    assert err.value.status == 404


def test_client_clock_studies_take_the_clients_times(client):
    client.create_study("cc", "st-gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client", seed=4)
    q = client.suggest("cc", t=10.0)
    assert q.t == 10.0
    assert client.suggest("cc", t=11.0).repeated  # the pending query again
    client.observe("cc", f(q.x, 10.5), query_id=q.query_id, t=10.5)
    assert client.suggest("cc", t=12.0).t == 12.0
    client.delete_study("cc")


def test_additional_queries_and_idempotency_keys_over_http(server, client):
    client.create_study("sq", "sparq-gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")
    for k in range(3):
        q = client.suggest("sq", t=float(k))
        assert len(q.additional) >= 1 and all(len(x) == 1 for x in q.additional)
        answers = [{"x": x, "y": f(x, k + 0.5), "t": k + 0.5} for x in q.additional]
        record = client.observe("sq", f(q.x, k), query_id=q.query_id, additional=answers)
        assert record["additional"] == len(answers)
    events = client.history("sq")
    assert events[-1]["additional"] == answers
    assert '"y"' in client.history("sq", format="csv").splitlines()[-1]
    # the same key twice (header or body): one observation, the first response twice
    q = client.suggest("sq", t=5.0)
    body = {"query_id": q.query_id, "y": 0.5, "additional": []}
    first = raw(server, "POST", "/studies/sq/observe", body, headers={"Idempotency-Key": "k-1"})
    again = raw(server, "POST", "/studies/sq/observe", body, headers={"Idempotency-Key": "k-1"})
    assert first[0] == again[0] == 200
    assert again[1] == {**first[1], "repeated": True}
    assert client.study("sq")["observations"] == 4
    client.delete_study("sq")


def test_bad_requests_are_4xx_with_a_json_error_and_change_nothing(server, client):
    client.create_study("bad", "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")
    q = client.suggest("bad", t=1.0)
    client.observe("bad", 0.1, query_id=q.query_id)
    q = client.suggest("bad", t=2.0)

    def snapshot():
        info = client.study("bad")
        keep = ("observations", "suggestions", "events", "dataset_size", "pending", "last_time")
        return {k: info[k] for k in keep}, client.dataset("bad"), len(client.history("bad"))

    before = snapshot()
    observe = "/studies/bad/observe"
    cases = [
        ("POST", observe, {"query_id": 99, "y": 1.0}, 404, "has no query 99"),
        ("POST", observe, {"query_id": 1, "y": 1.0}, 409, "answered already"),
        ("POST", observe, b'{"query_id": 2, "y": NaN}', 422, "y must be finite"),
        ("POST", observe, b'{"query_id": 2, "y": Infinity}', 422, "y must be finite"),
        ("POST", observe, {"x": [1.5], "t": 3.0, "y": 1.0}, 422, "outside"),
        ("POST", observe, {"x": [0.5], "t": 1.5, "y": 1.0}, 422, "time went backwards"),
        ("POST", observe, {"x": [0.5, 0.5], "t": 3.0, "y": 1.0}, 422, "list of 1 numbers"),
        ("POST", observe, {"x": [0.5], "y": 1.0}, 422, "t is required"),
        ("POST", observe, {"query_id": 2}, 422, "body.y"),
        ("POST", observe, {"query_id": 2, "y": "high"}, 422, "body.y"),
        ("POST", observe, {"query_id": 2, "y": 1.0, "code": "1"}, 422, "body.code"),
        ("POST", observe, b"{not json", 422, "JSON"),
        ("POST", observe, {"query_id": 2, "y": 1.0, "key": "k" * 300}, 422, "body.key"),
        # JSON that Python's parser refuses otherwise than by a syntax error
        (
            "POST",
            observe,
            b'{"y": 1, "x": ' + b"[" * 10**5 + b"]" * 10**5 + b"}",
            422,
            "nested too deeply",
        ),
        ("POST", observe, b'{"query_id": 2, "y": 1' + b"0" * 5000 + b"}", 422, "not valid JSON"),
        ("POST", observe, b'{"query_id": 2, "y": "\xff"}', 422, "not valid JSON"),
        # strict types: a string, bool or null is never read as a number or a bool
        ("POST", observe, {"query_id": True, "y": " 1e2 "}, 422, "body.query_id"),
        ("POST", observe, {"x": ["0.5"], "t": "3", "y": "1_000"}, 422, "body.x.0"),
        ("POST", "/studies/bad/suggest", {"t": "  3  ", "replace": "true"}, 422, "body.t"),
        ("POST", "/studies/bad/suggest", {"t": 3.0, "replace": 1}, 422, "body.replace"),
        # an empty key is refused as in the header (it is not "no key")
        ("POST", observe, {"query_id": 2, "y": 1.0, "key": ""}, 422, "idempotency key"),
        # a message quoting a huge bad value is cut
        ("POST", observe, {"x": [0.5] * 50_000, "t": 3.0, "y": 1.0}, 422, "characters)"),
        # the pending query is returned again only to a valid t
        ("POST", "/studies/bad/suggest", b'{"t": NaN}', 422, "finite"),
        ("POST", "/studies/bad/suggest", {"t": 0.5}, 422, "backwards"),
        ("POST", "/studies/bad/suggest", {}, 422, "t is required"),
        ("POST", "/studies/bad/suggest", {"t": 0.5, "replace": True}, 422, "backwards"),
        ("POST", "/studies/bad/suggest", b'{"t": NaN, "replace": true}', 422, "finite"),
        ("POST", "/studies/nope/suggest", {"t": 3.0}, 404, "no study named 'nope'"),
        ("POST", "/studies/nope/observe", {"x": [0.5], "t": 3.0, "y": 1.0}, 404, "no study"),
        ("GET", "/studies/b%20d", None, 422, "invalid study name"),
        ("GET", "/nowhere", None, 404, "Not Found"),
        ("POST", "/studies", {"name": "bad", "policy": "gp-ucb", "bounds": [[0], [1]]}, 409, ""),
        (
            "POST",
            "/studies",
            {"name": "x", "policy": "__import__('os')", "bounds": [[0], [1]]},
            422,
            "unknown policy",
        ),
        (
            "POST",
            "/studies",
            {"name": "x y", "policy": "gp-ucb", "bounds": [[0], [1]]},
            422,
            "invalid study name",
        ),
        (
            "POST",
            "/studies",
            {
                "name": "x",
                "policy": "gp-ucb",
                "bounds": [[0], [1]],
                "options": {"beta": "__import__('os').system('true')"},
            },
            422,
            "beta",
        ),
        (
            "POST",
            "/studies",
            {"name": "x", "policy": "gp-ucb", "bounds": [[0], [1]], "options": {"eval": 1}},
            422,
            "unknown option",
        ),
        (
            "POST",
            "/studies",
            b'{"name": "x", "policy": "gp-ucb", "bounds": [[0], [1]], "options": {"beta": '
            + b'{"a": ' * 600
            + b"1"
            + b"}" * 602,
            422,
            "option beta nests",
        ),
        (
            "POST",
            "/studies",
            {"name": "x", "policy": "gp-ucb", "bounds": [[1], [0]]},
            422,
            "below its upper",
        ),
        (
            "POST",
            "/studies",
            {"name": "x", "policy": "gp-ucb", "bounds": [[0], [1]], "clock": "moon"},
            422,
            "body.clock",
        ),
        (
            "POST",
            "/studies",
            {"name": "x\n", "policy": "gp-ucb", "bounds": [[0], [1]]},
            422,
            "name",
        ),
        (
            "POST",
            "/studies",
            {"name": "x", "policy": "gp-ucb", "bounds": [[False], [True]]},
            422,
            "body.bounds",
        ),
        (
            "POST",
            "/studies",
            {"name": "x", "policy": "gp-ucb", "bounds": [[0], [1]], "seed": True},
            422,
            "body.seed",
        ),
        # a lone surrogate quoted in the message is escaped, not a 500
        (
            "POST",
            "/studies",
            b'{"name": "x", "policy": "gp-ucb", "bounds": [[0], [1]], "options": {"beta": '
            b'{"kind": "constant", "value": 1, "\\ud800": 2}}}',
            422,
            "beta",
        ),
    ]
    for method, path, body, status, message in cases:
        got, payload = raw(server, method, path, body)
        assert got == status, (path, body, payload)
        assert isinstance(payload, dict) and message in payload["error"], (path, body, payload)
        assert len(payload["error"]) < 2100
    assert snapshot() == before
    assert "x" not in [s["name"] for s in client.studies()]
    # the pending query is still answerable
    assert client.observe("bad", 0.2, query_id=2)["observation"] == 2
    client.delete_study("bad")


def test_a_missing_or_wrong_token_is_401_and_records_nothing(server, client):
    client.create_study("auth", "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")
    q = client.suggest("auth", t=0.0)
    basic = "Basic " + base64.b64encode(f"dynbo:{TOKEN}".encode()).decode()
    wrong_basic = "Basic " + base64.b64encode(b"dynbo:guess").decode()
    for token, headers in [
        (None, {}),
        ("wrong", {}),
        (TOKEN[:-1], {}),
        (None, {"Authorization": wrong_basic}),
        (None, {"Authorization": "Token " + TOKEN}),
    ]:
        for method, path, body in [
            ("GET", "/health", None),
            ("GET", "/", None),
            ("GET", "/openapi.json", None),
            ("POST", "/studies/auth/observe", {"query_id": q.query_id, "y": 1.0}),
        ]:
            status, payload = raw(server, method, path, body, token=token, headers=headers)
            assert status == 401 and "token" in payload["error"]
    assert client.study("auth")["observations"] == 0
    assert raw(server, "GET", "/health", token=None, headers={"Authorization": basic})[0] == 200
    client.delete_study("auth")


def test_a_body_over_the_limit_is_413(server):
    import http.client

    def post(headers, body=None, chunks=None):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        try:
            conn.putrequest("POST", "/studies")
            for k, v in {"Authorization": f"Bearer {TOKEN}", **headers}.items():
                conn.putheader(k, v)
            conn.endheaders()
            for chunk in chunks or []:
                conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            if chunks is not None:
                conn.send(b"0\r\n\r\n")
            response = conn.getresponse()
            return response.status, json.loads(response.read())
        finally:
            conn.close()

    # declared too long: refused before any byte of the body is read
    status, payload = post({"Content-Length": str(2 << 20)})
    assert status == 413 and "limit" in payload["error"]
    # chunked, no length: refused once the bytes read pass the limit
    status, payload = post(
        {"Transfer-Encoding": "chunked"}, chunks=[b" " * (1 << 19)] * 2 + [b" " * 1024]
    )
    assert status == 413 and "limit" in payload["error"]


def test_the_openapi_description_lists_the_routes(server):
    status, spec = raw(server, "GET", "/openapi.json")
    assert status == 200 and spec["openapi"].startswith("3.")
    for path in (
        "/studies",
        "/studies/{name}",
        "/studies/{name}/suggest",
        "/studies/{name}/observe",
        "/studies/{name}/history",
    ):
        assert path in spec["paths"]
    assert "ObserveIn" in spec["components"]["schemas"]


def test_the_cli_refuses_bad_arguments(capsys, monkeypatch):
    from dynbo.cli import main

    monkeypatch.delenv("DYNBO_TOKEN", raising=False)
    assert main(["serve", "--host", "0.0.0.0"]) == 2
    assert "requires --token" in capsys.readouterr().err
    assert main(["serve", "--port", "70000"]) == 2
    assert "port" in capsys.readouterr().err
    assert main(["serve", "--token", " "]) == 2
    assert "must not be empty" in capsys.readouterr().err
    # HTTP strips a header's ends, and a header cannot carry control characters
    for token in (" secret ", "secret\n", "sec\x07ret"):
        assert main(["serve", "--token", token]) == 2
        err = capsys.readouterr().err
        assert err.startswith("dynbo: error: --token") and err.count("\n") == 1
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "fastapi" else real(name)
    )
    assert main(["serve"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'dynbo[serve]'" in err


def test_a_token_is_refused_only_where_http_could_never_carry_it():
    from dynbo.service.app import check_token

    for token in (" secret", "secret\t", "sec\nret", "\ud800secret", ""):
        with pytest.raises(ValueError, match="token"):
            check_token(token)
    for token in ("secret", "\u00a0secret\u00a0", "s\u00e9cret"):  # HTTP strips no NBSP
        check_token(token)


def test_port_0_serves_on_a_free_port_and_announces_it(tmp_path):
    command = [sys.executable, "-m", "dynbo", "serve", "--store", str(tmp_path / "s.sqlite")]
    proc = subprocess.Popen(
        [*command, "--port", "0"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    try:
        line = proc.stderr.readline()  # the announcement, once the service is ready
        assert line.startswith("dynbo serve: http://127.0.0.1:"), line
        url = line.split()[2].rstrip("/")
        assert not url.endswith(":0")
        assert Client(url, retries=0, timeout=30).health()["status"] == "ok"
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_the_client_refuses_bad_settings_when_made():
    for kwargs, word in [
        ({"retries": 2.5}, "retries"),
        ({"retries": -1}, "retries"),
        ({"retries": True}, "retries"),
        ({"backoff": float("inf")}, "backoff"),
        ({"max_backoff": -1}, "max_backoff"),
        ({"timeout": float("nan")}, "timeout"),
        ({"timeout": 0}, "timeout"),
    ]:
        with pytest.raises(ValueError, match=word):
            Client("http://127.0.0.1:1", **kwargs)


# ---------------------------------------------------------------------- concurrency


@register
class SleepyGPUCB(GPUCB):
    """GP-UCB whose iteration sleeps (a slow fit, without burning the CPU)."""

    name = "test-sleepy-gp-ucb"

    def _clean(self, t, diag):
        time.sleep(3.0)


def test_studies_run_in_parallel_and_one_studys_requests_are_serialized(tmp_path):
    with in_process(tmp_path / "s.sqlite", workers=4) as url:
        client = Client(url, retries=0)
        client.create_study(
            "slow", "test-sleepy-gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client"
        )
        for k in range(3):
            client.create_study(f"fast{k}", "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")
        done = {}

        started = time.monotonic()

        def slow(label):
            done[label] = (client.suggest("slow", t=0.0), time.monotonic())

        threads = [threading.Thread(target=slow, args=(i,)) for i in range(2)]
        for th in threads:
            th.start()
            time.sleep(0.2)
        errors = []

        def fast(k):
            try:
                for i in range(2):
                    q = client.suggest(f"fast{k}", t=float(i))
                    client.observe(f"fast{k}", f(q.x, q.t), query_id=q.query_id)
            except Exception as err:  # noqa: BLE001 - reported below
                errors.append(err)

        workers = [threading.Thread(target=fast, args=(k,)) for k in range(3)]
        for th in workers:
            th.start()
        for th in workers:
            th.join()
        fast_done = time.monotonic()
        for th in threads:
            th.join()
        assert errors == []
        # the fast studies finished while the slow one was still in its first suggest
        assert fast_done < min(when for _, when in done.values())
        # the later request to the slow study waited for the earlier one (its 3 s) and got
        # its query (the client threads' own clocks may note the two answers in any order)
        (first, _), (second, t_second) = sorted(done.values(), key=lambda d: d[0].repeated)
        assert first.query_id == second.query_id == 1
        assert not first.repeated and second.repeated and t_second - started >= 3.0
        for k in range(3):
            assert client.study(f"fast{k}")["observations"] == 2


@contextlib.contextmanager
def in_process(store, **kwargs):
    """``create_app(store, **kwargs)`` served by uvicorn in a thread; yields its URL."""
    import uvicorn

    from dynbo.service import create_app

    port = free_port()
    config = uvicorn.Config(
        create_app(store, **kwargs),
        host="127.0.0.1",
        port=port,
        log_level="critical",
        lifespan="on",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=60)


def test_a_non_ascii_token_is_compared_as_utf8(tmp_path):
    token = "pässwörd-令牌"
    with in_process(tmp_path / "s.sqlite", token=token, refit=False) as url:
        assert Client(url, token, retries=0).health()["status"] == "ok"
        with pytest.raises(ServiceError) as err:
            Client(url, "pässwörd", retries=0).health()
        assert err.value.status == 401
        import http.client

        port = int(url.rsplit(":", 1)[1])
        for value, status in [
            (b"Bearer " + token.encode(), 200),  # as curl sends it
            (b"Basic " + base64.b64encode(b"me:" + token.encode()), 200),  # as a browser
            ("Bearer pässwörd".encode("latin-1"), 401),
        ]:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            try:
                conn.putrequest("GET", "/health")
                conn.putheader("Authorization", value)
                conn.endheaders()
                assert conn.getresponse().status == status
            finally:
                conn.close()


def test_background_failures_are_logged_and_shutdown_leaves_no_thread(
    tmp_path, monkeypatch, caplog
):
    from dynbo.service import ServiceStore, StudyManager

    def broken(self, *args, **kwargs):
        raise RuntimeError("broken on purpose")

    closed = []
    close = ServiceStore.close
    monkeypatch.setattr(StudyManager, "background", broken)
    monkeypatch.setattr(StudyManager, "checkpoint_all", broken)
    monkeypatch.setattr(ServiceStore, "close", lambda self: closed.append(close(self)))
    caplog.set_level("WARNING", logger="dynbo.service")
    with in_process(tmp_path / "s.sqlite", workers=2) as url:
        client = Client(url, retries=0)
        client.create_study("a", "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")
        q = client.suggest("a", t=0.0)  # runs in the workers' pool
        client.observe("a", 0.5, query_id=q.query_id)
        deadline = time.monotonic() + 30
        while "failed" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "background checkpoint/refit of study 'a' failed" in caplog.text
        assert "broken on purpose" in caplog.text
        assert client.observe("a", 0.25, x=[0.5], t=1.0)["observation"] == 2
    # the failed shutdown checkpoint still closes the store and ends the workers
    assert closed == [None]
    assert [t.name for t in threading.enumerate() if t.name.startswith("dynbo-")] == []


# ---------------------------------------------------------------------- dashboard


def test_the_dashboard_data_agree_with_the_header_counts(server, client):
    client.create_study("dash-data", "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")
    for k in range(3):
        q = client.suggest("dash-data", t=float(k))
        client.observe("dash-data", f(q.x, q.t), query_id=q.query_id)
    client.suggest("dash-data", t=3.0)  # a query out: the dataset is still 3
    status, payload = raw(server, "GET", "/dashboard/data")
    assert status == 200
    study = next(s for s in payload["studies"] if s["name"] == "dash-data")
    header = next(s for s in client.studies() if s["name"] == "dash-data")
    assert study["dataset_size"] == header["dataset_size"] == 3
    # the size chart ends on the header's value (the suggests alone would end on 2)
    assert study["sizes"][-1][1] == 3 and max(size for _, size in study["sizes"]) == 3
    assert len(study["sizes"]) == header["events"] == 7
    assert len(study["observed"]) == header["observations"] == 3
    assert len(study["queried"]) == len(study["response"]) == header["suggestions"] == 4
    events = client.history("dash-data")
    suggests = [e for e in events if e["kind"] == "suggest"]
    assert study["queried"] == [[e["t"], *e["x"]] for e in suggests]
    assert raw(server, "GET", "/dashboard/data", token=None)[0] == 401
    client.delete_study("dash-data")


def dashboard_state(driver):
    """Per study on the page: header text, open or collapsed, and per chart: its width,
    tick label counts, texts that leave the chart, circles per series, the last value
    of each line."""
    return driver.execute_script(
        """
        const out = {};
        for (const box of document.querySelectorAll("details.study")) {
          const panels = {};
          for (const svg of box.querySelectorAll("svg.panel")) {
            const frame = svg.getBoundingClientRect();
            const outside = Array.from(svg.querySelectorAll("text")).filter(t => {
              const r = t.getBoundingClientRect();
              return r.left < frame.left - 1 || r.right > frame.right + 1 ||
                     r.top < frame.top - 1 || r.bottom > frame.bottom + 1;
            }).map(t => t.textContent);
            const dots = {};
            for (const c of svg.querySelectorAll("circle")) {
              dots[c.dataset.series] = (dots[c.dataset.series] || 0) + 1;
            }
            panels[svg.dataset.panel] = {
              width: frame.width,
              yticks: svg.querySelectorAll("text.tick.y").length,
              xticks: svg.querySelectorAll("text.tick.x").length,
              outside: outside,
              dots: dots,
              last: Array.from(svg.querySelectorAll("path")).map(p => +p.dataset.last),
            };
          }
          out[box.dataset.study] = {
            meta: box.querySelector(".meta").textContent,
            open: box.open,
            width: box.getBoundingClientRect().width,
            panels: panels,
          };
        }
        return out;
        """
    )


def test_the_dashboard_in_a_real_headless_browser(server, client, tmp_path, headless_chromium):
    from selenium.webdriver.support.ui import WebDriverWait

    bounds = {"dash-a": [[0.0], [1.0]], "dash-b": [[0.0, 0.0], [1.0, 1.0]]}
    for name, policy in (("dash-a", "gp-ucb"), ("dash-b", "st-gp-ucb")):
        client.create_study(name, policy, bounds[name], options=CHEAP, clock="client")
        for k in range(3):
            q = client.suggest(name, t=float(k))
            client.observe(name, f(q.x, q.t), query_id=q.query_id)
    studies = {s["name"]: s for s in client.studies()}
    driver = headless_chromium(1400, 500)
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd(
        "Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Bearer {TOKEN}"}}
    )
    driver.get(server.url + "/?refresh=1")
    assert driver.execute_script("return document.readyState") == "complete"
    errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert errors == []
    state = dashboard_state(driver)
    assert set(studies) <= set(state)
    for name in ("dash-a", "dash-b"):
        shown, study = state[name], studies[name]
        assert f"dataset size {study['dataset_size']}" in shown["meta"]
        assert f"{study['observations']} observations" in shown["meta"]
        panels = shown["panels"]
        assert set(panels) == {"observations", "queries", "dataset", "response"}
        for panel in panels.values():
            # two charts a row, as wide as the box allows, ticked, nothing cut off
            assert panel["width"] > 0.4 * shown["width"]
            assert panel["yticks"] >= 3 and panel["xticks"] >= 3
            assert panel["outside"] == []
        assert panels["observations"]["dots"] == {"y": 3}
        dims = len(bounds[name][0])
        assert panels["queries"]["dots"] == {f"x{i}": 3 for i in range(dims)}
        assert panels["dataset"]["last"] == [study["dataset_size"]]
    driver.save_screenshot(str(tmp_path / "dashboard.png"))
    assert (tmp_path / "dashboard.png").stat().st_size > 5000

    # auto-refresh: new data appear in place; the scroll position and a collapsed study stay
    driver.execute_script(
        "document.querySelector('details[data-study=\"dash-a\"] summary').click();"
        "window.scrollTo(0, 120);"
    )
    scrolled = driver.execute_script("return window.scrollY")
    assert scrolled > 0
    q = client.suggest("dash-b", t=3.0)
    client.observe("dash-b", f(q.x, q.t), query_id=q.query_id)
    WebDriverWait(driver, 30, poll_frequency=0.2).until(
        lambda d: "4 observations" in dashboard_state(d)["dash-b"]["meta"]
    )
    state = dashboard_state(driver)
    assert state["dash-b"]["panels"]["dataset"]["last"] == [4]
    assert state["dash-b"]["panels"]["observations"]["dots"] == {"y": 4}
    assert state["dash-a"]["open"] is False and state["dash-b"]["open"] is True
    assert driver.execute_script("return window.scrollY") == scrolled
    for name in ("dash-a", "dash-b"):
        client.delete_study(name)
