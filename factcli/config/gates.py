"""Release gates (factcli's own): the top-level `gates:` list of a config and `--gate` on the command line.

A gate names a figure of each column of the run and a bound it must keep:

    gates:
      - {metric: faithfulness, min: 0.85}              # a named metric's mean over the rows judged
      - {metric: pass-rate, min: 0.9, bound: lower}    # the lower end of the pass rate's 95% interval
      - {metric: latency, max: 2000}                   # mean latency per row, ms
      - {metric: cost, max: 0.01}                      # mean cost per row (model and grader calls), USD
      - {metric: errors, max: 2}                       # ERROR rows not the judge's (default: none)
      - {metric: recall, min: 0.9, min_judged: 0.9}    # held when at least 90% of its rows were judged

    factcli eval --gate 'faithfulness>=0.85' --gate 'pass-rate[lower]>=0.9' --gate 'latency<=2000'

`min` passes at the value itself and above (0.8 >= 0.8 passes: the figure is compared as computed,
not as printed), `max` at the value and below. `bound` (default `mean`) is `lower` or `upper` to hold
the 95% interval's end to the bound instead of the mean (pass-rate, score and named metrics).
`min_judged` (default 1: every row) is the share of the figure's rows that must have been judged for
the gate to be held at all; under it the gate is "not judged" (exit 4), neither passed nor failed.
A bound outside the figure's range (a pass rate, or a metric that only 0-to-1 scores name) is refused
before any call. run/recording/gates.py checks them once the run has finished; a gate that fails makes exit 100
and is named with its margin.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from factcli.config import keys
from factcli.config.context import check_keys, expect, percent_hint, unit_range
from factcli.errors import ConfigError

# figures of a column that are not named metrics
PASS_RATE, SCORE, COST, LATENCY, ERRORS = "pass-rate", "score", "cost", "latency", "errors"
BUILT_IN = (PASS_RATE, SCORE, COST, LATENCY, ERRORS)
BOUNDS = ("mean", "lower", "upper")
_KEYS = keys.names("gate")


@dataclass(frozen=True)
class Gate:
    """One gate: a figure of each column (`metric`), its bound (`limit`, a min when `at_least`), the end
    of the figure's interval it holds (`bound`), and where it was written."""

    metric: str
    limit: float
    at_least: bool  # min (>=) or max (<=)
    bound: str = "mean"
    source: str = ""  # where it was written: `gates[0]` of a file, or `--gate 'x>=1'`
    min_judged: float = 1.0  # the share of the figure's rows that must be judged for it to be held
    file: str = ""  # the config file it was written in ("" on the command line)

    def __str__(self) -> str:
        name = self.metric if self.bound == "mean" else f"{self.metric}[{self.bound}]"
        return f"{name} {'>=' if self.at_least else '<='} {_num(self.limit)}"


def _num(x: float) -> str:
    return f"{x:g}"


def _check(metric: str, limit, bound: str, at_least: bool, file: str, where: str, min_judged=1.0) -> Gate:
    key = where + (".min" if at_least else ".max")
    expect(isinstance(metric, str) and metric.strip() != "", "a gate needs a metric name (a named metric, "
           "pass-rate, score, cost, latency or errors)", file, where + ".metric")
    expect(isinstance(limit, (int, float)) and not isinstance(limit, bool) and math.isfinite(limit),
           f"expected a number, got {limit!r}{percent_hint(limit)}", file, key)
    expect(bound in BOUNDS, f"expected one of {', '.join(BOUNDS)}, got {bound!r}", file, where + ".bound")
    metric = metric.strip()
    if bound != "mean":
        expect(metric not in (COST, LATENCY, ERRORS), f"{metric} has no interval: its gate takes bound: mean",
               file, where + ".bound")
    if metric == PASS_RATE:
        unit_range(limit, file, key, "a pass rate")
    if metric == ERRORS:
        expect(not at_least and limit >= 0 and limit == int(limit), "an errors gate is a most, in rows "
               "(errors<=2, or max: 2)", file, key)
    expect(isinstance(min_judged, (int, float)) and not isinstance(min_judged, bool) and 0 <= min_judged <= 1,
           f"expected the share of rows that must be judged, between 0 and 1 (0.9 for 90%), got "
           f"{min_judged!r}{percent_hint(min_judged)}", file, where + ".min_judged")
    return Gate(metric, float(limit), at_least, bound, where, float(min_judged), file)


def parse_gates(value, file: str) -> list[Gate]:
    """The config's `gates:` list."""
    if value is None:
        return []
    expect(isinstance(value, list), "expected a list of {metric, min | max, bound}", file, "gates")
    out = []
    for i, g in enumerate(value):
        where = f"gates[{i}]"
        expect(isinstance(g, dict), "expected {metric, min | max, bound}", file, where)
        check_keys(g, _KEYS, file, where)
        has_min, has_max = "min" in g, "max" in g
        expect(has_min != has_max, "a gate takes one of min or max", file, where)
        out.append(_check(g.get("metric"), g["min"] if has_min else g["max"], g.get("bound", "mean"), has_min,
                          file, where, g.get("min_judged", 1.0)))
    return out


_CLI = re.compile(r"^\s*(?P<metric>[^\[<>=]+?)\s*(?:\[\s*(?P<bound>\w+)\s*\])?\s*(?P<op>>=|<=)\s*"
                  r"(?P<value>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(?P<pct>%)?\s*$")


def parse_cli_gate(text: str) -> Gate:
    """`--gate 'faithfulness>=0.85'`, `'pass-rate[lower]>=90%'`, `'latency<=2000'`."""
    m = _CLI.match(text or "")
    where = f"--gate {text!r}"
    if m is None:
        raise ConfigError(f"{where}: expected METRIC>=X or METRIC<=X (a bound as METRIC[lower]>=X), "
                          "e.g. --gate 'faithfulness>=0.85'")
    value = float(m["value"]) / (100 if m["pct"] else 1)
    return _check(m["metric"], value, (m["bound"] or "mean").lower(), m["op"] == ">=", "", where)


