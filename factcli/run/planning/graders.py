"""Which models grade a run, checked when it is planned, before any call: every judge of every assertion
resolved (scoring/judges.judges_of) with its role and kind, a calibration report that does not fit its
grader, a grader that may favour its own answers, a misspelled model name, and, under a budget, a model
whose price is unknown. run/runner.prepare calls these; run/planning/preflight checks the graders
they return.
"""

from __future__ import annotations

from factcli.config.loader import Suite
from factcli.types import walk_keyed

SELF_PREFERENCE = "(self-preference bias)"  # in the warning's text; left out when nothing is left to run (flow)


def self_preference_warning(grader_id: str, provider_ids: list[str]) -> str | None:
    """A warning when a text grader is, or shares a model family with, a model under test."""
    from factcli.scoring.panels import same_family

    if grader_id in provider_ids:
        return (f"the grader {grader_id} is also a model under test: it may favour its own answers "
                f"{SELF_PREFERENCE}; prefer a grader from another model family")
    for pid in provider_ids:
        family = same_family(grader_id, pid)
        if family:
            return (f"the grader {grader_id} is from the same model family ({family}) as the model under test "
                    f"{pid}: it may favour answers like its own {SELF_PREFERENCE}; prefer a grader from "
                    "another model family")
    return None


def model_name_warnings(suite: Suite) -> list[str]:
    """A model name litellm's list does not have but has one close to (`gpt-4o-mni`), or a model type
    no provider knows (`openai:chatt:…`): a warning, since new models appear before litellm lists them
    (and promptfoo only warns of the type)."""
    from factcli.providers.pricing import model_name_problem
    from factcli.providers.registry import create_provider

    out = []
    for i, spec in enumerate(suite.providers):
        problem = None
        if spec.id.count(":") >= 2 and not spec.id.startswith(("file:", "python:", "exec:")):  # vendor:type:model
            from factcli.providers.litellm_provider import kind_problem  # (not imported by an echo run)

            problem = kind_problem(spec.id)
        problem = problem or model_name_problem(create_provider(spec, suite.base_dir))
        if problem and problem not in out:
            out.append(f"providers[{i}] {spec.id}: {problem}")
    return out


def check_prices(suite: Suite, graders: list) -> None:
    """A budget needs the price of every model and grader it may call: one unknown is an error now,
    naming the key that would price it. `graders`: (spec, kind) of each grader (check_graders), each
    priced with its own config (`inputCost`/`outputCost`), as --dry-run prices it."""
    from factcli.errors import FactcliError
    from factcli.providers.registry import create_provider
    from factcli.run.calling.budget import unpriced

    where = {}
    for i, s in enumerate(suite.providers):
        where.setdefault(s.id, f"providers[{i}].config")
    models = [create_provider(s, suite.base_dir) for s in suite.providers]
    unknown = [s.id for s, p in zip(suite.providers, models) if unpriced(p)]
    for spec, kind in graders:
        if kind == "embedding":
            from factcli.providers.embedding import EmbeddingProvider

            provider = EmbeddingProvider(spec, suite.base_dir)
        else:
            provider = create_provider(spec, suite.base_dir)
        if unpriced(provider):
            unknown.append(spec.id)
    unknown = list(dict.fromkeys(unknown))
    if unknown:
        first = unknown[0]
        key = where.get(first, "the grader's config (defaultTest.options.provider: {id: ..., config: {...}})")
        raise FactcliError(f"--max-cost: no price is known for {', '.join(unknown)} (litellm's price table does not "
                           f"list it), so the budget could not be kept: add its price in USD per token to {key}, "
                           "e.g. inputCost: 0.0000025 and outputCost: 0.00001 (or cost: for both), or drop the budget")


def calibration_mismatch(a, grader_id: str | None) -> str | None:
    """A warning when a calibrated assertion is not graded as its calibration was (type, grader,
    rubric prompt): the report's error rates may not hold for this judge."""
    c = a.calibration
    report_assertion = c.get("assertion") or {}
    differs = []
    report_type = str(report_assertion.get("type") or "")
    if report_type.removeprefix("not-") != a.base_type:
        differs.append(f"type {report_type or '?'} there, {a.base_type} here")
    if grader_id is not None and c.get("grader") != grader_id:
        differs.append(f"grader {c.get('grader') or '?'} there, {grader_id} here")
    if report_assertion.get("rubricPrompt") != a.raw.get("rubricPrompt"):
        differs.append("another rubric prompt")
    if not differs:
        return None
    return (f"the calibration '{c['label']}' ({c['report']}) was measured with another judge ({'; '.join(differs)}): "
            "its error rates may not hold here, nor the pass rate corrected with them")


def check_graders(suite: Suite, source, warnings: list[str], specs: list | None = None) -> list[str]:
    """Resolve every model-graded assertion's graders before any call: none available is a config
    error. Warns once per text grader that is, or is of the same family as, a model under test, and
    once per calibrated assertion graded otherwise than its calibration."""
    from factcli.config.providers import check_values
    from factcli.errors import ConfigError
    from factcli.scoring.judges import JUDGE, JudgeProblem, judges_of, panel_of, role_of
    from factcli.scoring.registry import lookup

    provider_ids = [p.id for p in suite.providers]
    graders: list[str] = []
    checked: set[str] = set()
    valued: set[str] = set()

    def note(spec, kind: str, role: str) -> None:
        spec_id = spec.id
        if specs is not None and (spec, kind) not in specs:
            specs.append((spec, kind))  # for the preflight: each grader's own config (its key, its server)
        if spec_id not in graders:
            graders.append(spec_id)
        if kind == "text" and role == JUDGE and spec_id not in checked:
            checked.add(spec_id)
            message = self_preference_warning(spec_id, provider_ids)
            if message:
                warnings.append(message)

    def mismatch(a, grader_id: str | None) -> None:
        message = calibration_mismatch(a, grader_id)
        if message and message not in warnings:
            warnings.append(message)

    from factcli.config.stream import facts_of

    facts = facts_of(suite.tests)
    if facts is not None and not facts.model_graded:
        return graders  # a suite loaded from CSV/JSONL files without a judge: its tests are not read again
    unjudged = None  # the last assertion list found without a judge (defaultTest's is shared by many tests)
    for test in suite.tests:
        if test.assertions is unjudged:
            continue
        judged = [(where, a, kind) for where, a in walk_keyed(test.assertions)  # (a set is its members)
                  if not a.children and (kind := lookup(a.type)) is not None and kind.model_graded]
        if not judged:
            unjudged = test.assertions
            continue
        for where, a, kind in judged:
            file, path = test.source
            try:
                judges = judges_of(a, test, source)
            except JudgeProblem as exc:
                key = f"{where}.{exc.key}" if exc.key else where
                raise ConfigError(exc.detail, file or None, f"{path}.{key}" if path else key) from None
            for judge in judges:
                if judge.spec.config and judge.spec.id not in valued:  # its config's values, as a model's are
                    valued.add(judge.spec.id)
                    check_values(judge.spec.config, file or None,
                                 f"{f'{path}.{where}' if path else where} (its grader {judge.spec.id}).config")
                note(judge.spec, judge.kind, judge.role)
            if a.calibration is not None:  # a panel's judges are no one grader to compare
                for grader_id in [None] if panel_of(a) is not None else [s.id for s in role_of(judges, JUDGE)]:
                    mismatch(a, grader_id)
    return graders
