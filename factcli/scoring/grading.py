"""Grader plumbing, in one place: which model grades, how it is called, how its reply is read.

Which judges an assertion has (a panel, a grader per kind, a method's own models) is scoring/judges.py's
rule; the one grader of a kind is resolved here (GraderSource), in this order (contract §5): assertion
`provider` > test `options.provider` > `--grader` > `defaultTest.options.provider` > FACTCLI_GRADER >
`openai:gpt-5` when OPENAI_API_KEY is set.
Grader calls go through the run's Caller, so they share the cache, the retry loop and the
timeouts of provider calls; their tokens and cost are counted apart. They ask for temperature 0
and a fixed seed (a parameter a server refuses is learned once per endpoint in run/calling/caller). Each call is
one typed request (providers/request.CallRequest) that the grader's provider class translates: a
reasoning grader (as the class says: `reasoning_style()`) is asked with a reasoning budget on top of
the step's cap, a low effort and no temperature (providers/reasoning.py), and each server gets the
reply schema in the form it takes (`grammar_backed()`, providers/dialects.py).
"""

from __future__ import annotations

import json
import os
import re
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from factcli import templating
from factcli.errors import ConfigError
from factcli.types import GradingResult, ProviderSpec, TokenUsage

DEFAULT_GRADER = "openai:gpt-5"
DEFAULT_EMBEDDER = "openai:embedding:text-embedding-3-large"
GRADER_SEED = 0
# The cap of a grader call that declares no reply (a step's own cap is in its Reply, none above this).
GRADER_MAX_TOKENS = 2048


class NoGrader(ConfigError):
    pass


def _spec_from(value: Any) -> ProviderSpec:
    if isinstance(value, str):
        return ProviderSpec(id=value)
    if isinstance(value, dict) and isinstance(value.get("id"), str):
        return ProviderSpec(id=value["id"], label=value.get("label"), config=dict(value.get("config") or {}))
    raise ConfigError(f"a grader must be a provider id or {{id, config}}, got {value!r}")


def pick(value: Any, kind: str = "text") -> ProviderSpec | None:
    """A grader value may be a typed map {text: …, embedding: …}; pick the one for `kind`."""
    if value is None:
        return None
    if isinstance(value, dict) and "id" not in value and set(value) <= {"text", "embedding", "classification"}:
        chosen = value.get(kind)
        return None if chosen is None else _spec_from(chosen)
    if isinstance(value, list):
        raise ConfigError("judge panels (a list of graders) are not supported yet; give one grader")
    return _spec_from(value)


@dataclass
class GraderSource:
    """The run-wide fallbacks below a test's own `options.provider`."""

    cli: Any = None  # --grader
    default_test: Any = None  # defaultTest.options.provider

    def resolve(self, assertion_provider: Any, test_provider: Any, kind: str = "text",
                test_provider_is_default: bool = False) -> ProviderSpec:
        candidates = [assertion_provider]
        if test_provider_is_default:
            candidates += [self.cli, test_provider]
        else:
            candidates += [test_provider, self.cli, self.default_test]
        candidates.append(os.environ.get("FACTCLI_GRADER") or None)
        for value in candidates:
            spec = pick(value, kind)
            if spec is not None:
                return spec
        if os.environ.get("OPENAI_API_KEY"):
            return ProviderSpec(id=DEFAULT_EMBEDDER if kind == "embedding" else DEFAULT_GRADER)
        raise NoGrader(f"no grader for a model-graded assertion: set one with --grader, "
                       f"defaultTest.options.provider or FACTCLI_GRADER (or set OPENAI_API_KEY for {DEFAULT_GRADER})")

    def of(self, assertion, test, kind: str = "text") -> ProviderSpec:
        """The one grader of `kind` for an assertion on a row of `test` (None: no test options); a panel
        and a method's own models are scoring/judges.judges_of's, which calls this."""
        if test is None:
            return self.resolve(assertion.provider, None, kind)
        return self.resolve(assertion.provider, test.options.get("provider"), kind,
                            test_provider_is_default=test.grader_from_default)


