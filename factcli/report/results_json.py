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
from factcli.types import FAILURE_ASSERT, FAILURE_GRADING, EvalResult, TokenUsage, grading_json


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
        # promptfoo's: a row not judged is a failure there (factcli.notJudged says it was not judged)
        "failureReason": FAILURE_ASSERT if r.failure_reason == FAILURE_GRADING else r.failure_reason,
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
                    **_conversation(r), **({"notJudged": True} if r.failure_reason == FAILURE_GRADING else {})},
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
        "testFailCount": m.test_fail + m.test_unjudged,  # promptfoo's counts: a row not judged is a failure
        "testErrorCount": m.test_error - m.test_unjudged,
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
                "failures": run.failures + run.unjudged,  # promptfoo's: factcli.notJudged are among them
                "errors": run.errors - run.unjudged,
                # factcli's, beside promptfoo's layout: the rows among `failures` the judge could not judge
                # (issue 52: a script reads it without knowing factcli's own object)
                "notJudged": run.unjudged,
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
            "columns": [{"gradingErrors": m.grading_errors, "notJudged": m.test_unjudged,
                         **({"namedNotJudged": {k: v[0] for k, v in m.named_unjudged.items()}}
                            if m.named_unjudged else {}),
                         # each named metric over the rows judged on it, with (rows judged, rows that have it)
                         "namedScores": m.named_means(),  # (a derived metric: its value)
                         "namedJudged": {k: list(m.judged_of(k)) for k in m.named_scores if k in m.named_rows},
                         "scoreJudged": [m.scored, m.rows],
                         "categories": dict(m.categories),
                         "cached": m.cached, "graderCost": m.grader_cost,
                         "costUnpricedRows": m.cost_unpriced, "graderCostUnpricedRows": m.grader_unpriced,
                         "methods": {k: v["summary"] for k, v in m.methods.items()}, **m.stats,
                         **({"judgeCorrected": m.judge_corrected} if m.judge_corrected else {})}
                        for m in run.metrics],
            "retries": run.retries,
            "cost": _run_cost(run.metrics),
            **({"throttling": run.throttling} if run.throttling else {}),
            "abortReason": run.abort_reason,
            "notJudged": run.unjudged,  # rows the judge could not judge: errors to factcli, failures in stats
            "passRate": run.pass_rate,  # over the rows judged
            "passRateCi95": stats.run_interval(run),
            **({"gates": [g.to_json() for g in run.gate_results]} if getattr(run, "gate_results", None) else {}),
        },
    }
    return finite(doc)


def _run_cost(metrics) -> dict:
    """The run's money: model calls and grader calls apart, with the rows whose price is unknown
    (their sums are then floors; a figure is null when nothing in it was priced)."""
    model, grader = sum(m.cost for m in metrics), sum(m.grader_cost for m in metrics)
    unpriced, grader_unpriced = sum(m.cost_unpriced for m in metrics), sum(m.grader_unpriced for m in metrics)
    rows = sum(m.rows for m in metrics)
    batched = sum(m.batched for m in metrics)
    return {"model": None if rows and unpriced == rows else model, "modelUnpricedRows": unpriced,
            "grader": None if grader_unpriced and not grader else grader, "graderUnpricedRows": grader_unpriced,
            # calls billed at a batch API's price, and what that saved against the full price
            **({"batchedCalls": batched, "batchSaved": sum(m.batch_saved for m in metrics)} if batched else {})}


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


# ---------------------------------------------------------------- reading a results document back


def is_results_file(ref: str) -> bool:
    """Whether a RUN argument names an exported results JSON rather than a stored run."""
    import os

    return ref.lower().endswith(".json") and os.path.isfile(ref)


