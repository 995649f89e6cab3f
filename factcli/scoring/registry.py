"""The assertion registry and the one runner that owns promptfoo's scoring rules.

Handlers are pure functions of an AssertionContext that return a GradingResult. Everything
shared lives here, once: the `not-` prefix, weights (including weight 0), per-assertion
thresholds, templated metric names, assert-sets and the weighted aggregate of
promptfoo-semantics.md §1-§3.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable

from factcli import templating
from factcli.types import Assertion, GradingResult, ProviderResponse, TestCase, TokenUsage

ASSERTIONS_MAX_CONCURRENCY = 3


@dataclass
class AssertionType:
    name: str
    handler: Callable
    is_async: bool
    default_threshold: float | None = None
    model_graded: bool = False
    needs_value: bool = False


_REGISTRY: dict[str, AssertionType] = {}
_ALIASES: dict[str, str] = {}

# promptfoo types that factcli rejects at load time with a clear reason.
UNSUPPORTED: dict[str, str] = {
    "guardrails": "guardrails assertions need promptfoo's hosted guardrail providers",
    "trace-span-count": "trace assertions need promptfoo's OpenTelemetry tracing",
    "trace-span-duration": "trace assertions need promptfoo's OpenTelemetry tracing",
    "trace-error-spans": "trace assertions need promptfoo's OpenTelemetry tracing",
    "ruby": "ruby assertions are not supported; use python",
    "classifier": "classifier assertions need HuggingFace models downloaded at run time",
    "pi": "pi assertions need Prompt Security's hosted scoring API",
    "moderation": "moderation assertions need a provider moderation endpoint, which factcli does not call yet",
}


def assertion(name: str, *aliases: str, default_threshold: float | None = None,
              model_graded: bool = False, needs_value: bool = False):
    """Register an assertion handler under `name` (and aliases)."""

    def register(fn: Callable) -> Callable:
        if name in _REGISTRY or name in _ALIASES:
            raise RuntimeError(f"assertion type {name!r} registered twice")
        _REGISTRY[name] = AssertionType(
            name, fn, inspect.iscoroutinefunction(fn), default_threshold, model_graded, needs_value
        )
        for alias in aliases:
            _ALIASES[alias] = name
        return fn

    return register


# Which module registers which type, so that a run imports only the families it uses: importing
# all of them (numpy, jsonschema, sqlglot, html5lib, nltk, ...) was ~0.3 s of every start-up.
# Only a shortcut: a type missing here is found by importing every family (load_all).
FAMILIES = ("assertions.text", "assertions.structured", "assertions.similarity", "assertions.operational",
            "assertions.graded", "assertions.scripts", "assertions.rag", "methods.factual_correctness",
            "methods.factscore", "methods.facts_grounding")
_FAMILY_OF = {
    **dict.fromkeys(("contains", "contains-all", "contains-any", "equals", "icontains", "icontains-all",
                     "icontains-any", "regex", "starts-with"), "assertions.text"),
    **dict.fromkeys(("contains-html", "contains-json", "contains-sql", "contains-xml", "is-html", "is-json", "is-sql",
                     "is-valid-function-call", "is-valid-openai-function-call", "is-valid-openai-tools-call",
                     "is-xml"), "assertions.structured"),
    **dict.fromkeys(("bleu", "gleu", "levenshtein", "meteor", "rouge-n", "word-count"), "assertions.similarity"),
    **dict.fromkeys(("cost", "finish-reason", "is-refusal", "latency", "perplexity", "perplexity-score", "webhook"),
                    "assertions.operational"),
    **dict.fromkeys(("factuality", "g-eval", "llm-rubric", "max-score", "model-graded-closedqa",
                     "model-graded-factuality", "select-best", "similar", "similar:cosine", "similar:dot",
                     "similar:euclidean"), "assertions.graded"),
    **dict.fromkeys(("javascript", "python"), "assertions.scripts"),
    **dict.fromkeys(("answer-relevance", "context-faithfulness", "context-recall", "context-relevance",
                     "conversation-relevance"), "assertions.rag"),
    "factual-correctness": "methods.factual_correctness", "factscore": "methods.factscore",
    "facts-grounding": "methods.facts_grounding",
}
_all_loaded = False


def load_all() -> None:
    """Import every built-in family (registering its types and method reports)."""
    global _all_loaded
    if not _all_loaded:
        import importlib

        for family in FAMILIES:
            importlib.import_module(f"factcli.{family}")
        _all_loaded = True


def lookup(type_name: str) -> AssertionType | None:
    base = type_name[4:] if type_name.startswith("not-") else type_name
    found = _REGISTRY.get(_ALIASES.get(base, base))
    if found is None and not _all_loaded:
        family = _FAMILY_OF.get(base)
        if family is not None:
            import importlib

            importlib.import_module(f"factcli.{family}")
            found = _REGISTRY.get(_ALIASES.get(base, base))
        if found is None:
            load_all()
            found = _REGISTRY.get(_ALIASES.get(base, base))
    return found


def known_types() -> list[str]:
    load_all()
    return sorted(set(_REGISTRY) | set(_ALIASES))


@dataclass
class AssertionContext:
    assertion: Assertion
    output: Any  # after `transform`
    value: Any  # the assertion value rendered with the test vars
    test: TestCase
    vars: dict
    prompt: str
    response: ProviderResponse
    provider: Any = None
    grader: Any = None  # grading access for model-graded types
    extra: dict = field(default_factory=dict)

    @property
    def inverse(self) -> bool:
        return self.assertion.inverse

    @property
    def threshold(self) -> float | None:
        return self.assertion.threshold

    @property
    def output_text(self) -> str:
        return coerce_string(self.output)

    def result(self, condition: bool, reason: str, score: float | None = None) -> GradingResult:
        """Binary result: pass = condition XOR inverse. `{not}` in the reason becomes 'not '."""
        passed = bool(condition) != self.inverse
        return GradingResult(
            passed=passed,
            score=(1.0 if passed else 0.0) if score is None else score,
            reason="Assertion passed" if passed else reason.replace("{not}", "not " if self.inverse else ""),
            assertion=self.assertion,
        )


def coerce_string(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)  # JSON.stringify


class AssertionError_(Exception):
    """A handler's complaint about its input (promptfoo's invariant): the row becomes ERROR."""


class _Aggregate:
    """promptfoo's AssertionsResult: a weighted mean with named scores and an optional threshold."""

    def __init__(self, threshold: float | None, assertion_set: Assertion | None = None):
        self.threshold = threshold
        self.assertion_set = assertion_set
        self.total_score = 0.0
        self.total_weight = 0.0
        self.failed_reason: str | None = None
        self.components: dict[int, GradingResult] = {}
        self.named: dict[str, float] = {}
        self.named_weights: dict[str, float] = {}
        self.tokens = TokenUsage()

    def add(self, index: int, result: GradingResult, metric: str | None, weight: float) -> None:
        self.total_score += result.score * weight
        self.total_weight += weight
        self.components[index] = result
        if metric:
            self.named[metric] = self.named.get(metric, 0.0) + result.score * weight
            self.named_weights[metric] = self.named_weights.get(metric, 0.0) + weight
        for name, score in result.named_scores.items():
            if name != metric:
                w = result.named_score_weights.get(name, 1.0) * weight
                self.named[name] = self.named.get(name, 0.0) + score * w
                self.named_weights[name] = self.named_weights.get(name, 0.0) + w
        self.tokens.add(result.tokens_used)
        if not result.passed:
            self.failed_reason = result.reason

    def result(self) -> GradingResult:
        score = self.total_score / self.total_weight if self.total_weight > 0 else 0.0
        passed = not self.failed_reason
        reason = self.failed_reason or "All assertions passed"
        if self.threshold is not None and not _isnan(self.threshold):
            passed = score >= self.threshold
            reason = (f"Aggregate score {templating.to_fixed(score)} {'≥' if passed else '<'} "
                      f"{_js_num(self.threshold)} threshold")
        flattened: list[GradingResult] = []
        for idx in sorted(self.components):
            res = self.components[idx]
            flattened.append(res)
            if res.assertion is None and res.component_results:
                flattened.extend(res.component_results)
        named = {k: (v / self.named_weights[k] if self.named_weights.get(k, 0) > 0 else 0.0)
                 for k, v in self.named.items()}
        metadata = {}
        if self.assertion_set is not None:
            s = self.assertion_set
            meta = {"type": "assert-set", "assertionCount": len(s.children or [])}
            for key in ("metric", "threshold", "weight"):
                if key in s.raw:
                    meta[key] = s.raw[key]
            metadata["assertionSet"] = meta
        return GradingResult(
            passed=passed, score=score, reason=reason, named_scores=named,
            named_score_weights=dict(self.named_weights), tokens_used=self.tokens,
            component_results=flattened, metadata=metadata,
        )


