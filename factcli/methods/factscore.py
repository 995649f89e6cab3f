"""`factscore`: FActScore (Min et al., 2023): the share of a response's atomic facts that a knowledge
source supports, with FActScore's length penalty and abstention rules.

Pipeline, per response (factuality-methods.md §3, the paper's §3.1 and §4.1):
1. Abstention rules (below) run on the text; an abstaining response is not decomposed.
2. The response is split into sentences (lines first, then sentence ends; no tokenizer download).
   Preamble sentences that FActScore's bio mode skips produce no facts: a sentence starting with
   "Sure", "Please" or "This sentence does not contain any facts", and a first sentence starting with
   "Here are" (the default profile also "Here is" / "Here's"; `config.skipPreambles: false` keeps them).
3. The grader decomposes the sentences into atomic facts: one call per 400 words of sentences, or one
   per sentence with `config.decompose: sentence`. With a judge panel, the first judge (or
   `config.decomposer`) decomposes and every judge verifies the same facts, as in the paper, where one
   decomposition is checked by several evaluators. Sentences that give no facts at all are a grading
   error in the default profile (the decomposer failed); the reference profile counts the response as
   not responding, as FActScore does.
4. For each fact, BM25 (or, `retriever: dense`, an embedding model: factscore_dense.py) retrieves the
   top `k` passages (query: "<topic> <fact>") from the knowledge source, restricted to the topic's
   document when there is a topic (factcli.providers.search.knowledge, BM25 from factcli.stats.text).
5. Each judge verifies the facts against their passages: lists of `config.batchSize` facts (default
   10; the union of the list's passages is shown once, numbered), or one call per fact with
   `config.batch: false` (its own passages only). The reply must hold exactly one verdict per fact, in
   order; anything else is a grading error (never a guess).

`profile: reference` changes the defaults to FActScore's code (settings_from): dense retrieval, one
verification call a fact with its own passages best last, sentence-by-sentence decomposition, no
abstention rule; and, as FActScore's code, its preamble rules exactly and a response without atomic
facts counted as not responding.

Score (FActScore's definition, paper §3.1; length penalty from the reference implementation,
`factscorer.py`, factuality-methods.md §3.8 -- the paper text itself has no penalty):
    f(y)    = supported facts / N                       (N = number of atomic facts)
    penalty = 1                if γ = 0 or N > γ
            = exp(1 − γ / N)   otherwise                (γ = config.gamma, default 10)
    score   = penalty · f(y)
With a panel, every judge gets its own score and factcli.scoring.panels aggregates them: the score is
their mean; pass is score ≥ threshold (default 0.5), or a vote of the judges with
`config.aggregate: majority | unanimous` (a majority tie is a grading error). A judge that fails
is left out and reported (`judgesFailed`); all failing is a grading error. `not-factscore`
inverts pass and score.

An abstaining response is not scored: it fails (or passes with `config.onAbstain: pass`) with
`metadata.abstained: true` and the rule that fired, and `factscore_summary()` leaves it out of the
column's FActScore and reports it in the respond ratio, as the paper recommends (§3.1, Limitations).

Abstention rules (`config.abstain`), from FActScore's `abstain_detection.py`:
  generic        the response starts with "I'm sorry", or contains "provide more"
  perplexity_ai  after removing "[n]" citations, the response starts with one of FActScore's
                 "no information" phrases, or no paragraph comes before the first paragraph
                 containing one of them
  auto           (default) either rule
  none           only "no atomic facts"
`config.abstainPhrases`: more phrases; a response starting with one of them abstains.

`config` keys (SETTINGS; older snake_case spellings are read with a warning):
  knowledge       folder of .txt/.md, .jsonl of {title, text}, or SQLite documents(title, text);
                  a path relative to the config file (file:// accepted; test vars are rendered).
                  Without it, the assertion's `value` (reference text, or a list of texts) is the
                  source, else the `context` var. An assertion `contextTransform` (given the row's
                  vars, prompt and the provider response's metadata) overrides all three: its
                  result, a text or a list of texts, is the row's passages, one per text, and the
                  topic does not restrict them.
  topic           the topic (default: the `topic` var; test vars are rendered); restricts
                  retrieval to that document
  k               passages retrieved per fact (default 5)
  passageWords    passage size in words (default 256)
  gamma           length penalty γ (default 10; 0 or false turns it off)
  profile         default | reference
  decompose       response (default) | sentence
  retriever       bm25 (default) | dense;  embeddingProvider: the embedding model of dense retrieval
  batch           true (default): batchSize facts a verification call; false: one per fact
  batchSize       facts per verification call when batching (default 10; 0: all of them)
  abstain, abstainPhrases, onAbstain (fail | pass), skipPreambles   see above
  aggregate       mean (default) | majority | unanimous, for a judge panel (`provider:` list)
  decomposer      the provider that decomposes (default: the first judge)
  maxConcurrency  grader calls in flight per assertion (default: none of its own, the run's -j)
  decompositionPrompt, verificationPrompt   step prompts (variables and reply schemas in
                  factcli/methods/factscore_prompts.py); inline text, chat messages or file://

Result metadata: `factscore` (the score, None when abstained), `initScore` (before the penalty),
`penalty`, `supported`, `total` (N), `abstained` (+ `abstainReason`), `facts` (per fact and judge:
text, verdict SUPPORTED | NOT_SUPPORTED, supported, reason, evidence (the cited passage's text),
evidenceId, retrieved passage ids, judge), `judges` (per judge: score, pass, initScore, supported,
cost, or error), `judgesFailed`, `aggregate`,
`topic`, `knowledge`, `k`, `gamma`, `graderReplies`, `graderCost`. `factscore_summary(rows)` turns a
column of such metadata into the paper's summary: FActScore over responding rows, respond ratio
and facts per response.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from factcli import templating
from factcli.errors import ConfigError
from factcli.methods import factscore_prompts as prompts
from factcli.methods import reports as method_reports
from factcli.methods.claims import (FIRST_PREAMBLE_STARTS, JudgeCall, JudgeError, all_judges, step_prompt,
                                    without_preambles)
from factcli.methods.factscore_dense import dense_retrieve
from factcli.methods.factscore_facts import decompose, judge_name, verify
from factcli.methods.settings import (DEFAULT_CONCURRENCY, MethodSettings, Setting, anything, choice, concurrency,
                                      flag, max_concurrency, number, strings, text, whole)
from factcli.providers.search.knowledge import KnowledgeError, KnowledgeSource, open_source, passage_source, text_source
from factcli.scoring.abstention import ABSTAIN_MODES, detect_abstention
from factcli.scoring.gather import bound, gather_all
from factcli.scoring.grading import grader_error, load_rubric_prompt, pick
from factcli.scoring.judges import JUDGE, own_judge, role_of
from factcli.scoring.outcome import meta_errored
from factcli.scoring.panels import AGGREGATES, JudgeVerdict, aggregate, judge_names
from factcli.scoring.registry import AssertionContext, AssertionError_, assertion
from factcli.stats.text import DEFAULT_PASSAGE_WORDS, Passage, split_paragraph_sentences
from factcli.types import GradingResult, ProviderSpec, TokenUsage

DEFAULT_K = 5
DEFAULT_GAMMA = 10
DEFAULT_THRESHOLD = 0.5
DEFAULT_BATCH = 10  # facts a verification call: its reply (about 96 tokens a verdict) stays inside the cap

# the default profile also takes "Here is …" for a preamble; the reference, as FActScore, "Here are" only
_FIRST_PREAMBLE_STARTS = (*FIRST_PREAMBLE_STARTS, "Here is", "Here's", "Here’s")


# ---------------------------------------------------------------- formulas


def length_penalty(n_facts: int, gamma: float | None) -> float:
    """FActScore's length penalty: 1 if γ is off or N > γ, else exp(1 − γ/N)."""
    if not gamma or n_facts <= 0:
        return 1.0
    return 1.0 if n_facts > gamma else math.exp(1 - gamma / n_facts)


