"""Per-column aggregates exactly as promptfoo reports them (running sums), and derived metrics.

Derived metrics are mathjs-style expressions evaluated with simpleeval over the column's running
named-score sums plus `__count`, after every row, in list order (promptfoo-semantics §4).
"""

from __future__ import annotations

import ast
import math
import operator
import re
from dataclasses import dataclass, field

from factcli.errors import is_bug_message
from factcli.scoring.outcome import errored_metrics, has_grader_error, meta_errored
from factcli.types import ERROR_REASONS, FAILURE_GRADING, EvalResult, TokenUsage


def _div(a, b):
    try:
        return a / b
    except ZeroDivisionError:  # mathjs: x/0 is ±Infinity, 0/0 is NaN
        if a == 0 or a != a:
            return math.nan
        return math.copysign(math.inf, a) * (math.copysign(1, b))


def _pow(a, b):
    try:
        return math.pow(a, b)
    except (OverflowError, ValueError):
        return math.inf if a > 0 else math.nan


_OPERATORS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: _div,
    ast.Pow: _pow, ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Mod: operator.mod,
    ast.Gt: operator.gt, ast.Lt: operator.lt, ast.GtE: operator.ge, ast.LtE: operator.le,
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Not: operator.not_,
}


def _split_top(expr: str, sep: str) -> int:
    """Index of the first `sep` outside parentheses (-1 if none); for `:`, the one that closes the
    nearest `?` (mathjs's conditional nests to the right: a ? b ? c : d : e)."""
    depth = pending = 0
    for i, ch in enumerate(expr):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0 and ch == "?":
            if sep == "?":
                return i
            pending += 1
        elif depth == 0 and ch == ":" and sep == ":":
            if pending == 0:
                return i
            pending -= 1
    return -1


def _mathjs_to_python(expr: str) -> str:
    """mathjs's `c ? a : b`, `and`/`or`/`not` and `!=`-style comparisons as Python: parenthesised
    groups first, then the conditional at this level."""
    out, i = [], 0
    while i < len(expr):  # rewrite inside each top-level parenthesised group
        if expr[i] == "(":
            depth, j = 1, i + 1
            while j < len(expr) and depth:
                depth += {"(": 1, ")": -1}.get(expr[j], 0)
                j += 1
            out.append("(" + _mathjs_to_python(expr[i + 1:j - 1]) + ")")
            i = j
        else:
            out.append(expr[i])
            i += 1
    text = "".join(out)
    q = _split_top(text, "?")
    if q < 0:
        if _split_top(text, ":") >= 0:  # Python would read `a : b` as an annotation
            raise SyntaxError("':' without its '?'")
        return text
    rest = text[q + 1:]
    c = _split_top(rest, ":")
    if c < 0:
        raise SyntaxError("'?' without its ':'")
    return (f"({_mathjs_to_python(rest[:c])}) if ({text[:q]}) "
            f"else ({_mathjs_to_python(rest[c + 1:])})")
_FUNCTIONS = {
    "min": min, "max": max, "abs": abs, "round": round, "sqrt": math.sqrt, "log": math.log,
    "exp": math.exp, "floor": math.floor, "ceil": math.ceil,
}


class DerivedMetricError(ValueError):
    pass


def compile_expression(expr: str):
    """Parse once; mathjs's `^` is power, so it becomes `**` (same precedence and associativity)."""
    from simpleeval import SimpleEval

    evaluator = SimpleEval(operators=_OPERATORS, functions=_FUNCTIONS, names={})
    try:
        tree = evaluator.parse(_mathjs_to_python(expr.replace("^", "**")))
    except SyntaxError as exc:
        raise DerivedMetricError(f"invalid expression {expr!r}: {exc.msg}") from None
    return evaluator, tree


@dataclass(frozen=True)
class JsDerived:
    """A derived metric written in JavaScript (a function body, a function, an arrow), run in the Node
    worker with promptfoo's arguments: the column's named scores with `__count`, and the row's step."""

    code: str