def _isnan(x: float) -> bool:
    return isinstance(x, float) and math.isnan(x)


def _js_num(x: float) -> str:
    return templating.js_string(float(x)) if isinstance(x, (int, float)) else str(x)


def render_metric(metric: str | None, variables: dict) -> str | None:
    if not metric:
        return metric
    return templating.render(metric, variables)


async def run_assertion(a: Assertion, *, output: Any, test: TestCase, variables: dict, prompt: str,
                        response: ProviderResponse, provider=None, grader=None) -> GradingResult:
    """Run one assertion; handler exceptions propagate and turn the row into ERROR."""
    kind = lookup(a.type)
    if kind is None:  # config validation rejects these earlier; this guards the Python API
        raise AssertionError_(f"Unknown assertion type: {a.type}")
    if a.transform:
        from factcli.scripting.transforms import apply_transform

        output = await apply_transform(a.transform, output, {"vars": variables, "prompt": {"label": prompt}})
    value = templating.render_value(a.value, variables) if a.value is not None else None
    ctx = AssertionContext(a, output, value, test, variables, prompt, response, provider, grader)
    if kind.is_async:
        result = await kind.handler(ctx)
    else:
        result = kind.handler(ctx)
    if result.assertion is None:
        result.assertion = a
    if isinstance(value, str) and value != a.value:
        result.metadata.setdefault("renderedAssertionValue", value)
    if a.weight == 0:
        result.passed = True
    return result