def response_sentences(text: str, skip_preambles: bool = True, reference: bool = False) -> list[str]:
    """The sentences to decompose, without the preambles FActScore's bio mode skips (claims.without_preambles;
    the default profile's first-sentence rule also takes "Here is")."""
    sentences = split_paragraph_sentences(text)
    if not skip_preambles:
        return sentences
    return without_preambles(sentences, FIRST_PREAMBLE_STARTS if reference else _FIRST_PREAMBLE_STARTS)


# ---------------------------------------------------------------- settings


@dataclass
class Settings:
    k: int = DEFAULT_K
    passage_words: int = DEFAULT_PASSAGE_WORDS
    gamma: float = DEFAULT_GAMMA
    decompose: str = "response"
    batch_size: int = DEFAULT_BATCH  # 0: every fact in one call
    abstain: str = "auto"
    abstain_phrases: list[str] = field(default_factory=list)
    on_abstain: str = "fail"
    skip_preambles: bool = True
    aggregate: str = "mean"
    concurrency: int | None = DEFAULT_CONCURRENCY
    knowledge: str | None = None
    topic: str | None = None
    decomposer: Any = None
    profile: str = "default"
    retriever: str = "bm25"
    embedder: Any = None


def _gamma(value: Any) -> float:
    if value is False:
        return 0.0  # `gamma: false` turns the penalty off, as 0 does
    return number(0, say="a number ≥ 0 (0 turns the penalty off)")(value)


