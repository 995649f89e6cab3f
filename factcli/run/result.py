"""The run the Python API returns: the EvalRun with every row in memory, read as a notebook or a
script wants it: `rows`, `column_summaries` (each column's figures with their 95% intervals), `to_promptfoo()`
(the results JSON), `to_pandas()` and the HTML report's pieces for a notebook (`_repr_html_`).

Anything else is the EvalRun's (`run.suite`, `run.metrics`, ...), so the report functions that take
an EvalRun take a Run too.
"""

from __future__ import annotations

from typing import Any


class Run:
    def __init__(self, run, stored: bool = False):
        self._run = run
        self.stored = stored  # `factcli view RUN_ID` shows it

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_run":  # copy/pickle probe these before __init__ ran
            raise AttributeError(name)
        return getattr(self._run, name)

    @property
    def rows(self) -> list:
        """Every row (EvalResult), in (test, column, repeat) order."""
        return self._run.sorted_rows()

    @property
    def column_summaries(self) -> list[dict]:
        """One dict per column (prompt x provider): counts, pass rate and mean score, each with its
        95% interval, and the named metrics' means with their judged counts, as `factcli.columns` of the
        results JSON has them."""
        from factcli import stats

        stats.fill(self._run)
        out = []
        for col, m in zip(self._run.columns, self._run.metrics):
            s = m.stats or {}
            out.append({
                "provider": col.provider.display, "prompt": col.prompt.label,
                "pass": m.test_pass, "fail": m.test_fail, "error": m.test_error, "notJudged": m.test_unjudged,
                "passRate": s.get("passRate"), "passRateCi95": s.get("passRateCi95"),
                "scoreMean": s.get("scoreMean"), "scoreCi95": s.get("scoreCi95"),
                # each named metric's mean over the rows judged on it, as the CLI shows it (promptfoo's sums
                # are `to_promptfoo()`'s), with (rows judged, rows that have it)
                "namedScores": m.named_means(),
                "namedJudged": {k: list(m.judged_of(k)) for k in m.named_scores if k in m.named_rows},
                "cost": m.cost, "graderCost": m.grader_cost,
                **{k: v for k, v in s.items() if k.startswith(("passAt", "passHat", "repeat"))},
            })
        return out

    def to_promptfoo(self) -> dict:
        """The results JSON (promptfoo's layout plus `factcli`), as a dict."""
        from factcli.report.results_json import to_promptfoo_json

        return to_promptfoo_json(self._run)

    def to_records(self) -> list[dict]:
        """One flat dict per row: test, column, vars, output, pass, score, reason, cost, latency."""
        from factcli.report.rows import output_text, status_of

        records = []
        for r in self.rows:
            col = self._run.columns[r.step.prompt_idx]
            record = {"test": r.step.test_idx, "description": r.step.test.description,
                      "provider": col.provider.display, "prompt": col.prompt.label, "repeat": r.step.repeat_idx}
            record.update({f"var_{k}" if k in record else k: v for k, v in r.step.vars.items()})
            record.update({"output": output_text(r), "status": status_of(r), "pass": r.success, "score": r.score,
                           "reason": r.error or (r.grading.reason if r.grading else None),
                           "cost": r.response.cost, "latency_ms": r.latency_ms, **dict(r.named_scores)})
            records.append(record)
        return records

    def to_pandas(self):
        """The rows as a pandas DataFrame (one row per test x column x repeat); needs pandas."""
        try:
            import pandas
        except ImportError:
            raise ImportError("Run.to_pandas() needs pandas, which factcli does not install: pip install pandas "
                              "(Run.to_records() gives the same rows as a list of dicts)") from None
        return pandas.DataFrame(self.to_records())

    def _repr_html_(self) -> str:
        from factcli.report.html_page import fragment, style_tag

        return f'{style_tag()}<div class="fc">{fragment(self._run)}</div>'

    def __repr__(self) -> str:
        rate = self._run.pass_rate
        shown = "n/a" if rate is None else f"{rate * 100:.1f}%"
        where = " (stored)" if self.stored else ""
        return (f"<factcli Run {self._run.run_id} {self._run.status}{where}: {self._run.successes} passed, "
                f"{self._run.failures} failed, {self._run.errors} errors"
                + (f" ({self._run.unjudged} not judged)" if self._run.unjudged else "") + f", pass rate {shown}>")