@dataclass
class GraderReply:
    """One reply of a grader's call: its text (or error), tokens, cost, and the parsed reply when it had a
    schema."""

    text: str | None
    error: str | None = None
    tokens: TokenUsage = field(default_factory=TokenUsage)
    cost: float | None = None
    finish_reason: str | None = None
    output: Any = None
    # the step's Reply read the reply (`text` is then its text form): None when the reply did not fit
    # the schema, and the step reads `text`, the grader's own words, as promptfoo would
    parsed: dict | None = None
    raw: str | None = None  # what the grader sent, when `text` is the parsed reply's text form
    # `error` is the step's reading rule refusing the reply (neither its schema nor its text form); a step
    # that answers such a reply as promptfoo does (a score of 0 it fails with promptfoo's reason) reads
    # `text` with its own reader, which refuses it too
    refused: bool = False


@dataclass
class GraderLedger:
    """The grader calls made while one row is scored, whichever handler made them: the one place
    their tokens and cost add up, so a handler that forgets to report them cannot hide them."""

    calls: int = 0
    tokens: TokenUsage = field(default_factory=TokenUsage)
    cost: float = 0.0
    unpriced: int = 0  # answered calls whose price is unknown: the row's grader cost is then n/a
    cached: int = 0  # replies read from the response cache
    searches: int = 0  # of the calls, those made to a search backend (Grader.search)
    batched: int = 0  # of the calls, those billed at a batch API's price, and what that saved
    batch_saved: float = 0.0

    def add(self, provider, resp) -> None:
        self.calls += 1
        self.cached += bool(resp.cached)
        if getattr(provider, "is_search", False):
            self.searches += 1
        self.tokens.add(resp.token_usage)
        if resp.metadata.get("batch"):  # providers/pricing.bill
            self.batched += 1
            self.batch_saved += resp.metadata.get("batchSaved") or 0.0
        if resp.cost is not None:
            self.cost += resp.cost
        elif resp.error is None and not getattr(provider, "free", False):
            self.unpriced += 1

    @property
    def total_cost(self) -> float | None:
        return None if self.unpriced else self.cost


_LEDGER: ContextVar[GraderLedger | None] = ContextVar("factcli_grader_ledger", default=None)


class grader_ledger:
    """`with grader_ledger() as ledger`: count the grader calls made inside (tasks started inside
    share the ledger). A class, not a generator: every row enters one, most with no grader call."""

    __slots__ = ("ledger", "token")

    def __enter__(self) -> GraderLedger:
        self.ledger = GraderLedger()
        self.token = _LEDGER.set(self.ledger)
        return self.ledger

    def __exit__(self, *exc) -> None:
        _LEDGER.reset(self.token)


def note_grader_spend(result: GradingResult, ledger: GraderLedger) -> None:
    """Put a row's grader spend on its top-level result: metadata `graderCost` (None when a call's
    price is unknown) and `graderCalls`; its tokens become the ledger's when a handler left some out."""
    if not ledger.calls:
        return
    result.metadata = {**result.metadata, "graderCost": ledger.total_cost, "graderCalls": ledger.calls}
    if ledger.cached:
        result.metadata["graderCached"] = ledger.cached
    if ledger.searches:
        result.metadata["searches"] = ledger.searches
    if ledger.batched:
        result.metadata["graderBatched"] = ledger.batched
        result.metadata["graderBatchSaved"] = ledger.batch_saved
    if ledger.tokens.total > result.tokens_used.total:
        result.tokens_used = ledger.tokens


def name_of(reply) -> str:
    return f"{reply.name} step's" if reply is not None else "default"


def _text_of(output: Any) -> str | None:
    return output if isinstance(output, str) else (None if output is None else json.dumps(output))


def _record(provider, resp) -> None:
    ledger = _LEDGER.get()
    if ledger is not None:
        ledger.add(provider, resp)


class _NoReplies:
    keys = ()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def drop(self) -> None:
        return None


