"""The HTTP/JSON ask/tell service (FastAPI): ``create_app`` and ``serve``.

Routes (JSON unless said; the OpenAPI description is ``GET /openapi.json``)::

    GET    /                              the dashboard (HTML, no external assets)
    GET    /dashboard/data                the dashboard's data (JSON; the page refreshes)
    GET    /health                        {"status": "ok", "studies": n}
    GET    /studies                       every study with its counts
    POST   /studies                       create: {name, policy, bounds, options, seed, clock,
                                          max_dataset_size, max_pending, pending_expiry}
    GET    /studies/{name}                policy, dataset size, queries out,
                                          hyperparameters, last diagnostics
    DELETE /studies/{name}
    POST   /studies/{name}/suggest        {t?, replace?, budget?, key?} -> {query_id, x, t,
                                          additional, repeated}
    POST   /studies/{name}/observe        {y, query_id? | x, t?, additional?, key?}
    DELETE /studies/{name}/observations/{seq}?reason=...   retract observation event seq
    GET    /studies/{name}/alarms         health alarms, a server-sent event stream
    GET    /studies/{name}/history        every event (?format=csv for CSV)
    GET    /studies/{name}/dataset        the observations the policy keeps

Errors are ``{"error": "<what is wrong>"}`` with a 4xx status (422 for a bad value or a
body that is not valid JSON, 404 for an unknown study or query id, 409 for a taken name
or an answered query, 401 for a missing or wrong token, 413 for a body over the limit;
415, 421 and 403 for a body that is not JSON, a foreign Host, a foreign Origin:
``dynbo.service.security``) and change nothing; 503 when an event could not be stored
(nothing changed: retry).

Requests to one study are serialized by an asyncio lock per study and run in a thread
pool, so different studies proceed in parallel and a waiting request holds no thread.
After an accepted observation a background task checkpoints the study when due and
refits its hyperparameters (``Policy.refit``) before the next ``suggest`` runs.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import logging
import math
import socket
import sys
import threading
import unicodedata
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from dynbo.deadline import Deadline
from dynbo.service.dashboard import (
    dashboard_data,
    dashboard_json,
    health_events,
    render_dashboard,
)
from dynbo.service.http import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_KEEP_ALIVE,
    DEFAULT_MAX_CONNECTIONS,
    TimedH11Protocol,
    check_limits,
)
from dynbo.service.security import Guard, neutralize_csv_cell
from dynbo.service.storage import DamagedLog, ServiceStore
from dynbo.service.studies import (
    MAX_KEY_LENGTH,
    MAX_REASON_LENGTH,
    ServiceError,
    StudyManager,
    Unavailable,
)

__all__ = ["DEFAULT_MAX_BODY", "check_token", "create_app", "serve"]

#: the largest request body accepted (bytes).
DEFAULT_MAX_BODY = 1 << 20
#: seconds of policy work one ``suggest`` or background refit may take (``--suggest-timeout``)
DEFAULT_SUGGEST_TIMEOUT = 60.0
#: a study whose last suggest or refit took longer runs in the heavy lane (seconds)
DEFAULT_HEAVY_SECONDS = 1.0

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
    max_dataset_size: int | None = Field(
        None,
        description="the most observations the policy may keep (null: no cap); an "
        "observation that could take the dataset over it is refused with 409",
    )
    max_pending: int = Field(
        1,
        description="the most queries out (returned, not answered) at once: one per device "
        "that evaluates in parallel; each new query accounts for those out",
    )
    pending_expiry: float | None = Field(
        None,
        description="seconds of the study's clock after which a query out stops counting as "
        "out, at the next suggest (null: never); it stays answerable",
    )


class SuggestIn(_Body):
    """Optional body of ``suggest``."""

    t: float | None = Field(None, description="the time now (client clock only)")
    replace: bool = Field(
        False,
        description="ask afresh even if max_pending queries are out (the oldest then stops "
        "counting as out; default: return it again)",
    )
    key: str | None = Field(
        None,
        max_length=MAX_KEY_LENGTH,
        description="idempotency key: a repeated key returns the query it returned first",
    )
    budget: float | None = Field(
        None,
        gt=0,
        description="seconds the suggestion may take: the fit and the acquisition search stop "
        "early and keep what they have (the diagnostics say what was cut)",
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
    constraints: dict[str, float] | None = Field(
        None,
        description="the measured constraint values {name: value} (c >= 0 is safe) of a study "
        "whose policy declares constraints (its 'constraints' option)",
    )


class QueryOut(BaseModel):
    study: str
    query_id: int
    x: list[float]
    t: float
    additional: list[list[float]]
    repeated: bool = Field(
        description="true: a query out returned again (max_pending out, or a repeated key)"
    )


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
    violated: bool = Field(False, description="true: a measured constraint value is below 0")


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
    suggest_timeout: float | None = DEFAULT_SUGGEST_TIMEOUT,
    heavy_workers: int = 1,
    heavy_seconds: float = DEFAULT_HEAVY_SECONDS,
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
        suggest_timeout: seconds of policy work one ``suggest`` (or background refit)
            may take before it is abandoned (503, nothing changed); ``None``: no limit.
        heavy_workers: threads of the heavy lane: the suggests and refits of a study
            whose last one took over ``heavy_seconds`` run there, so that heavy studies
            queue behind each other and not in front of the light ones.
        heavy_seconds: the lane threshold (seconds of the study's last suggest or refit).

    Returns:
        The application wrapped in :class:`Guard` (``.app`` is the FastAPI app).
    """
    check_token(token)
    _check_budget(suggest_timeout, heavy_workers, heavy_seconds)
    executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dynbo-study")
    heavy_executor = ThreadPoolExecutor(max_workers=heavy_workers, thread_name_prefix="dynbo-heavy")
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
                heavy_executor.shutdown(wait=True)
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
        redirect_slashes=False,  # a redirect's Location would echo the Host header
    )

    def manager() -> StudyManager:
        return state["manager"]

    async def on_study(
        name: str,
        fn: Callable[..., Any],
        *args: Any,
        heavy: bool = False,
        cancel: threading.Event | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run ``fn`` after the study's earlier requests (FIFO per study) in a thread.

        ``heavy`` calls (``suggest``, the background refit: fits and acquisitions) go to
        the ``workers`` pool, or the heavy lane for a study whose last such call took
        over ``heavy_seconds``, and get ``deadline=``: a :class:`~dynbo.deadline.Deadline`
        of ``suggest_timeout`` seconds that starts when the work does (not while it
        waits) and stops at ``cancel``. The light ones (an observation's O(n^2) update
        and its commit, reads) go to the shared thread pool, so they do not queue behind
        the fits of other studies.
        """
        entry = locks.setdefault(name, (asyncio.Lock(), [0]))
        entry[1][0] += 1
        try:
            async with entry[0]:
                if not heavy:
                    return await run_in_threadpool(partial(fn, *args, **kwargs))
                if cancel is not None and cancel.is_set():
                    raise Unavailable("the client went away before the work started")

                def call() -> Any:
                    budget = Deadline(suggest_timeout, cancel or threading.Event())
                    return fn(*args, deadline=budget, **kwargs)

                lane = heavy_executor if manager().cost(name) > heavy_seconds else executor
                return await asyncio.get_running_loop().run_in_executor(lane, call)
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

    # HEAD /health: the same answer without its body (uvicorn drops it)
    app.add_api_route("/health", health, methods=["HEAD"], include_in_schema=False)

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
            max_dataset_size=body.max_dataset_size,
            max_pending=body.max_pending,
            pending_expiry=body.pending_expiry,
        )

    @app.get("/studies/{name}", summary="A study: policy, dataset size, hyperparameters")
    async def get_study(name: str) -> dict[str, Any]:
        return await on_study(name, manager().info, name)

    @app.delete("/studies/{name}", summary="Delete a study and its log")
    async def delete_study(name: str) -> dict[str, Any]:
        await on_study(name, manager().delete, name)
        return {"deleted": name}

    @app.post("/studies/{name}/suggest", response_model=QueryOut, summary="The next query")
    async def suggest(name: str, request: Request, body: SuggestIn | None = None) -> dict[str, Any]:
        body = body or SuggestIn()
        # a client that goes away cancels the work at its next check (nothing is logged)
        cancel = threading.Event()
        watcher = asyncio.create_task(_set_on_disconnect(request, cancel))
        try:
            return await on_study(
                name,
                manager().suggest,
                name,
                body.t,
                replace=body.replace,
                budget=body.budget,
                key=body.key,
                heavy=True,
                cancel=cancel,
            )
        finally:
            watcher.cancel()

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
            constraints=body.constraints,
        )
        if not response["repeated"]:
            in_background(name)
        return response

    @app.delete(
        "/studies/{name}/observations/{seq}",
        summary="Retract an observation (the policy forgets it; logged with the reason)",
    )
    async def forget(
        name: str,
        seq: int,
        reason: str | None = Query(
            None, max_length=MAX_REASON_LENGTH, description="why (kept in the history)"
        ),
    ) -> dict[str, Any]:
        response = await on_study(name, manager().forget, name, seq, reason)
        if not response["repeated"]:
            in_background(name)
        return response

    @app.get(
        "/studies/{name}/alarms",
        summary="Health alarms as a server-sent event stream (text/event-stream)",
    )
    async def alarms(
        name: str,
        request: Request,
        last_event_id: str | None = Header(None, max_length=100),
        poll: float = Query(1.0, ge=0.1, le=60, description="seconds between two looks"),
        seconds: float = Query(
            60.0,
            gt=0,
            le=3600,
            description="the stream ends after this long (an EventSource reconnects by "
            "itself, with Last-Event-ID), so that no stream holds a shutdown",
        ),
    ) -> StreamingResponse:
        await run_in_threadpool(manager().history, name, 1)  # 404 for an unknown study
        after_seq, after_alarm = _resume(last_event_id, manager().boot)

        async def stream() -> AsyncIterator[str]:
            nonlocal after_seq, after_alarm
            yield "retry: 1000\n: dynbo health alarms\n\n"
            end = asyncio.get_running_loop().time() + seconds
            while asyncio.get_running_loop().time() < end and not await request.is_disconnected():
                events = await run_in_threadpool(manager().store.events, name, after_seq)
                for event in events:
                    alarms = health_events(event)
                    for i, alarm in enumerate(alarms):
                        alarm = {"study": name, "seq": event.seq, "t": event.t, **alarm}
                        # an event's alarms but its last resume before it: a client that
                        # loses the rest gets them all again, never none
                        done = event.seq if i == len(alarms) - 1 else event.seq - 1
                        yield _sse(f"{done}.{manager().boot}.{after_alarm}", alarm)
                    after_seq = event.seq
                for alarm in manager().service_alarms(name, after_alarm):
                    after_alarm = alarm["id"]
                    yield _sse(f"{after_seq}.{manager().boot}.{after_alarm}", alarm)
                # the cursor after every look (an id without data moves a client's
                # Last-Event-ID, so that a reconnection does not read the log again)
                yield f"id: {after_seq}.{manager().boot}.{after_alarm}\n\n"
                await asyncio.sleep(poll)

        return StreamingResponse(
            stream(), media_type="text/event-stream", headers={"Cache-Control": "no-store"}
        )

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


def _resume(last_event_id: str | None, boot: str) -> tuple[int, int]:
    """``(log seq, service alarm number)`` to resume an alarm stream after: the
    ``Last-Event-ID`` a reconnecting client sends (``"<seq>.<boot>.<number>"``); the
    service alarms start again at 0 when the server restarted since (another ``boot``)."""
    if not last_event_id:
        return 0, 0
    seq, _, rest = last_event_id.partition(".")
    their_boot, _, number = rest.partition(".")
    try:
        after_seq = max(int(seq), 0)
        after_alarm = max(int(number), 0) if their_boot == boot else 0
    except ValueError:
        return 0, 0
    return after_seq, after_alarm


def _sse(event_id: str, alarm: Mapping[str, Any]) -> str:
    """One server-sent event: ``id``, ``event`` (the alarm's kind) and JSON ``data``."""
    data = json.dumps(alarm, allow_nan=False, default=str)
    return f"id: {event_id}\nevent: {alarm['kind']}\ndata: {data}\n\n"


async def _set_on_disconnect(request: Request, cancel: threading.Event) -> None:
    """Set ``cancel`` when the client disconnects (its body was read already, so the
    next ASGI message is the disconnect)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            cancel.set()
            return


def _check_budget(suggest_timeout: float | None, heavy_workers: int, heavy_seconds: float) -> None:
    """``ValueError`` for a non-positive budget, lane size or threshold."""
    if suggest_timeout is not None and not (
        isinstance(suggest_timeout, (int, float)) and 0 < suggest_timeout < math.inf
    ):
        raise ValueError(
            f"suggest_timeout must be a positive number of seconds or None, got {suggest_timeout!r}"
        )
    if isinstance(heavy_workers, bool) or not isinstance(heavy_workers, int) or heavy_workers < 1:
        raise ValueError(f"heavy_workers must be a positive integer, got {heavy_workers!r}")
    if not (isinstance(heavy_seconds, (int, float)) and 0 < heavy_seconds < math.inf):
        raise ValueError(f"heavy_seconds must be a positive number, got {heavy_seconds!r}")


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
    """One row per event: the columns above, ``x0..x{d-1}``, additional and diagnostics
    (JSON), a forget's target and reason, and an observation's constraint values (JSON)."""
    dim = len(events[0].x) if events else 0
    out = io.StringIO()
    # CRLF line ends (RFC 4180): a cell holding a lone carriage return is quoted too
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(
        [
            *_CSV_COLUMNS,
            *(f"x{i}" for i in range(dim)),
            "additional",
            "idempotency_key",
            "fit_seconds",
            "acquisition_seconds",
            "hyperparameters",
            "forgets",
            "reason",
            "constraints",
        ]
    )
    for e in events:
        diag = e.diagnostics or {}
        row = [
            *(getattr(e, c) if getattr(e, c) is not None else "" for c in _CSV_COLUMNS),
            *(float(v) for v in e.x),
            json.dumps(e.additional) if e.additional else "",
            e.idempotency_key or "",
            diag.get("fit_seconds", ""),
            diag.get("acquisition_seconds", ""),
            json.dumps(diag["hyperparameters"]) if diag.get("hyperparameters") else "",
            "" if e.forgets is None else e.forgets,
            e.reason or "",
            json.dumps(e.constraints) if e.constraints else "",
        ]
        # a text cell a spreadsheet would run as a formula is prefixed with ' (numbers
        # stay numbers)
        writer.writerow([neutralize_csv_cell(cell) for cell in row])
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
    header_timeout: float = DEFAULT_HEADER_TIMEOUT,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    keep_alive: float = DEFAULT_KEEP_ALIVE,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    suggest_timeout: float | None = DEFAULT_SUGGEST_TIMEOUT,
    heavy_workers: int = 1,
    heavy_seconds: float = DEFAULT_HEAVY_SECONDS,
    log_level: str = "warning",
    sock: socket.socket | None = None,
) -> None:
    """Run the service with uvicorn until SIGINT/SIGTERM (then checkpoint every study).

    Each policy call uses one torch thread; ``workers`` studies run at once.

    Args:
        header_timeout, body_timeout: seconds to receive a request's headers (from the
            connection's start or the request's first byte) and its body (from its
            headers); a slower client is closed (``dynbo.service.http``).
        keep_alive: seconds an idle kept-alive connection stays open.
        max_connections: open connections at most; one more is answered 503 and closed.
        suggest_timeout, heavy_workers, heavy_seconds: the per-request time budget and
            the heavy lane (:func:`create_app`).
        sock: a socket already listening (e.g. on port 0: any free port) to serve on
            instead of binding ``host:port``; the announced address is its own.
    """
    import torch
    import uvicorn

    check_token(token)
    check_limits(keep_alive=keep_alive)
    protocol = TimedH11Protocol.configured(
        header_timeout=header_timeout, body_timeout=body_timeout, max_connections=max_connections
    )
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
        suggest_timeout=suggest_timeout,
        heavy_workers=heavy_workers,
        heavy_seconds=heavy_seconds,
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=30,
        http=protocol,
        ws="none",  # no WebSocket route: an upgrade is plain HTTP, refused by the Guard
        timeout_keep_alive=keep_alive,  # type: ignore[arg-type]
        # a backstop: the protocol keeps the connections (and so the requests) at most
        # max_connections
        limit_concurrency=max_connections + 1,
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
