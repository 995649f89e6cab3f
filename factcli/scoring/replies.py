"""What a grader must reply, one definition per step: its JSON schema, its reader and its reply cap.

A step declares its reply once, as a shape built from the few types below; `Reply.json_schema()`
is what the grader request carries (`response_format: json_schema`, which OpenAI-compatible
servers, llama.cpp and vLLM turn into a grammar, and litellm maps to Ollama's `format`), and
`Reply.read()` is the parser. Both walk the same shape, so the schema cannot promise what the
parser refuses, nor the parser accept what the schema forbids (tests/test_replies.py checks this
with hypothesis).

The shapes stay inside what every provider's strict mode accepts (closed objects, every field
required, null for "none", `minItems` at most 1): `Number` and `Int` can carry bounds, but the steps
leave them out (Anthropic's and others' strict modes refuse `minimum`/`maximum`) and check ranges
themselves.

Why a cap per step: a verdict needs a few hundred tokens, a list of claims more; a small local
judge that is allowed 4,096 tokens rambles until the timeout. No step asks for more than
MAX_CAP; a grader's own `max_tokens` still wins.

Many steps were written for promptfoo's text replies (a letter, "Verdict: Yes.", "[Attributed]"
tags). Their shape's `as_text` turns a parsed reply back into that text, so the step keeps one
reader for a structured reply and for a server that could only answer in plain text.

The reading rule, one per step (issue 47): a reply is read if it fits the schema; else if the step
declares a `protocol` (the text form its own prompt asks for: a final `Y`, an `(A)` letter, JSON
lines) and the reply is unambiguous in it, read exactly as promptfoo or the reference reads it; else
it is a grading error. A server that ignores `response_format` answers in that text form, and is
read as promptfoo would read it. A step whose text form cannot be told from prose (the sentences
context-relevance copies out, statements, claims) declares none: prose there stays an error.
`protocol` is the step's own reader (the caller reads the text with the same function), so the
gate and the reading cannot disagree; it raises ReplyError with the step's own message (promptfoo's
wording where promptfoo has one) when the text is not in its form.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Callable

MAX_CAP = 2048
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # OpenAI's rule for json_schema.name


class ReplyError(ValueError):
    """A reply the step's schema does not allow; the message names where."""


class Shape:
    def schema(self) -> dict:  # pragma: no cover - every shape overrides it
        raise NotImplementedError

    def check(self, value: Any, where: str) -> Any:  # pragma: no cover
        raise NotImplementedError


class Text(Shape):
    def schema(self) -> dict:
        return {"type": "string"}

    def check(self, value, where):
        if not isinstance(value, str):
            raise ReplyError(f"{where} must be a string")
        return value


class Flag(Shape):
    def schema(self) -> dict:
        return {"type": "boolean"}

    def check(self, value, where):
        if not isinstance(value, bool):
            raise ReplyError(f"{where} must be true or false")
        return value


@dataclass(frozen=True)
class Number(Shape):
    low: float | None = None
    high: float | None = None

    def schema(self) -> dict:
        out: dict = {"type": "number"}
        if self.low is not None:
            out["minimum"] = self.low
        if self.high is not None:
            out["maximum"] = self.high
        return out

    def check(self, value, where):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ReplyError(f"{where} must be a number")
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            raise ReplyError(f"{where} is out of range ({json.dumps(self.schema())}), got {value!r}")
        return value


@dataclass(frozen=True)
class Int(Shape):
    low: int | None = None

    def schema(self) -> dict:
        return {"type": "integer"} if self.low is None else {"type": "integer", "minimum": self.low}

    def check(self, value, where):
        # JSON Schema counts 3.0 as an integer; so does the reader, and gives 3
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ReplyError(f"{where} must be a whole number")
        if self.low is not None and value < self.low:
            raise ReplyError(f"{where} must be at least {self.low}, got {value}")
        return value


@dataclass(frozen=True)
class Maybe(Shape):
    """The shape, or null."""

    item: Shape

    def schema(self) -> dict:
        return {"anyOf": [self.item.schema(), {"type": "null"}]}

    def check(self, value, where):
        return None if value is None else self.item.check(value, where)


class Choice(Shape):
    def __init__(self, *values: str):
        self.values = tuple(values)

    def schema(self) -> dict:
        return {"type": "string", "enum": list(self.values)}

    def check(self, value, where):
        if not isinstance(value, str) or value not in self.values:
            raise ReplyError(f"{where} must be one of {', '.join(self.values)}, got {json.dumps(value)[:80]}")
        return value


