"""Plain data passed between the pipeline's stages. promptfoo spellings live only at the edges."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from json.encoder import encode_basestring as _basestring
from typing import Any, Iterator

# promptfoo's ResultFailureReason
FAILURE_NONE, FAILURE_ASSERT, FAILURE_ERROR = 0, 1, 2
# factcli's own: the judge could not judge the row (a grader call failed after its retries, a reply the
# step's schema does not allow, a reply cut off). An error, never a failure or a pass: left out of pass
# rates and metric means, re-run by --retry-errors, exit 4 (contract §2). promptfoo's JSON writes it as
# ERROR (2) with `success: false`; scoring/outcome.py decides it, every count reads it through the
# functions below.
FAILURE_GRADING = 3
ERROR_REASONS = (FAILURE_ERROR, FAILURE_GRADING)


def status_word(success, failure_reason) -> str:
    """PASS, FAIL or ERROR: a row's status as every view prints it (a row not judged is an ERROR)."""
    if success:
        return "PASS"
    return "ERROR" if failure_reason in ERROR_REASONS else "FAIL"


def judged(failure_reason) -> bool:
    """Whether a row counts in pass rates and metric means: every row but those the judge could not judge."""
    return failure_reason != FAILURE_GRADING


# The mark a grading error leaves on its assertion's metadata (scoring/grading.grader_error writes it). Every
# reader asks the predicates below, never the key: tests/test_owned_keys.py fails on a bare read elsewhere.
GRADER_ERROR_KEY = "graderError"


def meta_errored(meta) -> bool:
    """Whether an assertion's metadata (a GradingResult's, a stored result's, a method's per-row record)
    marks its grading as errored."""
    return bool(meta) and bool(meta.get(GRADER_ERROR_KEY))


def grader_error_mark(meta):
    """The grader-error mark as written in the metadata (what a view prints after "grader error:"), or None."""
    return meta.get(GRADER_ERROR_KEY) if meta else None


def grader_errored(result) -> bool:
    """Whether one assertion's grading errored (its judge failed or could not be read): not judged
    (scoring/outcome.py tells the rule)."""
    return meta_errored(result.metadata)


def json_errored(component) -> bool:
    """grader_errored for a grading read back as JSON (a stored row's `componentResults` item, or its
    grading): its `metadata`'s mark."""
    return isinstance(component, dict) and meta_errored(component.get("metadata"))


def json_components(grading) -> list[dict]:
    """The component results of a grading read back as JSON (a stored row's, or one component's): the
    mappings in its `componentResults`, [] when it has none."""
    comps = grading.get("componentResults") if isinstance(grading, dict) else None
    return [c for c in comps if isinstance(c, dict)] if isinstance(comps, list) else []


def json_walk(grading) -> Iterator[dict]:
    """Every component of a JSON grading and of its assert-sets, each set before its members: walk's
    counterpart for a grading read back."""
    for c in json_components(grading):
        yield c
        yield from json_walk(c)


def has_grader_error(grading) -> bool:
    """Whether a row's grading holds an assertion not judged, in an assert-set too."""
    if grading is None:
        return False
    if grader_errored(grading):
        return True
    for c in grading.component_results:
        if grader_errored(c) or (c.component_results and has_grader_error(c)):
            return True
    return False


@dataclass(slots=True)
class Prompt:
    """A prompt of the config: its template (or chat messages, or a prompt function) and the label and id it
    is shown and matched by."""

    raw: str  # the template text as written (for chat prompts: the JSON text of the messages)
    label: str
    messages: list[dict] | None = None  # set for chat prompts; each content is a template
    id: str = ""
    # a prompt function, `file:///abs/prompts.py:fn` (or .js, or a .py run as a script): called per row
    # instead of rendering `raw` (run/planning/row_vars.py)
    function: str | None = None
    config: dict = field(default_factory=dict)  # the prompt entry's `config:`, request parameters for its calls
    # chat messages whose content is a prompt function (`messages:` form): message index -> function, as
    # `function` above; called per row, its return is that message's content
    message_functions: dict[int, str] | None = None


