"""``dynbo serve``: the HTTP/JSON ask/tell service."""

from __future__ import annotations

import argparse

from dynbo.cli.common import CliError, non_negative_float, port, positive_float, positive_int

NAME = "serve"
SUMMARY = "an HTTP/JSON ask/tell service for live systems (crash-safe)"
DESCRIPTION = (
    "Serve studies over HTTP/JSON (FastAPI on uvicorn: pip install 'dynbo[serve]'): "
    "create, suggest, observe, history (JSON, CSV), GET /openapi.json, and a dashboard "
    "at /. Every accepted observation is committed to the store before it is answered; "
    "after a crash, a restart rebuilds every study exactly. Binding to an address that "
    "is not loopback requires --token. See docs/live.md."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default="results/serve.sqlite", help="service store (SQLite)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind")
    parser.add_argument(
        "--port", type=port, default=8000, help="TCP port (0: any free port, announced at start)"
    )
    parser.add_argument(
        "--token", help="bearer token every request must carry (default: $DYNBO_TOKEN)"
    )
    parser.add_argument(
        "--checkpoint-every",
        type=positive_int,
        default=10,
        help="checkpoint a study's policy state every N observations (and at shutdown)",
    )
    parser.add_argument(
        "--no-refit",
        action="store_true",
        help="do not refit the hyperparameters in the background after an observation",
    )
    parser.add_argument(
        "--workers", type=positive_int, default=4, help="threads running the studies' policies"
    )
    parser.add_argument(
        "--max-body", type=positive_int, default=1 << 20, help="largest request body (bytes)"
    )
    # the defaults are dynbo.service.http's (not imported here: it imports uvicorn)
    parser.add_argument(
        "--header-timeout",
        type=positive_float,
        default=10.0,
        help="seconds to receive a request's headers; a slower client is closed (408)",
    )
    parser.add_argument(
        "--body-timeout",
        type=positive_float,
        default=30.0,
        help="seconds to receive a request's body after its headers; then closed (408)",
    )
    parser.add_argument(
        "--max-connections",
        type=positive_int,
        default=256,
        help="open connections at most; one more is answered 503 and closed",
    )
    parser.add_argument(
        "--suggest-timeout",
        type=non_negative_float,
        default=60.0,
        help="seconds of policy work one suggest (or background refit) may take; over it "
        "the work stops and the answer is 503 with nothing changed (0: no limit)",
    )
    parser.add_argument(
        "--heavy-workers",
        type=positive_int,
        default=1,
        help="threads of the heavy lane (studies whose last suggest or refit took longer "
        "than --heavy-seconds)",
    )
    parser.add_argument(
        "--heavy-seconds",
        type=positive_float,
        default=1.0,
        help="a study whose last suggest or refit took longer runs in the heavy lane",
    )


def run(args: argparse.Namespace) -> int:
    import importlib.util
    import ipaddress
    import os

    from_env = args.token is None
    token = args.token if not from_env else os.environ.get("DYNBO_TOKEN") or None
    if token is not None and not token.strip():
        raise CliError(f"{'DYNBO_TOKEN' if from_env else '--token'} must not be empty")
    # an IPv6 address as written in a URL, "[::1]", is the address "::1"
    host = args.host[1:-1] if args.host.startswith("[") and args.host.endswith("]") else args.host
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and token is None:
        raise CliError(
            f"binding to {host} (not a loopback address) requires --token (or DYNBO_TOKEN)"
        )
    missing = [m for m in ("fastapi", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        raise CliError(f"dynbo serve needs {' and '.join(missing)}: pip install 'dynbo[serve]'")
    import socket

    from dynbo.service.app import check_token, serve
    from dynbo.service.storage import ServiceStore

    try:
        check_token(token)
    except ValueError as err:
        raise CliError(f"{'DYNBO_TOKEN' if from_env else '--token'}: {err}") from None
    # the address and the store are checked here, where a failure is one line, not in
    # uvicorn's startup, where it is a logged traceback (and a store file left behind);
    # the socket opened here is the one served (port 0: the free port it got, announced)
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.create_server((host, args.port), family=family)
    except OSError as err:
        raise CliError(f"cannot listen on {host}:{args.port}: {err}") from None
    try:
        try:
            ServiceStore(args.store).close()
        except ValueError as err:
            raise CliError(str(err)) from None
        serve(
            args.store,
            token=token,
            checkpoint_every=args.checkpoint_every,
            refit=not args.no_refit,
            workers=args.workers,
            max_body=args.max_body,
            header_timeout=args.header_timeout,
            body_timeout=args.body_timeout,
            max_connections=args.max_connections,
            suggest_timeout=args.suggest_timeout or None,
            heavy_workers=args.heavy_workers,
            heavy_seconds=args.heavy_seconds,
            sock=sock,
        )
    finally:
        sock.close()
    return 0