@dataclass(frozen=True)
class ListOf(Shape):
    item: Shape
    min_items: int = 0

    def schema(self) -> dict:
        out = {"type": "array", "items": self.item.schema()}
        if self.min_items:
            out["minItems"] = self.min_items
        return out

    def check(self, value, where):
        if not isinstance(value, list):
            raise ReplyError(f"{where} must be a list")
        if len(value) < self.min_items:
            raise ReplyError(f"{where} must have at least {self.min_items} item(s)")
        return [self.item.check(v, f"{where}[{i}]") for i, v in enumerate(value)]


class Obj(Shape):
    """Every field required and nothing else allowed: what OpenAI's strict mode asks of a schema,
    and what leaves a grammar-constrained model no way to skip the verdict."""

    def __init__(self, **fields: Shape):
        self.fields = fields

    def schema(self) -> dict:
        return {"type": "object", "properties": {k: s.schema() for k, s in self.fields.items()},
                "required": list(self.fields), "additionalProperties": False}

    def check(self, value, where):
        if not isinstance(value, dict):
            raise ReplyError(f"{where} must be an object")
        missing = [k for k in self.fields if k not in value]
        if missing:
            raise ReplyError(f"{where} has no {', '.join(missing)}")
        extra = [k for k in value if k not in self.fields]
        if extra:
            raise ReplyError(f"{where} has unexpected key(s) {', '.join(map(str, extra))}")
        return {k: s.check(value[k], f"{where}.{k}") for k, s in self.fields.items()}


def _no_constants(name: str):
    raise ValueError(f"{name} is not JSON")


