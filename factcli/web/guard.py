"""What keeps the web view safe on a network, around every request (web/app.py puts it outermost):

- **Host names.** Only the names the server was started for are answered (`allowed_hosts`: the
  loopback names, `--host`, `--allowed-host`), through Starlette's TrustedHostMiddleware: a page
  fetched under another name (DNS rebinding: `rebind.attacker.example` resolving to 127.0.0.1) gets
  400 and nothing else.
- **Framing and sources.** Every response says `Content-Security-Policy` (scripts and styles from
  this server only, no framing: `frame-ancestors 'none'`), `X-Frame-Options: DENY`,
  `X-Content-Type-Options: nosniff` and `Referrer-Policy: same-origin`.
- **Request bodies are limited while they are read**: a declared length over the limit is a 413
  before any byte is read, and a body that grows past it (chunked) is cut off there, so an 800 MB
  POST never sits in memory. A sign-in form is tiny (16 KiB); a rating 64 KiB.
"""

from __future__ import annotations

from starlette.responses import PlainTextResponse

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
ANY_ADDRESS = ("0.0.0.0", "::", "")
LOGIN_MAX_BODY = 16 * 1024
MAX_BODY = 64 * 1024
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
HEADERS = [(b"content-security-policy", CSP.encode()), (b"x-frame-options", b"DENY"),
           (b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"same-origin")]


def allowed_hosts(host: str, extra: list[str] | tuple = (), machine: tuple = ()) -> list[str]:
    """The Host names a server listening on `host` answers: loopback names, `host` itself, and
    `extra` (`--allowed-host`); on the any-address (0.0.0.0), this machine's own names (`machine`, by
    default its host name and fully qualified name): its IP addresses and aliases need `--allowed-host`."""
    import socket

    names = list(LOOPBACK_NAMES)
    if host in ANY_ADDRESS:
        machine = machine or (socket.gethostname(), socket.getfqdn())
    for name in [host if host not in ANY_ADDRESS else "", *machine, *extra]:
        name = name.strip().lower()
        if ":" in name and not name.startswith("["):  # an IPv6 address, as a Host header writes it
            name = f"[{name}]"
        if name and name not in names:
            names.append(name)
    return names


class BodyTooLarge(Exception):
    pass


class Guard:
    """ASGI middleware: the security headers on every response, and request bodies limited while read."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def send_with_headers(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                names = {k.lower() for k, _ in message.get("headers", [])}
                message = {**message, "headers": [*message.get("headers", []),
                                                  *(h for h in HEADERS if h[0] not in names)]}
            await send(message)

        if "\x00" in scope.get("path", "") or b"%00" in scope.get("query_string", b"").lower():
            return await PlainTextResponse("a NUL character in the address", status_code=400)(
                scope, receive, send_with_headers)
        limit = LOGIN_MAX_BODY if scope.get("path") == "/login" else MAX_BODY
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                too_large = int(declared) > limit
            except ValueError:
                return await PlainTextResponse("bad Content-Length", status_code=400)(scope, receive, send_with_headers)
            if too_large:
                return await _too_large(limit)(scope, receive, send_with_headers)
        seen = 0

        async def limited_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge
            return message

        try:
            await self.app(scope, limited_receive, send_with_headers)
        except BodyTooLarge:
            if not started:
                await _too_large(limit)(scope, receive, send_with_headers)


def _too_large(limit: int) -> PlainTextResponse:
    return PlainTextResponse(f"the request body is larger than {limit // 1024} KiB", status_code=413,
                             headers={"Connection": "close"})
