"""`safe`: long-form factuality checked against web search, scored as F1@K (SAFE, Wei et al., 2024,
"Long-form factuality in large language models"; VeriScore, Song et al., 2024, with `claims: verifiable`).

Steps (SAFE, the paper's §3 and google-deepmind/long-form-factuality), each a judge call whose reply is
JSON, each prompt overridable under `config` (factcli/methods/safe_prompts.py has the variables):
1. `splitPrompt`: the response becomes individual facts;
2. `revisePrompt`, per fact: the fact made self-contained, and whether it is relevant to the prompt;
3. per relevant fact, up to `maxSearches` (default 5) searches, each query written by `queryPrompt`
   after seeing the results so far; an empty query ends that fact's search;
4. `ratePrompt`: supported or not_supported against the results found.
`claims: verifiable` (VeriScore) replaces 1-2: sentence by sentence, `extractPrompt` extracts the
verifiable claims of the sentence with the three sentences before it and the one after it as context;
every claim counts as relevant, and its one search is the claim itself (`results` default 10).

`profile: reference` follows SAFE's and VeriScore's code: the split is one call a sentence (FActScore's
preamble sentences left out), revision and relevance are two calls (`revisePrompt`, `relevancePrompt`),
the knowledge is SAFE's (a line of snippets a search), and an unreadable reply is asked again up to
`retries` (SAFE's 10) times, then handled as SAFE does: the revision keeps the fact, the relevance is
relevant, the search stops, a rating has the fact checked anew (3 times) and then dropped. With
`claims: verifiable` the rating is ternary, the results are Serper's organic ones, VeriScore's
abstentions are not checked, and the column report adds VeriScore's K per domain, the claim counts
over every compared column sorted, at len // 2 and the largest (veriscore_k, a cross-column report).

Score, with S supported, N not supported and I irrelevant facts (the paper's §5):
    precision = S / (S + N)           (undefined when S + N = 0: reported as null)
    recall@K  = min(S / K, 1)
    F1@K      = 2·P·R / (P + R), and 0 when S = 0
`K` (default 64, the median number of facts in the paper's responses) is how many supported facts a
user wants; the assertion passes when F1@K ≥ threshold (default 0.5); `not-safe` inverts it.

`config.search`: {provider, apiBaseUrl, apiKeyEnvar, results (default 3, SAFE's; 10 with
`claims: verifiable`), costPerSearch, rpm, maxConcurrency, and each backend's own keys} chooses the
backend (factcli/providers/search). Searches go through ctx.grader, so run/calling/caller retries, paces,
caches and prices them, and the row's ledger counts them.

One judge grades a row (a panel would search once per judge; give one `provider`). A reply of the
wrong shape or a search that fails after its retries makes the row a grading error, never a guess.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from factcli import templating
from factcli.methods import reports as method_reports
from factcli.methods import safe_prompts as prompts
from factcli.methods.claims import (
    JudgeCall,
    JudgeError,
    ask_json,
    gather_calls,
    prompt_for,
    string_list,
    without_preambles,
)
from factcli.methods.settings import MethodSettings, Setting, anything, choice, concurrency, max_concurrency, whole
from factcli.providers.search import create_backend, results_wanted
from factcli.providers.search.base import SearchConfigError
from factcli.scoring.gather import bound
from factcli.scoring.grading import grader_error
from factcli.scoring.content import RESTATED, Sent, listed
from factcli.scoring.outcome import meta_errored
from factcli.scoring.registry import AssertionContext, AssertionError_, assertion
from factcli.scoring.replies import Choice, Flag, ListOf, Obj, Reply, Text
from factcli.stats.text import split_paragraph_sentences
from factcli.types import GradingResult

DEFAULT_K = 64  # the paper's median number of facts per response (§5)
DEFAULT_MAX_SEARCHES = 5  # SAFE's max_steps
SAFE_RETRIES = 10  # SAFE's max_retries: a step is asked up to 11 times for a readable reply
PIPELINE_TRIES = 3  # SAFE's _MAX_PIPELINE_RETRIES: a fact whose rating stays unreadable is checked anew, then dropped
DEFAULT_THRESHOLD = 0.5
VERIFIABLE_RESULTS = 10  # VeriScore's search results per claim
CONTEXT_BEFORE, CONTEXT_AFTER = 3, 1  # VeriScore's window around the sentence being extracted
MODES = ("all", "verifiable")
SUPPORTED, NOT_SUPPORTED, IRRELEVANT = "supported", "not_supported", "irrelevant"
_VERDICTS = {"supported": SUPPORTED, "not_supported": NOT_SUPPORTED, "unsupported": NOT_SUPPORTED}
TERNARY = ("supported", "contradicted", "inconclusive")  # VeriScore's labels; only supported counts
# VeriScore's abstentions (veriscore.py's `abstain_responses`), matched exactly against the stripped response:
# such a response is not checked, and is left out of K and of the means
VERISCORE_ABSTAIN = ("I'm sorry, I cannot fulfill that request.", "I'm sorry, I can't fulfill that request.",
                     "I'm sorry, but I cannot fulfill that request.", "I'm sorry, but I can't fulfill that request.",
                     "Sorry, but I can't fulfill that request.", "Sorry, I can't do that.")

# Each step's reply (scoring/replies.py): its schema goes with the request, its cap is the call's
# max_tokens. A long answer's split is the one step that may need the most (about 15 tokens a fact);
# the rating gets room to reason before its verdict, as SAFE's rater does. The facts and claims listed must
# come from the response (or the prompt it answers) (scoring/content.py).
FACTS_REPLY = Reply("safe_facts", Obj(facts=ListOf(Text())), 2048, types=("safe",),
                    content=listed("facts", "fact", RESTATED))
REVISION_REPLY = Reply("safe_revision", Obj(fact=Text(), relevant=Flag()), 512, types=("safe",),
                       content=listed("fact", "revised fact", RESTATED))
QUERY_REPLY = Reply("safe_query", Obj(query=Text()), 256, types=("safe",))
RATING_REPLY = Reply("safe_rating", Obj(reason=Text(), verdict=Choice(SUPPORTED, NOT_SUPPORTED)), 1024,
                     types=("safe",))
CLAIMS_REPLY = Reply("safe_claims", Obj(claims=ListOf(Text())), 1024, types=("safe",),
                     content=listed("claims", "claim", RESTATED))
# profile: reference (SAFE's separate steps, VeriScore's three labels)
SENTENCE_FACTS_REPLY = Reply("safe_sentence_facts", Obj(facts=ListOf(Text())), 512, types=("safe",),
                             content=listed("facts", "fact", RESTATED))
REVISED_REPLY = Reply("safe_revised", Obj(fact=Text()), 512, types=("safe",),
                      content=listed("fact", "revised fact", RESTATED))
RELEVANCE_REPLY = Reply("safe_relevance", Obj(relevant=Flag()), 64, types=("safe",))
TERNARY_REPLY = Reply("veriscore_rating", Obj(reason=Text(), verdict=Choice(*TERNARY)), 1024, types=("safe",))


def f1_at_k(supported: int, not_supported: int, k: int) -> tuple[float | None, float, float]:
    """(precision, recall@K, F1@K) as the paper defines them; precision is None without rated facts."""
    rated = supported + not_supported
    precision = supported / rated if rated else None
    recall = min(supported / k, 1.0)
    if supported == 0:
        return precision, recall, 0.0
    return precision, recall, 2 * precision * recall / (precision + recall)


# ---------------------------------------------------------------- settings


SETTINGS = MethodSettings(
    "safe",
    Setting("claims", choice(*MODES, say="all (SAFE) or verifiable (VeriScore)")), Setting("search", anything),
    Setting("K", whole(1)), Setting("maxSearches", whole(1)),
    max_concurrency(), Setting("domain", anything), Setting("retries", whole(0)),
    prompts=("splitPrompt", "extractPrompt", "revisePrompt", "relevancePrompt", "queryPrompt", "ratePrompt"),
)


def settings(cfg: dict, base_dir: Path | None) -> dict:
    """The assertion's settings, every bad key named (AssertionError_)."""
    given = SETTINGS.read(cfg)
    mode = given.get("claims", "all")
    search = given.get("search")
    if search is None:
        raise AssertionError_("safe: config.search is required, e.g. {provider: serper} (or {provider: knowledge, "
                              "knowledge: docs/} to search a local corpus offline)")
    try:
        backend = create_backend(search, base_dir)
        results = results_wanted(search, VERIFIABLE_RESULTS if mode == "verifiable" else 3)
    except SearchConfigError as exc:
        raise AssertionError_(f"safe: {exc}") from None
    profile = given.get("profile", "default")
    return {"mode": mode, "backend": backend, "results": results, "K": given.get("K", DEFAULT_K),
            "maxSearches": given.get("maxSearches", DEFAULT_MAX_SEARCHES),
            "concurrency": concurrency(given), "profile": profile,
            "reference": profile == "reference", "tries": 1 + given.get("retries", SAFE_RETRIES),
            # SAFE's own flow (profile: reference, claims: all): retries and fallbacks instead of grading errors
            "safe_flow": profile == "reference" and mode == "all"}