@dataclass(frozen=True)
class Reply:
    """One step's reply: `name` (the schema's name), `shape`, `cap` (the default max_tokens),
    `types` (the assertion types whose grading makes this call, for --dry-run and budgets),
    `calls` (how many such calls one grading makes, when known), and `as_text` (the text form the
    step's own reader reads, when it reads text)."""

    name: str
    shape: Obj
    cap: int
    types: tuple[str, ...] = ()
    calls: int = 1
    as_text: Callable[[dict], str] | None = None
    # a reply whose length follows its input (claims of a text, a verdict per claim): base + per_item
    # tokens per item (a word of the text, a claim), never above `cap`. A small local judge that rambles
    # then stops where a fitting reply would, not at 2,048 tokens
    per_item: int = 0
    base: int = 0
    # the step's documented text form, read as promptfoo or the reference reads it: text -> its reading
    # (never None); ReplyError (or ValueError) with the step's message when the text is not in that form
    protocol: Callable[[str], Any] | None = None
    # what the reply must contain to judge what the step sent (scoring/content.py, issue 52): the step's
    # check of a read reply (a dict of the schema's shape) against a content.Sent; ReplyError with the reason
    content: Callable[[dict, Any], None] | None = None

    def __post_init__(self):
        if not _NAME.match(self.name):
            raise ValueError(f"reply name {self.name!r} must match {_NAME.pattern}")
        if not 0 < self.cap <= MAX_CAP:
            raise ValueError(f"reply {self.name}: cap {self.cap} must be 1..{MAX_CAP}")
        REPLIES[self.name] = self

    def json_schema(self) -> dict:
        return self.shape.schema()

    def cap_for(self, items: int | None = None) -> int:
        """The cap of one call about `items` things (None: not known, the step's cap)."""
        if not self.per_item or items is None:
            return self.cap
        return max(1, min(self.cap, self.base + self.per_item * items))

    def response_format(self, bounded_cap: int | None = None, items: int | None = None) -> dict:
        """The request's `response_format`. `bounded_cap`: for a grammar-backed local server (llama.cpp,
        vLLM, Ollama), the free-text fields carry a `maxLength` that fits the reply inside that cap
        (bounded_schema); the reply is read with the same reader either way."""
        schema = self.json_schema() if bounded_cap is None else self.bounded_schema(bounded_cap, items)
        return {"type": "json_schema", "json_schema": {"name": self.name, "schema": schema, "strict": True}}

    def listed(self, items: int | None) -> int | None:
        """How many entries the reply's lists hold, when the input says: one per item for a list of
        objects (a verdict per claim), one per three words for a list of texts (claims of a text)."""
        if not self.per_item or items is None:
            return None
        return max(1, items) if self.one_per_item else max(1, -(-items // 3))

    def bounded_schema(self, cap: int, items: int | None = None) -> dict:
        """The schema with every free-text field given a `maxLength`, its share of what the cap holds
        (CHARS_PER_TOKEN characters a token, a quarter left for the JSON around them), and a list whose
        length the input says given that `maxItems` (its entries share the cap). An entry of a list whose
        length is not known may take its field's whole share: splitting by a guessed count would cut the
        long sentences of a well-behaved judge. A grammar then ends a small judge's reasons where a
        fitting reply would end, not at the cap (docs/judges.md: a local judge)."""
        listed = self.listed(items)
        return _bounded(self.shape, cap * CHARS_PER_TOKEN * 0.75, listed, listed is not None and self.one_per_item)

    @property
    def one_per_item(self) -> bool:
        """Whether the reply lists exactly one entry per item (a verdict per claim): its list is a list of
        objects and its length follows the input."""
        first = next(iter(self.shape.fields.values()), None)
        return bool(self.per_item) and isinstance(first, ListOf) and isinstance(first.item, Obj)

    def read(self, text: str | None) -> dict:
        """The reply as the schema allows it; ReplyError otherwise. The JSON may sit in a ```json
        fence or after some words (a server that ignored the schema)."""
        value = _first_json(text or "")
        return self.shape.check(value, self.name)

    def read_protocol(self, text: str | None) -> Any:
        """The reply read in the step's text form (`protocol`); ReplyError when the step has none or the
        text is not unambiguous in it (the message is then the step's own)."""
        if self.protocol is None:
            raise ReplyError(f"the {self.name} step has no text form to read instead")
        try:
            out = self.protocol(text or "")
        except ReplyError:
            raise
        except ValueError as exc:
            raise ReplyError(str(exc)) from None
        if out is None:
            raise ReplyError(f"the judge's reply is not in the {self.name} step's text form")
        return out

    def content_error(self, value: Any, sent: Any) -> str | None:
        """Why a read reply is no judgment of what was sent (`sent`, a scoring.content.Sent): the
        placeholder check and the step's `content` check; None when it is one, or when nothing was said
        about what was sent, or the reply was read in a text form that is not the schema's shape."""
        if sent is None or not isinstance(value, dict):
            return None
        try:
            sent.check(self.name, value, self.content)
        except ReplyError as exc:
            return str(exc)
        return None

    def text_of(self, value: dict) -> str:
        return self.as_text(value) if self.as_text else json.dumps(value, ensure_ascii=False)


REPLIES: dict[str, Reply] = {}
CHARS_PER_TOKEN = 3.5  # English text in the usual tokenizers, a little under their ~4
MIN_CHARS = 16


def _slots(shape: Shape, listed: int | None) -> float:
    """How many free-text values a reply of this shape holds."""
    if isinstance(shape, Text):
        return 1
    if isinstance(shape, Maybe):
        return _slots(shape.item, listed)
    if isinstance(shape, ListOf):  # a list whose length the input does not say: each entry may take the share
        return (listed or 1) * _slots(shape.item, listed)
    if isinstance(shape, Obj):
        return sum(_slots(s, listed) for s in shape.fields.values())
    return 0


def _bounded(shape: Shape, chars: float, listed: int | None, exact: bool = False) -> dict:
    """`shape`'s schema with lengths; `exact`: a list of `listed` entries exactly (a grammar then cannot
    stop after the first verdict of many, which the reader would refuse)."""
    if isinstance(shape, Text):
        return {"type": "string", "maxLength": max(MIN_CHARS, int(chars))}
    if isinstance(shape, Maybe):
        return {"anyOf": [_bounded(shape.item, chars, listed), {"type": "null"}]}
    if isinstance(shape, ListOf):
        out = {"type": "array", "items": _bounded(shape.item, chars / (listed or 1), listed)}
        least = max(shape.min_items, listed or 0) if exact else shape.min_items
        if least:
            out["minItems"] = least
        if listed:
            out["maxItems"] = max(listed, shape.min_items)
        return out
    if isinstance(shape, Obj):
        total = _slots(shape, listed) or 1
        return {"type": "object", "required": list(shape.fields), "additionalProperties": False,
                "properties": {k: _bounded(s, chars * _slots(s, listed) / total, listed, exact)
                               for k, s in shape.fields.items()}}
    return shape.schema()


def _first_json(text: str) -> Any:
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = re.sub(r"^```[A-Za-z]*\s*|\s*```$", "", stripped)
    try:
        return json.loads(stripped, parse_constant=_no_constants)
    except ValueError:
        pass
    decoder = json.JSONDecoder(parse_constant=_no_constants)
    start = stripped.find("{")
    while start >= 0:
        try:
            return decoder.raw_decode(stripped, start)[0]
        except ValueError:
            start = stripped.find("{", start + 1)
    raise ReplyError("the reply has no JSON object")


def caps_for(assertion_type: str) -> list[int]:
    """The reply caps of the grader calls one grading of `assertion_type` makes (one entry per call),
    for the steps that are registered (a family registers its replies when it is imported)."""
    base = assertion_type[4:] if assertion_type.startswith("not-") else assertion_type
    out: list[int] = []
    for r in REPLIES.values():
        if base in r.types:
            out += [r.cap] * r.calls
    return out