SETTINGS = MethodSettings(
    "factscore",
    Setting("knowledge", text), Setting("topic", str), Setting("k", whole(1)),
    Setting("passageWords", whole(1), ("passage_words",)), Setting("gamma", _gamma),
    Setting("decompose", choice("response", "sentence")), Setting("batch", flag),
    Setting("batchSize", whole(0), ("batch_size",)), Setting("abstain", choice(*ABSTAIN_MODES)),
    Setting("abstainPhrases", strings, ("abstain_phrases",)), Setting("onAbstain", choice("fail", "pass"), ("on_abstain",)),
    Setting("skipPreambles", flag, ("skip_preambles",)), Setting("aggregate", choice(*AGGREGATES)),
    max_concurrency(), Setting("retriever", choice("bm25", "dense")),
    Setting("embeddingProvider", anything), Setting("decomposer", anything),
    prompts=("decompositionPrompt", "verificationPrompt"),
)


def settings_from(cfg: dict) -> Settings:
    """The settings; `profile: reference` changes the defaults to FActScore's code (facts verified one at a
    time against their own passages, best passage last; dense retrieval; sentence-by-sentence
    decomposition; no abstention rule), and every key given still wins."""
    given = SETTINGS.read(cfg)
    s = Settings()
    s.profile = given.get("profile", "default")
    ref = s.profile == "reference"
    s.k = given.get("k", DEFAULT_K)
    s.passage_words = given.get("passageWords", DEFAULT_PASSAGE_WORDS)
    s.gamma = given.get("gamma", 0.0 if "gamma" in cfg else float(DEFAULT_GAMMA))  # `gamma: null` is 0 too
    s.decompose = given.get("decompose", "sentence" if ref else "response")
    s.batch_size = given.get("batchSize", DEFAULT_BATCH) if given.get("batch", not ref) else 1
    s.abstain = given.get("abstain", "none" if ref else "auto")
    s.retriever = given.get("retriever", "dense" if ref else "bm25")
    s.embedder = given.get("embeddingProvider")
    if s.embedder is not None:
        try:
            pick(s.embedder, "embedding")
        except ConfigError as exc:
            raise AssertionError_(f"factscore: config.embeddingProvider: {exc}") from None
    if s.retriever == "dense" and not s.embedder:
        raise AssertionError_("factscore: dense retrieval (config.retriever: dense, the reference profile's default, "
                              "as FActScore's gtr-t5-large) needs config.embeddingProvider, e.g. "
                              "openai:embedding:text-embedding-3-small; or set config.retriever: bm25")
    s.abstain_phrases = given.get("abstainPhrases", [])
    s.on_abstain = given.get("onAbstain", "fail")
    s.skip_preambles = given.get("skipPreambles", True)
    s.aggregate = given.get("aggregate", "mean")
    s.concurrency = concurrency(given)
    s.knowledge = given.get("knowledge") or None
    s.topic = given.get("topic")
    s.decomposer = given.get("decomposer")
    return s


