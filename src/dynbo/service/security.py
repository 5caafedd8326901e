"""The service's request guard (ASGI middleware) and CSV cell neutralization.

:class:`Guard` wraps the FastAPI application. Before anything of a request is read it
checks, in this order (the first failure answers, and nothing changes):

1. without a token, the ``Host`` header: a loopback name of this server (``127.0.0.1``,
   ``localhost``, ``[::1]`` or the address it listens on, with no port or its own), else
   421 (a page served by another host name whose DNS rebinds to 127.0.0.1);
2. with a token, ``Authorization`` (bearer, or HTTP Basic with the token as password),
   compared in constant time, else 401;
3. an ``Origin`` header must be this service's own origin (``http://`` or ``https://``
   followed by the ``Host`` header), else 403 (a cross-site request from a browser,
   which would carry cached Basic credentials); ``Origin: null`` is refused too;
4. a WebSocket upgrade is refused (403; the service has none);
5. a declared ``Content-Length`` over ``max_body`` is 413;
6. a ``POST``, ``PUT``, ``PATCH`` or ``DELETE`` whose ``Content-Type`` is not
   ``application/json`` (parameters allowed) is 415 (no browser form can send JSON).

Then the body is read whole (413 as soon as it passes ``max_body``; a non-empty body
without a ``Content-Type`` is 415) and handed to the application. A WebSocket
connection is closed with code 1008 (policy violation) before it is accepted.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable
from typing import Any

__all__ = ["Guard", "neutralize_csv_cell"]

#: the methods whose body must be JSON
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

#: the loopback names accepted in the Host header without a token (and the listening
#: address itself)
_LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})


class Guard:
    """ASGI middleware: Host, token, Origin, content type and body size (module doc).

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

    def _refusal(self, scope: dict, headers: dict[bytes, bytes]) -> tuple[int, str] | None:
        """(status, message) of the first check the request fails before its body."""
        raw = scope.get("headers") or []
        for name in (b"host", b"origin"):
            if sum(1 for k, _ in raw if k == name) > 1:
                return 400, f"more than one {name.decode().title()} header"
        host = headers.get(b"host")
        host_text = None if host is None else host.decode("latin-1").lower()
        if self._digest is None and not _loopback_host(host_text, scope.get("server")):
            return 421, (
                "without a token the service answers only to a loopback Host header "
                f"(127.0.0.1, localhost or [::1] with its port), not {_shown(host)}: "
                "refused against DNS rebinding (serve with --token for other host names)"
            )
        if not self._authorized(headers):
            return 401, "missing or wrong bearer token"
        origin = headers.get(b"origin")
        if origin is not None:
            own = () if host_text is None else (f"http://{host_text}", f"https://{host_text}")
            if origin.decode("latin-1").lower() not in own:
                return 403, (
                    f"cross-origin request refused: Origin {_shown(origin)} is not this "
                    f"service's ({own[0] if own else 'no Host header'})"
                )
        if b"websocket" in headers.get(b"upgrade", b"").lower():
            return 403, "WebSocket connections are not served"
        try:
            declared = int(headers.get(b"content-length", b"0"))
        except ValueError:
            return 400, "invalid Content-Length"
        if declared > self.max_body:
            return 413, _too_large(self.max_body)
        kind = headers.get(b"content-type")
        if scope.get("method") in _BODY_METHODS and kind is not None and not _is_json(kind):
            return 415, _not_json(kind)
        return None

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            if (await receive())["type"] == "websocket.connect":
                await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            raise ValueError(f"dynbo serve does not serve {scope['type']!r} connections")
        headers = dict(scope.get("headers") or [])
        refused = self._refusal(scope, headers)
        if refused is not None:
            status, message = refused
            extra = []
            if status == 401:
                extra.append((b"www-authenticate", b'Bearer realm="dynbo"'))
                if scope.get("path") == "/":
                    extra.append((b"www-authenticate", b'Basic realm="dynbo"'))
            await _send_json(send, status, {"error": message}, extra)
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
                await _send_json(send, 413, {"error": _too_large(self.max_body)})
                return
        if body and b"content-type" not in headers:
            await _send_json(send, 415, {"error": _not_json(None)})
            return
        delivered = False

        async def replay() -> dict:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def _loopback_host(host: str | None, server: Any) -> bool:
    """Whether ``host`` (a Host header, lower case) names this server by a loopback name
    or its own address, with no port or the port it listens on."""
    if host is None:
        return False
    # "[::1]:8000" -> "[::1]" and "8000"; "localhost" -> "localhost" and no port
    if host.startswith("["):
        name, _, rest = host.partition("]")
        name += "]"
        if rest and not rest.startswith(":"):
            return False
        port = rest[1:] if rest else None
    else:
        name, colon, port_text = host.partition(":")
        port = port_text if colon else None
    names = set(_LOOPBACK_NAMES)
    own_port = None
    if server:
        address, own_port = server[0], server[1]
        names.add(f"[{address}]" if ":" in str(address) else str(address))
    if name not in names:
        return False
    if port is None:
        return True
    if own_port is None:  # a server without a TCP port (a Unix socket): any port
        return port.isdigit()
    return port == str(own_port)


def _is_json(kind: bytes) -> bool:
    return kind.split(b";", 1)[0].strip().lower() == b"application/json"


def _not_json(kind: bytes | None) -> str:
    given = "no Content-Type" if kind is None else f"Content-Type {_shown(kind)}"
    return f"the body must be JSON (Content-Type: application/json), got {given}"


def _shown(value: bytes | None) -> str:
    """A header value quoted for an error message (cut at 200 characters)."""
    if value is None:
        return "none"
    text = value.decode("latin-1")
    return repr(text if len(text) <= 200 else text[:200] + "...")


def _too_large(limit: int) -> str:
    return f"request body over the limit of {limit} bytes"


async def _send_json(
    send: Callable, status: int, payload: dict, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    headers += extra or []
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


#: the first characters that make a spreadsheet read a cell as a formula (OWASP)
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralize_csv_cell(value: Any) -> Any:
    """A text cell that a spreadsheet would run as a formula, prefixed with ``'``.

    Only strings are changed (numbers, written by the CSV writer as numbers, stay
    numbers, negative ones too): those that start with ``=``, ``+``, ``-``, ``@``, a tab
    or a carriage return (OWASP's rule against CSV injection).
    """
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value
