"""The run's row in the store: made when the run starts (status `started`, its config, options record
and columns), and its record at the end: final status, row counts, tokens and cost, column metrics, the
gate verdicts (run/recording/gates.py) and the warnings; also after Ctrl-C, an abort or an error.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from factcli.scoring.registry import compares
from factcli.settings import VERSION
from factcli.store.database import now
from factcli.store.records import column_record, metrics_to_json


def insert(store, run, scrub, options_record: dict) -> None:
    """A new run's row (status started) and its columns."""
    files = [str(Path(f).resolve()) for f in run.suite.config_files if f and not f.startswith("<")]
    store.insert_run({
        "id": run.run_id, "created_at": run.created_at, "updated_at": now(), "finished_at": None,
        "description": scrub.text(run.suite.description), "status": "started",
        "config_json": scrub.dumps(run.suite.raw), "config_files_json": json.dumps(files),
        "base_dir": str(Path(run.suite.base_dir).resolve()),
        "options_json": scrub.dumps(options_record), "graders_json": json.dumps(run.graders),
        "total_steps": run.total_steps, "rows_done": 0, "successes": 0, "failures": 0, "errors": 0,
        "tokens_json": None, "cost": None, "duration_ms": 0, "retries": 0, "calls": 0,
        "abort_reason": None, "warnings_json": None, "factcli_version": VERSION,
        "pid": os.getpid(), "host": socket.gethostname(), "attempts": 1,
    })
    store.set_columns(run.run_id, [column_record(c, scrub) for c in run.columns])


def totals(run) -> tuple[dict, float]:
    """(the tokens record, the cost) of the run's columns so far."""
    from factcli.types import TokenUsage

    tokens, grader, cost, grader_cost, unpriced, grader_unpriced = TokenUsage(), TokenUsage(), 0.0, 0.0, 0, 0
    batched, saved = 0, 0.0
    for m in run.metrics:
        tokens.add(m.tokens)
        grader.add(m.grader_tokens)
        cost, grader_cost = cost + m.cost, grader_cost + m.grader_cost
        unpriced, grader_unpriced = unpriced + m.cost_unpriced, grader_unpriced + m.grader_unpriced
        batched, saved = batched + m.batched, saved + m.batch_saved
    return {**tokens.to_json(), "assertions": grader.to_json(), "graderCost": grader_cost,
            "costUnpriced": unpriced, "graderCostUnpriced": grader_unpriced,
            **({"batched": batched, "batchSaved": saved} if batched else {})}, cost


def finish(store, run, writer, stored_row: dict | None, error: BaseException | None) -> None:
    """The run's final record. `stored_row`: the run's row as a resume found it (its time, retries and
    calls so far are added to this attempt's); `writer`: run/recording/writer.RowWriter, which writes
    again the rows a comparison changed after they were written."""
    run_id, scrub = run.run_id, writer.scrub
    status = "error" if error is not None else run.status
    if status == "started":
        status = "interrupted"
    counts = store.counts(run_id)
    rows_done = sum(c["pass"] + c["fail"] + c["error"] for c in counts.values())
    if status == "complete":
        if rows_done < run.total_steps:
            status = "interrupted"  # e.g. --retry-errors on a run that never finished
        for r in run.rows:  # comparisons changed these rows after they were written
            if compares(r.step.test):
                writer.queue(r)
        writer.flush()
    tokens_json, cost = totals(run)
    src = stored_row or {}
    run.duration_ms = (src.get("duration_ms") or 0) + (run.duration_ms or 0)
    warnings = list(run.warnings)
    if error is not None and not isinstance(error, KeyboardInterrupt):
        warnings.append(f"{type(error).__name__}: {error}")
    store.update_run(run_id, {
        "status": status, "updated_at": now(), "finished_at": now(), "rows_done": rows_done,
        "successes": sum(c["pass"] for c in counts.values()), "failures": sum(c["fail"] for c in counts.values()),
        "errors": sum(c["error"] for c in counts.values()),
        "tokens_json": json.dumps(tokens_json), "cost": cost, "duration_ms": run.duration_ms,
        "retries": (src.get("retries") or 0) + run.retries, "calls": (src.get("calls") or 0) + run.calls,
        "abort_reason": scrub.text(run.abort_reason), "graders_json": json.dumps(run.graders),
        "warnings_json": scrub.dumps(warnings) if warnings else None,
        "gates_json": scrub.dumps([g.to_json() for g in run.gate_results]) if run.gate_results else None,
    }, commit=False)
    store.set_column_metrics(run_id, [metrics_to_json(m, scrub) for m in run.metrics], commit=False)
    store.commit()