def preflight(a, base_dir: Path, test=None) -> list[str]:
    """Before any call: the config is valid, the backend's key is set, a knowledge source loads."""
    try:
        s = settings(a.config or {}, base_dir)
    except AssertionError_ as exc:
        return [str(exc)]
    return [f"safe: {p}" for p in s["backend"].preflight()]


# ---------------------------------------------------------------- steps


def knowledge_text(found: list[dict]) -> str:
    """The results so far as the query and rating steps see them."""
    if not found:
        return "N/A"
    return "\n\n".join(f"[{i + 1}] {r['title']}\n{r['snippet']}\nURL: {r['url']}" for i, r in enumerate(found))


def safe_knowledge(searches: list[list[dict]]) -> str:
    """SAFE's knowledge: each search's snippets joined on one line, a line a search ("N/A" before any)."""
    lines = [" ".join(r["snippet"] for r in found if r.get("snippet")) for found in searches]
    return "\n".join(line for line in lines if line) or "N/A"


async def _split(ctx, spec, s: dict, call: JudgeCall) -> list[dict]:
    """The facts to check: [{text, revised?, relevant?}] (revised and relevant come later in SAFE mode)."""
    response = ctx.output_text
    if not response.strip():
        return []
    if s["mode"] == "all" and not s["reference"]:
        obj = await ask_json(ctx, spec, prompt_for(ctx, "splitPrompt", prompts.SPLIT),
                             {**ctx.vars, "prompt": ctx.prompt, "response": response}, call, "split", FACTS_REPLY,
                             sent=Sent.of("response", response, ctx.prompt or ""))
        return [{"text": f} for f in string_list(obj, "facts", "split", call.replies[-1]["reply"])]
    sentences = split_paragraph_sentences(response)
    sem = bound(s["concurrency"])
    if s["mode"] == "all":  # SAFE: one split call a sentence, its preambles (FActScore's rules) giving no facts
        sentences = without_preambles(sentences)
        template = prompt_for(ctx, "splitPrompt", prompts.SPLIT_SENTENCE)

        async def split(i: int, sub: JudgeCall) -> list[str]:
            step = f"split sentence {i + 1}"
            async with sem:
                obj = await ask_json(ctx, spec, template, {**ctx.vars, "prompt": ctx.prompt, "response": response,
                                                           "sentence": sentences[i]}, sub, step, SENTENCE_FACTS_REPLY,
                                 sent=Sent.of("response", response, ctx.prompt or ""))
            return string_list(obj, "facts", step, sub.replies[-1]["reply"])

        groups = await gather_calls(call, *(partial(split, i) for i in range(len(sentences))))
        return [{"text": f, "sentence": i + 1} for i, group in enumerate(groups) for f in group]

    async def extract(i: int, sub: JudgeCall) -> list[str]:
        before = sentences[max(0, i - CONTEXT_BEFORE):i]
        after = sentences[i + 1:i + 1 + CONTEXT_AFTER]
        context = " ".join([*before, f"<SOS>{sentences[i]}<EOS>", *after])
        async with sem:
            obj = await ask_json(ctx, spec, prompt_for(ctx, "extractPrompt", prompts.EXTRACT),
                                 {**ctx.vars, "prompt": ctx.prompt, "sentence": sentences[i], "context": context},
                                 sub, f"extract sentence {i + 1}", CLAIMS_REPLY,
                                 sent=Sent.of("response", context, ctx.prompt or ""))
        return string_list(obj, "claims", f"extract sentence {i + 1}", sub.replies[-1]["reply"])

    groups = await gather_calls(call, *(partial(extract, i) for i in range(len(sentences))))
    claims = [c for group in groups for c in group]
    return [{"text": c, "revised": c, "relevant": True} for c in dict.fromkeys(claims)]


