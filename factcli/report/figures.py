"""Statistics as the tables print them: rates with their margin, intervals, repeat cells, the legend."""

from __future__ import annotations

import math
from typing import Sequence

from factcli.stats.intervals import RESAMPLES


def fmt_rate(value: float | None, margin: float | None) -> str:
    """A proportion as the FACTS paper prints it: `91.4% ± 1.9` (points)."""
    if value is None:
        return "n/a"
    if margin is None or math.isnan(margin):
        return f"{value * 100:.1f}%"
    return f"{value * 100:.1f}% ± {margin * 100:.1f}"


def fmt_cost(amount: float | None, unpriced: int = 0, digits: int = 4) -> str:
    """Money as every report prints it: `n/a` when no price was known, never a made-up $0; a floor
    with the count of rows left out when only some were priced."""
    if amount is None or (unpriced and not amount):
        return "n/a"
    text = f"${amount:.{digits}f}"
    return f"≥{text} ({unpriced} row{'s' if unpriced != 1 else ''} n/a)" if unpriced else text


def fmt_interval(ci: Sequence[float] | None, digits: int = 3) -> str:
    if not ci:
        return ""
    return f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def repeat_cells(st: dict, k: int) -> list[str]:
    """pass@k, pass^k and the flip rate of one column, as table cells."""
    at, hat = (st.get("passAtK") or {}).get(str(k)), (st.get("passHatK") or {}).get(str(k))
    flip = st.get("flipRate")
    return ["—" if at is None else f"{at * 100:.1f}%", "—" if hat is None else f"{hat * 100:.1f}%",
            "—" if flip is None else f"{flip * 100:.1f}% ({st.get('flakyTests', 0)}/{st.get('repeatedTests', 0)})"]


def legend(nonbinary: bool, repeat: int) -> str:
    """One line under a table saying what its intervals and repeat columns are."""
    parts = ["95% intervals: pass rate ± 1.96·√(p(1−p)/N)"]
    if nonbinary:
        parts.append(f"score [percentile bootstrap, {RESAMPLES} resamples over tests]")
    if repeat > 1:
        parts.append(f"pass@{repeat}: some of {repeat} repeats pass, pass^{repeat}: all pass, "
                     "flip rate: tests whose repeats disagree")
    return "; ".join(parts)


def spend_text(metrics) -> str:
    """`Tokens 218 (+1,402 grading, 700 reasoning) · cost $0.0001 (+$0.0012 grading)`: a run's or a
    column's tokens and money, model calls and grader calls apart, `n/a` where a price is unknown; the
    hidden reasoning tokens among them, when there were any."""
    tokens = sum(m.tokens.total for m in metrics)
    grader_tokens = sum(m.grader_tokens.total for m in metrics)
    reasoning = sum(m.tokens.reasoning for m in metrics)
    grader_reasoning = sum(m.grader_tokens.reasoning for m in metrics)
    rows = sum(m.rows for m in metrics)
    unpriced = sum(m.cost_unpriced for m in metrics)
    cost = fmt_cost(None if rows and unpriced == rows else sum(m.cost for m in metrics), unpriced)
    text = f"Tokens {tokens:,}" + (f", {reasoning:,} reasoning" if reasoning else "")
    if grader_tokens:  # hidden reasoning tokens are part of the counts (and of the cost, as output)
        text += f" (+{grader_tokens:,} grading" + (f", {grader_reasoning:,} reasoning" if grader_reasoning else "") + ")"
    text += f" · cost {cost}"
    grader_calls = grader_tokens or any(m.grader_cost or m.grader_unpriced for m in metrics)
    if grader_calls:
        text += f" (+{fmt_cost(sum(m.grader_cost for m in metrics), sum(m.grader_unpriced for m in metrics))} grading)"
    return text
