"""Rows between memory and the store: EvalResult -> results row (`RowEncoder`) and back, and a
run's rows read back in order (a stored run as an EvalRun is run/recording/stored.py).

The stored form keeps everything the results JSON needs, so an export from the store is the same
document `eval -o` writes (minus secrets, which never reach the store).
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from factcli.store.database import Store
from factcli.store.encode import loads
from factcli.store.redact import Scrubber
from factcli.store.row_text import RowTexts, _encode_fast, as_dict, extra_json
from factcli.types import (
    EvalResult,
    EvalStep,
    Prompt,
    ProviderResponse,
    ProviderSpec,
    TestCase,
    TokenUsage,
    grading_from_json,
    grading_json,
    test_key,
    test_key_of,
    tokens_from_json,
)


def _num(value: Any) -> float | None:
    if type(value) is float:  # (most: a finite float; NaN and the infinities give NaN here)
        return value if value - value == 0.0 else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return None if math.isnan(value) or math.isinf(value) else float(value)
    return None


_last_ms: list = [0, ""]


def _now_ms() -> str:
    """now() with its text made once per millisecond (rows finish many to a millisecond)."""
    import time

    ms = time.time_ns() // 1_000_000
    if ms != _last_ms[0]:
        from datetime import datetime, timezone

        _last_ms[0], _last_ms[1] = ms, datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(
            timespec="milliseconds")
    return _last_ms[1]


class RowEncoder:
    """A run's finished rows as the store keeps them (`row`): tuples in RESULT_FIELDS order, secrets
    scrubbed, NaN as null, each JSON field encoded once. Most rows take the quick way: their JSON
    texts made from the texts the run keeps (store/row_text.RowTexts), looked at once for what
    redaction could change (Scrubber.unchanged); a row where it could, or with a NaN or a value JSON
    cannot take as it is, the general one (Scrubber.dumps_all of the values)."""

    def __init__(self, scrub: Scrubber):
        self.scrub = scrub
        self.texts = RowTexts()

    def row(self, run_id: str, r: EvalResult, seq: int, created_at: str | None = None) -> tuple:
        scrub, step = self.scrub, r.step
        fields = self._quick(r)
        if fields is None:
            fields = self._general(r)
        named, graded, variables, extra, key = fields
        resp = r.response
        output, output_json = resp.output, 0
        description, error, prompt = step.test.description, r.error, r.rendered_prompt
        if output is not None and not isinstance(output, str):
            output, output_json = scrub.dumps_all((output,))[0], 1
            if scrub.holds_any(f"{description}\x00{error}\x00{prompt}"):
                description, error, prompt = scrub.text(description), scrub.text(error), scrub.text(prompt)
        elif scrub.holds_any(f"{description}\x00{error}\x00{output}\x00{prompt}"):  # else scrub.text gives each back
            description, error, output, prompt = (scrub.text(description), scrub.text(error), scrub.text(output),
                                                  scrub.text(prompt))
        usage = resp.token_usage
        grading = r.grading
        score, latency, cost = r.score, r.latency_ms, resp.cost
        return (
            run_id, step.test_idx, step.prompt_idx, step.repeat_idx, step.provider_idx, seq, key, description,
            int(bool(r.success)), r.failure_reason,
            score if type(score) is float and score - score == 0.0 else _num(score),
            error, output, output_json, named, graded,
            latency if type(latency) is float and latency - latency == 0.0 else _num(latency),
            usage.prompt, usage.completion, usage.total, grading.tokens_used.total if grading is not None else 0,
            cost if type(cost) is float and cost - cost == 0.0 else _num(cost), int(bool(resp.cached)),
            variables, prompt, extra, created_at or _now_ms(),
        )

    def _quick(self, r: EvalResult) -> tuple | None:
        """(named scores, grading, vars, extra, test key) from kept texts, when redaction would not
        change them and nothing in them needs the general way; else None."""
        step = r.step
        variables = step.vars
        if type(variables) is not dict:
            return None
        try:
            vars_text = _encode_fast(variables)
            extra, residue = self.texts.extra(r)
            graded, grading_residue = (None, "") if r.grading is None else self.texts.grading(r.grading)
            named = _encode_fast(as_dict(r.named_scores))
        except (TypeError, ValueError, RecursionError):  # RecursionError: vars that hold themselves
            return None
        if not self.scrub.unchanged((vars_text, extra, graded, named),
                                    f"{residue}\x00{grading_residue}\x00{named}\x00{vars_text}"):
            return None
        return named, graded, vars_text, extra, test_key_of(step.test.description, variables, vars_text)

    def _general(self, r: EvalResult) -> tuple:
        step, grading = r.step, r.grading
        named, graded, variables, extra = self.scrub.dumps_all((
            as_dict(r.named_scores), None if grading is None else grading_json(grading, top=True),
            as_dict(step.vars), extra_json(r)))
        return named, graded, variables, extra, test_key(step.test.description, step.vars)



# ---------------------------------------------------------------- back from the store


def output_of(rec: dict) -> Any:
    if rec.get("output_json"):
        return loads(rec["output"])
    return rec.get("output")


def from_record(rec: dict, columns: list, step: EvalStep | None = None) -> EvalResult:
    """An EvalResult from a stored row. `step`: the rebuilt plan's step (resume); otherwise one is
    made from what was stored."""
    extra = loads(rec.get("extra_json"), {}) or {}
    resp_x = extra.get("response") or {}
    variables = loads(rec.get("vars_json"), {}) or {}
    if step is None:
        col = columns[rec["prompt_idx"]]
        tc = dict(extra.get("testCase") or {})
        test = TestCase(description=tc.get("description"), vars=variables, raw=tc,
                        metadata=dict(extra.get("metadata") or {}))
        step = EvalStep(test_idx=rec["test_idx"], prompt_idx=rec["prompt_idx"], repeat_idx=rec["repeat_idx"],
                        test=test, vars=variables, prompt=col.prompt, provider=col.provider,
                        provider_idx=rec.get("provider_idx") or col.provider_idx)
    output = output_of(rec)
    exact = extra.get("exact") or {}
    response = ProviderResponse(
        output=output if resp_x.get("present", True) else None, error=resp_x.get("error"),
        token_usage=tokens_from_json(resp_x.get("tokenUsage")), cost=exact.get("cost", rec.get("cost")),
        latency_ms=resp_x.get("latencyMs", rec.get("latency_ms") or 0), cached=bool(rec.get("cached")),
        finish_reason=resp_x.get("finishReason"), metadata=dict(resp_x.get("metadata") or {}),
        retries=resp_x.get("retries") or 0,
    )
    score = exact.get("score", rec.get("score"))
    return EvalResult(
        step=step, rendered_prompt=rec.get("rendered_prompt") or "", response=response,
        grading=grading_from_json(loads(rec.get("grading_json"))), success=bool(rec.get("success")),
        score=math.nan if score is None else score, named_scores=loads(rec.get("named_scores_json"), {}) or {},
        failure_reason=rec.get("failure_reason") or 0, error=rec.get("error"),
        latency_ms=exact.get("latencyMs", rec.get("latency_ms") or 0),
        conversation=extra.get("conversation") if isinstance(extra.get("conversation"), dict) else None,
    )


def turn_entry(rendered_prompt: str, raw_output: Any, metadata: dict | None) -> dict:
    """One `_conversation` entry as promptfoo builds it (promptfoo-features part B §3.2): `prompt` is the
    rendered prompt parsed as JSON when it parses; `input` the last message's content for a chat prompt
    (the last message itself when its content is empty), the parsed value for other JSON, else the text;
    `output` the model's output before any transform ("" when there was none). Used while a run executes
    and again when a stored run's conversation is rebuilt (--resume, `show`)."""
    try:
        prompt: Any = json.loads(rendered_prompt)
    except (TypeError, ValueError):
        prompt = rendered_prompt
    if isinstance(prompt, list) and prompt:
        last = prompt[-1]
        content = last.get("content") if isinstance(last, dict) else None
        turn_input = content if content else last
    elif isinstance(prompt, list):
        turn_input = prompt
    else:
        turn_input = prompt
    return {"prompt": prompt, "input": turn_input, "output": "" if raw_output is None else raw_output,
            "metadata": dict(metadata or {})}


