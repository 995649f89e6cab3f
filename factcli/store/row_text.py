"""A stored row's extra field, declared once (extra_json), and its JSON texts made quickly (RowTexts).

The stored row's JSON fields are the texts json gives (redact._encode) for a grading (its layout is
types.grading_json) and for the extra field (its layout is extra_json below, read back by
records.from_record). A run stores thousands of rows whose texts are mostly the same from row to row,
so RowTexts, one for each run, keeps texts and makes a row's from them, byte for byte what encoding
the whole value gives:
- what a layout part gives for the same arguments is the same text: a part is a function of plain
  values (response_json, exact_json), and its text is kept by them;
- a grading whose leaves' texts are decided by their assertion and verdict alone (most of a run's) is
  kept whole, by those;
- a test's raw assertions are kept by the list itself (one list is shared by the tests that take
  defaultTest's; a loaded config is not changed);
- what joins the parts is json's too: a layout encoded once with a marker in place of each part, cut
  at the markers (_glue).
Each kept text is kept with whether its keys are clean (redact.keys_clean), so that the look for what
redaction could change (Scrubber.unchanged) is at the row's other texts only: its residue.
"""

from __future__ import annotations

from typing import Any

from factcli.store.redact import _encode, keys_clean
from factcli.types import ZERO_TOKENS, EvalResult, GradingResult, TokenUsage, grading_json, json_encoder

# ---------------------------------------------------------------- the layout


def as_dict(value: Any) -> dict:
    """A mapping as the record stores it: a dict as it is (JSON encodes it without a copy), any
    other mapping copied into one."""
    return value if isinstance(value, dict) else dict(value)


def test_case_json(raw: dict) -> dict:
    """The test as the row keeps it: its raw keys, vars stored apart (their own column)."""
    return {k: (None if k == "vars" else v) for k, v in raw.items()}


def response_json(present: bool, error: Any, finish_reason: Any, metadata: Any, tokens: TokenUsage,
                  latency_ms: Any, retries: Any) -> dict:
    return {"present": present, "error": error, "finishReason": finish_reason, "metadata": as_dict(metadata),
            "tokenUsage": tokens.to_json(), "latencyMs": latency_ms, "retries": retries}


def exact_json(score: Any, latency_ms: Any, cost: Any) -> dict:
    """The row's numbers as typed (the REAL columns are not)."""
    return {"score": score, "latencyMs": latency_ms, "cost": cost}


def _response_args(r: EvalResult) -> tuple:
    resp = r.response
    return (resp.error is None or resp.output is not None, resp.error, resp.finish_reason, resp.metadata,
            resp.token_usage, resp.latency_ms, resp.retries)


def extra_json(r: EvalResult, test_case: Any = None, metadata: Any = None, response: Any = None,
               exact: Any = None, conversation: Any = None) -> dict:
    """A row's extra field (the extra_json column): what the results JSON needs beyond the row's own
    columns. A part given is used as it is (RowTexts gives marks, to find where each part goes)."""
    step = r.step
    out = {"testCase": test_case_json(step.test.raw) if test_case is None else test_case,
           "metadata": as_dict(step.test.metadata) if metadata is None else metadata,
           "response": response_json(*_response_args(r)) if response is None else response,
           "exact": exact_json(r.score, r.latency_ms, r.response.cost) if exact is None else exact}
    if r.conversation is not None:
        out["conversation"] = r.conversation if conversation is None else conversation
    return out


# ---------------------------------------------------------------- the texts a run keeps

# json's text, as _encode gives it, by one C encoder without circular-reference markers: a value that
# holds itself raises RecursionError (the row then takes the general way, records.RowEncoder)
_encode_fast = json_encoder(allow_nan=False, check_circular=False)
# Put in a layout in place of its parts (_glue); a layout with a key that is one gets no glue.
_MARKS = tuple(f"\x00{i}\x00" for i in range(64))
_KEPT_MAX = 4096  # texts a run keeps; cleared when full
_EMPTY, _NO_TOKENS = object(), object()  # _key's own: equal to no value a row holds


class _NoKey(Exception):
    """A value whose text is not kept (made each time)."""


def _key(value: Any) -> Any:
    """What decides a plain value's JSON text, as a dict key: 1, 1.0 and True are equal keys and not
    the same text, nor are 0.0 and -0.0."""
    kind = type(value)
    if kind is str or value is None:
        return value
    if kind is float:
        return kind, repr(value)
    if kind is int or kind is bool:
        return kind, value
    if (kind is dict or isinstance(value, dict)) and not value:
        return _EMPTY
    if value is ZERO_TOKENS or (kind is TokenUsage and not (
            value.prompt or value.completion or value.total or value.cached or value.num_requests
            or value.reasoning or value.cache_write)):
        return _NO_TOKENS
    raise _NoKey


def _glue(layout: dict) -> tuple[str, tuple[int, ...], bool] | None:
    """A %-format of the text json gives for `layout`, whose values are _MARKS or hold them, with "%s"
    where each mark was; the marks found, in order; whether its keys are clean. None if a mark is
    there more than once."""
    text = _encode(layout)
    found = sorted((text.find(_encode(mark)), i) for i, mark in enumerate(_MARKS) if _encode(mark) in text)
    if any(text.count(_encode(_MARKS[i])) != 1 for _, i in found):
        return None
    pieces, last = [], 0
    for at, i in found:
        pieces.append(text[last:at].replace("%", "%%"))
        last = at + len(_encode(_MARKS[i]))
    pieces.append(text[last:].replace("%", "%%"))
    return "%s".join(pieces), tuple(i for _, i in found), keys_clean(text)


