"""A Python client of ``dynbo serve`` (standard library only: it runs on a device without torch).

Usage::

    from dynbo.client import Client

    client = Client("http://127.0.0.1:8000", token=None)
    client.create_study("pump", "wdbo", bounds=[[0.0, 0.0], [1.0, 1.0]], exist_ok=True)
    while running:
        query = client.suggest("pump")                 # query.query_id, query.x, query.t
        y = measure(query.x)
        client.observe("pump", y, query_id=query.query_id)

Connection errors, timeouts and 502/503/504 answers are retried with exponential
backoff. Retrying can never record an observation twice: each :meth:`Client.observe`
call draws one idempotency key and sends it with every attempt, and the server
answers a key it has committed with the first response. A ``suggest`` does the same:
its retries get the query a lost response carried, not a new one.

Errors the server answers (4xx) raise :class:`ServiceError` with its status and
message, at once (they are not retried).
"""

from __future__ import annotations

import http.client
import json
import math
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Client", "Suggestion", "ServiceError"]

_RETRY_STATUSES = (502, 503, 504)


class ServiceError(Exception):
    """An error answer of the service: ``status`` (HTTP) and ``message`` (its ``error``)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Suggestion:
    """A query of the service.

    Attributes:
        query_id: pass it to :meth:`Client.observe`.
        x: ``(d,)`` the point to evaluate (original units).
        t: when to evaluate it (the study's clock).
        additional: ``(m, d)`` past points the policy also asks to evaluate afresh
            (empty for most policies); answer them with ``observe(..., additional=)``.
        repeated: the query was pending already (returned again).
    """

    query_id: int
    x: list[float]
    t: float
    additional: list[list[float]] = field(default_factory=list)
    repeated: bool = False


class Client:
    """Talk to a ``dynbo serve`` at ``url``.

    Args:
        url: e.g. ``"http://127.0.0.1:8000"``.
        token: the server's bearer token (``None`` if it has none).
        timeout: seconds to wait for one answer (a suggest may take as long as a fit).
        retries: attempts after the first on a connection error, timeout or 502-504.
        backoff: seconds before the first retry; doubled each time, up to ``max_backoff``.
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = 60.0,
        retries: int = 8,
        backoff: float = 0.1,
        max_backoff: float = 2.0,
    ) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"url must be http(s)://host:port, got {url!r}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries must be an integer >= 0, got {retries!r}")
        for name, value, least in (
            ("timeout", timeout, None),
            ("backoff", backoff, 0.0),
            ("max_backoff", max_backoff, 0.0),
        ):
            # a real number, finite (a sleep of inf overflows), > 0 or >= least
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or (value <= 0 if least is None else value < least)
            ):
                bound = "> 0" if least is None else f">= {least:g}"
                raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff

    # ------------------------------------------------------------------ studies
    def create_study(
        self,
        name: str,
        policy: str,
        bounds: Sequence[Sequence[float]],
        *,
        options: Mapping[str, Any] | None = None,
        seed: int = 0,
        clock: str = "wall",
        exist_ok: bool = False,
        max_dataset_size: int | None = None,
        max_pending: int = 1,
        pending_expiry: float | None = None,
    ) -> dict[str, Any]:
        """Create a study (``exist_ok``: return the existing one of that name instead).

        A retry whose first attempt created the study (its answer lost) gets 409: pass
        ``exist_ok=True`` where that may happen.

        ``clock``: ``"wall"`` (the server's clock, seconds since the study was created)
        or ``"client"`` (you give ``t`` to every suggest and observe).
        ``max_dataset_size``: the most observations the study's policy may keep
        (``None``: no cap); an observation that could take it over is refused (409).
        ``max_pending``: the most queries out at once (one per device evaluating in
        parallel); ``pending_expiry``: seconds of the study's clock after which a query
        out stops counting as out (``None``: never).
        """
        body = {
            "name": name,
            "policy": policy,
            "bounds": [[float(v) for v in row] for row in bounds],
            "options": dict(options or {}),
            "seed": seed,
            "clock": clock,
        }
        if max_dataset_size is not None:
            body["max_dataset_size"] = max_dataset_size
        if max_pending != 1:
            body["max_pending"] = max_pending
        if pending_expiry is not None:
            body["pending_expiry"] = float(pending_expiry)
        try:
            return self._request("POST", "/studies", body)
        except ServiceError as err:
            if exist_ok and err.status == 409:
                return self.study(name)
            raise

    def studies(self) -> list[dict[str, Any]]:
        """Every study with its counts."""
        return self._request("GET", "/studies")["studies"]

    def study(self, name: str) -> dict[str, Any]:
        """One study: policy, dataset size, pending query, hyperparameters, diagnostics."""
        return self._request("GET", f"/studies/{_quote(name)}")

    def delete_study(self, name: str) -> None:
        self._request("DELETE", f"/studies/{_quote(name)}")

    # ------------------------------------------------------------------ ask / tell
    def suggest(
        self,
        name: str,
        t: float | None = None,
        *,
        replace: bool = False,
        budget: float | None = None,
        key: str | None = None,
    ) -> Suggestion:
        """The next query of study ``name`` (``t``: the time now, client clock only).

        While the study's ``max_pending`` queries are out, the oldest is returned again;
        ``replace=True`` asks afresh (the oldest stays answerable). ``budget``: seconds the
        policy may compute for this suggestion (its fit and acquisition search stop early
        and keep what they have). ``key``: the idempotency key (default: a fresh random
        one for this call, kept across its retries, so that a retry after a lost answer
        gets the same query).
        """
        body: dict[str, Any] = {"replace": replace, "key": key or uuid.uuid4().hex}
        if t is not None:
            body["t"] = float(t)
        if budget is not None:
            body["budget"] = float(budget)
        answer = self._request("POST", f"/studies/{_quote(name)}/suggest", body)
        return Suggestion(
            query_id=int(answer["query_id"]),
            x=[float(v) for v in answer["x"]],
            t=float(answer["t"]),
            additional=[[float(v) for v in row] for row in answer.get("additional", [])],
            repeated=bool(answer.get("repeated", False)),
        )

    def observe(
        self,
        name: str,
        y: float,
        *,
        query_id: int | None = None,
        x: Sequence[float] | None = None,
        t: float | None = None,
        additional: Sequence[Mapping[str, Any]] = (),
        key: str | None = None,
        constraints: Mapping[str, float] | None = None,
    ) -> dict[str, Any]:
        """Record ``y``: the answer to ``query_id`` (or a free observation at ``x``, ``t``).

        Args:
            additional: answers to the query's additional points,
                ``[{"x": [...], "y": ..., "t": ...}]`` (``t`` optional).
            key: the idempotency key (default: a fresh random one for this call, kept
                across its retries).
            constraints: the measured constraint values ``{name: value}`` (``c >= 0``
                is safe) of a study whose policy declares constraints.

        Returns:
            The server's record of the observation (``"repeated": true`` when a retry
            found it committed already).
        """
        body: dict[str, Any] = {
            "y": float(y),
            "key": key or uuid.uuid4().hex,
        }
        if query_id is not None:
            body["query_id"] = int(query_id)
        if x is not None:
            body["x"] = [float(v) for v in x]
        if t is not None:
            body["t"] = float(t)
        if constraints is not None:
            body["constraints"] = {str(k): float(v) for k, v in constraints.items()}
        if additional:
            body["additional"] = [
                {k: v for k, v in dict(a).items() if k in ("x", "y", "t")} for a in additional
            ]
        return self._request("POST", f"/studies/{_quote(name)}/observe", body)

    def forget(self, name: str, seq: int, reason: str | None = None) -> dict[str, Any]:
        """Retract observation event ``seq`` of study ``name`` (its ``"seq"`` in the
        answer of ``observe``): the policy forgets it and the history keeps a ``forget``
        event with ``reason``. Retracting it again answers ``"repeated": true``."""
        path = f"/studies/{_quote(name)}/observations/{int(seq)}"
        if reason is not None:
            path += "?" + urllib.parse.urlencode({"reason": reason})
        return self._request("DELETE", path)

    def history(self, name: str, format: str = "json") -> list[dict[str, Any]] | str:  # noqa: A002
        """Every event of the study: a list of dicts, or the CSV text (``format="csv"``)."""
        if format not in ("json", "csv"):
            raise ValueError(f"format must be 'json' or 'csv', got {format!r}")
        if format == "csv":
            return self._request("GET", f"/studies/{_quote(name)}/history?format=csv", raw=True)
        return self._request("GET", f"/studies/{_quote(name)}/history")["events"]

    def dataset(self, name: str) -> dict[str, Any]:
        """The observations the study's policy keeps now: ``x``, ``t``, ``y``."""
        return self._request("GET", f"/studies/{_quote(name)}/dataset")

    def health(self) -> dict[str, Any]:
        return self._request("GET", "/health")

    # ------------------------------------------------------------------ transport
    def _request(self, method: str, path: str, body: Any = None, *, raw: bool = False) -> Any:
        data = None if body is None else json.dumps(body, allow_nan=True).encode()
        headers: dict[str, Any] = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.token is not None:  # UTF-8 bytes (http.client would send a str as latin-1)
            headers["Authorization"] = b"Bearer " + self.token.encode()
        delay = self.backoff
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(
                self.url + path, data=data, headers=headers, method=method
            )
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    payload = response.read()
            except urllib.error.HTTPError as err:
                payload = err.read()
                if err.code in _RETRY_STATUSES and attempt < self.retries:
                    time.sleep(delay)
                    delay = min(2 * delay, self.max_backoff)
                    continue
                raise ServiceError(err.code, _message(payload, err.reason)) from None
            except (urllib.error.URLError, http.client.HTTPException, OSError):
                if attempt >= self.retries:
                    raise
                time.sleep(delay)
                delay = min(2 * delay, self.max_backoff)
                continue
            if raw:
                return payload.decode()
            return json.loads(payload) if payload else None
        raise AssertionError("unreachable")


def _quote(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def _message(payload: bytes, reason: str) -> str:
    try:
        return str(json.loads(payload)["error"])
    except (ValueError, KeyError, TypeError):
        return payload.decode(errors="replace").strip() or str(reason)