# ---------------------------------------------------------------- knowledge


def _base_dir(ctx: AssertionContext) -> Path:
    base = getattr(ctx.grader, "base_dir", None)
    return Path(base) if base else Path.cwd()


def _open_knowledge(ctx: AssertionContext, s: Settings, topic: str | None) -> tuple[KnowledgeSource, str | None]:
    """The knowledge source and the document retrieval is restricted to (None: all of it)."""
    if s.knowledge:
        ref = templating.render(s.knowledge, ctx.vars) if templating.has_template(s.knowledge) else s.knowledge
        ref = ref.removeprefix("file://")
        unset = re.search(r"\$\{(\w+)\}", ref)
        if unset:
            raise AssertionError_(f"factscore: config.knowledge uses the environment variable {unset.group(1)}, "
                                  "which is not set")
        path = Path(ref).expanduser()
        if not path.is_absolute():
            path = _base_dir(ctx) / path
        try:
            source = open_source(path, s.passage_words)
            return source, source.topic_title(topic)
        except KnowledgeError as exc:
            raise AssertionError_(f"factscore: {exc}") from None
    docs = _texts(ctx.value, "the assertion value")
    name = "value"
    if docs is None:
        docs = _texts(ctx.vars.get("context"), "the context var")
        name = "context"
    if not docs:
        raise AssertionError_("factscore needs a knowledge source: config.knowledge (a folder, a .jsonl or a SQLite "
                              "file), a reference text as the value, or a `context` var")
    base = (topic or "").strip() or name
    titled = [(base if len(docs) == 1 else f"{base} ({i + 1})", text) for i, text in enumerate(docs)]
    return text_source(titled, s.passage_words, name=name), None  # the whole text is the topic's document


async def _transformed_knowledge(ctx: AssertionContext) -> KnowledgeSource:
    """The row's own passages: the `contextTransform`'s result (a text or a list of texts, each one
    passage), in place of config.knowledge, the value or the `context` var (a RAG answer is checked
    against what its retriever returned)."""
    texts = [t for t in await ctx.transformed_passages("factscore") if t.strip()]
    return passage_source(texts, name="contextTransform")