class Grader:
    """What assertion handlers use to call a grader: resolved spec in, reply out."""

    def __init__(self, caller, base_dir: Path | None = None, source: GraderSource | None = None):
        self.caller = caller
        self.base_dir = base_dir
        self.source = source or GraderSource()
        self._providers: dict[str, Any] = {}
        self.used: set[str] = set()
        self._kept: dict[str, Any] = {}

    def kept(self, name: str, make: Callable[[], Any]) -> Any | None:
        """What a handler keeps from one row to the next for this run (factscore's embedding vectors:
        methods/factscore_dense.py): `make()` on first use, dropped with the run's Grader, never seen
        by another run. None when the run keeps no cache (--no-cache: every row computes again)."""
        if self.caller.cache is None:
            return None
        if name not in self._kept:
            self._kept[name] = make()
        return self._kept[name]

    def spec_for(self, assertion, test, kind: str = "text") -> ProviderSpec:
        return self.source.of(assertion, test, kind)

    def _provider(self, spec: ProviderSpec):
        from factcli.providers.registry import create_provider

        key = json.dumps([spec.id, spec.config], sort_keys=True, default=str)
        if key not in self._providers:
            self._providers[key] = create_provider(spec, self.base_dir)
        return self._providers[key]

    async def complete(self, spec: ProviderSpec, messages: list[dict], *, reply: Any = None,
                       json_mode: bool = False, items: int | None = None, strict: bool = True,
                       attempt: int = 0, sent: Any = None, cache_prefix: int = 0) -> GraderReply:
        """One grader call. `reply` (a scoring.replies.Reply) is the step's answer: its JSON schema goes
        with the request as `response_format` and its cap as `max_tokens`, unless the grader's config
        sets them (`items`: how many things the reply is about, for a step whose cap follows them);
        `json_mode` (no Reply) asks for any JSON object. A reply outside the schema is a grading error
        (`error` set) unless `strict` is False: a step that reads the reply as a reference implementation
        does (`profile: reference`) reads the grader's words whatever they are. `attempt`: the same request
        asked again (a step that retries an unreadable reply, as SAFE does): its own cache entry. `sent` (a
        scoring.content.Sent): what the step sent, against which a read reply's content is checked (the
        step's Reply declares what it must contain); a reply that fails is a grading error too, with the
        check's reason. `cache_prefix`: how many leading messages are static text the step's other calls
        share (providers/request.CallRequest), for the provider's prompt cache."""
        from factcli.providers import reasoning
        from factcli.providers.base import RenderedPrompt
        from factcli.providers.dialects import schema_for
        from factcli.providers.request import CallRequest, Reasoning

        provider = self._provider(spec)
        self.used.add(spec.label or spec.id)
        own_cap = spec.config.get("max_completion_tokens", spec.config.get("max_tokens"))
        cap = reply.cap_for(items) if reply is not None else GRADER_MAX_TOKENS
        style = provider.reasoning_style()
        # hidden reasoning comes out of the same allowance: the step's cap on top of a reasoning budget, no
        # temperature, a low effort (the provider's family's parameters, providers/reasoning.py); the
        # grader's own cap is the whole allowance, its own thinking config (if any) stands
        thinks = None if style is None else \
            Reasoning(style, cap, reasoning.allowance(provider, style) if own_cap is None else None)
        schema = name = None
        form = "plain"
        if "response_format" not in spec.config:  # the grader's own response_format stands
            if reply is not None:
                form, name, schema = "json_schema", reply.name, schema_for(provider, reply, own_cap or cap, items)
            elif json_mode:
                form = "json_object"
        request = CallRequest(RenderedPrompt(text=json.dumps(messages, ensure_ascii=False), messages=messages),
                              purpose="grader", repeat_idx=attempt, schema=schema, schema_name=name, form=form,
                              max_tokens=cap if own_cap is None else None, temperature=0, seed=GRADER_SEED,
                              reasoning=thinks, cache_prefix=cache_prefix)
        held = getattr(self.caller, "sends_json", None)

        def schema_error(reply_text: str | None) -> str | None:
            """Why the reply can be read neither by the step's schema nor in its text form, when the request
            asked for the schema (None: it is read, or the endpoint refused every structured form, and the
            step reads the grader's own words). The reading rule is the step's (scoring/replies.py)."""
            if not strict or reply is None or not reply_text or (held is not None and not held(provider, request)):
                return None
            from factcli.scoring.replies import ReplyError

            try:
                reply.read(reply_text)
            except ReplyError as exc:
                if reply.protocol is None:  # JSON was asked for and the step has no text form: prose is no verdict
                    return f"the judge's reply does not fit the {reply.name} step's JSON schema: {exc}"
                try:
                    reply.read_protocol(reply_text)
                except ReplyError as why:
                    return str(why)
            return None

        if sent is not None:
            sent = sent.about(messages)

        def content_error(reply_text: str | None) -> str | None:
            """Why a reply that can be read is no judgment of what the step sent (scoring/content.py)."""
            if sent is None or reply is None or not strict or not reply_text:
                return None
            from factcli.scoring.replies import ReplyError

            try:
                value = reply.read(reply_text)
            except ReplyError:
                try:
                    value = reply.read_protocol(reply_text)
                except ReplyError:
                    return None  # unreadable: schema_error's to say
            return reply.content_error(value, sent)

        def usable(resp) -> bool:  # the cache keeps and serves only this (run/calling/caller.py)
            text = _text_of(resp.output)
            return resp.finish_reason != "length" and schema_error(text) is None and content_error(text) is None

        resp = await self.caller.call(provider, request, accept=usable)
        _record(provider, resp)
        output = resp.output
        reply_text = _text_of(output)
        error = resp.error

        if error is None and resp.finish_reason == "length":
            if thinks is not None and thinks.budget is not None:
                budget = (resp.metadata or {}).get("reasoningBudget", thinks.budget)
                said = "asked twice, the second time with the budget doubled" if \
                    (resp.metadata or {}).get("reasoningRetried") else "at the ceiling, not asked again"
                error = (f"the grader's reply was cut off while it reasoned (finish_reason=length; "
                         f"{resp.token_usage.reasoning:,} reasoning tokens spent) at the {name_of(reply)} cap of {cap} "
                         f"tokens plus a reasoning budget of {budget:,} ({said}); raise {reasoning.KEY} in the "
                         f"grader's config (provider: {{id: {spec.id}, config: {{{reasoning.KEY}: {budget * 2}}}}}) "
                         f"or lower its reasoning_effort")
            elif own_cap is not None:
                error = (f"the grader's reply was cut off at its max_tokens of {own_cap} (finish_reason=length); "
                         f"raise max_tokens in the grader's config")
            elif resp.token_usage.reasoning:
                error = (f"the grader's reply was cut off at the {name_of(reply)} cap of {cap} tokens after "
                         f"{resp.token_usage.reasoning:,} hidden reasoning tokens (finish_reason=length): it is a "
                         f"reasoning model factcli did not know as one; say so in the grader's config (provider: "
                         f"{{id: {spec.id}, config: {{reasoning: true}}}}) to give it a reasoning budget")
            else:
                step = f"the {reply.name} step's" if reply is not None else "the default"
                error = (f"the grader's reply was cut off at {step} cap of {cap} tokens (finish_reason=length); "
                         f"raise it with max_tokens in the grader's config (provider: {{id: {spec.id}, "
                         f"config: {{max_tokens: {cap * 2}}}}})")
        out = GraderReply(reply_text, error, resp.token_usage, resp.cost, resp.finish_reason, output)
        if reply is not None and error is None and reply_text:
            from factcli.scoring.replies import ReplyError

            try:
                out.parsed = reply.read(reply_text)
            except ReplyError:
                # not the schema: read in the step's text form (its `protocol`, the step's own reader, issue 47),
                # else a grading error in the step's words; a step without one: JSON was asked for, and prose
                # is no verdict (issue 44)
                out.error = schema_error(reply_text)
                out.refused = out.error is not None
            else:
                out.raw, out.text = reply_text, reply.text_of(out.parsed)
            if out.error is None:
                # read, but not a judgment of what was sent: a grading error that no step reads on from
                out.error = content_error(reply_text)
        return out

    def given_replies(self):
        """The cache entries of the replies read inside (run/calling/caller.GivenReplies), to drop when the
        grading fails; a caller without a cache gives a scope that drops nothing."""
        given = getattr(self.caller, "given", None)
        return given() if given is not None else _NoReplies()

    async def search(self, backend, query: str, results: int) -> GraderReply:
        """One search through the run's Caller (retries, limits, cache, budget), counted in the row's
        ledger with its price. `backend` is a search Provider (providers/search); the reply's `output` is
        its list of results {title, url, snippet}; `cached` on the response says no request was sent."""
        from factcli.providers.base import RenderedPrompt
        from factcli.providers.request import CallRequest

        self.used.add(backend.id)
        prompt = RenderedPrompt(text=query, messages=[{"role": "user", "content": query}],
                                config={"results": results})
        resp = await self.caller.call(backend, CallRequest(prompt, purpose="search"))
        _record(backend, resp)
        return GraderReply(None, resp.error, resp.token_usage, resp.cost, resp.finish_reason,
                           resp.output if resp.error is None else None)

    async def embed(self, spec: ProviderSpec, text: str) -> tuple[list[float] | None, str | None, TokenUsage]:
        from factcli.providers.base import RenderedPrompt
        from factcli.providers.embedding import EmbeddingProvider
        from factcli.providers.request import CallRequest

        key = json.dumps(["embedding", spec.id, spec.config], sort_keys=True, default=str)
        if key not in self._providers:
            self._providers[key] = EmbeddingProvider(spec, self.base_dir)
        provider = self._providers[key]
        self.used.add(spec.label or spec.id)
        prompt = RenderedPrompt(text=text, messages=[{"role": "user", "content": text}])
        resp = await self.caller.call(provider, CallRequest(prompt, purpose="embedding"))
        _record(provider, resp)
        if resp.error is not None:
            return None, resp.error, resp.token_usage
        if not isinstance(resp.output, list):
            return None, f"embedding provider {spec.id} returned no vector", resp.token_usage
        return resp.output, None, resp.token_usage