def conversation_of(rec: dict) -> dict | None:
    """A stored row's place in a conversation (`{"id", "turn", ...}`), or None."""
    extra = loads(rec.get("extra_json"), {}) or {}
    place = extra.get("conversation")
    return place if isinstance(place, dict) else None


# ---------------------------------------------------------------- columns and metrics


def column_record(col, scrub: Scrubber) -> dict:
    return {"prompt_idx": col.index, "provider_idx": col.provider_idx, "provider_id": scrub.text(col.provider.id),
            "provider_label": scrub.text(col.provider.label), "prompt_label": scrub.text(col.prompt.label),
            "prompt_raw": scrub.text(col.prompt.raw), "prompt_id": col.prompt.id}


def columns_from_records(rows: list[dict]):
    from factcli.config.plan import Column

    return [Column(index=c["prompt_idx"], provider=ProviderSpec(id=c["provider_id"], label=c["provider_label"]),
                   provider_idx=c["provider_idx"],
                   prompt=Prompt(raw=c["prompt_raw"] or "", label=c["prompt_label"] or "", id=c["prompt_id"] or ""))
            for c in rows]


def metrics_to_json(m, scrub=None) -> str:
    """A column's metrics as stored; `scrub` (the run's store/redact.Scrubber) over the critical tests'
    descriptions, as over every row's."""
    from factcli.store.encode import finite

    d = dataclasses.asdict(m)
    if scrub is not None and d.get("critical"):
        d["critical"] = [[i, scrub.text(desc) if isinstance(desc, str) else desc, *rest]
                         for i, desc, *rest in d["critical"]]
    return json.dumps(finite(d), ensure_ascii=False, default=str)


