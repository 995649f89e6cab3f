"""`factcli eval --dry-run`: what a run would call and cost, computed without calling anything.

Model calls are exact: one per step, its input tokens counted from the rendered prompt with the
model's tokenizer (providers/tokens.py), its reply assumed to run to the cap it will be sent with
(`max_tokens`, else the model's output limit from litellm's table). The cost range is [input only, input + every reply at its
cap], priced as --max-cost prices a call (providers/pricing.Price): the low end every input token at
the input price (no prompt-cache read assumed), the high end at the dearer of the input and
cache-write prices; `batch` (a bool, or a test of a provider) prices the calls that go through a
batch API at the batch price. A call the response cache already holds costs nothing and is counted apart.

Searches (`safe`): an upper estimate, K facts a row each searched up to maxSearches times, priced at
the backend's price per search; the cost range starts at $0, since none may be needed.

Grader calls: one text call per model-graded assertion per judge and row; answer-relevance's
embedding calls (the query and its three questions, EMBEDDED_TOKENS each) on their embedder's line,
priced as --max-cost prices them (`similar`'s are left out: a handful of tokens). The claim-level methods (factual-correctness, factscore, facts-grounding) call once
per claim, which no one knows before the model answers: their rows are counted, not priced (on each
judge's line, and on a method's own model's: factscore's decomposer, its dense retrieval's embedder), except
facts-grounding with a one-call template (all but span_level), which is one call per judge and row
plus its eligibility call unless `config.eligibility: false`.
A grader call's input is its rubric (GRADER_RUBRIC_TOKENS, a typical built-in rubric) plus the
graded output: nothing of it at the low end, the model's reply cap at the high end, or, when the
output is known before the run (calibrate's), its tokens exactly; plus the test's `context` document
for a type that shows it to the grader (SHOWS_CONTEXT, or a rubric that names `{{context}}`); its reply runs
to the cap it will be sent with: the grader's own max_tokens if its config sets one, else the step's
cap (scoring/replies.py: 512 for a factuality verdict, 1,024 for g-eval's steps, …), plus a reasoning
grader's reasoning budget (providers/reasoning.py: 2,048 at gpt-5's low effort). A type whose
grading makes several calls (g-eval, answer-relevance) counts each.
"""

from __future__ import annotations

from dataclasses import dataclass

from factcli.providers.pricing import price_of
from factcli.providers.tokens import count_messages
from factcli.run.calling.budget import budget_cap, output_cap, reply_cap
from factcli.report.figures import money, plural
from factcli.types import walk

GRADER_RUBRIC_TOKENS = 600
EMBEDDED_TOKENS = 64  # a query or a generated question, embedded by answer-relevance


@dataclass
class Line:
    """One provider's or grader's share of the plan."""

    name: str
    calls: int = 0
    cached: int = 0
    input_tokens: int = 0
    output_cap: int = 0
    low: float | None = 0.0
    high: float | None = 0.0
    unpriced: bool = False
    claim_rows: int = 0  # rows graded by a claim-level method: calls not known in advance
    search_rows: int = 0  # a search backend's line: rows of `safe` that search with it

    def add_cost(self, provider, tokens_in: int, low_in: int, cap: int, batch=False) -> None:
        price = price_of(provider) if provider is not None else None
        if price is None:
            self.unpriced = True
            return
        batched = batch(provider) if callable(batch) else bool(batch)
        self.low += price.cost(low_in, 0, batched)
        self.high += tokens_in * price.worst_input(batched) + price.cost(0, cap, batched)


