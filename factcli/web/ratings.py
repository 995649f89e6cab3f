"""The web view's rating endpoints (`routes()`, mounted by web/app.py):

- `POST /api/runs/{run_id}/ratings`: test_idx, prompt_idx, repeat_idx (0), assertion_idx (optional),
  verdict (pass | fail), comment, rater, token -> 201 JSON `{id, ...rating}`, or for a form post a
  303 redirect to its `next` field (a path on this server).
- `POST /api/ratings/{rating_id}/retract`: token -> JSON `{retracted: true}`, or 303 to `next`.

Every request must carry the server's token (field `token` or header `X-Factcli-Token`), which only
its own pages hold, so another site cannot post ratings through a reader's browser: without it,
403 and nothing is stored. An unknown run, row, assertion or rating is a 404, bad fields a 400,
as JSON for a JSON request and as a short page for a form; never a traceback.

Forms are read as application/x-www-form-urlencoded (a plain `<form method="post">`), parsed here
so that no multipart parser is needed. This module does not import web/app.py (which imports it):
it opens the store from `request.app.state.db_target` itself. A rating that names no rater records
the name its author gave when signing in (web/auth.py), if any.
"""

from __future__ import annotations

import html
import json
import secrets
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from factcli.errors import FactcliError, StoreUnavailable
from factcli.store import ratings as store_ratings
from factcli.store.database import Store

MAX_BODY = 64 * 1024
MAX_INDEX = 2**31 - 1  # far beyond any run, and within every store's integers
MAX_ID = 2**63 - 1  # a rating's id: the stores' largest integer


class _Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def _store(request: Request) -> Store:
    return Store.open(request.app.state.db_target)


def _is_json(request: Request) -> bool:
    return "application/json" in request.headers.get("content-type", "")


async def _fields(request: Request) -> dict:
    body = await request.body()
    if len(body) > MAX_BODY:
        raise _Refused(413, f"the request is larger than {MAX_BODY // 1024} KiB")
    kind = request.headers.get("content-type", "")
    if _is_json(request):
        try:
            data = json.loads(body or b"{}")
        except (ValueError, RecursionError):  # RecursionError: nested deeper than Python's stack
            raise _Refused(400, "the body is not valid JSON") from None
        if not isinstance(data, dict):
            raise _Refused(400, "the body must be a JSON object")
        return data
    if kind.startswith("multipart/"):
        raise _Refused(415, "send the form as application/x-www-form-urlencoded")
    try:
        parsed = parse_qs(body.decode("utf-8"), keep_blank_values=True)
    except UnicodeDecodeError:
        raise _Refused(400, "the form is not UTF-8") from None
    return {k: v[-1] for k, v in parsed.items()}


def _check_token(request: Request, fields: dict) -> None:
    given = request.headers.get("x-factcli-token") or fields.get("token") or ""
    expected = request.app.state.token
    if not isinstance(given, str) or not expected or not secrets.compare_digest(given.encode(), expected.encode()):
        raise _Refused(403, "missing or wrong token: rate from a page of this server")


def _int(fields: dict, name: str, default: int | None = None, required: bool = True) -> int | None:
    value = fields.get(name)
    if value is None or value == "":
        if default is not None or not required:
            return default
        raise _Refused(400, f"{name} is missing")
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    elif isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        n = int(value.strip())
    else:  # 0.9 is not a test index (it was stored as 0), nor is true
        raise _Refused(400, f"{name} must be a whole number ≥ 0, not {str(value)[:40]!r}")
    if not 0 <= n <= MAX_INDEX:
        raise _Refused(400, f"{name} must be a whole number from 0 to {MAX_INDEX}")
    return n


def _verdict(fields: dict) -> bool:
    value = fields.get("verdict")
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("pass", "fail"):
        return value.strip().lower() == "pass"
    raise _Refused(400, "verdict must be 'pass' or 'fail'")