@dataclass(slots=True)
class ProviderSpec:
    """A provider as the config names it: its id and label, its config, and which prompts it runs."""

    id: str
    label: str | None = None
    config: dict = field(default_factory=dict)
    prompts: list[str] | None = None  # promptfoo's provider-level prompt filter (labels or ids)
    delay_ms: float = 0
    transform: str | None = None

    @property
    def display(self) -> str:
        return self.label or self.id


@dataclass(slots=True)
class Assertion:
    """One assertion of a test, as parsed: its type (with `not-`), value, threshold, weight, metric and
    grader, and its members for an assert-set."""

    type: str  # may carry the "not-" prefix
    value: Any = None
    threshold: float | None = None
    weight: float = 1.0
    metric: str | None = None
    provider: Any = None
    rubric_prompt: Any = None
    transform: str | None = None
    context_transform: str | None = None
    config: dict = field(default_factory=dict)
    children: list["Assertion"] | None = None  # assert-set members
    raw: dict = field(default_factory=dict)  # as written, for the results JSON
    calibration: dict | None = None  # the judge's measured errors (config/judge_calibration.py)

    @property
    def base_type(self) -> str:
        return self.type[4:] if self.type.startswith("not-") else self.type

    @property
    def inverse(self) -> bool:
        return self.type.startswith("not-")


def walk(assertions) -> Iterator[Assertion]:
    """Every assertion of a list and of its assert-sets, each set before its members, in the order written:
    the one walk of an assertion tree (a set's members are its `children`)."""
    for a in assertions or ():
        yield a
        if a.children:
            yield from walk(a.children)


def walk_keyed(assertions, prefix: str = "assert") -> Iterator[tuple[str, Assertion]]:
    """walk, each assertion with its key path under its test (`assert[1].assert[0]`), for messages."""
    for i, a in enumerate(assertions or ()):
        where = f"{prefix}[{i}]"
        yield where, a
        if a.children:
            yield from walk_keyed(a.children, f"{where}.assert")


@dataclass(slots=True)
class TestCase:
    """One test after defaultTest is merged in: vars, assertions, options, and where it was declared."""

    __test__ = False  # not a pytest test class, whatever its name
    description: str | None = None
    vars: dict = field(default_factory=dict)
    assertions: list[Assertion] = field(default_factory=list)
    threshold: float | None = None
    options: dict = field(default_factory=dict)
    metadata: dict = field(default_factory=dict)
    provider_output: Any = None  # CSV __providerOutput / --model-outputs: skip the provider call
    raw: dict = field(default_factory=dict)  # merged test as promptfoo reports it in testCase
    source: tuple[str, str] = ("", "")  # (file, key path) where the test was declared, for errors
    grader_from_default: bool = False  # options.provider came from defaultTest, not the test itself
    # keys of options (and defaultTest.options) that are request parameters, not test options: merged
    # over the provider's config for this test's calls, as promptfoo merges them (contract §4)
    request_params: dict = field(default_factory=dict)
    # names of vars whose values were written in the config (test vars, defaultTest.vars, --var) and hold a
    # template: rendered once per row with the row's vars (contract §3); values from files never are
    template_vars: frozenset = frozenset()


@dataclass(slots=True)
class EvalStep:
    """One row to run: a test (with one combination of its vars) in one column, for one repeat."""

    test_idx: int
    prompt_idx: int  # the column
    repeat_idx: int
    test: TestCase
    vars: dict
    prompt: Prompt
    provider: ProviderSpec
    provider_idx: int = 0


