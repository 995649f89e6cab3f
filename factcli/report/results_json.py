"""The results document of `-o results.json`: promptfoo's layout (version 3) plus a `factcli` object.

This module and config/ are the only places that speak promptfoo's spellings.
"""

from __future__ import annotations

import json
import platform
import sys
from datetime import datetime, timezone

from factcli.settings import VERSION
from factcli.store.encode import dumps_finite, finite
from factcli.types import EvalResult, TokenUsage, grading_json


def tokens_json(t: TokenUsage, assertions: TokenUsage | None = None) -> dict:
    out = t.to_json()
    if assertions is not None:
        out["assertions"] = assertions.to_json()
    return out


def prompt_json(col) -> dict:
    return {"raw": col.prompt.raw, "label": col.prompt.label, "id": col.prompt.id,
            "provider": col.provider.display}


def row_json(r: EvalResult, columns, ratings: list[dict] | None = None) -> dict:
    """One row of `results.results`. `ratings`: people's ratings of the row in force (a stored run's
    export), under factcli.ratings; None leaves the key out (an eval's own -o files)."""
    step = r.step
    col = columns[step.prompt_idx]
    resp = r.response
    response = None
    if resp.error is None or resp.output is not None:
        response = {
            "output": resp.output,
            "tokenUsage": resp.token_usage.to_json(),
            "cached": resp.cached,
            "latencyMs": resp.latency_ms,
            "finishReason": resp.finish_reason,
            "cost": resp.cost,
            "metadata": dict(resp.metadata),
        }
        if resp.error:
            response["error"] = resp.error
    tc = dict(step.test.raw)
    tc["vars"] = dict(step.vars)
    out = {
        "testIdx": step.test_idx,
        "promptIdx": step.prompt_idx,
        "id": f"{step.test_idx}-{step.prompt_idx}",
        "success": r.success,
        "score": r.score,
        "namedScores": dict(r.named_scores),
        "failureReason": r.failure_reason,
        "latencyMs": r.latency_ms,
        "cost": resp.cost,
        "vars": dict(step.vars),
        "prompt": {"raw": stored_prompt_text(r.rendered_prompt), "label": col.prompt.label, "config": {}},
        "promptId": col.prompt.id,  # as promptfoo's rows carry it: the column's `results.prompts[j].id`
        "provider": {"id": col.provider.id, "label": col.provider.label},
        "response": response,
        "testCase": tc,
        "tokenUsage": tokens_json(resp.token_usage,
                                  r.grading.tokens_used if r.grading is not None else TokenUsage()),
        "gradingResult": grading_json(r.grading, top=True) if r.grading is not None else None,
        "metadata": dict(step.test.metadata),
        "factcli": {"repeatIdx": step.repeat_idx, "retries": resp.retries, **_grader_spend(r.grading),
                    **_conversation(r)},
    }
    if ratings is not None:
        out["factcli"]["ratings"] = ratings
    if r.error is not None:
        out["error"] = r.error
    return out


def stored_prompt_text(text: str) -> str:
    """promptfoo writes a rendered prompt that is a JSON object or array (a chat prompt) as compact JSON;
    the model received the text as rendered, whitespace included (promptfoo-features §0, part B §3.7)."""
    if not text or text.lstrip()[:1] not in ("[", "{"):
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _conversation(r: EvalResult) -> dict:
    """A turn's conversation (its `metadata.conversationId`, None for the column's default thread)
    and its 1-based turn number."""
    place = r.conversation
    if not place:
        return {}
    return {"conversation": {"id": place.get("id"), "turn": place.get("turn")}}


def _grader_spend(grading) -> dict:
    meta = grading.metadata if grading is not None else None
    if not meta or "graderCalls" not in meta:
        return {}
    return {"graderCalls": meta["graderCalls"], "graderCost": meta.get("graderCost")}


def column_metrics_json(m) -> dict:
    return {
        "score": m.score,
        "testPassCount": m.test_pass,
        "testFailCount": m.test_fail,
        "testErrorCount": m.test_error,
        "assertPassCount": m.assert_pass,
        "assertFailCount": m.assert_fail,
        "totalLatencyMs": m.total_latency_ms,
        "tokenUsage": tokens_json(m.tokens, m.grader_tokens),
        "namedScores": dict(m.named_scores),
        "namedScoresCount": dict(m.named_count),
        "namedScoreWeights": dict(m.named_weights),
        "cost": m.cost,
    }


