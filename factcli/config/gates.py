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
before any call. run/gates.py checks them once the run has finished; a gate that fails makes exit 100
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
