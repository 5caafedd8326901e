"""The HTTP/JSON ask/tell service (FastAPI): ``create_app`` and ``serve``.

Routes (JSON unless said; the OpenAPI description is ``GET /openapi.json``)::

    GET    /                              the dashboard (HTML, no external assets)
    GET    /dashboard/data                the dashboard's data (JSON; the page refreshes)
    GET    /health                        {"status": "ok", "studies": n}
    GET    /studies                       every study with its counts
    POST   /studies                       create: {name, policy, bounds, options, seed, clock}
    GET    /studies/{name}                policy, dataset size, pending query,
                                          hyperparameters, last diagnostics
    DELETE /studies/{name}
    POST   /studies/{name}/suggest        {t?, replace?} -> {query_id, x, t, additional, repeated}
    POST   /studies/{name}/observe        {y, query_id? | x, t?, additional?, key?}
    GET    /studies/{name}/history        every event (?format=csv for CSV)
    GET    /studies/{name}/dataset        the observations the policy keeps

Errors are ``{"error": "<what is wrong>"}`` with a 4xx status (422 for a bad value or a
body that is not valid JSON, 404 for an unknown study or query id, 409 for a taken name
or an answered query, 401 for a missing or wrong token, 413 for a body over the limit)
and change nothing; 503 when an event could not be stored (nothing changed: retry).

Requests to one study are serialized by an asyncio lock per study and run in a thread
pool, so different studies proceed in parallel and a waiting request holds no thread.
After an accepted observation a background task checkpoints the study when due and
refits its hyperparameters (``Policy.refit``) before the next ``suggest`` runs.
"""

from __future__ import annotations

import asyncio
import base64
import csv
import hashlib
import hmac
import io
import json
import logging
import socket
import sys
import unicodedata
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from dynbo.service.dashboard import dashboard_data, dashboard_json, render_dashboard
from dynbo.service.storage import DamagedLog, ServiceStore
from dynbo.service.studies import MAX_KEY_LENGTH, ServiceError, StudyManager

__all__ = ["DEFAULT_MAX_BODY", "check_token", "create_app", "serve"]

#: the largest request body accepted (bytes).
DEFAULT_MAX_BODY = 1 << 20

log = logging.getLogger("dynbo.service")

# ====================================================================== request bodies


class _Body(BaseModel):
    # strict: a JSON string, bool or null is never read as a number (nor "true" as a
    # bool); a JSON integer is still a float
    model_config = ConfigDict(extra="forbid", strict=True)


class StudyIn(_Body):
    """A study to create."""

    name: str = Field(description="letters, digits, '_', '.', '-'; at most 64 characters")
    policy: str = Field(description="a policy of `dynbo list policies`, e.g. 'wdbo'")
    bounds: list[list[float]] = Field(description="[[lower...], [upper...]], original units")
    options: dict[str, Any] = Field(
        default_factory=dict, description="the policy's keyword options (JSON values)"
    )
    seed: int = Field(0, description="seed of the policy's random stream")
    clock: Literal["wall", "client"] = Field(
        "wall",
        description="wall: t is the server's clock, seconds since the study was created; "
        "client: every suggest and observe gives its t",
    )


class SuggestIn(_Body):
    """Optional body of ``suggest``."""

    t: float | None = Field(None, description="the time now (client clock only)")
    replace: bool = Field(
        False, description="ask afresh even if a query is pending (default: return it)"
    )


class AdditionalIn(_Body):
    x: list[float] = Field(description="(d,) one of the query's additional points")
    y: float
    t: float | None = Field(None, description="default: the observation's t")


class ObserveIn(_Body):
    """An observation: the answer to a query (``query_id``) or a free one (``x``, ``t``)."""

    y: float = Field(description="the observed value")
    query_id: int | None = Field(None, description="the query answered")
    x: list[float] | None = Field(None, description="(d,) the point; required without query_id")
    t: float | None = Field(
        None,
        description="the time of the evaluation (default: the query's t; the server's now "
        "for a free observation with the wall clock)",
    )
    additional: list[AdditionalIn] = Field(
        default_factory=list, description="answers to the query's additional points"
    )
    key: str | None = Field(
        None,
        max_length=MAX_KEY_LENGTH,
        description="idempotency key: a repeated key returns the first response, records nothing",
    )


class QueryOut(BaseModel):
    study: str
    query_id: int
    x: list[float]
    t: float
    additional: list[list[float]]
    repeated: bool = Field(description="true: the pending query, returned again")