@dataclass(slots=True)
class TokenUsage:
    """Token counts of one or more calls, in promptfoo's fields. `prompt` is every input token sent,
    those read from and written to the provider's prompt cache included (OpenAI's prompt_tokens is so;
    Anthropic's input_tokens leaves them out, and its reply is counted so when read); `cached` are
    the cache reads among them, `cache_write` the cache writes (providers/pricing.Price.cost_of
    prices each)."""

    prompt: int = 0
    completion: int = 0
    total: int = 0
    cached: int = 0
    num_requests: int = 0
    # of `completion`, the hidden reasoning tokens (OpenAI's reasoning models, Claude's thinking, Gemini's
    # thoughts): billed as output, never seen in the reply
    reasoning: int = 0
    cache_write: int = 0  # promptfoo has no field for it: JSON's `factcli.cacheWrite`

    def add(self, other: "TokenUsage") -> None:
        self.prompt += other.prompt
        self.completion += other.completion
        self.total += other.total
        self.cached += other.cached
        self.num_requests += other.num_requests
        self.reasoning += other.reasoning
        self.cache_write += other.cache_write

    def to_json(self) -> dict:
        out = {
            "prompt": self.prompt,
            "completion": self.completion,
            "total": self.total,
            "cached": self.cached,
            "numRequests": self.num_requests,
        }
        if self.reasoning:  # promptfoo's field for them
            out["completionDetails"] = {"reasoning": self.reasoning}
        if self.cache_write:  # a key of factcli's own, which promptfoo's readers pass over
            out["factcli"] = {"cacheWrite": self.cache_write}
        return out


@dataclass(slots=True)
class ProviderResponse:
    """What a provider's call gave: the output or an error, tokens, cost, latency, and whether it came from
    the cache."""

    output: Any = None
    error: str | None = None
    token_usage: TokenUsage = field(default_factory=TokenUsage)
    cost: float | None = None
    latency_ms: float = 0
    cached: bool = False
    finish_reason: str | None = None
    logprobs: list[float] | None = None
    metadata: dict = field(default_factory=dict)
    retries: int = 0


@dataclass(slots=True)
class GradingResult:
    """The verdict of an assertion (or of a row's assertions together, with one component each): pass,
    score, reason, named scores and the grader's tokens."""

    passed: bool
    score: float
    reason: str = ""
    assertion: Assertion | None = None
    named_scores: dict = field(default_factory=dict)
    named_score_weights: dict = field(default_factory=dict)
    tokens_used: TokenUsage = field(default_factory=TokenUsage)
    component_results: list["GradingResult"] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)


@dataclass(slots=True)
class EvalResult:
    """One finished row: its step, the prompt as sent, the response, the grading and the row's outcome."""

    step: EvalStep
    rendered_prompt: str
    response: ProviderResponse
    grading: GradingResult | None
    success: bool
    score: float
    named_scores: dict
    failure_reason: int
    error: str | None = None
    latency_ms: float = 0
    # the row's place in a multi-turn conversation (run/planning/conversations.py): {"id": conversationId or
    # None, "turn": 1-based, "rawOutput": the output before transforms when they changed it}
    conversation: dict | None = None


# ------------------------------------------------------------------ finished rows, shared empties
# A finished row stays in memory until the run ends (the table, exports and comparisons read it),
# and most of its small containers are empty: a leaf GradingResult alone carries three empty dicts,
# an empty list and a zero TokenUsage. `compact_row` swaps those for shared read-only instances once
# the row is recorded. They compare, serialise and read as their plain counterparts; any mutation
# raises instead of silently changing every row that shares them.


def _read_only(self, *args, **kwargs):
    raise TypeError("a shared empty value of a finished row is read-only")


class _EmptyDict(dict):
    __slots__ = ()
    __setitem__ = __delitem__ = update = setdefault = pop = popitem = clear = __ior__ = _read_only


class _EmptyList(list):
    __slots__ = ()
    __setitem__ = __delitem__ = append = extend = insert = pop = remove = clear = sort = reverse = _read_only
    __iadd__ = __imul__ = _read_only