async def _ask_until_read(ctx, spec, template: Any, variables: dict, call: JudgeCall, step: str, shape: Reply,
                          s: dict, read, offset: int = 0, sent: Sent | None = None) -> Any:
    """SAFE's retry loop: the step asked up to `tries` times (1 + `retries`, SAFE's 11) until `read(reply)`
    gives a value; None when no reply could be read (a reply that is no judgment of what was `sent` is not
    read either). A call that gets no reply at all (the endpoint failed after run/calling/caller' retries) is still a
    JudgeError: it is no judgment to fall back from."""
    for attempt in range(s["tries"]):
        try:
            obj = await ask_json(ctx, spec, template, variables, call, step if not attempt else f"{step} (try {attempt + 1})",
                                 shape, attempt=offset + attempt, sent=sent)
        except JudgeError as exc:
            if not (exc.raw or "").strip():
                raise
            continue
        value = read(obj)
        if value is not None:
            return value
    return None


def _flag(value: Any) -> bool | None:
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return value if isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


async def _revise_then_relevance(ctx, spec, fact: dict, call: JudgeCall, s: dict, offset: int = 0) -> None:
    """SAFE's two calls (classify_relevance.py): the fact made self-contained, then the revised fact's relevance
    to the prompt. As SAFE: a revision never read keeps the fact as it was, a relevance never read counts as
    relevant."""
    revised = await _ask_until_read(
        ctx, spec, prompt_for(ctx, "revisePrompt", prompts.REVISE_ONLY),
        {**ctx.vars, "prompt": ctx.prompt, "response": ctx.output_text, "fact": fact["text"]}, call, "revise",
        REVISED_REPLY, s, lambda obj: _text(obj.get("fact")), offset, _revising(ctx, fact))
    fact["revised"] = revised or fact["text"]
    if revised is None:
        fact["unread"] = fact.get("unread", []) + ["revise: kept the fact as written"]
    relevant = await _ask_until_read(
        ctx, spec, prompt_for(ctx, "relevancePrompt", prompts.RELEVANCE),
        {**ctx.vars, "prompt": ctx.prompt, "response": ctx.output_text, "fact": fact["revised"]}, call, "relevance",
        RELEVANCE_REPLY, s, lambda obj: _flag(obj.get("relevant")), offset)
    fact["relevant"] = True if relevant is None else relevant
    if relevant is None:
        fact["unread"] = fact.get("unread", []) + ["relevance: counted as relevant"]