def preflight(a, base_dir: Path, test=None) -> list[str]:
    """A config.knowledge that names no test var must exist and load before the first call (loaded
    here, it stays in open_source's cache for the run), and the test's topic must not be a near miss
    of one of its documents' titles (a did-you-mean)."""
    ref = (a.config or {}).get("knowledge")
    if getattr(a, "context_transform", None) or not isinstance(ref, str) or not ref or templating.has_template(ref):
        return []
    ref = ref.removeprefix("file://")
    unset = re.search(r"\$\{(\w+)\}", ref)
    if unset:
        return [f"factscore: config.knowledge uses the environment variable {unset.group(1)}, which is not set"]
    path = Path(ref).expanduser()
    path = path if path.is_absolute() else base_dir / path
    try:
        source = open_source(path, settings_from(a.config or {}).passage_words)
    except AssertionError_ as exc:
        return [str(exc)]
    except KnowledgeError as exc:
        return [f"factscore: {exc}"]
    # a topic that misses a document's title by a typo (`Canbera`) is refused here rather than after
    # the model was paid for; one far from every title is left to the row, as FActScore leaves it: an
    # answer that abstains (the usual test of an entity the source does not hold) is never checked
    topic = (a.config or {}).get("topic")
    if topic is None and test is not None:
        topic = (test.vars or {}).get("topic")
    if isinstance(topic, str) and templating.has_template(topic):
        try:
            topic = templating.render(topic, dict(test.vars or {}) if test is not None else {})
        except templating.TemplateError:
            return []
    if topic is None or not str(topic).strip():
        return []
    topic = str(topic).strip()
    if source.resolve_title(topic) is not None or not source.title_hint(topic):
        return []
    try:
        source.topic_title(topic)
    except KnowledgeError as exc:
        return [f"factscore: {exc}"]
    return []


preflight.per_test = True  # the topic is the test's: run/planning/preflight checks each test, not each assertion once


def _texts(value: Any, what: str) -> list[str] | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return [value] if value.strip() else None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v for v in value if v.strip()] or None
    raise AssertionError_(f"factscore: {what} must be a text or a list of texts to serve as the knowledge source")


def _retrieve_all(source: KnowledgeSource, facts: list[str], k: int, topic: str | None,
                  title: str | None) -> list[list[Passage]]:
    out = []
    for fact in facts:
        query = f"{topic} {fact}" if topic else fact
        out.append(source.retrieve(query, k, title) if title is not None else source.retrieve(query, k))
    return out


# ---------------------------------------------------------------- step prompts


def _step(ctx: AssertionContext, key: str, default: Any) -> Any:
    """A step's prompt from config; resolved here because `file://` is relative to the config file."""
    value = step_prompt(ctx, key, default)
    if isinstance(value, str) and value.startswith("file://"):
        value = load_rubric_prompt(value, _base_dir(ctx), "", f"config.{key}")
    return value


# ---------------------------------------------------------------- the assertion


def _fmt(x: float) -> str:
    return templating.to_fixed(x, 2)


def _judge_score(verdicts: list[dict], gamma: float) -> dict:
    n = len(verdicts)
    supported = sum(v["supported"] for v in verdicts)
    init = supported / n
    penalty = length_penalty(n, gamma)
    return {"supported": supported, "initScore": init, "penalty": penalty, "score": init * penalty}


def _add_cost(calls: list[JudgeCall]) -> tuple[TokenUsage, float | None]:
    tokens = TokenUsage()
    cost, known = 0.0, True
    for c in calls:
        tokens.add(c.tokens)
        cost += c.cost
        known = known and c.cost_known
    return tokens, (cost if known else None)


def own_models(config: dict) -> list[tuple]:
    """factscore's own models beside its judges (scoring/judges.judges_of): the decomposer when one is set, the
    embedding model of dense retrieval."""
    try:
        s = settings_from(config)
    except AssertionError_:
        return []  # the row names what is wrong with its settings
    out = [("decomposer", s.decomposer, "text", "decomposer")] if s.decomposer is not None else []
    if s.retriever == "dense":
        out.append(("embeddingProvider", s.embedder, "embedding", "embedder"))
    return out