def check_metrics(gates: list[Gate], named, templated: bool, unit: set[str] = frozenset()) -> None:
    """A gate on a metric no assertion of the config names is refused before any call (a typo would
    otherwise pass every release: a gate with nothing to check). `templated`: some metric name is a
    template, known only per row; the check is then left to the end of the run. `unit`: the metrics
    only 0-to-1 scores name (scoring/registry's `unit_score`): a bound outside that range is refused."""
    for g in gates:
        if g.metric in unit:
            unit_range(g.limit, g.file, g.source + (".min" if g.at_least else ".max") if g.file else g.source,
                       f"{g.metric} (a score)")
    if templated:
        return
    for g in gates:
        if g.metric in BUILT_IN or g.metric in named:
            continue
        import difflib

        close = difflib.get_close_matches(g.metric, [*BUILT_IN, *sorted(named)], n=1)
        hint = f" (did you mean {close[0]}?)" if close else (
            f" (the metrics of this config: {', '.join(sorted(named))})" if named else
            " (no assertion of this config has a `metric:`)")
        raise ConfigError(f"{g.source}: no assertion names the metric {g.metric!r}{hint}; a gate takes a named "
                          "metric, pass-rate, score, cost, latency or errors")


# ---------------------------------------------------------------- verdicts (run/recording/gates.py computes them)

NO_METRIC = "no row of this column has the metric"
CRITICAL = "critical"  # the gate a failed `critical: true` test fails
IMPLICIT_ERRORS = Gate(ERRORS, 0.0, False, source="provider errors (no errors gate allows them)")
CRITICAL_GATE = Gate(CRITICAL, 0.0, False, source="tests with critical: true")


@dataclass
class GateResult:
    """A gate against one column: the figure read, passed or not (None: unknown), and a note."""

    gate: Gate
    column: str  # the column's label, "" when the run has one column
    value: float | None  # the figure read (None: nothing to read)
    passed: bool | None  # None: not judged (too few of its rows were judged to hold it)
    note: str = ""
    judged: tuple[int, int] | None = None  # (rows judged, rows) of the figure, when some were not judged

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
        if g.metric == CRITICAL:
            if self.passed is None:
                return f"gate critical tests{where} not judged: {self.note}"
            return (f"gate critical tests{where} {'passed' if self.passed else 'FAILED'}"
                    + (f": {self.note}" if self.note else ""))
        if self.passed is None:
            judged = f"{self.judged[0]} of {self.judged[1]} rows judged" if self.judged else "no row judged"
            need = f"{g.min_judged:.0%}" if g.min_judged < 1 else "every row"
            figure = "" if self.value is None else f" ({what} {_fmt(g.metric, self.value)} over them)"
            return (f"gate {g}{where} not judged: {what} has {judged}{figure}; the gate needs {need} judged "
                    "(min_judged)")
        if self.value is None:
            return f"gate {g}{where} FAILED: {what} has no value ({self.note or NO_METRIC})"
        if g == IMPLICIT_ERRORS:
            return (f"gate errors <= 0{where} FAILED: {int(self.value)} row{'s' if self.value != 1 else ''} ended in "
                    "an error (a provider's, or an assertion that could not run); a gated run fails on them unless "
                    "a gate allows some (errors<=N)")
        verb = "passed" if self.passed else "FAILED"
        side = ("≥" if self.passed else "<") if g.at_least else ("≤" if self.passed else ">")
        by = abs(self.margin or 0.0)
        return (f"gate {g}{where} {verb}: {what} {_fmt(g.metric, self.value)} {side} {_fmt(g.metric, g.limit)} "
                f"({'by' if self.passed else 'short by' if g.at_least else 'over by'} {_fmt(g.metric, by)})"
                + (f"; {self.note}" if self.note else ""))

    def to_json(self) -> dict:
        return {"gate": str(self.gate), "metric": self.gate.metric, "bound": self.gate.bound,
                ("min" if self.gate.at_least else "max"): self.gate.limit, "column": self.column,
                "value": self.value, "passed": self.passed, "margin": self.margin, "note": self.note or None,
                "minJudged": self.gate.min_judged,
                "judged": list(self.judged) if self.judged else None,
                "notJudged": self.passed is None, "source": self.gate.source}

    @classmethod
    def from_json(cls, d: dict) -> "GateResult":
        """A verdict as a finished run stored it (to_json), for export, show and view of the run."""
        at_least = "min" in d
        gate = Gate(d["metric"], float(d["min" if at_least else "max"]), at_least, d.get("bound") or "mean",
                    d.get("source") or "", float(d.get("minJudged", 1.0)))
        judged = d.get("judged")
        return cls(gate, d.get("column") or "", d.get("value"), d.get("passed"), d.get("note") or "",
                   tuple(judged) if judged else None)


def stored(text: str | None) -> list[GateResult]:
    """The verdicts a run stored (runs.gates_json); none when it has none or they cannot be read."""
    import json

    try:
        return [GateResult.from_json(d) for d in json.loads(text or "[]")]
    except (ValueError, TypeError, KeyError):
        return []


def _fmt(metric: str, x: float) -> str:
    if metric == PASS_RATE:
        return f"{x * 100:.2f}%"
    if metric == COST:
        return f"${x:.6f}"
    if metric == LATENCY:
        return f"{x:.0f} ms"
    if metric == ERRORS:
        return f"{x:.0f}"
    return f"{x:.4f}".rstrip("0").rstrip(".") if x != int(x) else f"{x:.0f}"