def _revising(ctx, fact: dict) -> Sent:
    """What a revision is about: a revised fact must come from the fact, the response or the prompt."""
    return Sent.of("fact, the response or the prompt", fact["text"], ctx.output_text, ctx.prompt or "")


async def _revise(ctx, spec, fact: dict, call: JudgeCall) -> None:
    obj = await ask_json(ctx, spec, prompt_for(ctx, "revisePrompt", prompts.REVISE),
                         {**ctx.vars, "prompt": ctx.prompt, "response": ctx.output_text, "fact": fact["text"]},
                         call, "revise", REVISION_REPLY, sent=_revising(ctx, fact))
    revised, relevant = obj.get("fact"), obj.get("relevant")
    if isinstance(relevant, str) and relevant.strip().lower() in ("true", "false"):
        relevant = relevant.strip().lower() == "true"
    if not isinstance(revised, str) or not revised.strip() or not isinstance(relevant, bool):
        raise JudgeError(f'revise: expected {{"fact": "<text>", "relevant": true|false}}, got {str(obj)[:200]}',
                         call.replies[-1]["reply"])
    fact["revised"], fact["relevant"] = revised.strip(), relevant


async def _search(ctx, s: dict, query: str, fact: dict, found: list[dict], searches: list[list[dict]]) -> None:
    reply = await ctx.grader.search(s["backend"], query, s["results"])
    if reply.error is not None:
        raise JudgeError(f"search {query!r}: {reply.error}")
    fact["queries"].append(query)
    results = [r for r in reply.output or [] if isinstance(r, dict)]
    if s["reference"] and s["mode"] == "verifiable":  # VeriScore reads Serper's organic results only
        results = [r for r in results if not r.get("extra")]
    searches.append(results)
    seen = {(r["url"], r["snippet"]) for r in found}
    found.extend(r for r in results if (r.get("url"), r.get("snippet")) not in seen)


