"""`pytest --factcli-config FILE`: a config's rows as pytest items, imported only when the option is given.

The config is loaded and checked (preflight) at collection, without a call; each planned row becomes
an item named `description [column]`. The first item that runs executes every row still selected
(after -k / -m) at once, concurrently, as one run stored like `factcli eval` stores it; each item
then reports its own row: a failure's message is the verdict (score, threshold, the grader's
reason, unsupported claims), an ERROR row's is its error.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from factcli.errors import FactcliError
from factcli.run.api import Evaluation, parse_options, run_sync


class RowFailed(Exception):
    """A row that did not pass: its message is the whole report, shown without a traceback."""


def collect(session, paths: list[str], grader: str | None) -> list:
    items = []
    for path in paths:
        options = parse_options(None, {"grader": grader} if grader else {})
        try:
            evaluation = Evaluation([path], options)
        except FactcliError as exc:
            lines = [str(exc), *(f"  - {p}" for p in getattr(exc, "problems", ()))]
            raise pytest.UsageError(f"--factcli-config {path}: " + "\n".join(lines)) from None
        config_file = ConfigFile.from_parent(session, path=Path(path).resolve())
        config_file.evaluation = evaluation
        items.extend(config_file.collect())
    return items


def _column_name(col, several_prompts: bool) -> str:
    name = col.provider.display
    if several_prompts:
        label = " ".join(col.prompt.label.split())
        name += f" · {label if len(label) <= 40 else label[:39] + '…'}"
    return name


class ConfigFile(pytest.File):
    evaluation: Evaluation
    _items: list | None = None
    _results: dict | None = None
    _error: str | None = None

    def collect(self):
        if self._items is not None:
            return self._items
        run = self.evaluation.run
        several = len({c.prompt.label for c in run.columns}) > 1
        repeat = run.repeat > 1
        seen: dict[str, int] = {}
        self._items = []
        for step in self.evaluation.steps:
            desc = step.test.description or f"test {step.test_idx}"
            name = f"{desc} [{_column_name(run.columns[step.prompt_idx], several)}]"
            if repeat:
                name += f" (repeat {step.repeat_idx + 1})"
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:
                name += f" ({seen[name]})"
            self._items.append(RowItem.from_parent(self, name=name,
                                                   key=(step.test_idx, step.prompt_idx, step.repeat_idx)))
        return self._items

    def result_of(self, item: RowItem):
        """The item's row; the first call runs every row still selected."""
        if self._results is None and self._error is None:
            self._run()
        if self._error is not None:
            raise RowFailed(self._error)
        return self._results.get(item.key)

    def _run(self) -> None:
        selected = {i.key for i in self.session.items if isinstance(i, RowItem) and i.parent is self}
        self.evaluation.keep_only(selected)
        try:
            run = run_sync(self.evaluation.execute)
        except FactcliError as exc:
            self._error = str(exc)
            return
        self._results = {(r.step.test_idx, r.step.prompt_idx, r.step.repeat_idx): r for r in run.rows}
        notes = self.config.__dict__.setdefault("_factcli_notes", [])
        where = f"stored as {run.run_id} (factcli view {run.run_id})" if run.stored else "not stored"
        notes.append(f"factcli: {self.path.name}: {run.successes} passed, {run.failures} failed, "
                     f"{run.errors} errors; {where}")


class RowItem(pytest.Item):
    def __init__(self, *, key: tuple[int, int, int], **kwargs):
        super().__init__(**kwargs)
        self.key = key

    def runtest(self) -> None:
        row = self.parent.result_of(self)
        if row is None:
            raise RowFailed("this row did not run (the run stopped before it; see the warnings)")
        if not row.success:
            raise RowFailed(_report(row))

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, RowFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, f"{self.path.name}::{self.name}"


def _report(row) -> str:
    from factcli.report.rows import output_text, status_of
    from factcli.run.check import explain

    if status_of(row) == "ERROR" or row.grading is None:
        head, body = f"ERROR: {row.error}", []
    else:
        first, *body = explain(row.grading, row.step.test.threshold).splitlines()
        head = f"FAIL: {first.removeprefix('failed: ')}"
    text = output_text(row)
    text = text if len(text) <= 300 else text[:299] + "…"
    return "\n".join([head, *body, f"output: {text}"])