class _ZeroTokens(TokenUsage):
    __slots__ = ()
    __setattr__ = __delattr__ = add = _read_only

    def __eq__(self, other):
        if isinstance(other, TokenUsage):
            return self.to_json() == other.to_json()
        return NotImplemented

    __hash__ = None

    def __repr__(self):  # read as its plain counterpart (a scored leaf holds it from the start: scoring/scorer.py)
        return TokenUsage.__repr__(self).replace("_ZeroTokens(", "TokenUsage(", 1)


EMPTY_DICT = _EmptyDict()
EMPTY_LIST = _EmptyList()
ZERO_TOKENS = object.__new__(_ZeroTokens)
for _name in ("prompt", "completion", "total", "cached", "num_requests", "reasoning", "cache_write"):
    object.__setattr__(ZERO_TOKENS, _name, 0)
del _name


def is_zero_tokens(t) -> bool:
    return (type(t) is TokenUsage and not t.prompt and not t.completion and not t.total and not t.cached
            and not t.num_requests and not t.cache_write)


def compact_row(row: EvalResult) -> None:
    """Share the empty containers of a recorded row (see above). The aggregate GradingResult keeps
    its own component list and TokenUsage: select-best/max-score append to them afterwards."""
    if type(row.named_scores) is dict and not row.named_scores:
        row.named_scores = EMPTY_DICT
    r = row.response
    if type(r.metadata) is dict and not r.metadata:
        r.metadata = EMPTY_DICT
    if is_zero_tokens(r.token_usage):
        r.token_usage = ZERO_TOKENS
    g = row.grading
    if g is None:
        return
    for name in ("named_scores", "named_score_weights", "metadata"):
        value = getattr(g, name)
        if type(value) is dict and not value:
            setattr(g, name, EMPTY_DICT)
    for c in g.component_results:
        for name in ("named_scores", "named_score_weights", "metadata"):
            value = getattr(c, name)
            if type(value) is dict and not value:
                setattr(c, name, EMPTY_DICT)
        if type(c.component_results) is list and not c.component_results:
            c.component_results = EMPTY_LIST
        if is_zero_tokens(c.tokens_used):
            c.tokens_used = ZERO_TOKENS


def grading_json(g: GradingResult, top: bool = False) -> dict:
    """promptfoo's GradingResult as JSON."""
    out: dict = {"pass": g.passed, "score": g.score, "reason": g.reason}
    if top or g.named_scores:
        out["namedScores"] = dict(g.named_scores)
    if g.named_score_weights:
        out["namedScoreWeights"] = dict(g.named_score_weights)
    out["tokensUsed"] = g.tokens_used.to_json()
    if g.assertion is not None:
        out["assertion"] = dict(g.assertion.raw)
    if g.component_results or top:
        out["componentResults"] = [grading_json(c) for c in g.component_results]
    if g.metadata:
        out["metadata"] = dict(g.metadata)
    return out


def tokens_from_json(d: dict | None) -> TokenUsage:
    d = d or {}
    details = d.get("completionDetails")
    return TokenUsage(prompt=d.get("prompt") or 0, completion=d.get("completion") or 0, total=d.get("total") or 0,
                      cached=d.get("cached") or 0, num_requests=d.get("numRequests") or 0,
                      reasoning=(details.get("reasoning") or 0) if isinstance(details, dict) else 0,
                      cache_write=cache_write_of(d))


def cache_write_of(d: dict) -> int:
    """The cache writes of a tokenUsage JSON (`factcli.cacheWrite`; promptfoo's releases after
    0.121.20 write `completionDetails.cacheCreationInputTokens`), 0 when it has none."""
    own, details = d.get("factcli"), d.get("completionDetails")
    value = own.get("cacheWrite") if isinstance(own, dict) else None
    if value is None and isinstance(details, dict):
        value = details.get("cacheCreationInputTokens")
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else 0


