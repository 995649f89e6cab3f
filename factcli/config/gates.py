"""Release gates (factcli's own): the top-level `gates:` list of a config and `--gate` on the command line.

A gate names a figure of each column of the run and a bound it must keep:

    gates:
      - {metric: faithfulness, min: 0.85}              # a named metric's mean over the rows judged
      - {metric: pass-rate, min: 0.9, bound: lower}    # the lower end of the pass rate's 95% interval
      - {metric: latency, max: 2000}                   # mean latency per row, ms
      - {metric: cost, max: 0.01}                      # mean cost per row (model and grader calls), USD

    factcli eval --gate 'faithfulness>=0.85' --gate 'pass-rate[lower]>=0.9' --gate 'latency<=2000'

`min` passes at the value itself and above, `max` at the value and below. `bound` (default `mean`)
is `lower` or `upper` to hold the 95% interval's end to the bound instead of the mean (pass-rate,
score and named metrics). run/gates.py checks them once the run has finished; a gate that fails
makes exit 100 and is named with its margin.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from factcli.config import keys
from factcli.config.context import check_keys, expect
from factcli.errors import ConfigError

# figures of a column that are not named metrics
PASS_RATE, SCORE, COST, LATENCY = "pass-rate", "score", "cost", "latency"
BUILT_IN = (PASS_RATE, SCORE, COST, LATENCY)
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

    def __str__(self) -> str:
        name = self.metric if self.bound == "mean" else f"{self.metric}[{self.bound}]"
        return f"{name} {'>=' if self.at_least else '<='} {_num(self.limit)}"


def _num(x: float) -> str:
    return f"{x:g}"


def _check(metric: str, limit, bound: str, at_least: bool, file: str, where: str) -> Gate:
    expect(isinstance(metric, str) and metric.strip() != "", "a gate needs a metric name (a named metric, "
           "pass-rate, score, cost or latency)", file, where + ".metric")
    expect(isinstance(limit, (int, float)) and not isinstance(limit, bool) and math.isfinite(limit),
           f"expected a number, got {limit!r}", file, where + (".min" if at_least else ".max"))
    expect(bound in BOUNDS, f"expected one of {', '.join(BOUNDS)}, got {bound!r}", file, where + ".bound")
    if bound != "mean":
        expect(metric not in (COST, LATENCY), f"{metric} has no interval: its gate takes bound: mean",
               file, where + ".bound")
    if metric == PASS_RATE:
        expect(0 <= limit <= 1, f"a pass rate is between 0 and 1 (0.9 for 90%), got {limit!r}", file,
               where + (".min" if at_least else ".max"))
    return Gate(metric.strip(), float(limit), at_least, bound, where)


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
                          file, where))
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


def check_metrics(gates: list[Gate], named: set[str], templated: bool) -> None:
    """A gate on a metric no assertion of the config names is refused before any call (a typo would
    otherwise pass every release: a gate with nothing to check). `templated`: some metric name is a
    template, known only per row; the check is then left to the end of the run."""
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
                          "metric, pass-rate, score, cost or latency")
