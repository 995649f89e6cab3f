"""The web view's access token: a server given one (`--token` or FACTCLI_WEB_TOKEN, required on an
address other than loopback) answers only requests that carry it.

- A script sends `Authorization: Bearer TOKEN`.
- A browser signs in once at /login (the token and, optionally, the rater name its ratings record);
  the answer sets an HttpOnly, SameSite=Lax cookie holding a new random session id (never the token),
  so page scripts cannot read it and other sites' forms do not carry it. Sessions live in the
  server's memory: one expires after SESSION_TTL_S (12 h), a sign-in replaces the session the
  browser had, a sign-out ends it, and a restarted server knows none. The cookie is named after the
  port (`factcli_session_15510`), so two servers on one machine do not sign each other out.
- Without either: a page request is sent to /login, an API request gets 401. /login and the static
  files (the stylesheet the login page needs) are open.
- A POST whose Origin is another site is refused (403) on every server, token or not; the ratings
  endpoints also need the per-server form token (web/ratings.py).
"""

from __future__ import annotations

import hashlib
import hmac
import html
import secrets
import time
from urllib.parse import parse_qs, quote, urlsplit

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

SESSION_COOKIE = "factcli_session"
RATER_COOKIE = "factcli_rater"
OPEN_PATHS = ("/login", "/static/")
SESSION_TTL_S = 12 * 3600


def _port(scope) -> int:
    server = scope.get("server") or (None, None)
    return server[1] or 0


def session_cookie(scope) -> str:
    """The session cookie's name on this server: one per port."""
    return f"{SESSION_COOKIE}_{_port(scope)}"


def rater_cookie(scope) -> str:
    return f"{RATER_COOKIE}_{_port(scope)}"


def _same(given: str | None, expected: str) -> bool:
    return isinstance(given, str) and hmac.compare_digest(given.encode(), expected.encode())


def _sessions(app) -> dict[str, float]:
    """session id -> when it expires (time.monotonic), in the server's memory."""
    if not hasattr(app.state, "sessions"):
        app.state.sessions = {}
    return app.state.sessions


def _session_id(request: Request) -> str | None:
    """The request's session id if it is one this server gave and it has not expired."""
    sid = request.cookies.get(session_cookie(request.scope))
    if not sid:
        return None
    key = hashlib.sha256(sid.encode()).hexdigest()  # compared as a dict key: by its hash, not its value
    expires = _sessions(request.app).get(key)
    if expires is None:
        return None
    if expires < time.monotonic():
        _sessions(request.app).pop(key, None)
        return None
    return key


def signed_in(request: Request, token: str) -> bool:
    header = request.headers.get("authorization") or ""
    if header[:7].lower() == "bearer " and _same(header[7:].strip(), token):
        return True
    return _session_id(request) is not None


def viewer_signed_in(request: Request) -> bool:
    """Whether this request may see what only a signed-in user sees (an open server: everyone)."""
    token = request.app.state.access_token
    return token is None or signed_in(request, token)


def cross_site(request: Request) -> bool:
    """A write sent from another site's page: its Origin (browsers send one on POST) is not this server."""
    origin = request.headers.get("origin")
    if not origin:
        return False
    return origin == "null" or urlsplit(origin).netloc.lower() != (request.headers.get("host") or "").lower()


def _local(target: str | None) -> str:
    """Where to go after signing in: a path on this server only (never another site)."""
    if isinstance(target, str) and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"


class TokenGate:
    """ASGI middleware: cross-site POSTs refused; with a token, every other request must carry it."""

    def __init__(self, app, token: str | None):
        self.app, self.token = app, token

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        request = Request(scope)
        if request.method == "POST" and cross_site(request):
            return await JSONResponse({"error": "a write from another site is refused"}, status_code=403)(
                scope, receive, send)
        path = scope.get("path") or "/"
        if self.token is None or path.startswith(OPEN_PATHS) or signed_in(request, self.token):
            return await self.app(scope, receive, send)
        if path.startswith("/api/") or "application/json" in request.headers.get("accept", "") \
                or request.headers.get("authorization"):
            response: Response = JSONResponse({"error": "this server needs its token: Authorization: Bearer TOKEN"},
                                              status_code=401, headers={"WWW-Authenticate": "Bearer"})
        else:
            here = path + (f"?{scope['query_string'].decode('latin-1')}" if scope.get("query_string") else "")
            response = RedirectResponse(f"/login?next={quote(here, safe='')}", status_code=303)
        return await response(scope, receive, send)


def _login_page(next_path: str, message: str = "", status: int = 200) -> HTMLResponse:
    note = f"<p class='bad'>{html.escape(message)}</p>" if message else ""
    body = f"""<!doctype html><html lang="en"><meta charset="utf-8"><title>factcli · sign in</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/static/web.css">
<main><h1>Sign in</h1>{note}
<p>This factcli server needs its token (ask whoever started it; it is the <code>--token</code> given to
<code>factcli view --web</code>, or FACTCLI_WEB_TOKEN).</p>
<form method="post" action="/login">
<input type="hidden" name="next" value="{html.escape(next_path)}">
<p><label>token <input type="password" name="token" autocomplete="current-password" required autofocus></label></p>
<p><label>your name (recorded with your ratings) <input type="text" name="rater" size="20"></label></p>
<p><button type="submit">Sign in</button></p></form></main></html>"""
    return HTMLResponse(body, status_code=status)


async def login(request: Request) -> Response:
    token = request.app.state.access_token
    if request.method == "GET":
        if token is None:
            return RedirectResponse(_local(request.query_params.get("next")), status_code=303)
        return _login_page(_local(request.query_params.get("next")))
    body = await request.body()
    if len(body) > 16 * 1024:
        return _login_page("/", "the form is too large", 413)
    fields = {k: v[-1] for k, v in parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()}
    next_path = _local(fields.get("next"))
    if token is None:
        return RedirectResponse(next_path, status_code=303)
    if not _same(fields.get("token"), token):
        return _login_page(next_path, "wrong token", 401)
    sessions = _sessions(request.app)
    old = _session_id(request)
    if old is not None:  # a new session at each sign-in: an id planted before it is worth nothing after
        sessions.pop(old, None)
    now = time.monotonic()
    for key in [k for k, expires in sessions.items() if expires < now]:
        del sessions[key]
    sid = secrets.token_urlsafe(32)
    sessions[hashlib.sha256(sid.encode()).hexdigest()] = now + SESSION_TTL_S
    response = RedirectResponse(next_path, status_code=303)
    secure = request.url.scheme == "https"
    response.set_cookie(session_cookie(request.scope), sid, max_age=SESSION_TTL_S, httponly=True, samesite="lax",
                        secure=secure, path="/")
    rater = (fields.get("rater") or "").strip()[:200]
    if rater:
        response.set_cookie(rater_cookie(request.scope), quote(rater), httponly=True, samesite="lax", secure=secure,
                            path="/", max_age=365 * 24 * 3600)
    return response


async def logout(request: Request) -> Response:
    sid = _session_id(request)
    if sid is not None:
        _sessions(request.app).pop(sid, None)
    response = RedirectResponse("/login" if request.app.state.access_token else "/", status_code=303)
    response.delete_cookie(session_cookie(request.scope), path="/")
    return response


def rater_of(request: Request) -> str | None:
    """The name given when signing in, for ratings that name no rater."""
    from urllib.parse import unquote

    value = request.cookies.get(rater_cookie(request.scope))
    return unquote(value) if value else None