class ObservationOut(BaseModel):
    study: str
    seq: int = Field(description="the event's number in the study's log")
    observation: int = Field(description="how many observations the study has, this one included")
    query_id: int | None
    x: list[float]
    t: float
    y: float
    additional: int = Field(description="answers to additional points recorded")
    dataset_size: int
    repeated: bool = Field(description="true: the key was seen; this is the first response")


# ====================================================================== security


class Guard:
    """ASGI middleware: bearer token (constant-time) and a bound on the request body.

    With a token, every request must carry ``Authorization: Bearer <token>`` (or HTTP
    Basic with the token as password, so that a browser can open the dashboard);
    otherwise 401. The token is compared as UTF-8 bytes with the header's raw bytes. A
    body over ``max_body`` bytes is refused with 413 before the application reads it.
    """

    def __init__(self, app: Any, token: str | None, max_body: int) -> None:
        self.app = app
        self._digest = None if token is None else hashlib.sha256(token.encode()).digest()
        self.max_body = max_body

    def _authorized(self, headers: dict[bytes, bytes]) -> bool:
        if self._digest is None:
            return True
        scheme, _, credentials = headers.get(b"authorization", b"").partition(b" ")
        given = b""
        if scheme.lower() == b"bearer":
            given = credentials.strip()
        elif scheme.lower() == b"basic":
            try:
                decoded = base64.b64decode(credentials.strip(), validate=True)
            except ValueError:
                decoded = b""
            given = decoded.partition(b":")[2]
        # compare digests: constant time, and the token's length does not leak either
        return hmac.compare_digest(hashlib.sha256(given).digest(), self._digest)

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if not self._authorized(headers):
            challenge = [(b"www-authenticate", b'Bearer realm="dynbo"')]
            if scope.get("path") == "/":
                challenge.append((b"www-authenticate", b'Basic realm="dynbo"'))
            await _send_json(send, 401, {"error": "missing or wrong bearer token"}, challenge)
            return
        try:
            declared = int(headers.get(b"content-length", b"0"))
        except ValueError:
            await _send_json(send, 400, {"error": "invalid Content-Length"})
            return
        if declared > self.max_body:
            await _send_json(send, 413, _too_large(self.max_body))
            return
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_body:
                await _send_json(send, 413, _too_large(self.max_body))
                return
        delivered = False

        async def replay() -> dict:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


#: FastAPI's detail when the body's JSON could not be parsed (other than a syntax error)
_PARSE_ERROR = "There was an error parsing the body"


def _log_failure(name: str, task: asyncio.Task) -> None:
    """Log the failure of a study's background checkpoint or refit (nothing waits for it)."""
    if not task.cancelled() and task.exception() is not None:
        log.warning(
            "background checkpoint/refit of study %r failed", name, exc_info=task.exception()
        )


#: the longest error message sent (characters): a message quoting a huge bad value is cut
MAX_ERROR_LENGTH = 2000