# what mathjs has no use for: a function, an arrow, a `return`, a declaration, strict (in)equality
_JS_MARKS = re.compile(r"\bfunction\b|=>|\breturn\b|\b(?:const|let|var)\s|===|!==")


def is_javascript(expr: str) -> bool:
    """Whether a derived metric's value is JavaScript (run in the Node worker), not a mathjs expression."""
    return _JS_MARKS.search(expr) is not None


def compile_metric(expr: str):
    """A derived metric's value: JavaScript when it reads as JavaScript (promptfoo 0.121.20 hands such a
    string to mathjs, which throws: the metric stays 0), else a mathjs expression."""
    if is_javascript(expr):
        return JsDerived(expr)
    return compile_expression(expr)


def _eval_step(row) -> dict:
    step = row.step
    return {"testIdx": step.test_idx, "promptIdx": step.prompt_idx, "repeatIndex": step.repeat_idx,
            "test": {"vars": dict(step.vars), "description": step.test.description},
            "prompt": {"raw": step.prompt.raw, "label": step.prompt.label},
            "provider": {"id": step.provider.id, "label": step.provider.label or ""}}


def _evaluate_js(compiled: JsDerived, names: dict, row) -> float:
    from factcli.scripting.node import JSError, NodeWorkerError, get_worker, js_value

    try:
        answer = get_worker().call_sync("derived", {"code": compiled.code, "scores": names,
                                                    "step": _eval_step(row) if row is not None else {}})
    except (JSError, NodeWorkerError) as exc:  # it threw: the previous value stays, as in promptfoo
        raise DerivedMetricError(str(exc)) from None
    return js_value(answer)


def evaluate(compiled, names: dict, row=None) -> float:
    from simpleeval import InvalidExpression

    if isinstance(compiled, JsDerived):
        return _evaluate_js(compiled, names, row)
    evaluator, tree = compiled
    evaluator.names = names
    try:
        value = evaluator.eval("", previously_parsed=tree)
    except (InvalidExpression, ZeroDivisionError, ValueError, TypeError, OverflowError) as exc:
        raise DerivedMetricError(str(exc)) from None
    if isinstance(value, bool):  # a comparison: mathjs's true/false count as 1/0 in a metric
        return int(value)
    if not isinstance(value, (int, float)):
        raise DerivedMetricError(f"expression gave {value!r}, not a number")
    return value


