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

from factcli.errors import FactcliError
from factcli.web.deps import open_store, render, wants_json

__all__ = ["create_app", "open_store"]

STATIC_DIR = Path(__file__).parent / "static"


async def not_found(request: Request, exc: Exception) -> Response:
    detail = getattr(exc, "detail", None) or str(exc) or "not found"
    code = getattr(exc, "status_code", 404)
    if code == 404 and not isinstance(exc, (HTTPException, FactcliError)):
        detail = "not found"
    if wants_json(request):
        return JSONResponse({"error": detail}, status_code=code)
    return render(request, "error.html", {"title": "Not found" if code == 404 else f"Error {code}",
                                          "message": detail}, status_code=code)


async def http_error(request: Request, exc: HTTPException) -> Response:
    if exc.status_code == 404:
        return await not_found(request, exc)
    if wants_json(request):
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code)
    return render(request, "error.html", {"title": f"Error {exc.status_code}", "message": exc.detail},
                  status_code=exc.status_code)


async def store_error(request: Request, exc: FactcliError) -> Response:
    """An unknown run or row (the store's one-line errors) is a 404, as the CLI's exit 1."""
    return await not_found(request, HTTPException(404, str(exc)))


async def server_error(request: Request, exc: Exception) -> Response:
    message = "the server failed on this page; the terminal running `factcli view --web` has the details"
    if wants_json(request):
        return JSONResponse({"error": message}, status_code=500)
    return render(request, "error.html", {"title": "Server error", "message": message}, status_code=500)


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


def create_app(db: Path | str, token: str | None = None, access_token: str | None = None) -> Starlette:
    """The web view of the store `db` (a SQLite path or a postgresql:// URL). `token`: the secret
    every POST must carry (a random one per server when None); pages carry it in a meta tag and in
    their forms. `access_token`: when given, every request must carry it (web/auth.py)."""
    from starlette.middleware import Middleware

    from factcli.store.database import is_url, shown
    from factcli.web.auth import TokenGate

    app = Starlette(routes=_routes(), middleware=[Middleware(TokenGate, token=access_token or None)],
                    exception_handlers={HTTPException: http_error, FactcliError: store_error, 404: not_found,
                                        Exception: server_error})
    app.state.db_target = db if is_url(db) else Path(db)
    app.state.db_path = shown(db)  # what pages show: a URL without its password
    app.state.token = token or secrets.token_urlsafe(24)
    app.state.access_token = access_token or None
    return app