# ---------------------------------------------------------------- prompts


def load_rubric_prompt(value: Any, base_dir: Path | None, file: str = "", where: str = "") -> Any:
    """At config load: a `file://` rubric prompt becomes its text (paths relative to the config)."""
    if isinstance(value, str) and value.startswith("file://"):
        from factcli import sources

        path, _ = sources.ref_path(value, base_dir or Path.cwd())
        text = sources.read_text(path, file, where)
        if path.suffix.lower() in (".json", ".yaml", ".yml"):
            return sources.load_structured(path, file)
        return text
    return value


def render_grading_prompt(template: Any, variables: dict) -> list[dict]:
    """A rubric prompt (text, chat messages, or their JSON text) rendered into chat messages.

    Object-valued variables are inserted as compact JSON, as promptfoo does.
    """
    ctx = {k: (json.dumps(v, separators=(",", ":"), ensure_ascii=False) if isinstance(v, dict) else v)
           for k, v in variables.items()}
    messages = template
    if isinstance(template, str):
        stripped = template.strip()
        if stripped.startswith("["):
            try:
                messages = json.loads(stripped)
            except ValueError:
                messages = template
    if isinstance(messages, list) and all(isinstance(m, dict) and "role" in m for m in messages):
        out = []
        for m in messages:
            m = dict(m)
            if isinstance(m.get("content"), str):
                m["content"] = templating.render(m["content"], ctx)
            out.append(m)
        return out
    if isinstance(messages, dict):
        raise ConfigError("a rubric prompt must be text or a list of chat messages")
    return [{"role": "user", "content": templating.render(str(messages), ctx)}]