def to_promptfoo_json(run, rows: bool = True) -> dict:
    """The whole document. `rows=False`: its results list left empty and its "vars" taken from
    the rows' facts, for write_json to stream the rows in."""
    from factcli import stats
    from factcli.store.redact import redact

    stats.fill(run)  # a run replayed from the store (not finished) has none stored yet
    columns = run.columns
    prompts = []
    for col, m in zip(columns, run.metrics):
        entry = prompt_json(col)
        entry["metrics"] = column_metrics_json(m)
        prompts.append(entry)
    total_tokens = TokenUsage()
    grader_tokens = TokenUsage()
    for m in run.metrics:
        total_tokens.add(m.tokens)
        grader_tokens.add(m.grader_tokens)
    if rows:
        from factcli.report.ratings import ratings_of

        results = [row_json(r, columns, ratings_of(run, r)) for r in run.all_rows()]
        var_names = sorted({k for r in results for k in r["vars"]})
    else:
        results, var_names = [], sorted(run.row_facts().var_names)
    doc = {
        "evalId": run.run_id,
        "results": {
            "version": 3,
            "timestamp": run.created_at,
            "prompts": prompts,
            "results": results,
            "stats": {
                "successes": run.successes,
                "failures": run.failures,
                "errors": run.errors,
                "tokenUsage": tokens_json(total_tokens, grader_tokens),
                "durationMs": run.duration_ms,
            },
        },
        "config": redact(run.suite.raw),
        "shareableUrl": None,
        "metadata": {
            "factcliVersion": VERSION,
            "pythonVersion": sys.version.split()[0],
            "platform": sys.platform,
            "arch": platform.machine(),
            "exportedAt": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
            "evaluationCreatedAt": run.created_at,
        },
        "vars": var_names,
        "runtimeOptions": {"maxConcurrency": run.concurrency, "repeat": run.repeat, "cache": run.cache},
        "factcli": {
            "version": VERSION,
            "runId": run.run_id,
            "status": run.status,
            "graders": list(run.graders),
            "columns": [{"gradingErrors": m.grading_errors, "categories": dict(m.categories),
                         "cached": m.cached, "graderCost": m.grader_cost,
                         "costUnpricedRows": m.cost_unpriced, "graderCostUnpricedRows": m.grader_unpriced,
                         "methods": {k: v["summary"] for k, v in m.methods.items()}, **m.stats,
                         **({"judgeCorrected": m.judge_corrected} if m.judge_corrected else {})}
                        for m in run.metrics],
            "retries": run.retries,
            "cost": _run_cost(run.metrics),
            **({"throttling": run.throttling} if getattr(run, "throttling", None) else {}),
            "abortReason": run.abort_reason,
            "passRate": run.pass_rate,
            "passRateCi95": stats.run_interval(run),
        },
    }
    return finite(doc)


def _run_cost(metrics) -> dict:
    """The run's money: model calls and grader calls apart, with the rows whose price is unknown
    (their sums are then floors; a figure is null when nothing in it was priced)."""
    model, grader = sum(m.cost for m in metrics), sum(m.grader_cost for m in metrics)
    unpriced, grader_unpriced = sum(m.cost_unpriced for m in metrics), sum(m.grader_unpriced for m in metrics)
    rows = sum(m.rows for m in metrics)
    return {"model": None if rows and unpriced == rows else model, "modelUnpricedRows": unpriced,
            "grader": None if grader_unpriced and not grader else grader, "graderUnpricedRows": grader_unpriced}


PRETTY_MAX_ROWS = 2000  # json's C encoder is only used without indent: larger files go on one line
_ROWS_MARK = "\x00factcli:results\x00"
_ROWS_DEPTH = 3  # results.results[] items sit three levels down


def write_json(run, path) -> None:
    """The document, its rows written one at a time as they are read (a stored run's stream from
    the store), so that they are never all in memory: the bytes of json.dumps(to_promptfoo_json(run))
    with indent 2 up to PRETTY_MAX_ROWS rows, on one line beyond."""
    import json

    from factcli.report.ratings import ratings_of

    indent = 2 if run.row_count <= PRETTY_MAX_ROWS else None
    doc = to_promptfoo_json(run, rows=False)
    doc["results"]["results"] = _ROWS_MARK
    head, tail = json.dumps(doc, ensure_ascii=False, indent=indent, default=str).split(json.dumps(_ROWS_MARK))
    pad = "\n" + " " * (indent * _ROWS_DEPTH) if indent else ""
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(head + "[")
        n = 0
        for n, r in enumerate(run.all_rows(), 1):
            text = dumps_finite(row_json(r, run.columns, ratings_of(run, r)), indent)
            if indent:
                text = pad + text.replace("\n", pad)
            fh.write(("" if n == 1 else "," if indent else ", ") + text)
        if n and indent:
            fh.write(pad[: -indent])
        fh.write("]" + tail + "\n")
