"""What every handler of the web view uses: the store of this server for one request
(`open_store`), the page renderer (`render`) and whether a request wants JSON.

Handlers (pages.py, ratings.py) import from here, never from app.py, which imports them.
Pages are Jinja2 templates shipped in the package, rendered by an autoescaping environment of their
own (not factcli's prompt templating): every output, prompt and reason is escaped on the way out."""

from __future__ import annotations

from functools import lru_cache

from starlette.requests import Request
from starlette.responses import HTMLResponse

from factcli.store.database import Store


@lru_cache(maxsize=1)
def environment():
    import jinja2

    from factcli.web import filters

    env = jinja2.Environment(loader=jinja2.PackageLoader("factcli.web", "templates"),
                             autoescape=jinja2.select_autoescape(["html"], default=True),
                             trim_blocks=True, lstrip_blocks=True)
    env.filters.update(filters.FILTERS)
    return env


def render(request: Request, name: str, context: dict, status_code: int = 200, bare: bool = False) -> HTMLResponse:
    """A page from templates/NAME with the per-server token and the store's path in its context.
    `bare` (error pages, which a client that has not signed in may see): neither of them, nor the version."""
    from factcli.report.html_page import CSS
    from factcli.settings import VERSION
    from factcli.web.auth import rater_of

    body = environment().get_template(name).render(
        request=request, token=None if bare else request.app.state.token,
        db_path=None if bare else str(request.app.state.db_path),
        signed_in=request.app.state.access_token is not None and not bare, rater=None if bare else rater_of(request),
        version=None if bare else VERSION, report_css=CSS, **context)
    return HTMLResponse(body, status_code=status_code)


def open_store(request: Request) -> Store:
    """The store this server serves, opened for one request (use it in a `with`)."""
    return Store.open(request.app.state.db_target)


def wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/") or "application/json" in request.headers.get("accept", "")
