"""The web view's application: `create_app(db, token, access_token)`, its routes and the error pages
(a bad request gets a plain 404 page, a bug a plain 500 page, never a traceback). `access_token`:
every request must carry it (web/auth.py); `token`: the per-server secret every POST carries.

Each request opens its own connection to the store (deps.open_store, re-exported here), so a run
that is still writing is read as it stands. Handlers import deps, not this module (it imports them).
"""

from __future__ import annotations

import secrets
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from factcli.errors import FactcliError, StoreUnavailable
from factcli.web.deps import open_store, render, wants_json

__all__ = ["create_app", "open_store"]

STATIC_DIR = Path(__file__).parent / "static"


def _shown(request: Request, message: str) -> str:
    """An error's message for this client: the store's name only for one that has signed in."""
    from factcli.web.auth import viewer_signed_in

    db_path = str(request.app.state.db_path)
    if db_path and not viewer_signed_in(request):
        message = message.replace(db_path, "the run store")
    return message


def _error(request: Request, code: int, title: str, message: str) -> Response:
    message = _shown(request, message)
    if wants_json(request):
        return JSONResponse({"error": message}, status_code=code)
    return render(request, "error.html", {"title": title, "message": message}, status_code=code, bare=True)


async def not_found(request: Request, exc: Exception) -> Response:
    detail = getattr(exc, "detail", None) or str(exc) or "not found"
    code = getattr(exc, "status_code", 404)
    if code == 404 and not isinstance(exc, (HTTPException, FactcliError)):
        detail = "not found"
    return _error(request, code, "Not found" if code == 404 else f"Error {code}", detail)


async def http_error(request: Request, exc: HTTPException) -> Response:
    if exc.status_code == 404:
        return await not_found(request, exc)
    return _error(request, exc.status_code, f"Error {exc.status_code}", exc.detail)


async def store_error(request: Request, exc: FactcliError) -> Response:
    """An unknown run or row (the store's one-line errors) is a 404, as the CLI's exit 1; a store that
    cannot be reached a 503."""
    if isinstance(exc, StoreUnavailable):
        return _error(request, 503, "Store unavailable", str(exc))
    return await not_found(request, HTTPException(404, str(exc)))


async def server_error(request: Request, exc: Exception) -> Response:
    import sqlite3
    import sys

    drivers = (sqlite3, sys.modules.get("psycopg"))
    if isinstance(exc, tuple(m.OperationalError for m in drivers if m is not None)):  # the store went away
        return _error(request, 503, "Store unavailable", "the run store stopped answering; try again shortly")
    message = "the server failed on this page; the terminal running `factcli view --web` has the details"
    return _error(request, 500, "Server error", message)


def _routes() -> list:
    from factcli.web import auth, pages

    routes = [
        Route("/login", auth.login, methods=["GET", "POST"], name="login"),
        Route("/logout", auth.logout, methods=["POST"], name="logout"),
        Route("/", pages.runs_page, name="runs"),
        Route("/compare", pages.compare_page, name="compare"),
        Route("/runs/{run_id}", pages.run_page, name="run"),
        Route("/runs/{run_id}/disagreements", pages.disagreements_page, name="disagreements"),
        Route("/runs/{run_id}/cell/{test_idx:int}/{prompt_idx:int}", pages.cell_page, name="cell0"),
        Route("/runs/{run_id}/cell/{test_idx:int}/{prompt_idx:int}/{repeat_idx:int}", pages.cell_page,
              name="cell"),
        Route("/api/runs/{run_id}/status", pages.status_json, name="status"),
        Mount("/static", app=StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    try:  # the ratings endpoints (factcli/web/ratings.py)
        from factcli.web import ratings
    except ImportError:
        return routes
    return ratings.routes() + routes


def create_app(db: Path | str, token: str | None = None, access_token: str | None = None,
               hosts: list[str] | None = None) -> Starlette:
    """The web view of the store `db` (a SQLite path or a postgresql:// URL). `token`: the secret
    every POST must carry (a random one per server when None); pages carry it in a meta tag and in
    their forms. `access_token`: when given, every request must carry it (web/auth.py). `hosts`: the
    Host names answered (web/guard.allowed_hosts; the server always gives them, None answers any)."""
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware

    from factcli.store.database import is_url, shown
    from factcli.web.auth import TokenGate
    from factcli.web.guard import Guard

    middleware = [Middleware(Guard), Middleware(TrustedHostMiddleware, allowed_hosts=hosts or ["*"],
                                                www_redirect=False),
                  Middleware(TokenGate, token=access_token or None)]
    app = Starlette(routes=_routes(), middleware=middleware,
                    exception_handlers={HTTPException: http_error, FactcliError: store_error, 404: not_found,
                                        Exception: server_error})
    app.state.db_target = db if is_url(db) else Path(db)
    app.state.db_path = shown(db)  # what pages show: a URL without its password
    app.state.token = token or secrets.token_urlsafe(24)
    app.state.access_token = access_token or None
    return app