def plan(run, batch=False) -> tuple[list[Line], list[Line]]:
    """(one Line per provider, one Line per grader) for the run's remaining steps. `batch`: whether
    a call goes through a batch API, for every provider (a bool) or by provider (a callable); by
    default as the run will send it (--batch, evaluateOptions.batch, a provider's `batch:`)."""
    from factcli.providers.registry import create_provider

    if batch is False and getattr(run, "batch", None) is not None:
        from factcli.run.calling.batches import wanted

        default = run.batch["default"]
        batch = lambda provider: wanted(provider, default)  # noqa: E731 - calling/batches' one rule
    from factcli.run.calling.cache import ResponseCache, cache_key
    from factcli.run.planning.row_vars import static_row

    suite = run.suite
    cache = ResponseCache() if run.cache else None
    providers = {i: create_provider(spec, suite.base_dir) for i, spec in enumerate(suite.providers)}
    lines = {i: Line(spec.label or spec.id) for i, spec in enumerate(suite.providers)}
    graders: dict[str, Line] = {}
    grader_caps = {spec.id: output_cap(spec.config or {}) for spec, _ in run.grader_specs}
    grader_models = {spec.id: create_provider(spec, suite.base_dir) for spec, kind in run.grader_specs
                     if kind == "text"}
    from factcli.providers.embedding import EmbeddingProvider

    grader_models.update({("embedding", spec.id): EmbeddingProvider(spec, suite.base_dir)
                          for spec, kind in run.grader_specs if kind == "embedding"})
    for step in run.steps:
        provider, line = providers[step.provider_idx], lines[step.provider_idx]
        cap = reply_cap(provider)
        if step.test.provider_output is None:
            rendered = static_row(step).prompt  # without running user code (script vars, prompt functions)
            model = getattr(provider, "price_model", None) or ""
            tokens = count_messages(rendered.messages, model) or 0
            line.calls += 1
            line.output_cap = cap
            # the key the call will have: a budget sends max_tokens with a call that has no cap
            sent_cap = budget_cap(provider) if run.max_cost is not None and \
                output_cap(provider.config or {}) is None else None
            extra = {"max_tokens": sent_cap} if sent_cap else None
            if cache is not None and provider.cacheable and cache.get(
                    cache_key(provider.cache_identity(), rendered.messages, step.repeat_idx, extra,
                              rendered.config)) is not None:
                line.cached += 1
            else:
                line.input_tokens += tokens
                line.add_cost(provider, tokens, tokens, cap, batch)
        _plan_grading(run, step, cap, graders, grader_caps, grader_models, batch)
    if cache is not None:
        cache.close()
    return list(lines.values()), list(graders.values())


def _plan_grading(run, step, model_cap: int, graders: dict, caps: dict, models: dict, batch=False) -> None:
    from factcli.providers import reasoning
    from factcli.scoring.grading import GRADER_MAX_TOKENS
    from factcli.scoring.judges import JUDGE, JudgeProblem, judges_of, role_of
    from factcli.scoring.registry import TYPES, lookup
    from factcli.scoring.replies import caps_for

    for a in walk(step.test.assertions):
        kind = lookup(a.type)
        if kind is None or not kind.model_graded or "text" not in TYPES[kind.name].graders:
            continue  # `similar` only embeds
        try:
            judges = judges_of(a, step.test, run.grader_source)
        except JudgeProblem:
            continue  # (the checks before any call name it)
        claim_method = TYPES[kind.name].claim_method  # its calls follow the output
        ids = [spec.id for spec in role_of(judges, JUDGE)]
        if kind.name == "safe":
            _plan_searches(run, a, graders)
        if kind.name == "answer-relevance":
            _plan_embeddings(role_of(judges, JUDGE, "embedding"), graders, models)
        fixed = fixed_calls(kind.name, a) if claim_method else None
        for gid in ids:
            line = graders.setdefault(gid, Line(gid))
            if claim_method and fixed is None:
                line.claim_rows += 1
                continue
            provider = models.get(gid)
            shown, output_cap = shown_tokens(step, a, provider, model_cap)
            # a reasoning grader is sent its reasoning budget on top of each step's cap (providers/reasoning.py)
            hidden = reasoning.allowance(provider) if provider is not None and not caps.get(gid) else 0
            for step_cap in [GRADER_MAX_TOKENS] * fixed if fixed else caps_for(kind.name) or [GRADER_MAX_TOKENS]:
                cap = caps.get(gid) or step_cap + hidden  # the grader's own max_tokens wins
                line.calls += 1
                line.output_cap = max(line.output_cap, cap)
                line.input_tokens += GRADER_RUBRIC_TOKENS + shown
                line.add_cost(provider, GRADER_RUBRIC_TOKENS + shown + output_cap, GRADER_RUBRIC_TOKENS + shown, cap,
                              batch)
        # a method's own models (factscore's decomposer, its dense retrieval's embedder): calls per fact
        for own in dict.fromkeys(j.spec.id for j in judges if j.role != JUDGE and j.spec.id not in ids):
            graders.setdefault(own, Line(own)).claim_rows += 1


# Types that show their grader the test's `context` var (a document): its tokens are in every call's input.
SHOWS_CONTEXT = ("facts-grounding", "context-faithfulness", "context-recall", "context-relevance")


def fixed_calls(kind: str, a) -> int | None:
    """Calls per judge and row of a claim-level method whose count does not follow the output:
    facts-grounding with a one-call template (all but span_level), plus its eligibility call
    unless `config.eligibility: false`. None: one call per claim, not known before the model answers."""
    if kind != "facts-grounding":
        return None
    cfg = a.config or {}
    if cfg.get("templates") or cfg.get("template", "json") == "span_level":
        return None
    return 1 + (cfg.get("eligibility", True) is not False)


