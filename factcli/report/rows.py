"""A result row's plain facts as every report prints them: its status word, its output and vars as
text, and the rows of a run grouped by test. Shared by the export formats and the HTML page."""

from __future__ import annotations

import json
from collections.abc import Iterator

from factcli.types import FAILURE_ERROR, EvalResult


def status_of(r: EvalResult) -> str:
    if r.success:
        return "PASS"
    return "ERROR" if r.failure_reason == FAILURE_ERROR else "FAIL"


def output_text(r: EvalResult) -> str:
    out = r.response.output
    if out is None:
        return ""
    return out if isinstance(out, str) else json.dumps(out, ensure_ascii=False)


def by_test(run) -> Iterator[tuple[int, dict[int, EvalResult]]]:
    """(test index, {column: row}) for each test in order, read as the rows stream in (they come in
    test order)."""
    test_idx, cells = None, {}
    for r in run.all_rows():
        if r.step.test_idx != test_idx:
            if cells:
                yield test_idx, cells
            test_idx, cells = r.step.test_idx, {}
        cells[r.step.prompt_idx] = r
    if cells:
        yield test_idx, cells


def var_text(value) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def claim_supported(item: dict) -> bool:
    """A claim or fact of any claim-level method, supported or not: factscore marks a fact
    `supported`, FACTS Grounding a claim `grounded`, factual-correctness gives the verdict SUPPORTED."""
    if isinstance(item.get("supported"), bool):
        return item["supported"]
    if isinstance(item.get("grounded"), bool):
        return item["grounded"]
    return str(item.get("verdict") or "").upper() == "SUPPORTED"


_SIDES = ("response", "reference")


def claim_side(item: dict) -> str | None:
    """Where a factual-correctness claim comes from and what it was checked against, in the words
    `show`, the HTML export and `check().explain()` all use: `from the response, checked against the
    reference`; None for a claim without sides (the other methods: their evidence is a text)."""
    side, against = item.get("side"), item.get("evidence")
    if side in _SIDES and against in _SIDES:
        return f"from the {side}, checked against the {against}"
    return None


def claim_irrelevant(item: dict) -> bool:
    """A fact `safe` found irrelevant to the prompt: neither supported nor not, and never searched."""
    return item.get("verdict") == "irrelevant"