@assertion("factscore", model_graded=True, preflight=preflight, settings=SETTINGS, judges=own_models)
async def factscore(ctx: AssertionContext) -> GradingResult:
    if ctx.grader is None:
        raise AssertionError_("factscore needs a grader (run it through factcli eval)")
    s = settings_from(ctx.assertion.config or {})
    topic = s.topic if s.topic is not None else ctx.vars.get("topic")
    if isinstance(topic, str) and templating.has_template(topic):
        topic = templating.render(topic, ctx.vars)
    topic = "" if topic is None else str(topic).strip()
    try:
        judges = all_judges(ctx)
        specs = role_of(judges, JUDGE)
        decomposer = own_judge(judges, "decomposer") or specs[0]
    except JudgeError as exc:
        raise AssertionError_(f"factscore: {exc}") from None
    threshold = ctx.threshold if ctx.threshold is not None else DEFAULT_THRESHOLD
    meta: dict = {"method": "factscore", "profile": s.profile, "topic": topic or None, "k": s.k, "gamma": s.gamma,
                  "threshold": threshold}

    def abstained(why: str, tokens: TokenUsage | None = None, **extra) -> GradingResult:
        passed = s.on_abstain == "pass"
        reason = (f"Abstained ({why}): not scored; left out of the column's FActScore and counted in its "
                  f"respond ratio")
        return GradingResult(passed, 1.0 if passed else 0.0, reason, tokens_used=tokens or TokenUsage(),
                             metadata={**meta, "abstained": True, "abstainReason": why, "factscore": None,
                                       "supported": 0, "total": 0, "facts": [], **extra})

    response = ctx.output_text
    rule = detect_abstention(response, s.abstain, s.abstain_phrases)
    if rule:
        return abstained(rule)
    sentences = response_sentences(response, s.skip_preambles, s.profile == "reference")
    if not sentences:
        return abstained("no sentence states a fact")
    # The knowledge source is opened before any grader call: a bad path or topic costs nothing.
    if ctx.assertion.context_transform:
        source, title = await _transformed_knowledge(ctx), None
    else:
        source, title = await asyncio.to_thread(_open_knowledge, ctx, s, topic or None)
    meta["knowledge"] = source.name
    if title is not None:
        meta["document"] = title

    sem = bound(s.concurrency)
    decompose_call = JudgeCall()
    try:
        decompose_prompt = _step(ctx, "decompositionPrompt", prompts.DECOMPOSE)
        facts = await decompose(ctx, decomposer, decompose_prompt, sentences, s.decompose, topic, decompose_call, sem)
    except JudgeError as exc:
        tokens, cost = _add_cost([decompose_call])
        return grader_error(f"factscore: {exc}", exc.raw, tokens, **meta, judges=[],
                            graderReplies=decompose_call.replies, graderCost=cost)
    meta["sentences"] = len(sentences)
    if not facts and s.profile == "reference":
        # FActScore: a response with no atomic facts is not responding (it lowers the respond ratio)
        tokens, cost = _add_cost([decompose_call])
        return abstained("the decomposer found no atomic facts: not responding, as FActScore counts it", tokens,
                         graderReplies=decompose_call.replies, graderCost=cost)
    if not facts:
        # the sentences state something (the preambles are gone), so a decomposer that finds nothing in
        # them failed: a grading error, not an abstention that would raise the respond ratio's doubt
        tokens, cost = _add_cost([decompose_call])
        return grader_error("factscore: the decomposer returned no atomic facts for "
                            f"{len(sentences)} sentence(s)", decompose_call.replies[-1]["reply"]
                            if decompose_call.replies else None, tokens, **meta, judges=[],
                            graderReplies=decompose_call.replies, graderCost=cost)

    texts = [f["text"] for f in facts]
    retrieve_call = JudgeCall()
    if s.retriever == "dense":
        meta["retriever"] = "dense"
        try:
            passages = source.passages(title) if title is not None else source.all_passages()
            queries = [f"{topic} {fact}" if topic else fact for fact in texts]
            retrieved = await dense_retrieve(ctx, own_judge(judges, "embedder"), passages, queries, s.k,
                                             retrieve_call, sem)
        except JudgeError as exc:
            tokens, cost = _add_cost([decompose_call, retrieve_call])
            return grader_error(f"factscore: {exc}", None, tokens, **meta, judges=[],
                                graderReplies=decompose_call.replies, graderCost=cost)
        except ValueError as exc:
            raise AssertionError_(f"factscore: {exc}") from None
    else:
        retrieved = await asyncio.to_thread(_retrieve_all, source, texts, s.k, topic or None, title)
    if not any(retrieved):
        raise AssertionError_(f"factscore: the knowledge source {source.name} has no text"
                              + (f" for {title!r}" if title else ""))

    calls = [JudgeCall() for _ in specs]

    async def judge(spec: ProviderSpec, call: JudgeCall) -> dict:
        try:
            verify_prompt = _step(ctx, "verificationPrompt", prompts.VERIFY)
            verdicts = await verify(ctx, spec, verify_prompt, facts, retrieved, s.batch_size, topic, call, sem,
                                    best_last=s.profile == "reference")
        except JudgeError as exc:
            return {"judge": judge_name(spec), "error": str(exc), "raw": exc.raw}
        return {"judge": judge_name(spec), "verdicts": verdicts, **_judge_score(verdicts, s.gamma)}

    results = await gather_all(judge(spec, call) for spec, call in zip(specs, calls))
    for r, name in zip(results, judge_names(specs)):
        r["judge"] = name
    tokens, cost = _add_cost([decompose_call, retrieve_call, *calls])
    verdicts = []
    for r, call in zip(results, calls):
        judge_cost = call.cost if call.cost_known else None
        if "error" in r:
            verdicts.append(JudgeVerdict(r["judge"], error=r["error"], raw=r.get("raw"), cost=judge_cost))
        else:
            verdicts.append(JudgeVerdict(r["judge"], score=r["score"], cost=judge_cost,
                                         details={"initScore": r["initScore"], "supported": r["supported"]}))
    panel = aggregate(verdicts, threshold, s.aggregate)
    meta.update({"total": len(facts), **panel.metadata(), "graderCost": cost,
                 "facts": [v for r in results for v in r.get("verdicts", [])],
                 "graderReplies": decompose_call.replies + [rep for c in calls for rep in c.replies]})
    answered = [r for r in results if "error" not in r]
    if not answered:
        return grader_error(f"factscore: {panel.error}", panel.raw, tokens, **meta)

    score = panel.score
    init = sum(r["initScore"] for r in answered) / len(answered)
    supported = sum(r["supported"] for r in answered) / len(answered)
    penalty = answered[0]["penalty"]
    if len(answered) == 1:
        supported = answered[0]["supported"]
    meta.update({"abstained": False, "factscore": score, "initScore": init, "penalty": penalty,
                 "supported": supported})
    if panel.error:
        return grader_error(f"factscore: {panel.error}", None, tokens, **meta)
    passed = panel.passed

    n = len(facts)
    if len(results) == 1:
        detail = f"{answered[0]['supported']}/{n} facts supported"
    else:
        detail = (", ".join(f"{r['judge']} {r['supported']}/{n}" for r in answered)
                  + f" facts supported, mean {_fmt(init)}; {panel.rule()}")
    if penalty < 1:
        detail += f", × length penalty {_fmt(penalty)} for {n} facts (γ={templating.js_string(s.gamma)})"
    unsupported = [f["text"] for f in meta["facts"] if not f["supported"]]
    unsupported = list(dict.fromkeys(unsupported))
    if unsupported:
        detail += "; not supported: " + "; ".join(unsupported[:3]) + (" …" if len(unsupported) > 3 else "")
    if panel.failed:
        detail += "; " + panel.failed_note()
    relation = "≥" if score >= threshold else "<"
    reason = f"FActScore {_fmt(score)} {relation} {templating.js_string(threshold)} ({detail})"
    if ctx.inverse:
        passed = not passed
        score = 1.0 - score
    return GradingResult(passed, score, reason, tokens_used=tokens, metadata=meta)