def _zero(t: Any) -> bool:
    return t is ZERO_TOKENS or (type(t) is TokenUsage and not (
        t.prompt or t.completion or t.total or t.cached or t.num_requests or t.reasoning or t.cache_write))


def _verdict_key(g: GradingResult) -> tuple | None:
    """What decides grading_json(g)'s own fields when its assertion and verdict do (no named scores,
    weights, metadata or tokens); None when they do not."""
    if g.named_scores or g.named_score_weights or g.metadata or not _zero(g.tokens_used):
        return None
    passed, score, reason = g.passed, g.score, g.reason
    return (id(g.assertion), type(passed), passed, type(score), score if score else repr(score), type(reason),
            reason)


class RowTexts:
    """The texts one run keeps (see above): grading and extra give (text, residue), the text what encoding
    the whole value gives (ValueError, TypeError or RecursionError as encoding it raises them), the
    residue the pieces of it whose keys are not known clean, joined by "\\x00" ("" for none)."""

    def __init__(self) -> None:
        self._kept: dict = {}  # key -> (text, clean, what the key refers to by id, held)
        self._glues: dict = {}  # a layout's keys -> _glue of it

    def _keep(self, key: Any, text: str, held: Any = None) -> tuple:
        if len(self._kept) >= _KEPT_MAX:
            self._kept.clear()
        found = self._kept[key] = (text, keys_clean(text), held)
        return found

    def grading(self, g: GradingResult) -> tuple[str, str]:
        key = _verdict_key(g)
        if key is not None:
            for c in g.component_results:
                leaf = None if c.component_results else _verdict_key(c)
                if leaf is None:
                    key = None
                    break
                key += leaf
        if key is not None:
            hit = self._kept.get(key)
            if hit is not None:
                return hit[0], "" if hit[1] else hit[0]
        text = _encode_fast(grading_json(g, top=True))
        if key is None:
            return text, text
        text, clean, _ = self._keep(key, text, [g.assertion, *(c.assertion for c in g.component_results)])
        return text, "" if clean else text

    def _part(self, make, args: tuple) -> tuple[str, bool]:
        """make(*args)'s text, kept by its arguments when they are plain."""
        try:
            key = (make, *map(_key, args))
        except _NoKey:
            return _encode_fast(make(*args)), False
        hit = self._kept.get(key)
        if hit is None:
            hit = self._keep(key, _encode_fast(make(*args)))
        return hit[0], hit[1]

    def _value(self, value: Any) -> tuple[str, bool]:
        """A test's raw value: a list kept by itself (a test's assertions: see above)."""
        if type(value) is not list:
            return _encode_fast(value), False
        key = ("list", id(value))
        hit = self._kept.get(key)
        if hit is None:
            hit = self._keep(key, _encode_fast(value), value)
        return hit[0], hit[1]

    def extra(self, r: EvalResult) -> tuple[str, str]:
        raw = r.step.test.raw
        conversation = r.conversation
        shape = (conversation is not None, *raw)  # (the test's keys: its layout's)
        glue = self._glues.get(shape)
        if glue is None:
            glue = self._glue_extra(r, shape)
        if not glue:  # keys that are not all text (json makes them text), or too many
            text = _encode(extra_json(r))
            return text, text
        fmt, holes, clean = glue  # the holes of the test's values, then the four parts after it
        values = [*raw.values()]
        texts, unclean = [], [] if clean else [fmt]  # (fmt: a secret-looking key among the test's own)
        for i in holes:
            text, known_clean = self._value(values[i])
            texts.append(text)
            if not known_clean:
                unclean.append(text)
        metadata = r.step.test.metadata
        texts.append(_encode_fast(as_dict(metadata)))
        if metadata:
            unclean.append(texts[-1])
        for text, known_clean in (self._part(response_json, _response_args(r)),
                                  self._part(exact_json, (r.score, r.latency_ms, r.response.cost))):
            texts.append(text)
            if not known_clean:
                unclean.append(text)
        if conversation is not None:
            texts.append(_encode_fast(conversation))
            unclean.append(texts[-1])
        return fmt % tuple(texts), "\x00".join(unclean)

    def _glue_extra(self, r: EvalResult, shape: tuple):
        """The extra field's glue for rows of this shape (False: none): its layout with a mark for each
        of the test's values, then for the metadata, response, exact numbers and conversation; its
        holes those of the test's values (the four parts after them are always there, in order)."""
        keys = shape[1:]
        glue = False
        if all(type(k) is str for k in keys) and len(keys) + 4 <= len(_MARKS):
            n = len(keys)
            glue = _glue(extra_json(r, test_case_json(dict(zip(keys, _MARKS))), *_MARKS[n:n + 4])) or False
            if glue:
                fmt, holes, clean = glue
                assert holes[len(holes) - 3 - shape[0]:] == tuple(range(n, n + 3 + shape[0]))
                glue = fmt, holes[:len(holes) - 3 - shape[0]], clean
        if len(self._glues) >= _KEPT_MAX:
            self._glues.clear()
        self._glues[shape] = glue
        return glue
