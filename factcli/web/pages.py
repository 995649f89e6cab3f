"""The web view's pages: runs, a run (the results matrix with its filters), a cell, Compare, the
judge's disagreements with raters, and the small JSON document a run in progress polls.

Handlers are plain functions: Starlette runs them in its thread pool, each with its own connection
to the store (app.open_store). Unknown runs and rows raise the store's FactcliError or a 404,
which app.py turns into a plain page."""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse

from factcli.report import figures, view
from factcli.types import json_components
from factcli.web import queries
from factcli.web.deps import open_store, render

MAX_NUMBER = 10**9  # a page, a limit, a column: beyond any run, and far within every store's integers
OUTPUT_START = 240  # characters of an output shown in a matrix cell


def _int(request: Request, name: str, default: int | None, low: int | None = None) -> int | None:
    raw = request.query_params.get(name, "")
    if raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise HTTPException(400, f"{name} must be a whole number, not {raw!r}") from None
    if low is not None and value < low:
        raise HTTPException(400, f"{name} must be at least {low}")
    if value > MAX_NUMBER:
        raise HTTPException(400, f"{name} must be at most {MAX_NUMBER}")
    return value


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "") not in ("", "0", "false", "off")


def run_url(run_id: str, **params) -> str:
    from urllib.parse import quote

    query = urlencode({k: v for k, v in params.items() if v not in (None, "", False, 0)})
    return f"/runs/{quote(run_id, safe='')}" + (f"?{query}" if query else "")


def cell_url(run_id: str, test_idx: int, prompt_idx: int, repeat_idx: int = 0) -> str:
    from urllib.parse import quote

    return f"/runs/{quote(run_id, safe='')}/cell/{test_idx}/{prompt_idx}/{repeat_idx}"


# ---------------------------------------------------------------- runs


def runs_page(request: Request):
    with open_store(request) as store:
        listed = queries.runs(store)
    return render(request, "runs.html", {"title": "factcli runs", "runs": listed})


# ---------------------------------------------------------------- a run


def _column_lines(summaries: list[dict]) -> list[tuple[str, str]]:
    """The method reports and the judge-corrected pass rates, one line each, under their column."""
    from factcli.stats.judge import describe

    lines = []
    for s in summaries:
        lines += [(s["label"], line) for line in (s.get("methods") or {}).values() if line]
        lines += [(s["label"], describe(e)) for e in s.get("judgeCorrected") or []]
    return lines


def run_page(request: Request):
    failures, errors = _flag(request, "failures"), _flag(request, "errors")
    text = request.query_params.get("q", "").strip()
    metric = request.query_params.get("metric", "").strip()
    column = _int(request, "column", None, 0)
    limit = _int(request, "limit", 50, 1)
    page_no = _int(request, "page", 1, 1)
    limit = min(limit, 500)
    with open_store(request) as store:
        run = store.resolve(request.path_params["run_id"])
        header = view.run_header(store, run)
        summaries = view.column_summaries(store, run)
        if column is not None and column not in {s["promptIdx"] for s in summaries}:
            raise HTTPException(404, f"run {run['id']} has no column {column}")
        info = queries.matrix(store, run, failures=failures, errors=errors, text=text, column=column,
                              metric=metric, limit=limit, page_no=page_no)
        marks = queries.rated(store, run["id"])
        agreement = queries.agreement(store, run["id"])
        first_failed = store.first_failed_test(run["id"])
    if info["total"] and not info["tests"]:
        raise HTTPException(404, f"page {page_no} is past the end: {info['pages']} pages of {info['total']} tests")
    shown = [s for s in summaries if column is None or s["promptIdx"] == column]
    var_names: list[str] = []
    for t in info["tests"]:
        if isinstance(t["vars"], dict):
            var_names += [k for k in t["vars"] if k not in var_names]
    filters = {"failures": failures, "errors": errors, "q": text, "column": column, "metric": metric,
               "limit": limit if limit != 50 else None}

    def page_link(n: int) -> str:
        return run_url(run["id"], page=n if n > 1 else None, **filters)

    return render(request, "run.html", {
        "title": f"factcli {run['id']}", "run": header, "columns": summaries, "shown": shown,
        "lines": _column_lines(summaries), "info": info, "var_names": var_names[:6], "filters": filters,
        "metrics": queries.metric_names(summaries), "marks": marks, "agreement": agreement,
        "page_link": page_link, "cell_url": cell_url, "run_url": run_url, "output_start": OUTPUT_START,
        "first_failed": first_failed, "gates": view.gate_lines(header), "filtered": bool(failures or errors or text or column is not None or metric),
        "live": header["status"] == "running", "page_sizes": queries.PAGE_SIZES,
        "small_sample": figures.small_sample([s["pass"] + s["fail"] + s["error"] for s in summaries])})