# ---------------------------------------------------------------- column summary


def _metadata_of(item: Any) -> dict | None:
    if item is None:
        return None
    if isinstance(item, GradingResult):
        return item.metadata
    if isinstance(item, dict):
        if "method" in item or "abstained" in item or meta_errored(item):
            return item
        meta = item.get("metadata")
        return meta if isinstance(meta, dict) else None
    return None


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def factscore_summary(rows: Iterable[Any]) -> dict:
    """The paper's per-column report (§3.1, §4.3, Limitations) from a column's factscore results.

    `rows`: the componentResults of one column's factscore assertions, as metadata dicts, as
    componentResults (with a "metadata" key) or as GradingResults. Returns
      factscore         mean score (length penalty included) over responding rows, None if none
      initScore         the same without the length penalty
      respondRatio      responding / (responding + abstained)
      factsPerResponse  mean number of atomic facts over responding rows
      responding, abstained, gradingErrors, rows (responding + abstained)
      judges            per judge: mean score over the responding rows it answered
      judgesFailed      per judge: responding rows where it failed and was left out
      rowsWithFailedJudges  responding rows scored without one or more of their judges
    Grading errors are counted apart and left out of every ratio.
    """
    responding: list[dict] = []
    abstained = errors = 0
    for item in rows:
        meta = _metadata_of(item)
        if meta is None or meta.get("method", "factscore") != "factscore":
            continue
        if meta_errored(meta):
            errors += 1
        elif meta.get("abstained"):
            abstained += 1
        elif isinstance(meta.get("factscore"), (int, float)):
            responding.append(meta)
    n = len(responding) + abstained
    judges: dict[str, list[float]] = {}
    judges_failed: dict[str, int] = {}
    for meta in responding:
        for j in meta.get("judges") or []:
            if not isinstance(j, dict):
                continue
            if j.get("error") is not None:
                judges_failed[str(j.get("judge"))] = judges_failed.get(str(j.get("judge")), 0) + 1
            elif isinstance(j.get("score"), (int, float)):
                judges.setdefault(str(j.get("judge")), []).append(j["score"])
    return {
        "factscore": _mean([m["factscore"] for m in responding]),
        "initScore": _mean([m.get("initScore", m["factscore"]) for m in responding]),
        "respondRatio": len(responding) / n if n else None,
        "factsPerResponse": _mean([m.get("total", 0) for m in responding]),
        "responding": len(responding),
        "abstained": abstained,
        "gradingErrors": errors,
        "rows": n,
        "judges": {name: _mean(scores) for name, scores in judges.items()},
        "judgesFailed": judges_failed,
        "rowsWithFailedJudges": sum(1 for m in responding if m.get("judgesFailed")),
    }


