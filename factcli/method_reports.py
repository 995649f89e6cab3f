"""Per-column reports of the claim-level methods, as their papers ask results to be reported.

A method registers a `summarize(metadatas) -> dict | None` and a `describe(summary) -> str`; the
runner computes the reports once all rows are in (and again for a stored run being re-rendered),
they are stored with the column metrics, written to the results JSON (`factcli.columns[i].methods`)
and shown as one line per column by the summary and by `view`. The line is stored next to the
numbers so that showing a stored run needs no method code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from factcli.types import GradingResult


@dataclass(frozen=True)
class MethodReport:
    key: str  # the key under `methods`, e.g. "factscore"
    method: str  # the `metadata.method` of the grading results it reads
    summarize: Callable[[list[dict]], dict | None]
    describe: Callable[[dict], str]


_REPORTS: dict[str, MethodReport] = {}


def register(key: str, method: str, summarize: Callable[[list[dict]], dict | None],
             describe: Callable[[dict], str]) -> None:
    _REPORTS[key] = MethodReport(key, method, summarize, describe)


def _metadatas(grading: GradingResult | None, method: str, out: list[dict]) -> None:
    if grading is None:
        return
    if grading.metadata.get("method") == method:
        out.append(grading.metadata)
    for child in grading.component_results:
        if child is not grading:
            _metadatas(child, method, out)


def column_reports(rows: Iterable[Any]) -> dict:
    """{key: {"summary": {...}, "line": "..."}} for every registered method found in `rows`
    (EvalResults of one column); methods with no result in the column are left out."""
    rows = list(rows)
    reports = {}
    for report in _REPORTS.values():
        found: list[dict] = []
        for row in rows:
            _metadatas(getattr(row, "grading", None), report.method, found)
        if not found:
            continue
        summary = report.summarize(found)
        if summary is not None:
            reports[report.key] = {"summary": summary, "line": report.describe(summary)}
    return reports


def fill(run) -> None:
    """Compute every column's reports of `run` (an EvalRun) into its metrics."""
    by_column: dict[int, list] = {}
    for row in run.rows:
        by_column.setdefault(row.step.prompt_idx, []).append(row)
    for idx, metrics in enumerate(run.metrics):
        metrics.methods = column_reports(by_column.get(idx, []))
