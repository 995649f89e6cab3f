"""`facts-grounding`: FACTS Grounding (Jacovi et al., 2025) for a response written from a context document.

Two phases, run by every judge of the panel (`provider:` as a list; one grader otherwise):

1. Eligibility (paper §3.2): does the response address the user request? Each judge answers
   "No Issues", "Minor Issue(s)" or "Major Issue(s)". The response is ineligible only if EVERY
   judge that answered says "Major Issue(s)" (consensus, as in the paper).
2. Grounding (paper §3.1): is the response accurate, i.e. is every sentence supported by the
   context document or in no need of support? One verdict per judge, with the template of
   `config.template` (default `json`, the template the paper selected for two of its three judges).

Both phases run concurrently; the grounding verdicts of an ineligible response are kept (they give
the unadjusted score of the paper's Table 5).

Scores (paper §3.1-§3.2):
    score_j   = 1 if the response is eligible and judge j finds it accurate, else 0
    score     = mean_j score_j                (ineligible counts as inaccurate)
    pass      = score >= threshold            (default threshold 0.5: with three judges, at least two
                                               find it accurate; `threshold: 1` asks for all)
`config.aggregate: majority | unanimous` decides pass by the judges' votes instead (a majority
tie is a grading error); the score stays the mean. Over a column, `facts_summary(rows)` gives the
paper's factuality score p (the mean of the row scores, = the mean over judges of each judge's
accuracy), its 95% interval 1.96·sqrt(p(1-p)/N) (Tables 5 and 6), per-judge scores and the number
of ineligible responses.

Inputs:
- user request: the var named by `config.requestVar`, else the `request` var, else the `query`
  var, else the rendered prompt. When the rendered prompt is used and contains the context
  document (of 200 characters or more), the document is replaced there by "[the context
  document, given separately]" so that long documents are not sent twice.
- context document: the var named by `config.contextVar` (default `context`; a list of strings is
  joined by blank lines), or the result of the assertion's `contextTransform`. Missing or empty
  is an error of the row.
- response: the output (after `transform`). An empty response scores 0 without any judge call.

Templates (`config.template`, or per judge `config.templates: {<judge label or id>: template}`,
as the paper picks one per judge model, e.g. implicit_span_level for its Claude judge):
- `json` (default): one JSON object per line and per sentence,
  `{"sentence", "label": supported | unsupported | contradictory | no_rad, "rationale", "excerpt"}`.
  Parsed as factuality-methods.md §4.3: the text of a ```json fence if there is one, split into
  objects at each `}` followed by a newline, newlines in an object read as spaces, `\\'` as `'`
  (several objects on one line, or one JSON array, are read too; prose without `{` is skipped).
  Accurate iff every label is supported or no_rad.
- `implicit_span_level`: lines `Sentence k: <text>`, optional `Sentence k evidence: <quote>`,
  `Sentence k label: Accurate | Inaccurate`, then `Final Answer: Accurate | Inaccurate`. The
  verdict is read from the text after the last `Final Answer:`: lower-cased, containing
  "inaccurate" or "false" is inaccurate, else "accurate" or "true" is accurate (§4.3).
- `span_level`: the response is split into sentences (lines, then sentence ends; abbreviations,
  initials and decimals kept whole) and every span gets its own call (variables `span`,
  `span_index`, `span_count`); each reply ends with `Final Answer: ...` (optional `Evidence:` and
  `Reasoning:` lines). Accurate iff every span is. The costliest template: one call per sentence
  and judge, each with the whole document.
- `response_level`: one call, free reasoning ending with `Final Answer: Accurate | Inaccurate`.
For `span_level` and `response_level` the final answer is read as for implicit_span_level; a
reply without `Final Answer:` falls back to its last line naming exactly one of Accurate /
Inaccurate.

Stricter than the reference parsers (factuality-methods.md §8.2), every one of these is a grading
error (`graderError`, raw reply kept) rather than a guess: no JSON object or an unreadable one, an
unknown label, a sentence label other than Accurate/Inaccurate, sentence numbers that are not
1..n with one label each, a final answer that contradicts the sentence labels, no final answer,
an eligibility reply without a readable verdict (the starter notebook counts that as eligible) or
with conflicting verdicts. With `config.checkSentences` (default true), judged sentences must come
from the response (scoring/content's rule: word for word after normalising case, spacing and markup,
or with at least 60% of their content words, by stem, in it) and must cover at least
`config.minCoverage` (default 0.5) of the response's words: a judge that labels the few-shot example or skips most of the response is a
grading error of that judge. A judge that fails (HTTP error, unusable reply) is left out of the row
and reported, as for every judge panel (factcli.scoring.panels): eligibility and the score are computed
over the judges that answered, the row lists the missing judge in `judgesFailed`, and
`facts_summary` counts such rows (`rowsWithFailedJudges`) and each judge's failures, since a
row scored by fewer judges is not quite the paper's fixed-panel mean. Every judge failing is a
grading error.

Every step prompt can be replaced (inline text, chat messages, or `file://` relative to the config):
`eligibilityPrompt`, `baselinePrompt`, `groundingPrompt` (whatever the template), or per template
`jsonPrompt`, `implicitSpanLevelPrompt`, `spanLevelPrompt`, `responseLevelPrompt`. Variables:
`request`, `context`, `response`, `full_prompt` (the rendered prompt; of a chat prompt, the
messages' contents joined by blank lines), every test var, and `baseline` (eligibility; empty
unless `config.baseline: true`, which first asks each judge for its own answer to the prompt, as
the paper's rubric does), `span`, `span_index`, `span_count` (span_level). The replies must keep
the formats above; the eligibility reply must contain
```json {"Instruction Following": "No Issues" | "Minor Issue(s)" | "Major Issue(s)"} ```.
Other `config` keys: `eligibility: false` skips phase 1; `maxConcurrency` bounds the judge calls in
flight for one row (default: no limit of its own, the run's -j).

Results metadata: `method` "facts-grounding", `score`, `unadjustedScore`, `eligible`, `judges`
(per judge: `judge`, `id`, `template`, `eligibility`, `eligible`, `accurate`, `verdict`, `score`,
`reason`, `eligibilityReason`, `coverage`, `cost`, or `error`), `judgesFailed`, `claims` (per judged sentence or
span: `judge`, `index`, `text`, `verdict`, `grounded`, `reason`, `evidence`, `evidenceFound`),
`graderReplies`, `graderCost`. The rendered judge prompts are not stored (each holds the document).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from factcli import templating
from factcli.methods import facts_prompts
from factcli.methods import reports as method_reports
from factcli.methods.claims import JudgeCall, JudgeError, ask_text, judges_for, prompt_for, shared_lead, warmed
from factcli.methods.facts_parsing import (
    BASELINE_REPLY,
    ELIGIBILITY_REPLY,
    GROUNDING_REPLIES,
    MAJOR,
    check_sentences,
    parse_eligibility,
    parse_implicit_span_level,
    parse_json_labels,
    parse_span_level,
    read_final_answer,
    split_sentences,
)
from factcli.methods.settings import Bad, MethodSettings, Setting, choice, concurrency, flag, max_concurrency, number
from factcli.providers import prompt_cache
from factcli.scoring.content import normalize
from factcli.scoring.gather import bound, gather_all, gather_settled
from factcli.scoring.grading import grader_error
from factcli.scoring.outcome import meta_errored
from factcli.scoring.panels import AGGREGATES, JudgeVerdict, aggregate, judge_names
from factcli.scoring.registry import AssertionContext, AssertionError_, assertion
from factcli.stats.intervals import wald_margin as facts_interval  # the paper's interval (Tables 5, 6)
from factcli.types import GradingResult, ProviderSpec, TokenUsage

METHOD = "facts-grounding"
TEMPLATES = ("json", "implicit_span_level", "span_level", "response_level")
DEFAULT_TEMPLATE = "json"
DEFAULT_THRESHOLD = 0.5
DEFAULT_MIN_COVERAGE = 0.5
TEMPLATE_PROMPT_KEYS = {"json": "jsonPrompt", "implicit_span_level": "implicitSpanLevelPrompt",
                        "span_level": "spanLevelPrompt", "response_level": "responseLevelPrompt"}
GROUNDED = {"SUPPORTED", "NO_RAD", "ACCURATE"}
DOC_MARKER = "[the context document, given separately]"


# ---------------------------------------------------------------- configuration


@dataclass
class Options:
    template: str
    templates: dict
    eligibility: bool
    baseline: bool
    aggregate: str
    check_sentences: bool
    min_coverage: float
    max_concurrency: int | None
    threshold: float
    profile: str = "default"
    template_given: bool = True


_template = choice(*TEMPLATES, fold=lambda name: name.lower().replace("-", "_").replace(" ", "_"))


def _templates(value: Any) -> dict:
    if not isinstance(value, dict):
        raise Bad(f"a mapping of a judge (label or id) to a template ({', '.join(TEMPLATES)})")
    try:
        return {str(k): _template(v) for k, v in value.items()}
    except Bad:
        raise Bad(f"a mapping of a judge (label or id) to a template ({', '.join(TEMPLATES)})") from None


SETTINGS = MethodSettings(
    METHOD,
    Setting("template", _template), Setting("templates", _templates), Setting("aggregate", choice(*AGGREGATES)),
    Setting("eligibility", flag), Setting("baseline", flag), Setting("checkSentences", flag, ("check_sentences",)),
    Setting("minCoverage", number(0, 1), ("min_coverage",)),
    max_concurrency("max_concurrency"),
    Setting("contextVar", str, ("context_var",)), Setting("requestVar", str, ("request_var",)),
    prompts=("eligibilityPrompt", "baselinePrompt", "groundingPrompt", *TEMPLATE_PROMPT_KEYS.values()),
)


def _options(ctx: AssertionContext) -> Options:
    given = SETTINGS.read(ctx.assertion.config)
    threshold = ctx.threshold if ctx.threshold is not None else DEFAULT_THRESHOLD
    profile = given.get("profile", "default")
    ref = profile == "reference"  # the paper's protocol: a baseline answer for eligibility, no sentence check
    return Options(given.get("template", DEFAULT_TEMPLATE), given.get("templates", {}), given.get("eligibility", True),
                   given.get("baseline", ref), given.get("aggregate", "mean"), given.get("checkSentences", not ref),
                   given.get("minCoverage", float(DEFAULT_MIN_COVERAGE)),
                   concurrency(given), float(threshold), profile, "template" in given)


def paper_template(spec: ProviderSpec) -> str:
    """The template the paper gave a judge of this family: implicit_span_level for its Claude judge, json for
    its Gemini and GPT judges."""
    return "implicit_span_level" if re.search(r"claude|anthropic", spec.id, re.I) else "json"


@dataclass
class Inputs:
    request: str
    context: str
    response: str
    full_prompt: str
    prompt_messages: list[dict] | None = None
    _norm_context: str | None = field(default=None, repr=False)

    def variables(self, ctx: AssertionContext, **extra) -> dict:
        return {**ctx.vars, "request": self.request, "context": self.context, "response": self.response,
                "full_prompt": self.full_prompt, **extra}

    def find_evidence(self, excerpt: str) -> bool:
        """Is the excerpt in the document (exactly, or after normalising spaces and case)?"""
        if excerpt in self.context:
            return True
        if self._norm_context is None:
            self._norm_context = normalize(self.context)
        return normalize(excerpt) in self._norm_context


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n\n".join(value)
    return json.dumps(value, ensure_ascii=False)


def _chat_messages(prompt: str) -> list[dict] | None:
    stripped = prompt.lstrip()
    if not stripped.startswith("["):
        return None
    try:
        messages = json.loads(stripped)
    except ValueError:
        return None
    if isinstance(messages, list) and messages and all(isinstance(m, dict) and "role" in m for m in messages):
        return messages
    return None


async def _inputs(ctx: AssertionContext) -> Inputs:
    given = SETTINGS.read(ctx.assertion.config)
    if ctx.assertion.context_transform:
        # the provider's output and metadata, as the RAG types see them (retrieved passages)
        context = "\n\n".join(await ctx.transformed_passages("facts-grounding"))
    else:
        name = given.get("contextVar", "context")
        context = _as_text(ctx.vars.get(name))
        if not context.strip():
            raise AssertionError_(f"facts-grounding needs the context document in the '{name}' var "
                                  "(or config.contextVar, or a contextTransform)")
    if not context.strip():
        raise AssertionError_("facts-grounding: the contextTransform returned no context document")
    prompt = ctx.prompt or ""
    messages = _chat_messages(prompt)
    as_text = "\n\n".join(_as_text(m.get("content")) for m in messages) if messages else prompt
    request_var = given.get("requestVar")
    if request_var is not None:
        if str(request_var) not in ctx.vars:
            raise AssertionError_(f"facts-grounding: config.requestVar names the var '{request_var}', "
                                  "which this test does not have")
        request = _as_text(ctx.vars[str(request_var)])
    elif "request" in ctx.vars:
        request = _as_text(ctx.vars["request"])
    elif "query" in ctx.vars:
        request = _as_text(ctx.vars["query"])
    else:
        request = as_text.replace(context, DOC_MARKER) if len(context) > 200 else as_text
    return Inputs(request, context, ctx.output_text, as_text, messages)


# ---------------------------------------------------------------- one judge


def _grounding_prompt(ctx: AssertionContext, template: str):
    cfg = ctx.assertion.config
    key = TEMPLATE_PROMPT_KEYS[template]
    if cfg.get(key) not in (None, "", []):
        return prompt_for(ctx, key, None)
    return prompt_for(ctx, "groundingPrompt", facts_prompts.GROUNDING[template])


async def _run_judge(ctx: AssertionContext, spec: ProviderSpec, name: str, template: str, inp: Inputs,
                     opts: Options, sem: asyncio.Semaphore) -> dict:
    call = JudgeCall()
    out: dict = {"judge": name, "id": spec.id, "template": template, "call": call, "claims": []}

    async def ask(prompt, variables, step, shape, cache_prefix=0):
        async with sem:
            return await ask_text(ctx, spec, prompt, variables, call, step, shape, cache_prefix)

    async def eligibility():
        baseline = ""
        if opts.baseline:
            base_prompt = prompt_for(ctx, "baselinePrompt", None)
            if base_prompt is None and inp.prompt_messages:
                base_prompt = inp.prompt_messages
            baseline = await ask(base_prompt or facts_prompts.BASELINE, inp.variables(ctx), "baseline",
                                 BASELINE_REPLY)
        reply = await ask(prompt_for(ctx, "eligibilityPrompt", facts_prompts.ELIGIBILITY),
                          inp.variables(ctx, baseline=baseline), "eligibility", ELIGIBILITY_REPLY)
        return parse_eligibility(reply), reply

    async def grounding():
        prompt = _grounding_prompt(ctx, template)
        if template == "span_level":
            spans = split_sentences(inp.response)
            variables = [inp.variables(ctx, span=s, span_index=i + 1, span_count=len(spans))
                         for i, s in enumerate(spans)]
            # the spans' calls share the instructions, the request, the context and the response: the
            # first goes alone when that is long enough to be cached, and the others read it
            static, first = shared_lead(prompt, variables)
            replies = await warmed([lambda i=i, v=v: ask(prompt, v, f"grounding span {i + 1}/{len(spans)}",
                                                         GROUNDING_REPLIES[template], static)
                                    for i, v in enumerate(variables)],
                                   bool(first) and prompt_cache.worth_warming(first, static, spec.config),
                                   lambda aws: gather_settled(aws, JudgeError))
            claims = []
            for i, (span, reply) in enumerate(zip(spans, replies)):
                accurate, reasoning, evidence = parse_span_level(reply, f"span_level span {i + 1}")
                claims.append({"text": span, "verdict": "ACCURATE" if accurate else "INACCURATE",
                               "reason": reasoning, "evidence": evidence})
            return all(c["verdict"] == "ACCURATE" for c in claims), claims, 1.0
        reply = await ask(prompt, inp.variables(ctx), "grounding", GROUNDING_REPLIES[template])
        if template == "json":
            claims = parse_json_labels(reply)
            accurate = all(c["verdict"] in GROUNDED for c in claims)
        elif template == "implicit_span_level":
            accurate, claims = parse_implicit_span_level(reply)
        else:  # response_level: one verdict for the whole response
            accurate = read_final_answer(reply, "response_level")
            return accurate, [{"text": inp.response, "verdict": "ACCURATE" if accurate else "INACCURATE",
                               "reason": reply.strip()[-1000:], "evidence": None}], 1.0
        coverage = None
        if opts.check_sentences and claims:
            try:
                coverage = check_sentences(name, [c["text"] for c in claims], inp.response, opts.min_coverage,
                                            template)
            except JudgeError as exc:
                raise JudgeError(str(exc), reply) from None
        return accurate, claims, coverage

    jobs = [grounding()] + ([eligibility()] if opts.eligibility else [])
    try:
        results = await gather_settled(jobs, JudgeError)
    except JudgeError as exc:
        out["error"], out["raw"] = str(exc), exc.raw
        return out
    accurate, claims, coverage = results[0]
    out["accurate"] = accurate
    out["coverage"] = coverage
    for i, c in enumerate(claims):
        c["grounded"] = c["verdict"] in GROUNDED
        if c.get("evidence"):
            c["evidenceFound"] = inp.find_evidence(c["evidence"])
        out["claims"].append({"judge": name, "index": i + 1, **c})
    if opts.eligibility:
        label, reply = results[1]
        out["eligibility"], out["eligibilityReason"] = label, reply.strip()[-1000:]
    else:
        out["eligibility"] = None
    out["eligible"] = out["eligibility"] != MAJOR
    return out


def _ground_reason(r: dict) -> str:
    claims = r["claims"]
    bad = [c for c in claims if not c["grounded"]]
    if r["template"] == "response_level" or not claims:
        return "accurate" if r["accurate"] else "inaccurate"
    unit = "span" if r["template"] == "span_level" else "sentence"
    if not bad:
        return f"accurate ({len(claims)} {unit}s grounded)"
    shown = "; ".join(f"{c['verdict'].lower()}: {c['text'][:80]}" for c in bad[:2])
    return f"inaccurate ({len(bad)} of {len(claims)} {unit}s not grounded: {shown}{' …' if len(bad) > 2 else ''})"


def _fmt(x: float) -> str:
    return templating.to_fixed(x, 2)


@assertion(METHOD, model_graded=True, settings=SETTINGS)
async def facts_grounding(ctx: AssertionContext) -> GradingResult:
    if ctx.grader is None:
        raise AssertionError_("facts-grounding needs a grader (run through factcli eval)")
    opts = _options(ctx)
    try:
        specs = judges_for(ctx)
    except JudgeError as exc:
        raise AssertionError_(f"facts-grounding: {exc}") from None
    names = judge_names(specs)
    def default(spec: ProviderSpec) -> str:
        return paper_template(spec) if opts.profile == "reference" and not opts.template_given else opts.template

    templates = [opts.templates.get(n, opts.templates.get(s.label or "", opts.templates.get(s.id, default(s))))
                 for n, s in zip(names, specs)]
    inp = await _inputs(ctx)
    base_meta = {"method": METHOD, "profile": opts.profile, "threshold": opts.threshold, "aggregate": opts.aggregate}

    if not inp.response.strip():
        judges = [{"judge": n, "id": s.id, "template": t, "eligibility": None, "eligible": False, "accurate": None,
                   "score": 0.0, "reason": "empty response: not judged"} for n, s, t in zip(names, specs, templates)]
        meta = {**base_meta, "score": 0.0, "unadjustedScore": 0.0, "eligible": False, "empty": True,
                "judges": judges, "claims": []}
        return _finish(ctx, False, 0.0, "FACTS grounding 0.00: the response is empty", TokenUsage(), meta)

    sem = bound(opts.max_concurrency)
    results = await gather_all(_run_judge(ctx, s, n, t, inp, opts, sem) for s, n, t in zip(specs, names, templates))
    tokens, cost, cost_known = TokenUsage(), 0.0, True
    for r in results:
        tokens.add(r["call"].tokens)
        cost += r["call"].cost
        cost_known = cost_known and r["call"].cost_known
    answered = [r for r in results if "error" not in r]
    # Eligibility is the paper's consensus over the judges that answered: a failed judge has no say.
    eligible = not opts.eligibility or any(r["eligible"] for r in answered)
    for r in answered:
        r["score"] = 1.0 if eligible and r["accurate"] else 0.0
        r["reason"] = _ground_reason(r)
    verdicts = [JudgeVerdict(r["judge"], error=r["error"], raw=r.get("raw")) if "error" in r
                else JudgeVerdict(r["judge"], score=r["score"], reason=r["reason"]) for r in results]
    panel = aggregate(verdicts, opts.threshold, opts.aggregate)
    details = _details(results, cost if cost_known else None)
    if not answered:
        meta = {**base_meta, **details, "judgesFailed": [r["judge"] for r in results]}
        return grader_error(f"facts-grounding: {panel.error}", panel.raw, tokens, **meta)

    score = panel.score
    unadjusted = sum(1.0 for r in answered if r["accurate"]) / len(answered)
    meta = {"method": METHOD, "profile": opts.profile, "score": score, "unadjustedScore": unadjusted,
            "eligible": eligible, "threshold": opts.threshold, "aggregate": opts.aggregate, **details,
            "judgesFailed": [v.judge for v in panel.failed]}
    if panel.error:
        return grader_error(f"facts-grounding: {panel.error}", None, tokens, **meta)
    passed = panel.passed
    if opts.aggregate in ("majority", "unanimous") and len(results) > 1:
        rule = panel.rule() + " judges"
    else:
        rule = f"{'≥' if passed else '<'} {templating.js_string(opts.threshold)}"
        if len(answered) < len(results):
            rule += f" ({panel.rule()})"
    per_judge = "; ".join(f"{r['judge']}: {r['reason']}" for r in answered)
    if panel.failed:
        per_judge += "; " + panel.failed_note()
    if not eligible:
        head = (f"FACTS grounding {_fmt(score)} {rule}: ineligible, every judge that answered found Major "
                f"Issue(s) in following the request (grounding alone: {_fmt(unadjusted)})")
    else:
        head = f"FACTS grounding {_fmt(score)} {rule}"
    return _finish(ctx, passed, score, f"{head} ({per_judge})", tokens, meta)


def _details(results: list[dict], cost: float | None) -> dict:
    return {"judges": [_judge_meta(r) for r in results], "claims": [c for r in results for c in r["claims"]],
            "graderReplies": [rep for r in results for rep in r["call"].replies], "graderCost": cost}


def _judge_meta(r: dict) -> dict:
    keep = ("judge", "id", "template", "eligibility", "eligible", "accurate", "score", "reason", "eligibilityReason",
            "coverage", "error")
    out = {k: r[k] for k in keep if k in r}
    if isinstance(r.get("accurate"), bool):
        out["verdict"] = "ACCURATE" if r["accurate"] else "INACCURATE"
    call = r["call"]
    out["cost"] = call.cost if call.cost_known else None
    return out


def _finish(ctx: AssertionContext, passed: bool, score: float, reason: str, tokens: TokenUsage,
            meta: dict) -> GradingResult:
    if ctx.inverse:
        passed, score = not passed, 1.0 - score
    return GradingResult(passed, score, reason, tokens_used=tokens, metadata=meta)


# ---------------------------------------------------------------- column summary


def _facts_components(item: Any) -> list[dict]:
    """facts-grounding metadata found in a row: an EvalResult, a GradingResult, a results-JSON row,
    a gradingResult/component dict, or the metadata dict itself."""
    if item is None:
        return []
    if isinstance(item, GradingResult):
        found = [item.metadata] if item.metadata.get("method") == METHOD else []
        for c in item.component_results:
            if c is not item:
                found.extend(_facts_components(c))
        return found
    grading = getattr(item, "grading", None)
    if grading is not None or hasattr(item, "step"):
        return _facts_components(grading)
    if isinstance(item, dict):
        if item.get("method") == METHOD:
            return [item]
        found = []
        meta = item.get("metadata")
        if isinstance(meta, dict) and meta.get("method") == METHOD:
            found.append(meta)
        for key in ("gradingResult", "componentResults"):
            sub = item.get(key)
            for s in (sub if isinstance(sub, list) else [sub] if isinstance(sub, dict) else []):
                found.extend(_facts_components(s))
        return found
    return []


def facts_summary(rows: Iterable[Any]) -> dict:
    """The FACTS Grounding score of one column (paper §3, Tables 5-6).

    Every facts-grounding result in `rows` counts once (rows whose grading failed are counted
    apart as `gradingErrors`; rows without the assertion are ignored). Over the N judged results:
    `accuracy` p = mean of the row scores (= the mean over judges of each judge's accuracy, with
    ineligible responses counted inaccurate), `ci95` = 1.96·sqrt(p(1-p)/N), `unadjusted` the same
    without the eligibility filter (Table 5), `ineligible` the number of responses every judge
    found to have Major Issue(s), and `judges`: per judge its accuracy, interval, unadjusted
    accuracy and eligibility votes over the rows it answered, and `failed`, the rows where it
    failed and was left out. `rowsWithFailedJudges` counts the judged rows scored without one or
    more of their judges.
    """
    metas: list[dict] = []
    for row in rows:
        metas.extend(_facts_components(row))
    errors = sum(1 for m in metas if meta_errored(m))
    judged = [m for m in metas if not meta_errored(m) and isinstance(m.get("score"), (int, float))]
    n = len(judged)

    def stat(values: list[float]) -> dict:
        if not values:
            return {"n": 0, "accuracy": None, "ci95": None}
        p = sum(values) / len(values)
        return {"n": len(values), "accuracy": p, "ci95": facts_interval(p, len(values))}

    total = stat([float(m["score"]) for m in judged])
    unadjusted = stat([float(m.get("unadjustedScore", m["score"])) for m in judged])
    per_judge: dict[str, dict] = {}
    for m in judged:
        for j in m.get("judges") or []:
            entry = per_judge.setdefault(j["judge"], {"scores": [], "accurate": [], "votes": Counter(),
                                                      "failed": 0})
            if j.get("error") is not None:
                entry["failed"] += 1
                continue
            entry["scores"].append(float(j.get("score") or 0.0))
            entry["accurate"].append(1.0 if j.get("accurate") else 0.0)
            entry["votes"][j.get("eligibility") or "not judged"] += 1
    judges = {}
    for name, e in per_judge.items():
        s, u = stat(e["scores"]), stat(e["accurate"])
        judges[name] = {**s, "unadjusted": u["accuracy"], "unadjustedCi95": u["ci95"],
                        "eligibility": dict(sorted(e["votes"].items())), "majorIssues": e["votes"].get(MAJOR, 0),
                        "failed": e["failed"]}
    return {
        "n": n,
        "accuracy": total["accuracy"],
        "ci95": total["ci95"],
        "unadjusted": unadjusted["accuracy"],
        "unadjustedCi95": unadjusted["ci95"],
        "ineligible": sum(1 for m in judged if m.get("eligible") is False),
        "gradingErrors": errors,
        "rowsWithFailedJudges": sum(1 for m in judged if m.get("judgesFailed")),
        "judges": judges,
    }


def format_facts_summary(summary: dict) -> str:
    """One line for the summary table: `FACTS 91.4% ±1.9 (N=860; ineligible 3; judge-a 90.0% ±2.0, …)`."""
    if not summary["n"]:
        return f"FACTS n/a (no judged rows; grading errors {summary['gradingErrors']})"
    parts = [f"N={summary['n']}", f"ineligible {summary['ineligible']}"]
    if summary["gradingErrors"]:
        parts.append(f"grading errors {summary['gradingErrors']}")
    if summary.get("rowsWithFailedJudges"):
        parts.append(f"a judge failed and was left out in {summary['rowsWithFailedJudges']} row(s)")
    for name, j in summary["judges"].items():
        shown = "n/a" if j["accuracy"] is None else f"{100 * j['accuracy']:.1f}% ±{100 * j['ci95']:.1f}"
        parts.append(f"{name} {shown}" + (f" (failed {j['failed']})" if j.get("failed") else ""))
    return f"FACTS {100 * summary['accuracy']:.1f}% ±{100 * summary['ci95']:.1f} ({'; '.join(parts)})"


method_reports.register("factsGrounding", METHOD, facts_summary, format_facts_summary)