async def _check(ctx, spec, s: dict, fact: dict, call: JudgeCall, offset: int = 0) -> bool:
    """Search for one relevant fact, then rate it against what was found. False: SAFE's flow found no
    readable rating (the caller checks the fact anew, then drops it)."""
    fact.update(queries=[], evidence=[])
    found: list[dict] = fact["evidence"]
    searches: list[list[dict]] = []  # each search's results, as SAFE's knowledge lists them

    def knowledge() -> str:
        return safe_knowledge(searches) if s["reference"] else knowledge_text(found)

    claim = fact["revised"]
    if s["mode"] == "verifiable":
        await _search(ctx, s, claim, fact, found, searches)
    else:
        for step in range(1, s["maxSearches"] + 1):
            variables = {**ctx.vars, "fact": claim, "knowledge": knowledge(), "step": step}
            template = prompt_for(ctx, "queryPrompt", prompts.QUERY)
            if s["safe_flow"]:
                # SAFE: a step without a query is asked again, up to its retries; then the search stops
                query = await _ask_until_read(ctx, spec, template, variables, call, f"query {step}", QUERY_REPLY, s,
                                              lambda obj: _text(obj.get("query")), offset)
                if query is None:
                    break
            else:
                obj = await ask_json(ctx, spec, template, variables, call, f"query {step}", QUERY_REPLY)
                query = obj.get("query")
                if query is not None and not isinstance(query, str):
                    raise JudgeError(f'query {step}: expected {{"query": "<text>"}}, got {str(obj)[:200]}',
                                     call.replies[-1]["reply"])
                if not (query or "").strip():
                    break  # an empty query ends this fact's search
            await _search(ctx, s, query.strip(), fact, found, searches)
    ternary = s["reference"] and s["mode"] == "verifiable"
    template = prompt_for(ctx, "ratePrompt", prompts.RATE_TERNARY if ternary else prompts.RATE)
    variables = {**ctx.vars, "fact": claim, "knowledge": knowledge()}
    if s["safe_flow"]:
        obj = await _ask_until_read(ctx, spec, template, variables, call, "rate", RATING_REPLY, s,
                                    lambda o: o if _VERDICTS.get(_verdict_of(o)) else None, offset)
        if obj is None:
            return False
    else:
        obj = await ask_json(ctx, spec, template, variables, call, "rate", TERNARY_REPLY if ternary else RATING_REPLY)
    raw = _verdict_of(obj)
    if ternary:
        if raw not in TERNARY:
            raise JudgeError(f"rate: the verdict is {obj.get('verdict')!r}, expected one of {', '.join(TERNARY)}",
                             call.replies[-1]["reply"])
        fact["label"] = raw
        verdict = SUPPORTED if raw == "supported" else NOT_SUPPORTED
    else:
        verdict = _VERDICTS.get(raw)
    if verdict is None:
        raise JudgeError(f"rate: the verdict is {obj.get('verdict')!r}, expected supported or not_supported",
                         call.replies[-1]["reply"])
    fact["verdict"] = verdict
    reason = obj.get("reason")
    fact["reason"] = reason if isinstance(reason, str) else ""
    return True


