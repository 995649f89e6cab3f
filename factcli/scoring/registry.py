"""The assertion registry and the one runner that owns promptfoo's scoring rules.

Handlers are pure functions of an AssertionContext that return a GradingResult. Everything
shared lives here, once: the `not-` prefix, weights (including weight 0), per-assertion
thresholds, templated metric names, assert-sets and the weighted aggregate of
promptfoo-semantics.md §1-§3.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from factcli.errors import FactcliError
from factcli.types import Assertion, GradingResult, ProviderResponse, TestCase, walk


@dataclass
class AssertionType:
    """A registered assertion type: its handler and what the scorer and the preflight need to know of it."""

    name: str
    handler: Callable
    is_async: bool
    default_threshold: float | None = None
    model_graded: bool = False
    needs_value: bool = False
    # (assertion, base_dir) -> problems found before any call (a knowledge source that is missing)
    preflight: Callable | None = None
    # A deterministic binary type's rule split in two (check_assertion): (assertion, value) -> (test,
    # reason), where test(output text) -> bool and reason is the failure's text, or a function of the
    # output text giving it, with `{not}` in it. The handler applies it to one row; the scorer may
    # apply it once to an assertion whose value is the same on every row and reuse the test.
    check: Callable | None = None
    # A claim-level method's `config` keys (methods/settings.MethodSettings): the loader warns of an older
    # spelling and an unknown key before any call; the handler reads its settings through it.
    settings: Any = None
    # A method's own models beside its judges (scoring/judges.judges_of): config -> [(config key, value,
    # grader kind, role)], e.g. factscore's decomposer; the checks before any call and the estimate see them.
    judges: Callable | None = None


_REGISTRY: dict[str, AssertionType] = {}
_ALIASES: dict[str, str] = {}


@dataclass(frozen=True)
class TypeFacts:
    """What a run must know of a type before its family is imported: a run imports only the families it
    uses (importing all of them, with numpy, jsonschema, sqlglot, html5lib, nltk, ..., would slow every
    start-up), yet the config checks, the estimate and the CSV grammar need these facts first. The
    registration (`@assertion`) is checked against them when the family is imported."""

    family: str | None  # the module under factcli/ that registers it; None: a promptfoo type factcli does not run
    model_graded: bool = False  # grades with a model (the handler's `model_graded=` must agree)
    graders: tuple[str, ...] = ("text",)  # the grader kinds it calls (scoring/judges), resolved before any call
    panel: bool = False  # takes a judge panel: a list of providers
    models_alias: bool = False  # also reads `config.models` as its judge list (the seed's spelling)
    claim_method: bool = False  # a claim-level method: its calls follow the output (run/planning/estimate)
    cell_threshold: float | None = None  # promptfoo's CSV cell `type(0.9):` keeps a threshold; this one if none
    # how promptfoo's CSV cell `type:value` gives its value: "text" trimmed, "list" split at commas and
    # each item trimmed, "json" as written (and no threshold)
    cell_value: str = "text"
    code: bool = False  # its value is code (a script), checked when the config loads, never read as a file
    in_promptfoo: bool = True  # in promptfoo 0.121.20's assertion enum, so in the CSV `__expected` grammar
    compares: bool = False  # scores a test's columns together once all of them ran (assertions/compare.py)
    user_code: bool = False  # runs the user's code (a script, a Python function): its result may carry named scores
    value_is_reference: bool = False  # its `value` is the reference answer (calibrate fills in the item's)
    needs_question: bool = False  # shows the grader the question (the rendered prompt) and refuses an empty one
    unsupported: str | None = None  # why factcli rejects it at load time
    # a var it takes as a list by design, never expanded into a row per item (config/plan): (the config
    # key that names the var, the var read when that key is not given), either None
    list_var: tuple[str | None, str | None] | None = None
    # its score is between 0 and 1: a threshold, and a gate on a metric only such types name, outside that
    # range is refused before any call ("did you mean 0.8?"); None of it says nothing of the range
    unit_score: bool = False


def _all(family: str | None, names: str, **facts) -> dict[str, TypeFacts]:
    return dict.fromkeys(names.split(), TypeFacts(family, **facts))


_METHOD = {"model_graded": True, "in_promptfoo": False, "unit_score": True}
_JUDGES = {**_METHOD, "panel": True, "models_alias": True, "claim_method": True}
_TRACE = "trace assertions need promptfoo's OpenTelemetry tracing"

# Every type, declared once (aliases beside their type, with its facts). A new type is its handler and
# one entry here.
TYPES: dict[str, TypeFacts] = {
    **_all("assertions.text", "contains equals icontains regex"),
    **_all("assertions.text", "contains-all contains-any icontains-all icontains-any", cell_value="list"),
    "starts-with": TypeFacts("assertions.text", cell_threshold=0.75),
    **_all("assertions.structured", "contains-json is-json", cell_value="json"),
    **_all("assertions.html_output", "contains-html is-html"),
    **_all("assertions.xml_output", "contains-xml is-xml"),
    **_all("assertions.sql_output", "contains-sql is-sql"),
    **_all("assertions.function_calls",
           "is-valid-function-call is-valid-openai-function-call is-valid-openai-tools-call"),
    **_all("assertions.similarity", "bleu gleu meteor", unit_score=True),
    "word-count": TypeFacts("assertions.similarity"),
    "levenshtein": TypeFacts("assertions.similarity", cell_threshold=0.75),
    "rouge-n": TypeFacts("assertions.similarity", cell_threshold=0.75, unit_score=True),
    **_all("assertions.operational", "finish-reason is-refusal webhook"),
    **_all("assertions.operational", "cost latency perplexity perplexity-score", cell_threshold=0.75),
    **_all("assertions.graded", "factuality model-graded-factuality", model_graded=True, panel=True,
           value_is_reference=True, needs_question=True, unit_score=True),
    "model-graded-closedqa": TypeFacts("assertions.graded", model_graded=True, panel=True, needs_question=True,
                                       unit_score=True),
    # llm-rubric's score is the judge's number, on whatever scale its rubric asks for
    "llm-rubric": TypeFacts("assertions.graded", model_graded=True, panel=True),
    "g-eval": TypeFacts("assertions.graded", model_graded=True, panel=True, unit_score=True),
    "select-best": TypeFacts("assertions.graded", model_graded=True, in_promptfoo=False, compares=True),
    "max-score": TypeFacts("assertions.graded", in_promptfoo=False, compares=True),
    "similar": TypeFacts("assertions.graded", model_graded=True, graders=("embedding",), cell_threshold=0.8,
                         unit_score=True),
    **_all("assertions.graded", "similar:cosine similar:dot similar:euclidean", model_graded=True,
           graders=("embedding",)),
    **_all("assertions.scripts", "javascript python", code=True, user_code=True),
    "python-function": TypeFacts("assertions.scripts", in_promptfoo=False, user_code=True),
    # answer-relevance writes questions with a text model and compares them with an embedding model
    "answer-relevance": TypeFacts("assertions.rag", model_graded=True, graders=("text", "embedding"),
                                  cell_threshold=0.75, unit_score=True),
    **_all("assertions.rag", "context-faithfulness context-recall context-relevance", model_graded=True,
           cell_threshold=0.75, unit_score=True),
    "conversation-relevance": TypeFacts("assertions.rag", model_graded=True, unit_score=True),
    # RAGAS's retrieval metrics (factcli's own types): the `context` var is the ranked passages, one value;
    # their calls follow the passages and statements, known once the model answered (claim_method)
    "context-precision": TypeFacts("assertions.rag_metrics", model_graded=True, in_promptfoo=False,
                                   claim_method=True, list_var=(None, "context"), unit_score=True),
    "noise-sensitivity": TypeFacts("assertions.rag_metrics", model_graded=True, in_promptfoo=False,
                                   claim_method=True, value_is_reference=True, list_var=(None, "context"),
                                   unit_score=True),
    "factual-correctness": TypeFacts("methods.factual_correctness", **_JUDGES, value_is_reference=True),
    "factscore": TypeFacts("methods.factscore", **_JUDGES, list_var=(None, "context")),
    "facts-grounding": TypeFacts("methods.facts_grounding", **_JUDGES, list_var=("contextVar", "context")),
    "simpleqa": TypeFacts("methods.simpleqa", **_METHOD, value_is_reference=True),
    "safe": TypeFacts("methods.safe", **_METHOD, claim_method=True),
    "citations": TypeFacts("methods.citations", **_METHOD, claim_method=True, list_var=("passages", None)),
    # promptfoo's types that factcli rejects at load time with a clear reason
    "guardrails": TypeFacts(None, unsupported="guardrails assertions need promptfoo's hosted guardrail providers"),
    **_all(None, "trace-span-count trace-span-duration trace-error-spans", unsupported=_TRACE),
    "ruby": TypeFacts(None, unsupported="ruby assertions are not supported; use python"),
    "classifier": TypeFacts(None, cell_threshold=0.75,
                            unsupported="classifier assertions need HuggingFace models downloaded at run time"),
    "pi": TypeFacts(None, unsupported="pi assertions need Prompt Security's hosted scoring API"),
    "moderation": TypeFacts(None, unsupported="moderation assertions need a provider moderation endpoint, "
                                              "which factcli does not call yet"),
    # promptfoo's types that factcli does not know (an unknown type at load time)
    **_all(None, "agent-rubric search-rubric skill-used tool-call-f1 trajectory:goal-success trajectory:step-count "
                 "trajectory:tool-args-match trajectory:tool-sequence trajectory:tool-used"),
}
UNSUPPORTED = {name: facts.unsupported for name, facts in TYPES.items() if facts.unsupported}
FAMILIES = tuple(dict.fromkeys(f.family for f in TYPES.values() if f.family))  # what load_all imports
COMPARING = frozenset(name for name, facts in TYPES.items() if facts.compares)
CODE = frozenset(name for name, facts in TYPES.items() if facts.code)


def whole_vars(assertions) -> frozenset[str]:
    """The vars these assertions (assert-set members included) take as a list by design (TypeFacts.list_var):
    each is one value, never expanded into a row per item."""
    out: set[str] = set()
    for a in walk(assertions):
        facts = TYPES.get(a.base_type)
        if facts is None or facts.list_var is None:
            continue
        key, default = facts.list_var
        named = (a.config or {}).get(key) if key else None
        if isinstance(named, str) and named:
            out.add(named)
        elif named is None and default:
            out.add(default)
    return frozenset(out)


def compares(test: TestCase) -> bool:
    """Whether a comparison (select-best, max-score) still changes the rows of `test` after they run."""
    for a in test.assertions:  # (a loop, not any(): asked of every row as it is kept)
        if a.type in COMPARING:
            return True
    return False


def _check_registration(name: str, fn: Callable, model_graded: bool) -> None:
    """A registration must agree with the type's entry in TYPES, which a run reads before importing it."""
    facts = TYPES.get(name)
    if facts is None or facts.family is None:
        raise RuntimeError(f"assertion type {name!r} has no family in registry.TYPES: add its entry there")
    if fn.__module__ != f"factcli.{facts.family}":
        raise RuntimeError(f"assertion type {name!r} is registered in {fn.__module__}, but registry.TYPES says "
                           f"factcli.{facts.family}")
    if facts.model_graded != model_graded:
        raise RuntimeError(f"assertion type {name!r} is registered with model_graded={model_graded}, but "
                           f"registry.TYPES says {facts.model_graded}")


