"""Per-column reports of the claim-level methods, as their papers ask results to be reported.

A method registers a `summarize(metadatas) -> dict | None` and a `describe(summary) -> str`; the
runner collects each row's metadata (of the gradings whose `metadata.method` is the method's, or
what the report's own `select(grading)` picks) as the row becomes final and computes the reports once all rows
are in (a stored run being re-rendered collects them from its rows),
they are stored with the column metrics, written to the results JSON (`factcli.columns[i].methods`)
and shown as one line per column by the summary and by `view`. The line is stored next to the
numbers so that showing a stored run needs no method code.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from factcli.types import GradingResult


class MethodReport(NamedTuple):
    """A method's report, as registered. A named tuple rather than a frozen dataclass: its class is made
    faster, on the start of every eval (issue 30)."""

    key: str  # the key under `methods`, e.g. "factscore"
    method: str  # the `metadata.method` of the grading results it reads
    summarize: Callable[[list[dict]], dict | None]
    describe: Callable[[dict], str]
    select: Callable[[GradingResult], dict | None] | None = None  # a report that reads other methods' rows too
    # a report whose figures depend on the other columns (VeriScore's K is set per domain from every compared
    # model's responses): across(every column's metadatas) -> what summarize gets as its second argument
    across: Callable[[list[list[dict]]], Any] | None = None


_REPORTS: dict[str, MethodReport] = {}


def register(key: str, method: str, summarize: Callable[..., dict | None],
             describe: Callable[[dict], str], select: Callable[[GradingResult], dict | None] | None = None,
             across: Callable[[list[list[dict]]], Any] | None = None) -> None:
    _REPORTS[key] = MethodReport(key, method, summarize, describe, select, across)


def _metadatas(grading: GradingResult | None, report: MethodReport, out: list[dict]) -> None:
    if grading is None:
        return
    if report.select is not None:
        item = report.select(grading)
        if item is not None:
            out.append(item)
    elif grading.metadata.get("method") == report.method:
        out.append(grading.metadata)
    for child in grading.component_results:
        if child is not grading:
            _metadatas(child, report, out)


class ColumnMethods:
    """The metadata of one column's method gradings, collected row by row as rows become final
    (only rows graded by a method with a report add anything)."""

    __slots__ = ("found",)

    def __init__(self) -> None:
        self.found: dict[str, list[dict]] = {}

    def add(self, row: Any) -> None:
        grading = getattr(row, "grading", None)
        if grading is None:
            return
        for report in _REPORTS.values():
            _metadatas(grading, report, self.found.setdefault(report.key, []))

    def reports(self, shared: dict | None = None) -> dict:
        """{key: {"summary": {...}, "line": "..."}} for every registered method found; methods with
        no result in the column are left out. `shared`: what each cross-column report's `across` found."""
        out = {}
        for report in _REPORTS.values():
            found = self.found.get(report.key)
            if not found:
                continue
            if report.across is not None and shared is not None and report.key in shared:
                summary = report.summarize(found, shared[report.key])
            else:
                summary = report.summarize(found)
            if summary is not None:
                out[report.key] = {"summary": summary, "line": report.describe(summary)}
        return out


def reports_of(columns: list[ColumnMethods]) -> list[dict]:
    """Every column's reports, the cross-column ones computed over all the columns first."""
    shared = {}
    for report in _REPORTS.values():
        if report.across is not None:
            lists = [c.found.get(report.key) or [] for c in columns]
            if any(lists):
                shared[report.key] = report.across(lists)
    return [c.reports(shared) for c in columns]


def fill(run) -> None:
    """Compute every column's reports of a stored run (an EvalRun) from its rows into its metrics."""
    by_column = [ColumnMethods() for _ in run.metrics]
    for row in run.all_rows():
        by_column[row.step.prompt_idx].add(row)
    for metrics, methods in zip(run.metrics, reports_of(by_column)):
        metrics.methods = methods