def _error(message: str, status: int, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """``{"error": message}`` with ``status``: cut to ``MAX_ERROR_LENGTH`` characters, and
    any text that is not valid Unicode (a lone surrogate quoted from the request) escaped."""
    if len(message) > MAX_ERROR_LENGTH:
        message = f"{message[:MAX_ERROR_LENGTH]}... ({len(message)} characters)"
    message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _too_large(limit: int) -> dict[str, str]:
    return {"error": f"request body over the limit of {limit} bytes"}


async def _send_json(
    send: Callable, status: int, payload: dict, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    headers += extra or []
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# ====================================================================== the application


def create_app(
    store: str | Path,
    *,
    token: str | None = None,
    checkpoint_every: int = 10,
    refit: bool = True,
    workers: int = 4,
    max_body: int = DEFAULT_MAX_BODY,
    announce: str | None = None,
) -> Any:
    """The ASGI application over the service store ``store`` (an SQLite file).

    Args:
        token: the bearer token every request must carry (``None``: none).
        checkpoint_every: checkpoint a study's policy state every this many observations
            (and at shutdown).
        refit: refit the hyperparameters in the background after each observation.
        workers: threads that run the studies' policies (different studies in parallel).
        max_body: the largest request body (bytes).
        announce: a line printed to stderr once the service is ready.

    Returns:
        The application wrapped in :class:`Guard` (``.app`` is the FastAPI app).
    """
    check_token(token)
    executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dynbo-study")
    # per study: its lock and how many requests hold or wait for it (dropped at 0, so
    # that requests for names that do not exist leave nothing behind)
    locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}
    tasks: set[asyncio.Task] = set()
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        state["manager"] = StudyManager(
            ServiceStore(store), checkpoint_every=checkpoint_every, refit=refit
        )
        if announce:
            print(announce, file=sys.stderr, flush=True)
        try:
            yield
        finally:
            manager: StudyManager = state["manager"]
            try:
                if tasks:  # the background checkpoints and refits (30 s at most)
                    await asyncio.wait(list(tasks), timeout=30)
                loop = asyncio.get_running_loop()
                await loop.run_in_executor(executor, manager.checkpoint_all)
            finally:  # no thread or open file left behind, whatever failed above
                executor.shutdown(wait=True)
                manager.store.close()

    app = FastAPI(
        title="dynbo serve",
        version=_version(),
        description="Ask/tell time-varying Bayesian optimization over HTTP. Every accepted "
        "observation is committed to SQLite before the response; a restarted server "
        "rebuilds every study exactly (docs/live.md).",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )

    def manager() -> StudyManager:
        return state["manager"]

    async def on_study(
        name: str, fn: Callable[..., Any], *args: Any, heavy: bool = False, **kwargs: Any
    ) -> Any:
        """Run ``fn`` after the study's earlier requests (FIFO per study) in a thread.

        ``heavy`` calls (``suggest``, the background refit: fits and acquisitions) go to
        the ``workers`` pool; the light ones (an observation's O(n^2) update and its
        commit, reads) to the shared thread pool, so they do not queue behind the fits of
        other studies.
        """
        entry = locks.setdefault(name, (asyncio.Lock(), [0]))
        entry[1][0] += 1
        try:
            async with entry[0]:
                call = partial(fn, *args, **kwargs)
                if not heavy:
                    return await run_in_threadpool(call)
                return await asyncio.get_running_loop().run_in_executor(executor, call)
        finally:
            entry[1][0] -= 1
            if entry[1][0] == 0 and locks.get(name) is entry:
                del locks[name]

    def in_background(name: str) -> None:
        task = asyncio.create_task(on_study(name, manager().background, name, heavy=True))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        task.add_done_callback(partial(_log_failure, name))

    @app.exception_handler(ServiceError)
    async def _service_error(_: Request, err: ServiceError) -> JSONResponse:
        return _error(str(err), err.status)

    @app.exception_handler(DamagedLog)
    async def _damaged(_: Request, err: DamagedLog) -> JSONResponse:
        return _error(f"the service store is damaged: {err}", 500)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, err: RequestValidationError) -> JSONResponse:
        parts = []
        for e in err.errors():
            where = ".".join(str(p) for p in e.get("loc", ()))
            parts.append(f"{where}: {e.get('msg', 'invalid')}")
        return _error("; ".join(parts) or "invalid request", 422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, err: StarletteHTTPException) -> JSONResponse:
        cause = err.__cause__
        if err.status_code == 400 and cause is not None and err.detail == _PARSE_ERROR:
            # FastAPI's parse of the body failed otherwise than by a JSON syntax error
            # (nested too deeply: RecursionError; an integer of over 4300 digits; not UTF-8)
            what = "nested too deeply" if isinstance(cause, RecursionError) else str(cause)
            return _error(f"the body is not valid JSON: {what}", 422)
        return _error(str(err.detail), err.status_code, err.headers)

    @app.exception_handler(Exception)
    async def _internal(_: Request, err: Exception) -> JSONResponse:
        return _error(f"internal error: {type(err).__name__}: {err}", 500)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def dashboard() -> HTMLResponse:
        studies = await run_in_threadpool(dashboard_data, manager())
        return HTMLResponse(render_dashboard(studies))

    @app.get("/dashboard/data", include_in_schema=False)
    async def dashboard_refresh() -> Response:
        studies = await run_in_threadpool(dashboard_data, manager())
        return Response(dashboard_json({"studies": studies}), media_type="application/json")

    @app.get("/health", summary="Liveness")
    async def health() -> dict[str, Any]:
        studies = await run_in_threadpool(manager().store.studies)
        return {"status": "ok", "studies": len(studies)}

    @app.get("/studies", summary="List the studies")
    async def list_studies() -> dict[str, Any]:
        return {"studies": await run_in_threadpool(manager().studies)}

    @app.post("/studies", status_code=201, summary="Create a study")
    async def create_study(body: StudyIn) -> dict[str, Any]:
        return await on_study(
            body.name,
            manager().create,
            body.name,
            body.policy,
            body.bounds,
            options=body.options,
            seed=body.seed,
            clock=body.clock,
        )

    @app.get("/studies/{name}", summary="A study: policy, dataset size, hyperparameters")
    async def get_study(name: str) -> dict[str, Any]:
        return await on_study(name, manager().info, name)

    @app.delete("/studies/{name}", summary="Delete a study and its log")
    async def delete_study(name: str) -> dict[str, Any]:
        await on_study(name, manager().delete, name)
        return {"deleted": name}

    @app.post("/studies/{name}/suggest", response_model=QueryOut, summary="The next query")
    async def suggest(name: str, body: SuggestIn | None = None) -> dict[str, Any]:
        body = body or SuggestIn()
        return await on_study(
            name, manager().suggest, name, body.t, replace=body.replace, heavy=True
        )

    @app.post("/studies/{name}/observe", response_model=ObservationOut, summary="An observation")
    async def observe(
        name: str,
        body: ObserveIn,
        idempotency_key: str | None = Header(None, max_length=MAX_KEY_LENGTH),
    ) -> dict[str, Any]:
        response = await on_study(
            name,
            manager().observe,
            name,
            body.y,
            query_id=body.query_id,
            x=body.x,
            t=body.t,
            additional=[a.model_dump() for a in body.additional],
            # an empty key in the body is refused as in the header, not read as none
            key=body.key if body.key is not None else idempotency_key,
        )
        if not response["repeated"]:
            in_background(name)
        return response

    @app.get("/studies/{name}/history", summary="Every query, observation and diagnostics")
    async def history(
        name: str,
        format: Literal["json", "csv"] = Query("json", description="json or csv"),  # noqa: A002
    ) -> Response:
        events = await run_in_threadpool(manager().history, name)
        if format == "csv":
            return PlainTextResponse(_csv(events), media_type="text/csv")
        return JSONResponse({"study": name, "events": [e.as_dict() for e in events]})

    @app.get("/studies/{name}/dataset", summary="The observations the policy keeps now")
    async def dataset(name: str) -> dict[str, Any]:
        return await on_study(name, manager().dataset, name)

    return Guard(app, token, max_body)