def metrics_from_json(text: str | None):
    from factcli.scoring.metrics import ColumnMetrics

    d = loads(text)
    if not isinstance(d, dict):
        return None
    m = ColumnMetrics()
    for f in dataclasses.fields(ColumnMetrics):
        if f.name not in d:
            continue
        value = d[f.name]
        if f.name in ("tokens", "grader_tokens"):
            value = TokenUsage(**{k: v for k, v in (value or {}).items()
                                  if k in ("prompt", "completion", "total", "cached", "num_requests", "reasoning",
                                           "cache_write")})
        setattr(m, f.name, value)
    return m


# ---------------------------------------------------------------- a run's rows, in memory or in the store
# A stored run does not hold its finished rows in memory (a large run's rows would not fit in the
# memory budget: benchmarks/memory.py): whatever reads every row afterwards (the results table, -o files, calibrate's report)
# reads them through one of these two sources, in the same order and with the same interface.

ROW_ORDER = "test_idx, prompt_idx, seq"  # a test's columns together; repeats of a cell in finishing order


@dataclasses.dataclass(slots=True)
class RowFacts:
    """What a results file's header needs from every row, read before the rows themselves."""

    seen_vars: dict = dataclasses.field(default_factory=dict)  # as an ordered set: first seen, in ROW_ORDER
    named_scores: set = dataclasses.field(default_factory=set)
    has_description: bool = False

    def add(self, variables: dict, named_scores: dict, description: str | None) -> None:
        self.seen_vars.update(dict.fromkeys(variables))
        self.named_scores.update(named_scores)
        self.has_description = self.has_description or bool(description)

    @property
    def var_names(self) -> list[str]:
        return list(self.seen_vars)


def _row_order(r: EvalResult) -> tuple[int, int]:
    return r.step.test_idx, r.step.prompt_idx


class MemoryRows:
    """Rows held in memory (a run that is not stored, or one built by hand)."""

    def __init__(self, rows: list[EvalResult]):
        self.rows = rows

    def __iter__(self):
        return iter(sorted(self.rows, key=_row_order))

    def first_tests(self, n: int) -> tuple[list[EvalResult], int]:
        """The rows of the first `n` tests (by index), and how many tests there are."""
        tests = sorted({r.step.test_idx for r in self.rows})
        shown = set(tests[:n])
        return [r for r in self if r.step.test_idx in shown], len(tests)

    def facts(self) -> RowFacts:
        facts = RowFacts()
        for r in self:
            facts.add(r.step.vars, r.named_scores, r.step.test.description)
        return facts


class StoredRows:
    """The rows of a run as the store has them, read back one at a time (each read opens its own
    connection, so it works after the writer closed its own). `target`: the store's `target` (a path,
    or a URL with its password: never shown). `flush`: commits the rows the writer still holds in its
    group (an afterAll hook reads the rows while the run is going on)."""

    def __init__(self, target, run_id: str, columns: list, flush=None):
        self.target, self.run_id, self.columns, self.flush = target, run_id, columns, flush

    def _commit_pending(self) -> None:
        if self.flush is not None:
            self.flush()

    def __iter__(self):
        self._commit_pending()
        store = Store.open(self.target)
        try:
            for rec in store.results(self.run_id, order=ROW_ORDER):
                yield from_record(rec, self.columns)
        finally:
            store.close()

    def first_tests(self, n: int) -> tuple[list[EvalResult], int]:
        self._commit_pending()
        with Store.open(self.target) as store:
            total = store.execute("SELECT COUNT(DISTINCT test_idx) FROM results WHERE run_id = ?",
                                       (self.run_id,)).fetchone()[0]
            shown = [r[0] for r in store.execute(
                "SELECT DISTINCT test_idx FROM results WHERE run_id = ? ORDER BY test_idx LIMIT ?", (self.run_id, n))]
            if not shown:
                return [], total
            marks = ",".join("?" * len(shown))
            rows = [from_record(rec, self.columns)
                    for rec in store.results(self.run_id, f"test_idx IN ({marks})", shown, order=ROW_ORDER)]
        return rows, total

    def facts(self) -> RowFacts:
        facts = RowFacts()
        self._commit_pending()
        with Store.open(self.target) as store:
            for rec in store.results(self.run_id, order=ROW_ORDER,
                                     fields="vars_json, named_scores_json, description"):
                facts.add(loads(rec["vars_json"], {}) or {}, loads(rec["named_scores_json"], {}) or {},
                          rec["description"])
        return facts
