"""What `--resume` and `--retry-errors` take back from the stored run and what they run again: the
plan checked against the stored columns and rows, the rows kept read back into the run (its metrics,
conversations, comparisons), and the plan's steps left with only those to run.
"""

from __future__ import annotations

import dataclasses

from factcli.errors import FactcliError
from factcli.scoring.registry import COMPARING, compares
from factcli.store import leases
from factcli.store.encode import loads
from factcli.store.records import from_record
from factcli.types import ERROR_REASONS, test_key


def resume(run, source, writer) -> int:
    """Take up the stored run `source.row` (run/recording/source.Source) in `run`; the writer
    (run/recording/writer.RowWriter) goes on from its rows. Returns the number of rows kept."""
    from factcli.run.calling.breaker import ROW_MARK
    from factcli.scoring.metrics import compile_derived

    src, store, scrub = source.row, writer.store, writer.scrub
    run_id = src["id"]
    stored_cols = store.columns(run_id)
    same = len(stored_cols) == len(run.columns) and all(
        s["provider_id"] == scrub.text(c.provider.id)
        and (s["prompt_label"] or "") == scrub.text(c.prompt.label)
        for s, c in zip(stored_cols, run.columns))
    if not same:
        raise FactcliError(f"the prompts or providers changed since run {run_id} started; "
                           "it cannot be resumed (start a new eval)")
    plan = run.steps.keyed()
    done = store.done_keys(run_id)
    # a beforeEach hook may have changed a row's vars: its stored key is not the plan's
    hooked = any(e.runs_for("beforeEach") for e in run.suite.extensions)
    for key, (_, stored_key) in done.items():
        step = plan.get(key)
        if step is None or (test_key(step.test.description, step.vars) != stored_key and not hooked):
            raise FactcliError(f"test {key[0]} of run {run_id} no longer matches the config "
                               "(the tests changed since the run started); it cannot be resumed")
    if source.mode == "resume" and ROW_MARK not in (src.get("abort_reason") or ""):
        keep = set(done)
    else:  # --retry-errors, or resuming a run the circuit breaker stopped: its outage's rows run again,
        # with every row holding an assertion not judged (scoring/outcome.needs_retry)
        keep = {k for k, (fr, _) in done.items() if fr not in ERROR_REASONS} - store.errored_assertion_keys(run_id)
    keep = settle(keep, plan, run.conversations)
    run.run_id, run.created_at = run_id, src["created_at"]
    writer.stream_rows()
    derived = compile_derived(run.suite.derived_metrics)
    loaded = 0
    for rec in store.results(run_id):
        key = (rec["test_idx"], rec["prompt_idx"], rec["repeat_idx"])
        if key not in keep:
            continue
        step = plan[key]
        if hooked:  # the vars the model saw
            step = dataclasses.replace(step, vars=loads(rec.get("vars_json"), {}) or {})
        result = from_record(rec, run.columns, step)
        if result.grading is not None and any(
                c.assertion is not None and c.assertion.type in COMPARING
                for c in result.grading.component_results):
            frozen = [a for a in step.test.assertions if a.type not in COMPARING]
            result.step = dataclasses.replace(step, test=dataclasses.replace(step.test, assertions=frozen))
        if run.conversations is not None:  # later turns see it as if it just ran
            run.conversations.restore(result)
        run.metrics[result.step.prompt_idx].add(result, derived)
        run.keep(result)
        loaded += 1
        writer.seq = max(writer.seq, rec["seq"] or 0)
    run.steps.leave_out(keep, plan)
    leases.take(store, src)  # refused if another process took the run since it was read
    store.update_run(run_id, {"attempts": (src.get("attempts") or 1) + 1})
    what = "Resuming" if source.mode == "resume" else "Retrying the errors of"
    source.ui.note(f"{what} run {run_id}: {loaded} of {run.total_steps} row{'s' if run.total_steps != 1 else ''} "
                   f"kept, {len(run.steps)} to run.")
    return loaded


def settle(keep: set, plan: dict, conversations) -> set:
    """The stored rows a resumed run keeps: not those a rerun row feeds (the later turns of its
    conversation, the rows after its storeOutputAs: their inputs would change), nor the columns of a
    test a comparison (select-best, max-score) ranks again when one of its columns runs again."""
    keep = set(keep)
    steps = list(plan.values())
    while True:
        before = len(keep)
        rerun = {k for k in plan if k not in keep}
        if conversations is not None and conversations.active:
            keep -= conversations.downstream(steps, rerun)
        rerun_tests = {k[0] for k in plan if k not in keep}
        keep = {k for k in keep if not (k[0] in rerun_tests and compares(plan[k].test))}
        if len(keep) == before:
            return keep