def parse_json_maybe(text: str) -> Any:
    """promptfoo's tryParse: JSON if the text is JSON, else the text."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def as_template_text(value: Any) -> str:
    """How promptfoo puts a parsed output into a grading prompt: objects as compact JSON."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return templating.js_string(value)


# ---------------------------------------------------------------- reading replies


def extract_json_objects(text: str, limit: int = 100_000, parse: Callable[[str], Any] | None = None) -> list[dict]:
    """Every top-level `{…}` object in a reply, read leniently (YAML flow syntax, unclosed braces).

    Follows promptfoo's brace scanner: from each `{`, grow until the braces balance (or the text
    ends, closing what is open), and keep the first prefix that `parse` (default: JSON, then YAML;
    None when unreadable) reads as a mapping.
    """
    if parse is None:
        import yaml

        def parse(candidate: str) -> Any:
            return _lenient_load(candidate, yaml)

    found = []
    i = 0
    n = len(text)
    while i < n:
        if text[i] != "{":
            i += 1
            continue
        opened, closed = 1, 0
        j = i + 1
        advanced = False
        end = min(i + limit, n)
        while j < end and opened > closed:
            ch = text[j]
            if ch == "{":
                opened += 1
            elif ch == "}":
                closed += 1
            j += 1
            if opened == closed or j == n or j == i + limit:
                candidate = text[i:j] + "}" * max(0, opened - closed)
                obj = parse(candidate)
                if isinstance(obj, dict):
                    found.append(obj)
                    i = j
                    advanced = True
                    break
                if opened == closed:
                    break
        if not advanced:
            i += 1
    return found


def _lenient_load(candidate: str, yaml) -> Any:
    try:
        return json.loads(candidate)
    except ValueError:
        pass
    try:
        return yaml.safe_load(candidate)
    except yaml.YAMLError:
        return None


def grader_error(reason: str, raw: str | None = None, tokens: TokenUsage | None = None, **metadata) -> GradingResult:
    """A reply that could not be used: the assertion fails, marked, never inverted by `not-`."""
    meta = {"graderError": True, **metadata}  # the replies it read leave the cache (scorer.run_assertion)
    if raw is not None:
        meta["graderRaw"] = raw
    return GradingResult(False, 0.0, reason, tokens_used=tokens or TokenUsage(), metadata=meta)


FIRST_LETTER = re.compile(r"\s*\(?([a-eA-E])\)")
