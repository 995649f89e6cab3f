"""The release gates of a finished run (config/gates.py says what a gate is): each gate against each
column of the run, with the figure it read and its margin.

A figure that cannot be read fails nothing by itself: a metric no row was judged on (the judge was
down) leaves the gate unknown, and the run then ends with exit 4 if rows were not judged (contract
§2: "passed every threshold and gate on the rows that were judged"). A cost gate on a column with
rows of unknown price fails: the sum is only a floor.
"""

from __future__ import annotations

from dataclasses import dataclass

from factcli.config.gates import COST, LATENCY, PASS_RATE, SCORE, Gate, check_metrics


NO_METRIC = "no row of this column has the metric"


@dataclass
class GateResult:
    """A gate against one column: the figure read, passed or not (None: unknown), and a note."""

    gate: Gate
    column: str  # the column's label, "" when the run has one column
    value: float | None  # the figure read (None: nothing to read)
    passed: bool | None  # None: unknown (no row judged on it)
    note: str = ""

    @property
    def margin(self) -> float | None:
        """How far the figure is on the right side of the bound (negative: by how much it failed)."""
        if self.value is None:
            return None
        return round(self.value - self.gate.limit if self.gate.at_least else self.gate.limit - self.value, 12)

    def describe(self) -> str:
        g = self.gate
        where = f" ({self.column})" if self.column else ""
        what = g.metric if g.bound == "mean" else f"{g.metric} ({g.bound} end of its 95% interval)"
        if self.value is None:
            state = "FAILED" if self.passed is False else "unknown"
            return f"gate {g}{where} {state}: {what} has no value ({self.note or 'no row was judged on it'})"
        verb = "passed" if self.passed else "FAILED"
        side = ("≥" if self.passed else "<") if g.at_least else ("≤" if self.passed else ">")
        by = abs(self.margin or 0.0)
        return (f"gate {g}{where} {verb}: {what} {_fmt(g.metric, self.value)} {side} {_fmt(g.metric, g.limit)} "
                f"({'by' if self.passed else 'short by' if g.at_least else 'over by'} {_fmt(g.metric, by)})"
                + (f"; {self.note}" if self.note else ""))

    def to_json(self) -> dict:
        return {"gate": str(self.gate), "metric": self.gate.metric, "bound": self.gate.bound,
                ("min" if self.gate.at_least else "max"): self.gate.limit, "column": self.column,
                "value": self.value, "passed": self.passed, "margin": self.margin, "note": self.note or None}


def _fmt(metric: str, x: float) -> str:
    if metric == PASS_RATE:
        return f"{x * 100:.2f}%"
    if metric == COST:
        return f"${x:.6f}"
    if metric == LATENCY:
        return f"{x:.0f} ms"
    return f"{x:.4f}".rstrip("0").rstrip(".") if x != int(x) else f"{x:.0f}"


def check_before_run(gates: list[Gate], suite) -> None:
    """A gate on a metric no assertion names is a config error before any call."""
    if not gates:
        return
    from factcli import templating
    from factcli.scoring.registry import TYPES

    named, templated = set(), False
    stack = []
    for test in suite.tests:
        stack.extend(test.assertions)
        while stack:
            a = stack.pop()
            stack.extend(a.children or ())
            if a.metric:
                if templating.has_template(a.metric):
                    templated = True
                named.add(a.metric)
            facts = TYPES.get(a.base_type)
            if (facts is not None and facts.user_code) or a.base_type.startswith("file"):
                templated = True  # a script may return namedScores of its own
        if templated:
            break
    named.update(d.get("name") for d in suite.derived_metrics or () if isinstance(d, dict))
    check_metrics(gates, named, templated)


def evaluate(run, gates: list[Gate]) -> list[GateResult]:
    """Every gate against every column of `run` (statistics filled: EvalRun.finalize, stats.fill)."""
    if not gates:
        return []
    from factcli import stats
    from factcli.report.labels import column_label_of

    stats.fill(run)
    derived = {d.get("name") for d in run.suite.derived_metrics or () if isinstance(d, dict)}
    several = len(run.columns) > 1
    one_prompt = len({(c.prompt.label, c.prompt.raw) for c in run.columns}) == 1  # name columns by provider
    per_row = _row_values(run, {g.metric for g in gates if g.bound != "mean"
                                and g.metric not in (PASS_RATE, SCORE, COST, LATENCY)})
    out = []
    for col, m in zip(run.columns, run.metrics):
        label = "" if not several else (f"[{col.provider.display}]" if one_prompt
                                         else column_label_of(col.provider.display, col.prompt.label, col.prompt.raw))
        for g in gates:
            value, note = _figure(g, m, derived, per_row.get((col.index, g.metric)))
            if value is None:
                # a metric no row has fails (nothing to hold the release to); one no row was judged on
                # is unknown, and the rows not judged make the exit code 4
                out.append(GateResult(g, label, None, False if note == NO_METRIC else None, note))
                continue
            passed = value >= g.limit if g.at_least else value <= g.limit
            if g.metric == COST and m.cost_unpriced + m.grader_unpriced:
                passed, note = False, "some calls have no known price: the cost is only a floor"
            out.append(GateResult(g, label, value, passed, note))
    return out


def _figure(g: Gate, m, derived: set, values: list | None) -> tuple[float | None, str]:
    st = m.stats or {}
    end = {"lower": 0, "upper": 1}.get(g.bound)
    if g.metric == PASS_RATE:
        if end is None:
            return st.get("passRate"), ""
        ci = st.get("passRateCi95")
        return (ci[end] if ci else None), ""
    if g.metric == SCORE:
        if end is None:
            return st.get("scoreMean"), ""
        ci = st.get("scoreCi95")
        return (ci[end] if ci else None), ""
    if g.metric == LATENCY:
        return (m.total_latency_ms / m.rows if m.rows else None), ""
    if g.metric == COST:
        return ((m.cost + m.grader_cost) / m.rows if m.rows else None), ""
    if g.metric in derived:
        return m.named_scores.get(g.metric), ""
    if g.metric not in m.named_scores:
        return None, NO_METRIC if not m.named_unjudged.get(g.metric) else "no row was judged on it"
    if end is None:
        return m.named_means().get(g.metric), ""
    from factcli import stats

    interval = stats.bootstrap_mean(values or [])
    if interval is None:
        return None, "no row was judged on it"
    return (interval["low"], interval["high"])[end], ""


def _row_values(run, names: set) -> dict:
    """(column, metric) -> the metric's value on each row judged, for the gates on an interval's end."""
    out: dict = {}
    if not names:
        return out
    from factcli.types import FAILURE_GRADING

    for r in run.all_rows():
        if r.failure_reason == FAILURE_GRADING:
            continue
        for name in names & set(r.named_scores):
            out.setdefault((r.step.prompt_idx, name), []).append(r.named_scores[name])
    return out