def import_results(path, store) -> dict:
    """An exported results JSON (factcli's or promptfoo's `-o x.json`) written into `store` as a finished
    run, for `diff` to compare with a stored run (a release's artifact in CI). Returns its run row. A row
    factcli marked `notJudged` is not judged again here; promptfoo's own rows are as promptfoo counted them."""
    from pathlib import Path

    from factcli import stats
    from factcli.config.plan import Column
    from factcli.errors import FactcliError
    from factcli.scoring.metrics import ColumnMetrics
    from factcli.store.records import RowEncoder, column_record, metrics_to_json
    from factcli.store.redact import Scrubber
    from factcli.types import (EvalResult, EvalStep, Prompt, ProviderResponse, ProviderSpec, TestCase,
                               grading_from_json, tokens_from_json)

    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        body = doc["results"]
        rows_json, prompts = body["results"], body.get("prompts") or []
        if not isinstance(rows_json, list):
            raise TypeError("results.results is not a list")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FactcliError(f"{path}: not a results JSON written by `-o FILE.json` ({exc})") from None
    run_id = f"{path.name}:{doc.get('evalId') or 'results'}"
    if store.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is not None:
        run_id += " (B)"  # the same file, or two of the same name, on both sides
    providers: dict[int, dict] = {}
    for row in rows_json:
        providers.setdefault(row.get("promptIdx") or 0, row.get("provider") or {})
    n_cols = max([len(prompts), *(i + 1 for i in providers)]) if (prompts or providers) else 0
    columns = []
    for i in range(n_cols):
        p = prompts[i] if i < len(prompts) else {}
        prov = providers.get(i) or {}
        spec = ProviderSpec(id=prov.get("id") or p.get("provider") or "?", label=prov.get("label"))
        columns.append(Column(index=i, provider=spec, provider_idx=i,
                              prompt=Prompt(raw=p.get("raw") or "", label=p.get("label") or "", id=p.get("id") or "")))
    metrics = [ColumnMetrics() for _ in columns]
    samples = [stats.ColumnSample(1) for _ in columns]
    scrub = Scrubber()
    encoder = RowEncoder(scrub)
    records, counts = [], [0, 0, 0]
    for seq, row in enumerate(rows_json):
        col = columns[row.get("promptIdx") or 0]
        tc = row.get("testCase") or {}
        variables = row.get("vars") or {}
        extra = row.get("factcli") or {}
        test = TestCase(description=tc.get("description"), vars=variables, raw=tc)
        step = EvalStep(row.get("testIdx") or 0, col.index, extra.get("repeatIdx") or 0, test, variables,
                        col.prompt, col.provider, col.index)
        resp = row.get("response") or {}
        response = ProviderResponse(output=resp.get("output"), error=resp.get("error"),
                                    token_usage=tokens_from_json(resp.get("tokenUsage")), cost=resp.get("cost"),
                                    latency_ms=resp.get("latencyMs") or 0, cached=bool(resp.get("cached")),
                                    metadata=resp.get("metadata") or {})
        reason = FAILURE_GRADING if extra.get("notJudged") else row.get("failureReason") or 0
        score = row.get("score")
        r = EvalResult(step, (row.get("prompt") or {}).get("raw") or "", response,
                       grading_from_json(row.get("gradingResult")), bool(row.get("success")),
                       score if isinstance(score, (int, float)) else 0.0, row.get("namedScores") or {}, reason,
                       error=row.get("error"), latency_ms=row.get("latencyMs") or 0)
        metrics[col.index].add(r, [])
        samples[col.index].add(r)
        records.append(encoder.row(run_id, r, seq))
        counts[0 if r.success else 2 if reason in (2, 3) else 1] += 1
    for m, sample in zip(metrics, samples):
        m.stats = sample.stats()
    created = body.get("timestamp") or ""
    store.insert_run({"id": run_id, "created_at": created, "updated_at": created, "finished_at": created or "-",
                      "description": f"{path}", "status": "complete", "config_json": "{}",
                      "config_files_json": json.dumps([str(path)]), "total_steps": len(records),
                      "rows_done": len(records), "successes": counts[0], "failures": counts[1], "errors": counts[2],
                      "factcli_version": (doc.get("factcli") or {}).get("version")})
    store.set_columns(run_id, [column_record(c, scrub) for c in columns], commit=False)
    store.write_results(records)
    store.set_column_metrics(run_id, [metrics_to_json(m) for m in metrics], commit=False)
    store.commit()
    return store.resolve(run_id)
