"""What the web pages read from the store, in SQL a page at a time (never a whole run).

The matrix page, its filters and the column summaries are `report/view.py`'s (the terminal's
`factcli view` reads the same page); a run's header is view.run_header; the Compare page's figures
are report/diff.diff_doc. This module adds what only the web shows: the runs list with intervals,
one stored row in full with its neighbours among the failures, and the human ratings (store/ratings)."""

from __future__ import annotations

import os
from typing import Any

from factcli.report import view
from factcli.store.database import Store, shown_status
from factcli.store.encode import loads
from factcli.types import cache_write_of, status_word

PAGE_SIZES = (25, 50, 100, 200)


def runs(store: Store, limit: int = 200) -> list[dict]:
    """The stored runs, newest first, with rows done, pass rate and its 95% interval, and cost."""
    from factcli import stats

    out = []
    for r in store.list_runs(limit):
        status = shown_status(r)
        if r.get("finished_at"):
            passed, failed, errors = r.get("successes") or 0, r.get("failures") or 0, r.get("errors") or 0
        else:  # still writing, or killed: count what is stored
            counts = store.counts(r["id"])
            passed, failed, errors = (sum(c[k] for c in counts.values()) for k in ("pass", "fail", "error"))
        done = passed + failed + errors
        not_judged = store.not_judged(r["id"])  # out of the pass rate
        rate = stats.wilson_interval(passed, done - not_judged)
        files = loads(r.get("config_files_json"), []) or []
        tokens = loads(r.get("tokens_json"), {}) or {}
        out.append({"id": r["id"], "createdAt": r.get("created_at"), "status": status,
                    "description": r.get("description") or ", ".join(os.path.basename(f) for f in files),
                    "rows": done, "totalRows": r.get("total_steps") or 0, "passed": passed, "failed": failed,
                    "errors": errors, "notJudged": not_judged, "passRate": rate["value"] if rate else None,
                    "ci95": [rate["low"], rate["high"]] if rate else None,
                    "cost": r.get("cost"), "costUnpriced": tokens.get("costUnpricedRows") or tokens.get("costUnpriced"),
                    "durationMs": r.get("duration_ms")})
    return out


def metric_names(summaries: list[dict]) -> list[str]:
    """The named metrics of a run's columns (derived ones included), for the metric filter."""
    names: set[str] = set()
    for s in summaries:
        names.update(s.get("namedMeans") or {})
    return sorted(names)


def matrix(store: Store, run: dict, *, failures: bool, errors: bool, text: str | None, column: int | None,
           metric: str | None, limit: int, page_no: int) -> dict:
    """One page of tests (report/view.page) with its cells in column order."""
    info = view.page(store, run, failures=failures, errors=errors, text=text or None, limit=limit,
                     page_no=page_no, column=column, metric=metric or None)
    return info


# ---------------------------------------------------------------- one row in full


def row(store: Store, run: dict, test_idx: int, prompt_idx: int, repeat_idx: int) -> dict | None:
    found = list(store.results(run["id"], "test_idx = ? AND prompt_idx = ? AND repeat_idx = ?",
                               [test_idx, prompt_idx, repeat_idx]))
    return found[0] if found else None


def repeats_of(store: Store, run_id: str, test_idx: int, prompt_idx: int) -> list[int]:
    return [r[0] for r in store.execute(
        "SELECT repeat_idx FROM results WHERE run_id = ? AND test_idx = ? AND prompt_idx = ? ORDER BY repeat_idx",
        (run_id, test_idx, prompt_idx))]


def cell(rec: dict) -> dict:
    """A stored row as report/html_page.result_cell and its pieces read it (as html_page.cell_of
    builds it from an EvalResult)."""
    from factcli.store.records import conversation_of, output_of

    status = status_word(rec["success"], rec["failure_reason"])
    out = output_of(rec)
    extra = loads(rec.get("extra_json"), {}) or {}
    response = extra.get("response") or {}
    return {"testIdx": rec["test_idx"], "promptIdx": rec["prompt_idx"], "repeatIdx": rec["repeat_idx"],
            "status": status, "score": rec["score"], "output": _text(out), "error": rec["error"],
            "latencyMs": rec["latency_ms"], "tokens": rec["tokens_total"], "graderTokens": rec["grader_tokens"],
            "tokensPrompt": rec["tokens_prompt"], "tokensCompletion": rec["tokens_completion"],
            "cost": rec["cost"], "answered": status != "ERROR" or rec["cost"] is not None,
            "cached": bool(rec["cached"]), "grading": loads(rec.get("grading_json")),
            "conversation": conversation_of(rec), "prompt": rec.get("rendered_prompt") or "",
            "vars": loads(rec.get("vars_json"), {}) or {}, "description": rec.get("description"),
            "namedScores": loads(rec.get("named_scores_json"), {}) or {},
            "finishReason": response.get("finishReason"),
            "reasoning": ((response.get("tokenUsage") or {}).get("completionDetails") or {}).get("reasoning"),
            "cacheRead": (response.get("tokenUsage") or {}).get("cached"),
            "cacheWrite": cache_write_of(response.get("tokenUsage") or {})}


def _text(value: Any) -> str:
    import json

    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)


def neighbour_failures(store: Store, run_id: str, key: tuple[int, int, int]) -> tuple[tuple | None, tuple | None]:
    """The previous and the next row that did not pass (FAIL or ERROR), in test, column, repeat order."""
    base = "SELECT test_idx, prompt_idx, repeat_idx FROM results WHERE run_id = ? AND success = 0 AND "
    prev = store.execute(base + "(test_idx, prompt_idx, repeat_idx) < (?, ?, ?) "
                              "ORDER BY test_idx DESC, prompt_idx DESC, repeat_idx DESC LIMIT 1", (run_id, *key)).fetchone()
    nxt = store.execute(base + "(test_idx, prompt_idx, repeat_idx) > (?, ?, ?) "
                             "ORDER BY test_idx, prompt_idx, repeat_idx LIMIT 1", (run_id, *key)).fetchone()
    return (tuple(prev) if prev else None), (tuple(nxt) if nxt else None)


def conversation(store: Store, run: dict, rec: dict) -> dict | None:
    """The turns the model saw before this row (report/show.history), or None for a row that is no turn."""
    from factcli.report.show import history

    found = history(store, run, rec)
    if found is None:
        return None
    place, entries = found
    return {"mark": view.turn_mark(place), "id": place.get("id"), "turn": place.get("turn"),
            "entries": [{k: _text(v) for k, v in e.items()} for e in entries]}


# ---------------------------------------------------------------- ratings (store/ratings)


def row_ratings(store: Store, run_id: str, key: tuple[int, int, int]) -> list[dict]:
    from factcli.store import ratings

    return ratings.ratings_for_row(store, run_id, *key)


def rated(store: Store, run_id: str) -> dict:
    """(test_idx, prompt_idx, repeat_idx) -> the latest row-level verdict in force (for the matrix marks)."""
    from factcli.store import ratings

    return ratings.rated_rows(store, run_id)


def agreement(store: Store, run_id: str) -> dict | None:
    from factcli.store import ratings

    return ratings.judge_agreement(store, run_id)


def live_status(store: Store, run: dict) -> dict:
    """The small document a page in progress polls: status and counts (exact while writing)."""
    h = view.run_header(store, run)
    return {"id": h["id"], "status": h["status"], "rows": h["rows"], "totalRows": h["totalRows"],
            "successes": h["successes"], "failures": h["failures"], "errors": h["errors"], "notJudged": h["notJudged"],
            "passRate": h["passRate"], "cost": h["cost"], "updatedAt": run.get("updated_at")}