def _optional_text(fields: dict, name: str) -> str | None:
    value = fields.get(name)
    if value is not None and not isinstance(value, str):
        raise _Refused(400, f"{name} must be text")
    if value is not None and "\x00" in value:
        raise _Refused(400, f"{name} must not contain a NUL character")
    if value is not None and not _encodable(value):  # JSON's "\ud800": no store can keep it
        raise _Refused(400, f"{name} must be Unicode text (it holds a lone surrogate)")
    return value


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _next(fields: dict, fallback: str) -> str:
    """Where a form post goes back to: a path on this server only (never another site)."""
    target = fields.get("next")
    if isinstance(target, str) and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return fallback


def _refusal(request: Request, as_json: bool, status: int, message: str) -> Response:
    if as_json:
        return JSONResponse({"error": message}, status_code=status)
    title = {403: "Forbidden", 404: "Not found", 503: "Store unavailable"}.get(status, f"Error {status}")
    page = (f"<!doctype html><meta charset='utf-8'><title>{title}</title><h1>{title}</h1>"
            f"<p>{html.escape(message)}</p><p><a href='/'>All runs</a></p>")
    return HTMLResponse(page, status_code=status)


async def add(request: Request) -> Response:
    as_json = _is_json(request)
    try:
        fields = await _fields(request)
        _check_token(request, fields)
        run_id = request.path_params["run_id"]
        where = {"test_idx": _int(fields, "test_idx"), "prompt_idx": _int(fields, "prompt_idx"),
                 "repeat_idx": _int(fields, "repeat_idx", 0), "assertion_idx": _int(fields, "assertion_idx",
                                                                                     required=False)}
        passed = _verdict(fields)
        comment, rater = _optional_text(fields, "comment"), _optional_text(fields, "rater")
        if not (rater or "").strip():
            from factcli.web.auth import rater_of

            rater = rater_of(request)
        with _store(request) as store:
            rating_id = store_ratings.add_rating(store, run_id, passed=passed, comment=comment, rater=rater, **where)
            rating = store_ratings.get_rating(store, rating_id)
    except _Refused as exc:
        return _refusal(request, as_json, exc.status, exc.message)
    except store_ratings.RatingNotFound as exc:
        return _refusal(request, as_json, 404, str(exc))
    except StoreUnavailable:
        return _refusal(request, as_json, 503, "the run store is not reachable; try again shortly")
    except FactcliError as exc:
        return _refusal(request, as_json, 400, str(exc))
    if as_json:
        return JSONResponse(rating, status_code=201)
    cell = f"/runs/{run_id}/cell/{where['test_idx']}/{where['prompt_idx']}/{where['repeat_idx']}"
    return RedirectResponse(_next(fields, cell), status_code=303)


async def retract(request: Request) -> Response:
    as_json = _is_json(request)
    try:
        fields = await _fields(request)
        _check_token(request, fields)
        try:
            rating_id = int(request.path_params["rating_id"])
        except ValueError:
            raise _Refused(404, f"no rating '{request.path_params['rating_id']}'") from None
        if not 0 <= rating_id <= MAX_ID:
            raise _Refused(400, f"a rating id is a whole number from 0 to {MAX_ID}")
        with _store(request) as store:
            rating = store_ratings.get_rating(store, rating_id)
            if rating is None:
                raise _Refused(404, f"no rating {rating_id}")
            store_ratings.retract_rating(store, rating_id)  # taking back twice is not an error
    except _Refused as exc:
        return _refusal(request, as_json, exc.status, exc.message)
    except StoreUnavailable:
        return _refusal(request, as_json, 503, "the run store is not reachable; try again shortly")
    except FactcliError as exc:
        return _refusal(request, as_json, 404, str(exc))
    if as_json:
        return JSONResponse({"retracted": True, "id": rating_id})
    cell = f"/runs/{rating['runId']}/cell/{rating['testIdx']}/{rating['promptIdx']}/{rating['repeatIdx']}"
    return RedirectResponse(_next(fields, cell), status_code=303)


def routes() -> list[Route]:
    return [Route("/api/runs/{run_id}/ratings", add, methods=["POST"], name="add_rating"),
            Route("/api/ratings/{rating_id}/retract", retract, methods=["POST"], name="retract_rating")]