async def run_assertions(test: TestCase, *, output: Any, variables: dict, prompt: str,
                         response: ProviderResponse, provider=None, grader=None,
                         scoring_function: str | None = None) -> GradingResult:
    """Aggregate a test's assertions exactly as promptfoo's runAssertions does.

    `scoring_function` (default: the test's `assertScoringFunction`, an absolute file:// reference)
    replaces the aggregate's pass, score and reason, as promptfoo's assertScoringFunction does."""
    if not test.assertions:
        return GradingResult(passed=True, score=1.0, reason="No assertions")
    main = _Aggregate(test.threshold)
    sets: list[tuple[int, Assertion, _Aggregate]] = []
    jobs: list[tuple[Assertion, _Aggregate, int]] = []
    for i, a in enumerate(test.assertions):
        if a.type == "assert-set":
            sub = _Aggregate(a.threshold, a)
            sets.append((i, a, sub))
            jobs.extend((child, sub, j) for j, child in enumerate(a.children or []))
        else:
            jobs.append((a, main, i))

    async def one(a: Assertion, agg: _Aggregate, index: int) -> None:
        if a.base_type in ("select-best", "max-score"):
            return  # run after all rows, across columns
        res = await run_assertion(a, output=output, test=test, variables=variables, prompt=prompt,
                                  response=response, provider=provider, grader=grader)
        agg.add(index, res, render_metric(a.metric, variables), a.weight)

    concurrent = any(a.transform or (lookup(a.type) and lookup(a.type).is_async) for a, _, _ in jobs)
    if not concurrent:
        for job in jobs:  # all synchronous: no scheduling overhead
            await one(*job)
    else:
        sem = asyncio.Semaphore(ASSERTIONS_MAX_CONCURRENCY)

        async def bounded(job):
            async with sem:
                await one(*job)

        await asyncio.gather(*(bounded(job) for job in jobs))
    for index, s, sub in sets:
        res = sub.result()
        main.add(index, res, render_metric(s.metric, variables), s.weight)
    result = main.result()
    scoring_function = scoring_function or test.raw.get("assertScoringFunction")
    if scoring_function:
        from factcli.assertions.scripts import apply_scoring_function

        result = await apply_scoring_function(scoring_function, result, test.threshold)
    return result
