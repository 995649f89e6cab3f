"""Statistics as the tables print them: rates with their margin, intervals, repeat cells, the legend."""

from __future__ import annotations

import math
from typing import Sequence

from factcli.stats.intervals import RESAMPLES, SMALL_SAMPLE


def fmt_rate(value: float | None, ci: Sequence[float] | None) -> str:
    """A proportion with its 95% interval in points: `100.0% [61.0, 100.0]`."""
    if value is None:
        return "n/a"
    if not ci or any(x is None or math.isnan(x) for x in ci):
        return f"{value * 100:.1f}%"
    return f"{value * 100:.1f}% [{ci[0] * 100:.1f}, {ci[1] * 100:.1f}]"


def run_rate(passes: int, rows: int) -> str:
    """A run's pass rate as its summary line says it: `50.00% [25.4, 74.6] (95% CI)`; `n/a` with no row."""
    from factcli.stats.intervals import wilson_interval

    ci = wilson_interval(passes, rows)
    if ci is None:
        return "n/a"
    return f"{ci['value'] * 100:.2f}% [{ci['low'] * 100:.1f}, {ci['high'] * 100:.1f}] (95% CI)"


def small_sample(rows: list[int]) -> str | None:
    """The line that says a run's columns are small samples (`rows`: each column's), else None."""
    counted = [n for n in rows if n]
    if not counted or min(counted) >= SMALL_SAMPLE:
        return None
    fewest = min(counted)
    where = " a column" if len(counted) > 1 else ""
    return f"Small sample ({plural(fewest, 'row')}{where}): wide intervals; read them, not the rates."


def score_text(value) -> str:
    """A score as every report prints one: three places (`0.389`, not `0.38940039153570244`)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:.3f}"


def plural(count: int, word: str, many: str | None = None) -> str:
    """`1 row`, `2 rows`, `0 rows` (`many` for a plural that is not word + s)."""
    return f"{count:,} {word if count == 1 else (many or word + 's')}"


def money(amount: float) -> str:
    """An amount of dollars to the precision it has: `$0` when nothing was spent, two significant digits
    below a cent with at least four places (`$0.000074`, `$0.0012`, `$0.1235`), cents from a dollar
    (`$12.35`); never a small sum shown as `$0.0000`."""
    if not amount:
        return "$0"
    if abs(amount) >= 1:
        return f"${amount:,.2f}"
    places = max(4, 1 - math.floor(math.log10(abs(amount))))
    return f"${amount:.{places}f}"


def fmt_cost(amount: float | None, unpriced: int = 0) -> str:
    """Money as every report prints it (`money`): `n/a` when no price was known, never a made-up $0; a
    floor with the count of rows left out when only some were priced."""
    if amount is None or (unpriced and not amount):
        return "n/a"
    text = money(amount)
    return f"≥{text} ({plural(unpriced, 'row')} n/a)" if unpriced else text


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
    parts = ["95% intervals: pass rate [Wilson score, points]"]
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


def savings_text(model, grader, batched: int = 0, saved: float = 0.0) -> str | None:
    """`Prompt cache: 62.5% of input tokens read from it (grading 81.0%), 12,400 written · Batch APIs:
    1,000 calls, $1.23 saved`: the share of the input tokens, the model's (`model`, a TokenUsage)
    and the graders' (`grader`), that the providers' prompt caches served, the tokens written to
    them, and the calls billed at a batch price with what that saved against the full price. None
    when no call read or wrote a cache nor went through a batch API."""
    parts = []
    if model.cached or model.cache_write or grader.cached or grader.cache_write:
        def share(t) -> str:
            return f"{t.cached / t.prompt * 100:.1f}%" if t.prompt else "n/a"

        if model.prompt:
            text = f"Prompt cache: {share(model)} of input tokens read from it"
            text += f" (grading {share(grader)})" if grader.prompt else ""
        else:
            text = f"Prompt cache: {share(grader)} of grading input tokens read from it"
        written = model.cache_write + grader.cache_write
        if written:
            text += f", {written:,} written"
        parts.append(text)
    if batched:
        parts.append(f"Batch APIs: {plural(batched, 'call')}, {money(saved)} saved")
    return " · ".join(parts) or None


def metrics_savings(metrics) -> str | None:
    """savings_text over columns' metrics (scoring/metrics.ColumnMetrics)."""
    from factcli.types import TokenUsage

    model, grader = TokenUsage(), TokenUsage()
    for m in metrics:
        model.add(m.tokens)
        grader.add(m.grader_tokens)
    return savings_text(model, grader, sum(m.batched for m in metrics), sum(m.batch_saved for m in metrics))