def _verdict_of(obj: dict) -> str:
    return str(obj.get("verdict") or "").strip().lower().replace(" ", "_").replace("-", "_")


# ---------------------------------------------------------------- the assertion


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else templating.to_fixed(x, 2)


def _fact_meta(f: dict) -> dict:
    relevant = bool(f.get("relevant"))
    out = {"text": f["text"], "revised": f.get("revised", f["text"]), "relevant": relevant,
           "verdict": f.get("verdict", IRRELEVANT) if relevant else IRRELEVANT,
           "queries": f.get("queries", []), "evidence": f.get("evidence", []), "reason": f.get("reason", "")}
    if "label" in f:
        out["label"] = f["label"]
    if f.get("unread"):
        out["unread"] = f["unread"]
    return out


@assertion("safe", model_graded=True, preflight=preflight, settings=SETTINGS)
async def safe(ctx: AssertionContext) -> GradingResult:
    if ctx.grader is None:
        raise AssertionError_("safe needs a grader (run it through factcli eval)")
    if isinstance(ctx.assertion.provider, list) or isinstance(ctx.assertion.config.get("models"), list):
        raise AssertionError_("safe grades with one judge: give `provider` one model (a panel would search once "
                              "per judge)")
    s = settings(ctx.assertion.config or {}, getattr(ctx.grader, "base_dir", None))
    spec = ctx.grader.spec_for(ctx.assertion, ctx.test)
    threshold = ctx.threshold if ctx.threshold is not None else DEFAULT_THRESHOLD
    backend = s["backend"]
    meta: dict[str, Any] = {"method": "safe", "mode": s["mode"], "profile": s["profile"], "K": s["K"],
                            "threshold": threshold, "search": {"provider": backend.name, "results": s["results"]}}
    domain = SETTINGS.read(ctx.assertion.config).get("domain", ctx.vars.get("domain"))
    if domain is not None:
        meta["domain"] = templating.render(domain, ctx.vars) if isinstance(domain, str) and \
            templating.has_template(domain) else str(domain)
    call = JudgeCall()

    def failed(exc: JudgeError) -> GradingResult:
        return grader_error(f"safe: {exc}", exc.raw, call.tokens, **meta, graderReplies=call.replies,
                            graderCost=call.cost if call.cost_known else None)

    if s["reference"] and s["mode"] == "verifiable" and ctx.output_text.strip() in VERISCORE_ABSTAIN:
        return GradingResult(False, 0.0, "Abstained (VeriScore's abstention list): not checked; left out of K and "
                             "of the column's means", metadata={**meta, "abstained": True, "facts": []})
    try:
        facts = await _split(ctx, spec, s, call)
        sem = bound(s["concurrency"])

        async def one(fact: dict, sub: JudgeCall) -> None:
            if s["safe_flow"]:
                # SAFE (search_augmented_factuality_eval.py): a fact whose rating stays unreadable is checked
                # anew from its revision, up to 3 times, then dropped from the counts
                for attempt in range(PIPELINE_TRIES):
                    offset = attempt * s["tries"]
                    fact.pop("unread", None)  # what this check could not read
                    async with sem:
                        await _revise_then_relevance(ctx, spec, fact, sub, s, offset)
                    if not fact["relevant"]:
                        return
                    async with sem:
                        if await _check(ctx, spec, s, fact, sub, offset):
                            return
                fact["dropped"] = True
                return
            if s["mode"] == "all":
                async with sem:
                    await (_revise_then_relevance if s["reference"] else _revise)(ctx, spec, fact, sub)
            if fact["relevant"]:
                async with sem:
                    await _check(ctx, spec, s, fact, sub)

        await gather_calls(call, *(partial(one, f) for f in facts))
    except JudgeError as exc:
        return failed(exc)

    dropped = [{"text": f["text"], "revised": f.get("revised", f["text"]), "queries": f.get("queries", [])}
               for f in facts if f.get("dropped")]
    facts = [f for f in facts if not f.get("dropped")]
    if dropped:
        meta["dropped"] = dropped
    facts_meta = [_fact_meta(f) for f in facts]
    n_s = sum(f["verdict"] == SUPPORTED for f in facts_meta)
    n_n = sum(f["verdict"] == NOT_SUPPORTED for f in facts_meta)
    n_i = sum(f["verdict"] == IRRELEVANT for f in facts_meta)
    precision, recall, score = f1_at_k(n_s, n_n, s["K"])
    meta.update({"supported": n_s, "notSupported": n_n, "irrelevant": n_i, "precision": precision,
                 "recallAtK": recall, "f1AtK": score, "facts": facts_meta,
                 "searches": sum(len(f["queries"]) for f in facts_meta), "graderReplies": call.replies,
                 "graderCost": call.cost if call.cost_known else None})
    passed = score >= threshold
    k = s["K"]
    if not facts_meta:
        detail = "the response states no facts"
    else:
        detail = (f"{n_s} supported, {n_n} not supported, {n_i} irrelevant of {len(facts_meta)} facts; "
                  f"precision {_fmt(precision)}, recall@{k} {_fmt(recall)}")
        if n_s + n_n == 0:
            detail += "; no fact is relevant to the prompt"
    if dropped:
        detail += (f"; {len(dropped)} fact(s) dropped, their rating unreadable after {PIPELINE_TRIES} checks of "
                   f"{s['tries']} tries each (as SAFE drops them)")
    unsupported = [f["revised"] for f in facts_meta if f["verdict"] == NOT_SUPPORTED]
    if unsupported:
        detail += "; not supported: " + "; ".join(unsupported[:3]) + (" …" if len(unsupported) > 3 else "")
    relation = "≥" if passed else "<"
    reason = f"F1@{k} {_fmt(score)} {relation} {templating.js_string(threshold)} ({detail})"
    if ctx.inverse:
        passed, score = not passed, 1.0 - score
    return GradingResult(passed, score, reason, tokens_used=call.tokens, metadata=meta)