def format_factscore_summary(summary: dict) -> str:
    """One line for the summary: `FActScore 0.712 (init 0.745; responded 9/10; 23.4 facts/response)`."""
    if summary["factscore"] is None:
        return (f"FActScore n/a (responded 0/{summary['rows']}"
                + (f"; grading errors {summary['gradingErrors']}" if summary["gradingErrors"] else "") + ")")
    parts = []
    if summary["initScore"] is not None and abs(summary["initScore"] - summary["factscore"]) > 1e-12:
        parts.append(f"init {summary['initScore']:.3f}")
    parts.append(f"responded {summary['responding']}/{summary['rows']}")
    parts.append(f"{summary['factsPerResponse']:.1f} facts/response")
    if summary["gradingErrors"]:
        parts.append(f"grading errors {summary['gradingErrors']}")
    if summary.get("rowsWithFailedJudges"):
        parts.append(f"a judge failed and was left out in {summary['rowsWithFailedJudges']} row(s)")
    if len(summary["judges"]) > 1:
        parts += [f"{name} {score:.3f}" for name, score in summary["judges"].items() if score is not None]
    return f"FActScore {summary['factscore']:.3f} ({'; '.join(parts)})"


method_reports.register("factscore", "factscore", factscore_summary, format_factscore_summary)