def shown_tokens(step, a, provider, model_cap: int) -> tuple[int, int]:
    """-> (tokens the grader is shown besides its rubric: a document it reads, and an output already
    known (calibrate's), exactly; the output's share still unknown: the model's reply cap, else 0)."""
    model = getattr(provider, "price_model", None) or ""
    known = step.test.provider_output if isinstance(step.test.provider_output, str) else None
    shown = count_messages([{"role": "user", "content": known}], model) or 0 if known is not None else 0
    context = (step.test.vars or {}).get("context")
    if isinstance(context, list):
        context = "\n\n".join(map(str, context))
    if isinstance(context, str) and context and (a.base_type in SHOWS_CONTEXT or "{{context}}" in str(a.value or "")):
        shown += count_messages([{"role": "user", "content": context}], model) or 0
    return shown, 0 if known is not None else model_cap


def _plan_embeddings(embedders: list, lines: dict, models: dict) -> None:
    """answer-relevance embeds the query and each of its three generated questions."""
    for spec in embedders:
        line = lines.setdefault(spec.id, Line(spec.id))
        for _ in range(4):
            line.calls += 1
            line.input_tokens += EMBEDDED_TOKENS
            line.add_cost(models.get(("embedding", spec.id)), EMBEDDED_TOKENS, EMBEDDED_TOKENS, 0)


def _plan_searches(run, a, lines: dict) -> None:
    """A `safe` row's searches, which no one knows before the model answers: an upper estimate of K facts
    (the paper's median, unless config.K says otherwise), each searched up to maxSearches times (once
    with `claims: verifiable`), at the backend's published price."""
    from factcli.methods.safe import settings
    from factcli.scoring.registry import AssertionError_

    try:
        s = settings(a.config or {}, run.suite.base_dir)
    except AssertionError_:
        return  # the preflight names the problem
    backend = s["backend"]
    line = lines.setdefault(f"search:{backend.name}", Line(f"search:{backend.name}"))
    per_row = s["K"] * (1 if s["mode"] == "verifiable" else s["maxSearches"])
    line.search_rows += 1
    line.calls += per_row
    line.output_cap = per_row  # searches a row, for the report line
    line.high += per_row * (backend.call_price or 0.0)


def _money(line: Line) -> str:
    if line.unpriced:
        return "n/a: no price is known (add inputCost and outputCost, USD per token, to its config)"
    if not line.high:
        return "$0"
    return f"{money(line.low)} – {money(line.high)}"


def describe(run, batch=False) -> list[str]:
    """The dry run's report, one line per provider and grader and a total (`batch`: as plan's)."""
    models, graders = plan(run, batch)
    # what a run would print before its first call (unknown vars, a misspelled model, ...)
    out = [f"warning: {w}" for w in run.warnings[run.warnings_shown:]]
    out.append(f"Dry run: {plural(run.total_steps, 'row')}, no call made.")
    low = high = 0.0
    unpriced = False
    for line in models:
        cached = f", {line.cached} already cached" if line.cached else ""
        out.append(f"  model  {line.name}: {plural(line.calls, 'call')}{cached}; {line.input_tokens:,} input tokens, "
                   f"replies up to {line.output_cap:,} tokens each; cost {_money(line)}")
        low, high, unpriced = low + (line.low or 0), high + (line.high or 0), unpriced or line.unpriced
    for line in graders:
        if line.search_rows:
            out.append(f"  search {line.name.removeprefix('search:')}: up to {line.calls:,} searches for "
                       f"{plural(line.search_rows, 'row')} by safe ({line.output_cap:,} a row: K facts, each searched up to "
                       f"maxSearches times; an upper estimate), cost up to {money(line.high)}")
            high += line.high
            continue
        parts = []
        if line.calls and not line.output_cap:  # an embedder: tokens in, a vector out
            parts.append(f"{plural(line.calls, 'embedding')}; ~{line.input_tokens:,} tokens; cost {_money(line)}")
        elif line.calls:
            parts.append(f"{plural(line.calls, 'call')}; ~{line.input_tokens:,} rubric tokens, replies up to "
                         f"{line.output_cap:,} tokens each; cost {_money(line)}")
        if line.claim_rows:
            parts.append(f"{line.claim_rows} rows by a claim-level method (one call per claim: not estimated)")
        out.append(f"  grader {line.name}: " + "; ".join(parts))
        low, high, unpriced = low + (line.low or 0), high + (line.high or 0), unpriced or line.unpriced
    if unpriced and not high:
        total = "n/a (no price is known for these models)"
    else:
        total = f"{money(low)} – {money(high)}" + (" plus calls whose price is unknown" if unpriced else "")
    if any(line.claim_rows for line in graders):
        total += " plus the claim-level calls"
    out.append(f"Estimated cost: {total}")
    return out