def _assertion(raw: dict) -> Assertion:
    weight = raw.get("weight", 1.0)
    return Assertion(type=str(raw.get("type", "")), value=raw.get("value"), threshold=raw.get("threshold"),
                     weight=weight if isinstance(weight, (int, float)) else 1.0, metric=raw.get("metric"),
                     raw=dict(raw))


def grading_from_json(d: dict | None) -> GradingResult | None:
    if d is None:
        return None
    score = d.get("score")
    return GradingResult(
        passed=bool(d.get("pass")), score=math.nan if score is None else score, reason=d.get("reason") or "",
        assertion=_assertion(d["assertion"]) if isinstance(d.get("assertion"), dict) else None,
        named_scores=dict(d.get("namedScores") or {}), named_score_weights=dict(d.get("namedScoreWeights") or {}),
        tokens_used=tokens_from_json(d.get("tokensUsed")),
        component_results=[grading_from_json(c) for c in d.get("componentResults") or []],
        metadata=dict(d.get("metadata") or {}),
    )


def json_encoder(*, sort_keys: bool = False, allow_nan: bool = True, check_circular: bool = True):
    """json.JSONEncoder(ensure_ascii=False, default=str, sort_keys=.., allow_nan=..).encode, the same
    text without its Python-level set-up on each call (half a small value's encoding time; a stored
    row encodes several values): the C encoder `encode` would build, with fresh circular-reference
    markers per call as `encode` has. `check_circular=False`: one C encoder for every call, without
    markers (less again); a value that holds itself raises RecursionError, not ValueError."""
    from json.encoder import c_make_encoder, encode_basestring

    slow = json.JSONEncoder(ensure_ascii=False, default=str, sort_keys=sort_keys, allow_nan=allow_nan)
    if c_make_encoder is None:  # an interpreter without json's C accelerator
        return slow.encode
    join = "".join
    if not check_circular:
        once = c_make_encoder(None, str, encode_basestring, None, ": ", ", ", sort_keys, False, allow_nan)

        def encode_acyclic(value: Any) -> str:
            if isinstance(value, str):
                return encode_basestring(value)
            return join(once(value, 0))

        return encode_acyclic

    def encode(value: Any) -> str:
        if isinstance(value, str):
            return encode_basestring(value)
        return join(c_make_encoder({}, str, encode_basestring, None, ": ", ", ", sort_keys, False, allow_nan)(value, 0))

    return encode


_sorted_json = json_encoder(sort_keys=True)


def test_key(description: str | None, variables: dict) -> str:
    """A stable id for a test: its description and concrete vars (not its position in the list)."""
    blob = _sorted_json({"d": description or "", "v": variables})
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


_FLAT = frozenset((str, int, float, bool, type(None)))


def test_key_of(description: str | None, variables: dict, vars_text: str) -> str:
    """test_key(description, variables), given `vars_text`: the vars' JSON as json_encoder(allow_nan=False)
    writes it. When the vars are flat (no value that holds keys) and their keys already in order, as a
    CSV row's mostly are, that text is their sorted form too and is not made again (issue 30)."""
    if description is None or type(description) is str:
        if _FLAT.issuperset(map(type, variables.values())) and (len(variables) < 2 or (
                (keys := list(variables)) == sorted(keys))):
            blob = f'{{"d": {_basestring(description or "")}, "v": {vars_text}}}'
            return hashlib.sha256(blob.encode()).hexdigest()[:16]
    return test_key(description, variables)


def row_description(n: int) -> str:
    """promptfoo's description of a test read from a CSV file (or a single JSON file) without one: `Row #n`,
    counted from 1 in its file. factcli numbers rows by their test index, from 0 (what `factcli show RUN N`
    takes), so its screens show such a row by its vars, never as a second number (report/labels.test_label)."""
    return f"Row #{n}"


def is_row_description(text) -> bool:
    return isinstance(text, str) and text.startswith("Row #") and text[5:].isdigit()
