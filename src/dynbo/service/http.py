"""uvicorn's h11 protocol with a header timeout, a body timeout and a connection limit.

uvicorn (h11) has neither a header nor a body timeout, and never closes a fresh
connection that sends nothing: a client that trickles its headers or its body holds a
connection (and, once its headers are in, a request) as long as it likes.
:class:`TimedH11Protocol` closes

* a connection whose request headers are not complete ``header_timeout`` seconds after
  the connection was made, or after the first byte of a later request on a kept-alive
  connection (with ``408 Request Timeout`` and ``Connection: close`` if a part of the
  request arrived; a connection that sent nothing is closed silently);
* a connection whose request body is not complete ``body_timeout`` seconds after its
  headers (with a 408 if no response was started; the application sees
  ``http.disconnect``);

and answers a connection beyond ``max_connections`` open ones with ``503`` and closes
it at once. An idle kept-alive connection is closed by uvicorn's ``timeout_keep_alive``.
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_HEADER_TIMEOUT",
    "DEFAULT_KEEP_ALIVE",
    "DEFAULT_MAX_CONNECTIONS",
    "TimedH11Protocol",
    "check_limits",
]

#: seconds to receive a request's headers
DEFAULT_HEADER_TIMEOUT = 10.0
#: seconds to receive a request's body once its headers are in
DEFAULT_BODY_TIMEOUT = 30.0
#: seconds an idle kept-alive connection stays open (uvicorn's ``timeout_keep_alive``)
DEFAULT_KEEP_ALIVE = 5.0
#: open connections at most
DEFAULT_MAX_CONNECTIONS = 256


def check_limits(**limits: float) -> None:
    """``ValueError`` unless every value is a positive finite number (an int for
    ``max_connections``)."""
    for name, value in limits.items():
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{name} must be a positive number, got {value!r}")
        if name == "max_connections" and not isinstance(value, int):
            raise ValueError(f"max_connections must be an integer, got {value!r}")


def _response(status: int, reason: str, message: str) -> bytes:
    """A whole HTTP/1.1 response with a JSON error, closing the connection."""
    body = json.dumps({"error": message}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


class TimedH11Protocol(H11Protocol):
    """:class:`H11Protocol` with the timeouts and the connection limit (module doc);
    :meth:`configured` makes a subclass with other values."""

    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS

    @classmethod
    def configured(
        cls, *, header_timeout: float, body_timeout: float, max_connections: int
    ) -> type[TimedH11Protocol]:
        """A subclass with these limits (``uvicorn.Config(http=...)`` takes a class)."""
        check_limits(
            header_timeout=header_timeout,
            body_timeout=body_timeout,
            max_connections=max_connections,
        )
        limits = {
            "header_timeout": float(header_timeout),
            "body_timeout": float(body_timeout),
            "max_connections": max_connections,
        }
        return type(cls.__name__, (cls,), limits)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._timer: asyncio.TimerHandle | None = None
        self._waiting_for: Any = None  # h11.IDLE: the headers; h11.SEND_BODY: the body
        self._refused = False

    # ------------------------------------------------------------------ the protocol
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            self._refused = True
            # not counted: the connections being served stay at the limit
            self.connections.discard(self)
            message = f"over the limit of {self.max_connections} open connections; retry"
            transport.write(_response(503, "Service Unavailable", message))
            transport.close()
            return
        self._wait_for(h11.IDLE)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        super().data_received(data)
        self._follow(received=True)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow(received=False)

    def connection_lost(self, exc: Exception | None) -> None:
        self._wait_for(None)
        super().connection_lost(exc)

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        self._wait_for(None)  # the connection is the WebSocket protocol's now
        super().handle_websocket_upgrade(event)

    def _unsupported_upgrade_warning(self) -> None:
        """Nothing logged: the application refuses the upgrade (a 403 that says so)."""

    # ------------------------------------------------------------------ the timers
    def _follow(self, *, received: bool) -> None:
        """Run the timer the client's state calls for: the header timer while a request's
        headers are due (from its first byte, or from the connection's start), the body
        timer while its body is, none otherwise (the keep-alive timer runs then)."""
        if self.transport is None or self.transport.is_closing():
            self._wait_for(None)
            return
        state = self.conn.their_state
        if state is h11.IDLE:
            started = received or bool(self.conn.trailing_data[0])
            self._wait_for(h11.IDLE if started or self._waiting_for is h11.IDLE else None)
        elif state is h11.SEND_BODY:
            self._wait_for(h11.SEND_BODY)
        else:
            self._wait_for(None)

    def _wait_for(self, what: Any) -> None:
        """Arm the timer for ``what`` (unless it runs already), or cancel it (``None``)."""
        if what is self._waiting_for and (what is None or self._timer is not None):
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._waiting_for = what
        if what is not None:
            delay = self.header_timeout if what is h11.IDLE else self.body_timeout
            self._timer = self.loop.call_later(delay, self._expired, what)

    def _expired(self, what: Any) -> None:
        self._timer = None
        self._waiting_for = None
        if self.transport.is_closing() or self.conn.their_state is not what:
            return
        if what is h11.IDLE:
            part, seconds = "headers", self.header_timeout
            # a connection that sent nothing (a browser's spare one) is closed silently
            answer = self.conn.our_state is h11.IDLE and bool(self.conn.trailing_data[0])
        else:
            part, seconds = "body", self.body_timeout
            answer = self.cycle is not None and not self.cycle.response_started
            if self.cycle is not None:
                self.cycle.disconnected = True  # the application's answer goes nowhere
        if answer:
            message = f"the request {part} did not arrive within {seconds:g} s"
            self.transport.write(_response(408, "Request Timeout", message))
        self.transport.close()
