"""Which judges grade an assertion: the one rule, read by everything that needs the answer.

- the handlers, as they grade (methods/claims.judges_for, assertions/graded's panels, factscore's
  decomposer and embedder; a handler with one grader reads grading.Grader.spec_for, the same
  GraderSource.of this module resolves with);
- the checks before any call (run/planning/graders.check_graders: every judge resolved, then run/planning/preflight
  checks its vendor, credential and server);
- the dry run's estimate (run/planning/estimate) and calibrate's column names (config/labels).

The rule:
- a judge panel is `provider:` as a list, or `config.models` for a type that reads it as one
  (TypeFacts.models_alias); only a type that takes a panel (TypeFacts.panel) may have one; each member
  is a text judge;
- without a panel, each grader kind the type calls (TypeFacts.graders: text, embedding) is one judge,
  resolved by grading.GraderSource (assertion `provider` > test `options.provider` > `--grader` >
  `defaultTest.options.provider` > FACTCLI_GRADER > openai when OPENAI_API_KEY is set);
- a method's own models (the `judges` of its registration: factscore's `config.decomposer`, and its
  `config.embeddingProvider` for dense retrieval) follow, each with its role.
"""

from __future__ import annotations

from dataclasses import dataclass
from factcli.errors import ConfigError
from factcli.scoring.grading import GraderSource, NoGrader, pick
from factcli.scoring.registry import TYPES, lookup
from factcli.types import ProviderSpec

JUDGE = "judge"  # a panel's member, or the one grader of a kind


@dataclass(frozen=True)
class Judge:
    spec: ProviderSpec
    kind: str = "text"  # the grader kind it is called as: text or embedding
    role: str = JUDGE  # JUDGE, or a method's own role ("decomposer", "embedder")


class JudgeProblem(ConfigError):
    """No judge can be named: `key` is where under the assertion (`provider`, `provider[1]`,
    `config.decomposer`; "" for the assertion itself: no grader is set anywhere)."""

    def __init__(self, detail: str, key: str = "", no_grader: bool = False):
        super().__init__(detail)
        self.key = key
        self.no_grader = no_grader


def panel_of(assertion) -> list | None:
    """The judge list as written (`provider:` as a list, else `config.models` where the type reads it as
    one), or None when the type's grader(s) grade."""
    value = assertion.provider
    if isinstance(value, list):
        return value
    facts = TYPES.get(assertion.base_type)
    if value is None and facts is not None and facts.models_alias:
        models = (assertion.config or {}).get("models")
        if isinstance(models, list):
            return models
    return None


def panel_specs(panel: list, key: str = "provider") -> list[ProviderSpec]:
    """A panel's judges, each a text model (`key`: where the list is written, for messages)."""
    if not panel:
        raise JudgeProblem("an empty list of judges", key)
    specs = []
    for j, item in enumerate(panel):
        try:
            spec = pick(item)
        except ConfigError as exc:
            raise JudgeProblem(exc.detail, f"{key}[{j}]") from None
        if spec is None:
            raise JudgeProblem("a judge needs a text model", f"{key}[{j}]")
        specs.append(spec)
    return specs


def judges_of(assertion, test=None, source: GraderSource | None = None) -> list[Judge]:
    """Every model that grades `assertion` on a row of `test` (None: a test with no provider of its own),
    with its kind and role; [] for a type graded without a model. JudgeProblem when one cannot be named."""
    facts = TYPES.get(assertion.base_type)
    if facts is None or not facts.model_graded:
        return []
    source = source or GraderSource()
    panel = panel_of(assertion)
    if panel is not None:
        if not facts.panel:
            panels = ", ".join(name for name, f in TYPES.items() if f.panel)
            raise JudgeProblem(f"a judge panel (a list of providers) is not supported for '{assertion.type}'; "
                               f"panels work with {panels}", "provider")
        key = "provider" if panel is assertion.provider else "config.models"
        judges = [Judge(spec) for spec in panel_specs(panel, key)]
    else:
        judges = []
        for kind in facts.graders:
            try:
                spec = source.of(assertion, test, kind)
            except NoGrader as exc:
                detail = exc.detail if kind == "text" else \
                    f"{assertion.type} also needs an embedding model: {exc.detail}"
                raise JudgeProblem(detail, no_grader=True) from None
            except ConfigError as exc:
                raise JudgeProblem(exc.detail, "provider") from None
            judges.append(Judge(spec, kind))
    registered = lookup(assertion.type)
    own = registered.judges if registered is not None else None
    for key, value, kind, role in own(assertion.config or {}) if own is not None else ():
        try:
            spec = pick(value, kind)
        except ConfigError as exc:
            raise JudgeProblem(exc.detail, f"config.{key}") from None
        if spec is None:
            raise JudgeProblem(f"the {role} needs {'an embedding' if kind == 'embedding' else 'a text'} model",
                               f"config.{key}")
        judges.append(Judge(spec, kind, role))
    return judges


def role_of(judges: list[Judge], role: str, kind: str = "text") -> list[ProviderSpec]:
    """The specs of `judges` in one role, of one kind."""
    return [j.spec for j in judges if j.role == role and j.kind == kind]


def own_judge(judges: list[Judge], role: str) -> ProviderSpec | None:
    """A method's own model in `role` (its decomposer, its embedder), None when not set."""
    return next((j.spec for j in judges if j.role == role), None)