# ---------------------------------------------------------------- column summary


def _veriscore_rows(metas: list[dict]) -> list[dict]:
    """The rows VeriScore counts: judged, and not abstaining (an abstention is in neither K nor the means)."""
    return [m for m in metas if m.get("mode") == "verifiable" and m.get("profile") == "reference"
            and not meta_errored(m) and not m.get("abstained") and isinstance(m.get("f1AtK"), (int, float))]


def veriscore_k(columns: list[list[dict]]) -> dict:
    """VeriScore's K, per domain, from every compared column's responses (the paper's §3.3, utils.get_stats):
    the claim counts sorted, K the one at len // 2 (the upper median: 1, 2, 4, 5 claims give 4, not 3) and
    Kmax the largest; {domain: {"K", "Kmax", "responses"}}."""
    counts: dict[str, list[int]] = {}
    for metas in columns:
        for m in _veriscore_rows(metas):
            counts.setdefault(str(m.get("domain") or "all"), []).append(len(m.get("facts") or []))
    out = {}
    for d, c in counts.items():
        c.sort()
        out[d] = {"K": c[len(c) // 2], "Kmax": c[-1], "responses": len(c)}
    return out


def _veriscore(metas: list[dict], ks: dict) -> dict | None:
    rows = _veriscore_rows(metas)
    if not rows or not ks:
        return None
    median, largest, zero = [], [], set()
    for m in rows:
        domain = str(m.get("domain") or "all")
        k = ks.get(domain)
        if not k:
            continue
        if not k["K"] or not k["Kmax"]:  # recall@0 is undefined: said, never a figure that vanishes
            zero.add(domain)
            continue
        median.append(f1_at_k(int(m.get("supported") or 0), int(m.get("notSupported") or 0), k["K"])[2])
        largest.append(f1_at_k(int(m.get("supported") or 0), int(m.get("notSupported") or 0), k["Kmax"])[2])
    if not median and not zero:
        return None
    return {"f1AtKMedian": sum(median) / len(median) if median else None,
            "f1AtKMax": sum(largest) / len(largest) if largest else None, "rows": len(median),
            "domains": ks, **({"kZero": sorted(zero)} if zero else {})}


def safe_summary(metas: list[dict], domain_ks: dict | None = None) -> dict | None:
    """A column's SAFE report: rows scored, mean F1@K with its 95% bootstrap interval, mean precision
    (over rows with a rated fact), total S/N/I and the searches made; grading errors counted apart.
    With VeriScore's reference profile, `veriscore`: the mean F1@K with K per domain from all the
    compared columns (`domain_ks`, from veriscore_k), at the median and at the largest claim count."""
    from factcli.stats.intervals import bootstrap_mean

    scored = [m for m in metas if isinstance(m.get("f1AtK"), (int, float)) and not meta_errored(m)]
    errors = sum(1 for m in metas if meta_errored(m))
    abstained = sum(1 for m in metas if m.get("abstained") and not meta_errored(m))
    if not scored and not errors and not abstained:
        return None
    f1 = [float(m["f1AtK"]) for m in scored]
    precisions = [float(m["precision"]) for m in scored if isinstance(m.get("precision"), (int, float))]
    ks = sorted({m.get("K") for m in scored if isinstance(m.get("K"), int)})
    return {
        "rows": len(scored), "gradingErrors": errors, "abstained": abstained, "K": ks[0] if len(ks) == 1 else ks,
        "f1AtK": sum(f1) / len(f1) if f1 else None, "f1AtKInterval": bootstrap_mean(f1, seed=0) if f1 else None,
        "precision": sum(precisions) / len(precisions) if precisions else None,
        "supported": sum(int(m.get("supported") or 0) for m in scored),
        "notSupported": sum(int(m.get("notSupported") or 0) for m in scored),
        "irrelevant": sum(int(m.get("irrelevant") or 0) for m in scored),
        "searches": sum(int(m.get("searches") or 0) for m in scored),
        **({"veriscore": found} if (found := _veriscore(metas, domain_ks or {})) else {}),
    }


def describe_safe(summary: dict) -> str:
    """`SAFE F1@64 0.412 (95% CI 0.300–0.520; precision 0.830; 120 supported, 25 not, 14 irrelevant; 10 rows)`."""
    k = summary["K"]
    k_text = k if isinstance(k, int) else "K"
    if summary["f1AtK"] is None:
        said = [f"{summary['abstained']} abstained"] if summary.get("abstained") else []
        said.append(f"grading errors {summary['gradingErrors']}")
        return f"SAFE F1@{k_text} n/a ({'; '.join(said)})"
    parts = []
    ci = summary.get("f1AtKInterval")
    if ci:
        parts.append(f"95% CI {ci['low']:.3f}–{ci['high']:.3f}")
    if summary["precision"] is not None:
        parts.append(f"precision {summary['precision']:.3f}")
    parts.append(f"{summary['supported']} supported, {summary['notSupported']} not, {summary['irrelevant']} irrelevant")
    parts.append(f"{summary['rows']} rows, {summary['searches']} searches")
    if summary.get("abstained"):
        parts.append(f"{summary['abstained']} abstained, left out")
    if summary["gradingErrors"]:
        parts.append(f"grading errors {summary['gradingErrors']}")
    if not isinstance(k, int):
        parts.append(f"K varies: {', '.join(map(str, k))}")
    line = f"SAFE F1@{k_text} {summary['f1AtK']:.3f} ({'; '.join(parts)})"
    v = summary.get("veriscore")
    if v:
        ks = "; ".join(f"{d}: K={_k(x['K'])}, Kmax={x['Kmax']} over {x['responses']} responses"
                       for d, x in v["domains"].items())
        if v["f1AtKMedian"] is not None:
            line += (f"; VeriScore F1@K(median) {v['f1AtKMedian']:.3f}, F1@K(max) {v['f1AtKMax']:.3f} "
                     f"(K per domain from every column: {ks})")
        if v.get("kZero"):
            line += (f"; VeriScore F1@K n/a for {', '.join(v['kZero'])}: K is 0 (most responses there have no "
                     f"claim; {ks})")
    return line


def _k(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


method_reports.register("safe", "safe", safe_summary, describe_safe, across=veriscore_k)