def assertion(name: str, *aliases: str, default_threshold: float | None = None,
              model_graded: bool = False, needs_value: bool = False, preflight: Callable | None = None,
              check: Callable | None = None, settings: Any = None, judges: Callable | None = None):
    """Register an assertion handler under `name` (and aliases)."""

    def register(fn: Callable) -> Callable:
        if name in _REGISTRY or name in _ALIASES:
            raise RuntimeError(f"assertion type {name!r} registered twice")
        for each in (name, *aliases):
            _check_registration(each, fn, model_graded)
        _REGISTRY[name] = AssertionType(
            name, fn, inspect.iscoroutinefunction(fn), default_threshold, model_graded, needs_value, preflight,
            check, settings, judges,
        )
        for alias in aliases:
            _ALIASES[alias] = name
        return fn

    return register


def check_assertion(name: str, *aliases: str, needs_value: bool = False):
    """Register a deterministic binary type by its rule (AssertionType.check): its handler is the
    rule applied to the row, so the scorer's prebound use of it cannot differ."""

    def register(rule: Callable) -> Callable:
        def handler(ctx: "AssertionContext") -> GradingResult:
            test, reason = rule(ctx.assertion, ctx.value)
            out = ctx.output_text
            return ctx.result(test(out), reason if isinstance(reason, str) else reason(out))

        handler.__name__ = handler.__qualname__ = rule.__name__
        handler.__module__ = rule.__module__  # the family that registers it (TYPES, checked)
        assertion(name, *aliases, needs_value=needs_value, check=rule)(handler)
        return rule

    return register


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
    base = type_name.removeprefix("not-")
    found = _REGISTRY.get(_ALIASES.get(base, base))
    if found is None and not _all_loaded:
        family = TYPES[base].family if base in TYPES else None
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
    """What a type's handler gets for one assertion on one row: the output, the rendered value, the test,
    vars, prompt and response, and grading access."""

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

    def need_grader(self):
        """The grader of a model-graded type; without one (outside an eval) the row is an ERROR."""
        if self.grader is None:
            raise AssertionError_("model-graded assertions need a grader (run through factcli eval)")
        return self.grader

    async def transformed_context(self, owner: str | None = None) -> Any:
        """The assertion's `contextTransform`, applied as promptfoo applies it, for every type that takes
        a context (the RAG types, facts-grounding, factual-correctness's reference, factscore's
        knowledge): to the provider's output, seeing the row's `vars`, the `prompt` and the provider
        response's `metadata` (retrieved passages: `context.metadata.contexts`). Raises what the
        transform raised, or, given the `owner` type's name, an AssertionError_ naming it."""
        from factcli.scripting.transforms import apply_transform

        source = self.response.output if self.response is not None else self.output
        tctx: dict = {"vars": dict(self.vars), "prompt": {"label": self.prompt}}
        if self.response is not None and self.response.metadata:
            tctx["metadata"] = self.response.metadata
        try:
            return await apply_transform(self.assertion.context_transform, source, tctx)
        except AssertionError_:
            raise
        except Exception as exc:
            if owner is None:
                raise
            raise AssertionError_(f"{owner}: its contextTransform failed: {exc}") from exc

    async def transformed_passages(self, owner: str) -> list[str] | None:
        """Where a context-taking type gets its context, the one rule: its `contextTransform`, when it has
        one, over the type's own source (the `context` var, `config.contextVar`, `config.passages`, the
        value), which it then never reads. The result is the passages in the retriever's order: a text is
        one passage, a list of texts one each. None when the assertion has no contextTransform; an
        AssertionError_ naming `owner` when the transform gives anything else or nothing."""
        if not self.assertion.context_transform:
            return None
        got = await self.transformed_context(owner)
        if isinstance(got, str):
            got = [got]
        if not isinstance(got, list) or not all(isinstance(p, str) for p in got):
            kind = "a list holding " + type(next(p for p in got if not isinstance(p, str))).__name__ \
                if isinstance(got, list) else type(got).__name__
            raise AssertionError_(f"{owner}: its contextTransform must return a text or a list of texts (the "
                                  f"passages), got {kind}")
        if not any(p.strip() for p in got):
            raise AssertionError_(f"{owner}: its contextTransform returned no passages")
        return got

    def rubric(self, default):
        """The rubric prompt: the assertion's, else the test's options.rubricPrompt, else the default."""
        value = self.assertion.rubric_prompt
        if value in (None, "", {}):
            value = self.test.options.get("rubricPrompt")
        return default if value in (None, "", {}) else value

    def result(self, condition: bool, reason: str, score: float | None = None) -> GradingResult:
        """Binary result: pass = condition XOR inverse."""
        passed = bool(condition) != self.inverse
        return GradingResult(
            passed=passed,
            score=(1.0 if passed else 0.0) if score is None else score,
            reason=PASSED if passed else worded(reason, self.inverse),
            assertion=self.assertion,
        )

    def verdict(self, passed: bool, reason: str) -> GradingResult:
        """A binary result whose pass the handler decided itself (its not- form already applied)."""
        return GradingResult(passed=passed, score=1.0 if passed else 0.0, reason=PASSED if passed else reason,
                             assertion=self.assertion)


PASSED = "Assertion passed"  # promptfoo's reason for a binary check that passed


def worded(reason: str, inverse: bool) -> str:
    """A binary check's failure reason: `{not}` in it becomes 'not ' for the not- form, else nothing."""
    return reason.replace("{not}", "not " if inverse else "")


def coerce_string(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)  # JSON.stringify


class AssertionError_(FactcliError):
    """A handler's complaint about its input (promptfoo's invariant): the row becomes ERROR. A
    FactcliError, so that from Python (check(), the pytest helpers) it is the error users catch."""