def _version() -> str:
    from dynbo import __version__

    return __version__


_CSV_COLUMNS = (
    "seq",
    "kind",
    "query_id",
    "asked_t",
    "t",
    "y",
    "dataset_size",
    "seconds",
    "wall",
)


def _csv(events: list[Any]) -> str:
    """One row per event: the columns above, ``x0..x{d-1}``, additional and diagnostics (JSON)."""
    dim = len(events[0].x) if events else 0
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        [
            *_CSV_COLUMNS,
            *(f"x{i}" for i in range(dim)),
            "additional",
            "idempotency_key",
            "fit_seconds",
            "acquisition_seconds",
            "hyperparameters",
        ]
    )
    for e in events:
        diag = e.diagnostics or {}
        writer.writerow(
            [
                *(getattr(e, c) if getattr(e, c) is not None else "" for c in _CSV_COLUMNS),
                *(repr(float(v)) for v in e.x),
                json.dumps(e.additional) if e.additional else "",
                e.idempotency_key or "",
                diag.get("fit_seconds", ""),
                diag.get("acquisition_seconds", ""),
                json.dumps(diag["hyperparameters"]) if diag.get("hyperparameters") else "",
            ]
        )
    return out.getvalue()


def serve(
    store: str | Path,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    checkpoint_every: int = 10,
    refit: bool = True,
    workers: int = 4,
    max_body: int = DEFAULT_MAX_BODY,
    log_level: str = "warning",
    sock: socket.socket | None = None,
) -> None:
    """Run the service with uvicorn until SIGINT/SIGTERM (then checkpoint every study).

    Each policy call uses one torch thread; ``workers`` studies run at once.

    Args:
        sock: a socket already listening (e.g. on port 0: any free port) to serve on
            instead of binding ``host:port``; the announced address is its own.
    """
    import torch
    import uvicorn

    check_token(token)
    if sock is not None:
        host, port = sock.getsockname()[:2]
    torch.set_num_threads(1)
    app = create_app(
        store,
        token=token,
        checkpoint_every=checkpoint_every,
        refit=refit,
        workers=workers,
        max_body=max_body,
        announce=f"dynbo serve: http://{_url_host(host)}:{port}/ (store {store})",
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=30,
    )
    uvicorn.Server(config).run(sockets=None if sock is None else [sock])


def check_token(token: str | None) -> None:
    """``ValueError`` unless ``token`` is ``None`` or can be sent in a header as given:
    not empty, no whitespace at either end (HTTP strips it), no control character."""
    if token is None:
        return
    # HTTP strips spaces and tabs from a header's ends (RFC 9110 5.5), no other space
    if not isinstance(token, str) or not token or token != token.strip(" \t"):
        raise ValueError(
            "the token must be a non-empty string without spaces or tabs at either end "
            "(HTTP strips them from the header, so it could never match)"
        )
    if any(unicodedata.category(c) == "Cc" for c in token):
        raise ValueError("the token must not contain control characters (a header cannot)")
    try:
        token.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("the token must be valid Unicode text (it is sent as UTF-8)") from None


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