@dataclass
class ColumnMetrics:
    """One column's totals (a provider with a prompt), added to row by row as promptfoo's prompt metrics
    are: counts, score, latency, cost, tokens, named scores, and what the end of the run adds (method
    reports, intervals, judge-corrected rates)."""

    score: float = 0.0
    test_pass: int = 0
    test_fail: int = 0
    test_error: int = 0  # ERROR rows, those not judged among them (promptfoo's testErrorCount)
    bugs: int = 0  # ERROR rows a factcli bug stopped (errors.is_bug_message), among test_error
    test_unjudged: int = 0  # rows the judge could not judge (FAILURE_GRADING): out of pass rates and means
    assert_pass: int = 0
    assert_fail: int = 0
    total_latency_ms: float = 0
    cost: float = 0.0
    tokens: TokenUsage = field(default_factory=TokenUsage)
    grader_tokens: TokenUsage = field(default_factory=TokenUsage)
    named_scores: dict = field(default_factory=dict)
    named_count: dict = field(default_factory=dict)
    named_weights: dict = field(default_factory=dict)
    # promptfoo's sums above hold every row; what the assertions not judged put in them, taken out of
    # factcli's means (named_means, judged_score): metric -> [rows, weighted score, weight] for every row
    # with an errored assertion feeding the metric (scoring/outcome.errored_metrics, whatever the row's
    # outcome), and the score of the rows with any errored assertion (`unscored` of them)
    named_unjudged: dict = field(default_factory=dict)
    unjudged_score: float = 0.0
    unscored: int = 0
    named_rows: dict = field(default_factory=dict)  # metric -> rows that have it (judged or not)
    # the rows of `critical: true` tests that did not pass: [test_idx, description, failed (False: not
    # judged)], for the critical gate (run/recording/gates.py); `show` has each one's reason
    critical: list = field(default_factory=list)
    rows: int = 0
    cached: int = 0
    grading_errors: int = 0  # assertions whose grader failed or could not be read
    categories: dict = field(default_factory=dict)  # factuality category -> count
    grader_cost: float = 0.0
    cost_unpriced: int = 0  # rows whose model answered at a price we do not know: `cost` is a floor
    grader_unpriced: int = 0  # rows with a grader call of unknown price: `grader_cost` is a floor
    # calls, the model's and the graders', billed at a batch API's price, and what that saved against
    # the full price (providers/pricing.bill: a reply's metadata `batch`, `batchSaved`)
    batched: int = 0
    batch_saved: float = 0.0
    methods: dict = field(default_factory=dict)  # claim-level method reports (methods/reports.py)
    stats: dict = field(default_factory=dict)  # intervals and repeat statistics, filled at the end (stats/columns.py)
    judge_corrected: list = field(default_factory=list)  # pass rates corrected for the judge (stats/judge.py)

    def add(self, row: EvalResult, derived: list[tuple[str, object]]) -> None:
        """promptfoo's updatePromptMetricsForRow, in its order (derived metrics before counts)."""
        self.rows += 1
        unjudged = row.failure_reason == FAILURE_GRADING
        self.score += row.score
        grading = row.grading
        left_out = ()
        if unjudged or has_grader_error(grading):
            self.unjudged_score += row.score
            self.unscored += 1
            left_out = _unjudged_metrics(row)
            for name in left_out:
                self.named_unjudged.setdefault(name, [0, 0.0, 0.0])[0] += 1
        for name in row.named_scores:
            self.named_rows[name] = self.named_rows.get(name, 0) + 1
        for name, value in row.named_scores.items():
            count = 0
            weight_total = None
            if grading is not None:
                from factcli.scoring.scorer import render_metric

                count = sum(1 for c in grading.component_results
                            if c.assertion is not None and render_metric(c.assertion.metric, row.step.vars) == name)
                if name in grading.named_score_weights:
                    weight_total = grading.named_score_weights[name]
            count = count or 1
            if weight_total is None:
                weight_total, weighted = count, value
            else:
                weighted = value * weight_total
            self.named_scores[name] = self.named_scores.get(name, 0.0) + weighted
            self.named_count[name] = self.named_count.get(name, 0) + count
            self.named_weights[name] = self.named_weights.get(name, 0.0) + weight_total
            if name in left_out:
                kept = self.named_unjudged[name]
                kept[1] += weighted
                kept[2] += weight_total
        if derived:
            names = dict(self.named_scores)
            names["__count"] = self.rows
            for metric_name, compiled in derived:
                self.named_scores.setdefault(metric_name, 0)
                try:
                    value = evaluate(compiled, names, row)
                except DerivedMetricError:
                    continue  # a metric not seen yet: keep the previous value, as promptfoo does
                self.named_scores[metric_name] = value
                names[metric_name] = value
        if not row.success and row.step.test.raw.get("critical"):
            self.critical.append([row.step.test_idx, row.step.test.description, not unjudged])
        if row.success:
            self.test_pass += 1
        elif row.failure_reason in ERROR_REASONS:
            self.test_error += 1
            self.test_unjudged += unjudged
            self.bugs += is_bug_message(row.error)
        else:
            self.test_fail += 1
        if grading is not None:
            top = grading.metadata
            ledger = bool(top) and "graderCalls" in top  # the row's ledger (scoring/grading.py): each grader call
            if ledger:
                if top.get("graderCost") is None:
                    self.grader_unpriced += 1
                else:
                    self.grader_cost += top["graderCost"]
                if top.get("graderBatched"):
                    self.batched += top["graderBatched"]
                    self.batch_saved += top.get("graderBatchSaved") or 0.0
            components = grading.component_results
            passes = 0
            for c in components:
                if c.passed:
                    passes += 1
                meta = c.metadata
                if meta:
                    if meta_errored(meta):
                        self.grading_errors += 1
                    if meta.get("category"):
                        self.categories[meta["category"]] = self.categories.get(meta["category"], 0) + 1
                    if not ledger and isinstance(meta.get("graderCost"), (int, float)):
                        self.grader_cost += meta["graderCost"]  # a row stored before the ledger: what handlers reported
            self.assert_pass += passes
            self.assert_fail += len(components) - passes
            self.grader_tokens.add(grading.tokens_used)
        self.total_latency_ms += row.latency_ms or 0
        self.tokens.add(row.response.token_usage)
        if row.response.cost is not None:
            self.cost += row.response.cost
        elif row.response.error is None:
            self.cost_unpriced += 1
        if row.response.cached:
            self.cached += 1
        if row.response.metadata.get("batch"):
            self.batched += 1
            self.batch_saved += row.response.metadata.get("batchSaved") or 0.0

    @property
    def judged(self) -> int:
        """Rows that count in the pass rate and the score: every row but those not judged."""
        return self.test_pass + self.test_fail + self.test_error - self.test_unjudged

    @property
    def pass_rate(self) -> float:
        total = self.judged
        return self.test_pass / total if total else 0.0

    @property
    def judged_score(self) -> float:
        """The sum of the scores of the rows whose every assertion was judged (`score` is promptfoo's, over
        every row): a row's score is its assertions' weighted mean, unknown while one of them is."""
        return self.score - self.unjudged_score

    @property
    def scored(self) -> int:
        """The rows in the score's mean (judged_score): those whose every assertion was judged (a row not
        judged is among `unscored`; metrics stored before it was counted have only test_unjudged)."""
        return self.rows - max(self.unscored, self.test_unjudged)

    def judged_of(self, name: str) -> tuple[int, int]:
        """(rows judged on the named metric, rows that have it): the metric's coverage, said beside its
        figure and held against a gate's `min_judged`."""
        total = self.named_rows.get(name)
        left = self.not_judged(name)
        if total is None:  # stored before named_rows was counted
            total = self.named_count.get(name, 0) or left
        return max(total - left, 0), total

    def judged_note(self, name: str) -> str:
        """" (28 of 30 judged)" beside a named metric's figure when some of its rows were not judged."""
        judged, total = self.judged_of(name)
        return f" ({judged} of {total} judged)" if judged < total else ""

    def named_means(self) -> dict:
        """Each named metric's mean over the rows judged (None when none was); a derived metric's value."""
        out = {}
        for k, v in self.named_scores.items():
            weight = self.named_weights.get(k)
            left = self.named_unjudged.get(k)
            if left:
                v, weight = v - left[1], (weight or 0.0) - left[2]
                if weight <= 1e-12:  # every row of it was left out (float sums: not exactly 0)
                    out[k] = None
                    continue
            out[k] = v / weight if weight else v
        return out

    def not_judged(self, name: str) -> int:
        """Rows left out of the named metric's mean: the judge could not judge them."""
        left = self.named_unjudged.get(name)
        return left[0] if left else 0


def _unjudged_metrics(row: EvalResult) -> set:
    """The named metrics of a row that an errored assertion feeds: left out of their means."""
    from factcli.scoring.scorer import render_metric

    return errored_metrics(row.grading, lambda metric: render_metric(metric, row.step.vars))


def compile_derived(derived_metrics: list[dict]) -> list[tuple[str, object]]:
    return [(d["name"], compile_metric(d["value"])) for d in derived_metrics]
