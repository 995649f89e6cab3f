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
from factcli.types import Assertion, GradingResult, ProviderResponse, TestCase


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
              model_graded: bool = False, needs_value: bool = False, preflight: Callable | None = None,
              check: Callable | None = None, settings: Any = None):
    """Register an assertion handler under `name` (and aliases)."""

    def register(fn: Callable) -> Callable:
        if name in _REGISTRY or name in _ALIASES:
            raise RuntimeError(f"assertion type {name!r} registered twice")
        _REGISTRY[name] = AssertionType(
            name, fn, inspect.iscoroutinefunction(fn), default_threshold, model_graded, needs_value, preflight,
            check, settings,
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
        handler.__module__ = rule.__module__  # the family that registers it (registry._FAMILY_OF)
        assertion(name, *aliases, needs_value=needs_value, check=rule)(handler)
        return rule

    return register


# The built-in types and the module that registers each: a run imports only the families it uses
# (importing all of them, with numpy, jsonschema, sqlglot, html5lib, nltk, ..., would slow every
# start-up). A new type is one entry here; a new family module is the value of its types' entries.
_FAMILY_OF = {
    **dict.fromkeys(("contains", "contains-all", "contains-any", "equals", "icontains", "icontains-all",
                     "icontains-any", "regex", "starts-with"), "assertions.text"),
    **dict.fromkeys(("contains-json", "is-json"), "assertions.structured"),
    **dict.fromkeys(("contains-html", "is-html"), "assertions.html_output"),
    **dict.fromkeys(("contains-xml", "is-xml"), "assertions.xml_output"),
    **dict.fromkeys(("contains-sql", "is-sql"), "assertions.sql_output"),
    **dict.fromkeys(("is-valid-function-call", "is-valid-openai-function-call", "is-valid-openai-tools-call"),
                    "assertions.function_calls"),
    **dict.fromkeys(("bleu", "gleu", "levenshtein", "meteor", "rouge-n", "word-count"), "assertions.similarity"),
    **dict.fromkeys(("cost", "finish-reason", "is-refusal", "latency", "perplexity", "perplexity-score", "webhook"),
                    "assertions.operational"),
    **dict.fromkeys(("factuality", "g-eval", "llm-rubric", "max-score", "model-graded-closedqa",
                     "model-graded-factuality", "select-best", "similar", "similar:cosine", "similar:dot",
                     "similar:euclidean"), "assertions.graded"),
    **dict.fromkeys(("javascript", "python", "python-function"), "assertions.scripts"),
    **dict.fromkeys(("answer-relevance", "context-faithfulness", "context-recall", "context-relevance",
                     "conversation-relevance"), "assertions.rag"),
    "factual-correctness": "methods.factual_correctness", "factscore": "methods.factscore",
    "facts-grounding": "methods.facts_grounding", "simpleqa": "methods.simpleqa", "safe": "methods.safe",
    "citations": "methods.citations",
}
FAMILIES = tuple(dict.fromkeys(_FAMILY_OF.values()))  # what load_all imports
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

    def rubric(self, default):
        """The rubric prompt: the assertion's, else the test's options.rubricPrompt, else the default."""
        value = self.assertion.rubric_prompt
        if value in (None, "", {}):
            value = self.test.options.get("rubricPrompt")
        return default if value in (None, "", {}) else value

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


class AssertionError_(FactcliError):
    """A handler's complaint about its input (promptfoo's invariant): the row becomes ERROR. A
    FactcliError, so that from Python (check(), the pytest helpers) it is the error users catch."""
