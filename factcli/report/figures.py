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