def status_json(request: Request):
    with open_store(request) as store:
        run = store.resolve(request.path_params["run_id"])
        return JSONResponse(queries.live_status(store, run))


# ---------------------------------------------------------------- a cell


def cell_page(request: Request):
    from factcli.report import html_page
    from factcli.report.labels import column_label

    p = request.path_params
    key = (p["test_idx"], p["prompt_idx"], p.get("repeat_idx", 0))
    if max(key) > MAX_NUMBER:
        raise HTTPException(400, f"a test, column or repeat number is at most {MAX_NUMBER}")
    with open_store(request) as store:
        run = store.resolve(p["run_id"])
        rec = queries.row(store, run, *key)
        if rec is None:
            raise HTTPException(404, f"run {run['id']} has no row: test {key[0]}, column {key[1]}, repeat {key[2]}")
        cols = {c["prompt_idx"]: c for c in store.columns(run["id"])}
        cell = queries.cell(rec)
        prev, nxt = queries.neighbour_failures(store, run["id"], key)
        conversation = queries.conversation(store, run, rec)
        ratings = queries.row_ratings(store, run["id"], key)
        repeats = queries.repeats_of(store, run["id"], key[0], key[1])
        siblings = [r[0] for r in store.execute(
            "SELECT DISTINCT prompt_idx FROM results WHERE run_id = ? AND test_idx = ? ORDER BY prompt_idx",
            (run["id"], key[0]))]
    grading = cell["grading"] if isinstance(cell["grading"], dict) else {}
    components = json_components(grading)
    return render(request, "cell.html", {
        "title": f"factcli {run['id']} · test {key[0]}", "run": run, "key": key, "cell": cell,
        "column": column_label(cols.get(key[1], {})), "columns": {i: column_label(c) for i, c in cols.items()},
        "assertions": html_page.assertion_list(components) if components else "", "components": components,
        "spend": html_page.spend_line(cell), "grading": grading, "prev": prev, "next": nxt,
        "conversation": conversation, "ratings": ratings, "repeats": repeats, "siblings": siblings,
        "cell_url": cell_url, "run_url": run_url, "here": cell_url(run["id"], *key)})


# ---------------------------------------------------------------- compare and disagreements


def compare_page(request: Request):
    from factcli.report.diff import NOISE_LEGEND, diff_doc

    picked = request.query_params.getlist("run")
    a_ref = request.query_params.get("a") or (picked[0] if len(picked) > 0 else "")
    b_ref = request.query_params.get("b") or (picked[1] if len(picked) > 1 else "")
    with open_store(request) as store:
        listed = queries.runs(store)
        if not (a_ref and b_ref):
            return render(request, "compare.html", {"title": "Compare runs", "runs": listed, "doc": None,
                                                    "a": None, "b": None, "a_ref": a_ref, "b_ref": b_ref})
        if picked and len(picked) != 2:
            raise HTTPException(400, f"pick two runs to compare, not {len(picked)}")
        a, b = store.resolve(a_ref), store.resolve(b_ref)
        doc = diff_doc(store, a, b)
    if "a" not in request.query_params and picked:  # checkboxes: keep one address per comparison
        return RedirectResponse(f"/compare?{urlencode({'a': a['id'], 'b': b['id']})}", status_code=303)
    return render(request, "compare.html", {"title": f"Compare {a['id']} → {b['id']}", "runs": listed, "doc": doc,
                                            "a": a, "b": b, "a_ref": a["id"], "b_ref": b["id"], "run_url": run_url,
                                            "cell_url": cell_url, "noise_legend": NOISE_LEGEND})


def disagreements_page(request: Request):
    with open_store(request) as store:
        run = store.resolve(request.path_params["run_id"])
        agreement = queries.agreement(store, run["id"])
        cols = {c["prompt_idx"]: view.column_label(c) for c in store.columns(run["id"])}
    return render(request, "disagreements.html", {"title": f"Disagreements · {run['id']}", "run": run,
                                                  "agreement": agreement, "columns": cols, "cell_url": cell_url,
                                                  "run_url": run_url})
