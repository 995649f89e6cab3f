"""A stored run read back as an EvalRun (for exports): its rows streamed from the store, its column
metrics as stored when it was finalised, else replayed from the rows."""

from __future__ import annotations

from factcli.config.loader import Suite
from factcli.methods import reports as method_reports
from factcli.run.runner import EvalRun
from factcli.scoring.metrics import ColumnMetrics, compile_derived
from factcli.scoring.registry import load_all
from factcli.store.database import Store, shown_status
from factcli.store.encode import loads
from factcli.store.records import StoredRows, columns_from_records, metrics_from_json


def load_run(store: Store, run_row: dict):
    """The whole stored run as an EvalRun, its rows read back from the store as they are written out."""
    config = loads(run_row.get("config_json"), {}) or {}
    options = loads(run_row.get("options_json"), {}) or {}
    columns = columns_from_records(store.columns(run_row["id"]))
    derived_raw = config.get("derivedMetrics") if isinstance(config, dict) else None
    derived_list = [d for d in derived_raw or [] if isinstance(d, dict) and "name" in d and "value" in d]
    suite = Suite(description=run_row.get("description"), prompts=[c.prompt for c in columns], providers=[],
                  tests=[], derived_metrics=derived_list, raw=config,
                  config_files=loads(run_row.get("config_files_json"), []) or [])
    rows = StoredRows(store.target, run_row["id"], columns)
    stored = [metrics_from_json(c.get("metrics_json")) for c in store.columns(run_row["id"])]
    if run_row.get("finished_at") and all(m is not None for m in stored):
        metrics = stored
    else:
        try:
            derived = compile_derived(derived_list)
        except Exception:
            derived = []
        metrics = [ColumnMetrics() for _ in columns]
        for r in rows:
            metrics[r.step.prompt_idx].add(r, derived)
    from factcli.store.ratings import ratings_by_row

    run = EvalRun(run_id=run_row["id"], suite=suite, columns=columns, metrics=metrics, stored_rows=rows,
                  total_steps=run_row.get("total_steps") or sum(m.rows for m in metrics),
                  created_at=run_row.get("created_at") or "",
                  duration_ms=run_row.get("duration_ms") or 0, status=shown_status(run_row),
                  abort_reason=run_row.get("abort_reason"), retries=run_row.get("retries") or 0,
                  calls=run_row.get("calls") or 0, warnings=loads(run_row.get("warnings_json"), []) or [],
                  concurrency=options.get("concurrency") or 4, repeat=options.get("repeat") or 1,
                  cache=options.get("cache", True), graders=loads(run_row.get("graders_json"), []) or [],
                  ratings=ratings_by_row(store, run_row["id"]))
    from factcli.config.gates import stored as stored_gates

    run.gate_results = stored_gates(run_row.get("gates_json"))  # as the eval said them (run/recording/gates.py)
    if metrics is not stored:
        load_all()  # registers the method reports
        method_reports.fill(run)
    return run
