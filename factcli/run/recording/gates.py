"""The release gates of a finished run (config/gates.py says what a gate is): each gate against each
column of the run, with the figure it read and its margin.

Each figure is read over the assertions that were judged (scoring/outcome.py: an errored assertion
never counts as 0), and a gate is held only when enough of its figure's rows were judged (the gate's
`min_judged`, default every row): under it the gate is "not judged", neither passed nor failed, and
the run ends with exit 4 (contract §2). A metric no row has fails (a gate with nothing to check). A
cost gate on a column with rows of unknown price fails: the sum is only a floor.

Two gates are added to a gated run's own: ERROR rows the judge had no part in (a provider error, an
assertion that could not run) fail it unless an `errors` gate
allows them (`errors<=N`), and a failed test marked `critical: true` fails it whatever the means
(also without `gates:`).
"""

from __future__ import annotations

from factcli.config.gates import (  # noqa: F401  (GateResult: the verdicts, said and stored, live with the gates)
    COST, CRITICAL, CRITICAL_GATE, ERRORS, IMPLICIT_ERRORS, LATENCY, NO_METRIC, PASS_RATE, SCORE, Gate, GateResult,
    check_metrics, stored)
from factcli.types import walk


def check_before_run(gates: list[Gate], suite) -> None:
    """A gate on a metric no assertion names is a config error before any call."""
    if not gates:
        return
    from factcli import templating
    from factcli.scoring.registry import TYPES

    named, templated = set(), False
    unit, other = set(), set()  # metrics a 0-to-1 score names, and those something else names
    for test in suite.tests:
        for a in walk(test.assertions):
            facts = TYPES.get(a.base_type)
            if a.metric:
                if templating.has_template(a.metric):
                    templated = True
                named.add(a.metric)
                (unit if facts is not None and facts.unit_score and not a.children else other).add(a.metric)
            if (facts is not None and facts.user_code) or a.base_type.startswith("file"):
                templated = True  # a script may return namedScores of its own
        if templated:  # names known only per row: neither check can be made now (nor read every test for it)
            break
    derived = {d.get("name") for d in suite.derived_metrics or () if isinstance(d, dict)}
    named.update(derived)
    check_metrics(gates, named, templated, set() if templated else unit - other - derived)


def evaluate(run, gates: list[Gate]) -> list[GateResult]:
    """Every gate against every column of `run` (statistics filled: EvalRun.finalize, stats.fill), then
    the implicit ones: provider errors (when `run` has gates and none is on errors) and critical tests."""
    critical = _critical_rows(run)
    if not gates and not critical:
        return []
    from factcli import stats
    from factcli.report.labels import column_label_of

    stats.fill(run)
    derived = {d.get("name") for d in run.suite.derived_metrics or () if isinstance(d, dict)}
    several = len(run.columns) > 1
    one_prompt = len({(c.prompt.label, c.prompt.raw) for c in run.columns}) == 1  # name columns by provider
    per_row = _row_values(run, {g.metric for g in gates if g.bound != "mean"
                                and g.metric not in (PASS_RATE, SCORE, COST, LATENCY, ERRORS)})
    errors_gated = any(g.metric == ERRORS for g in gates)
    out = []
    for col, m in zip(run.columns, run.metrics):
        label = "" if not several else (f"[{col.provider.display}]" if one_prompt
                                         else column_label_of(col.provider.display, col.prompt.label, col.prompt.raw))
        for g in gates:
            value, note = _figure(g, m, derived, per_row.get((col.index, g.metric)))
            judged, total = _coverage(g, m, derived)
            partial = (judged, total) if judged < total else None
            if total and judged < g.min_judged * total - 1e-9:
                out.append(GateResult(g, label, value, None, note, (judged, total)))
                continue
            if value is None:
                # a metric no row has fails (nothing to hold the release to); one no row was judged on
                # is not judged (above), and the rows not judged make the exit code 4
                out.append(GateResult(g, label, None, False if note == NO_METRIC else None, note, partial))
                continue
            passed = value >= g.limit if g.at_least else value <= g.limit
            if g.metric == COST and m.cost_unpriced + m.grader_unpriced:
                passed, note = False, "some calls have no known price: the cost is only a floor"
            out.append(GateResult(g, label, value, passed, note, partial))
        errors = m.test_error - m.test_unjudged
        if gates and not errors_gated and errors:
            out.append(GateResult(IMPLICIT_ERRORS, label, float(errors), False))
        if critical.get(col.index):
            out.append(_critical_result(label, critical[col.index]))
    return out


def _coverage(g: Gate, m, derived: set) -> tuple[int, int]:
    """(rows judged, rows) of the figure a gate reads in one column."""
    if g.metric in (COST, LATENCY, ERRORS):
        return m.rows, m.rows
    if g.metric == PASS_RATE:
        return m.judged, m.rows
    if g.metric == SCORE or g.metric in derived:  # a derived metric reads every named metric's sums
        return m.scored, m.rows
    return m.judged_of(g.metric)


def _critical_rows(run) -> dict:
    """column -> [(test_idx, description, failed: True, or False for not judged)] of the rows of
    `critical: true` tests that did not pass (counted as rows finished: ColumnMetrics.critical)."""
    return {i: [tuple(x[:3]) for x in m.critical] for i, m in enumerate(run.metrics) if getattr(m, "critical", None)}


def _critical_result(label: str, rows: list) -> GateResult:
    failed = [x for x in rows if x[2]]
    shown = failed or rows
    names = ", ".join(f"test {i}" + (f" ({' '.join(str(d).split())[:80]})" if d else "") for i, d, _ in shown[:5]) \
        + (f" and {len(shown) - 5} more" if len(shown) > 5 else "")
    if failed:
        return GateResult(CRITICAL_GATE, label, float(len(failed)), False,
                          f"{len(failed)} critical test{'s' if len(failed) != 1 else ''} failed: {names} "
                          "(factcli show RUN TEST_IDX says why)")
    return GateResult(CRITICAL_GATE, label, None, None, f"{len(rows)} critical test{'s' if len(rows) != 1 else ''} "
                      f"could not be judged: {names}")


def _figure(g: Gate, m, derived: set, values: list | None) -> tuple[float | None, str]:
    st = m.stats or {}
    end = {"lower": 0, "upper": 1}.get(g.bound)
    if g.metric == ERRORS:
        return float(m.test_error - m.test_unjudged), ""
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
    from factcli.scoring.outcome import errored_metrics
    from factcli.scoring.scorer import render_metric

    for r in run.all_rows():
        mine = names & set(r.named_scores)
        if mine:
            mine -= errored_metrics(r.grading, lambda metric: render_metric(metric, r.step.vars))
        for name in mine:
            out.setdefault((r.step.prompt_idx, name), []).append(r.named_scores[name])
    return out
