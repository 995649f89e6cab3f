"""The JSON texts of a stored row's grading and extra fields, joined from texts kept across rows.

Most of a row's grading and extra fields is the same text row after row: each grading leaf (one
assertion's verdict), the aggregate's own fields, the test's assertions, the response's fields when
they carry no tokens, named scores or metadata, the names of the test's keys. Their texts are kept
here, each with whether a secret-looking key is in it (redact.keys_clean), and a row's text is
joined from them, with the pieces of it that are not known clean (its residue: Scrubber.dumps_all
and Scrubber.unchanged look at these only): the same text, byte for byte, that encoding the whole
value gives (its encoding was half of a stored echo row's work). A kept text is keyed by what
decides it and, when that is an object (an assertion, a test's list of assertions, never changed
once loaded), by the object itself, held so that its id is not reused. Bounded: cleared when full.
"""

from __future__ import annotations

from json.encoder import encode_basestring
from typing import Any

from factcli.store.redact import _encode, keys_clean
from factcli.types import (EMPTY_DICT, ZERO_TOKENS, EvalResult, GradingResult, TokenUsage, grading_json,
                           is_zero_tokens)

_TEXTS: dict = {}
_TEXTS_MAX = 2048
_VERDICT_TYPES = (bool, float, int, str)
_NUMBER_TYPES = (int, float)
_DICT_TYPES = (dict, type(EMPTY_DICT))  # a plain dict, or a finished row's shared empty one
_FLOAT_TEXT = float.__repr__  # json's own text for a finite float


def as_dict(value: Any) -> dict:
    """A mapping as the record stores it: a dict as it is (JSON encodes it without a copy), any
    other mapping copied into one."""
    return value if isinstance(value, dict) else dict(value)


def _keep(key: tuple, anchor: Any, found: tuple[str, bool]) -> tuple[str, bool]:
    if len(_TEXTS) >= _TEXTS_MAX:
        _TEXTS.clear()
    _TEXTS[key] = (anchor, found)
    return found


def _plain(g: GradingResult, top: bool) -> bool:
    """Whether g's text is decided by its assertion, verdict, score and reason alone (keyed below).
    A score of -0.0 is not (it equals 0.0 as a key, not as JSON)."""
    t, score = g.tokens_used, g.score
    return (not (g.named_scores or g.named_score_weights or g.metadata) and (top or not g.component_results)
            and (t is ZERO_TOKENS or (type(t) is TokenUsage and not (
                t.prompt or t.completion or t.total or t.cached or t.num_requests)))
            and type(g.passed) is bool and type(g.reason) is str and type(score) in _VERDICT_TYPES
            and (score or type(score) is not float or _FLOAT_TEXT(score) == "0.0"))


def _kept_grading(g: GradingResult, top: bool) -> tuple[str, bool]:
    """(_encode(grading_json(g)), keys_clean of it); for `top`, without componentResults and the
    closing brace."""
    a = g.assertion
    plain = _plain(g, top)
    if plain:
        key = (top, id(a), g.passed, type(g.score), g.score, g.reason)  # 1 == 1.0 == True, not as JSON
        hit = _TEXTS.get(key)
        if hit is not None and hit[0] is a:
            return hit[1]
    text = _encode(grading_json(g, top=True, components=False) if top else grading_json(g))  # NaN: ValueError
    if top:
        text = text[:-1]
    found = (text, keys_clean(text))
    return _keep(key, a, found) if plain else found


def grading_text(g: GradingResult) -> tuple[str, str]:
    """The text `_encode(grading_json(g, top=True))` gives, and its residue (Scrubber.dumps_all):
    "" when its keys are known clean, else the text. ValueError/TypeError as `_encode` raises them
    (NaN, a key JSON cannot take)."""
    if g.metadata:  # it follows componentResults: the plain way
        text = _encode(grading_json(g, top=True))
        return text, text
    head, clean = _kept_grading(g, True)  # (the glue below holds no key keys_clean looks for)
    leaves = []
    get = _TEXTS.get
    for c in g.component_results:  # _plain(c, False) and a kept text, without a call per leaf
        a, passed, score, reason, t = c.assertion, c.passed, c.score, c.reason, c.tokens_used
        hit = None
        if (not (c.named_scores or c.named_score_weights or c.metadata or c.component_results)
                and (t is ZERO_TOKENS or (type(t) is TokenUsage and not (
                    t.prompt or t.completion or t.total or t.cached or t.num_requests)))
                and type(passed) is bool and type(reason) is str and type(score) in _VERDICT_TYPES
                and (score or type(score) is not float or _FLOAT_TEXT(score) == "0.0")):
            hit = get((False, id(a), passed, type(score), score, reason))
        text, leaf_clean = hit[1] if hit is not None and hit[0] is a else _kept_grading(c, False)
        leaves.append(text)
        clean = clean and leaf_clean
    key = (head, *leaves)  # kept texts: hashed once each
    text = _JOINED.get(key)
    if text is None:
        if len(_JOINED) >= _TEXTS_MAX:
            _JOINED.clear()
        text = _JOINED[key] = f"{head}, \"componentResults\": [{', '.join(leaves)}]}}"
    return text, "" if clean else text


# A grading's whole text by the kept texts it is joined from: rows with the same outcomes (most rows
# of a test shape) get the same text object, which the second process's hand-over then sends once
# per group (marshal refers back to an object it has sent, so a group of alike rows is about half
# the bytes to encode; store/writer.py).
_JOINED: dict = {}


def _kept_list(value: list) -> tuple[str, bool]:
    """A test's raw assertions: one list shared by the tests that take defaultTest's."""
    key = ("list", id(value), len(value))
    hit = _TEXTS.get(key)
    if hit is not None and hit[0] is value:
        return hit[1]
    text = _encode(value)
    return _keep(key, value, (text, keys_clean(text)))


_NAMES: dict = {}  # a test key -> (its JSON text, whether keys_clean passes it)


def _name(key: str) -> tuple[str, bool]:
    if len(_NAMES) >= _TEXTS_MAX:
        _NAMES.clear()
    text = encode_basestring(key)
    found = _NAMES[key] = (text, keys_clean(text))
    return found


def _exact(score: Any, latency: Any, cost: Any) -> tuple[str, bool]:
    """The row's exact numbers as JSON ({"score", "latencyMs", "cost"}), and whether the text is known
    clean (numbers hold none of keys_clean's words). ValueError for NaN and the infinities."""
    kind = type(cost)
    if (type(score) in _NUMBER_TYPES and type(latency) in _NUMBER_TYPES and score - score == latency - latency == 0.0
            and (cost is None or (kind in _NUMBER_TYPES and cost - cost == 0.0))):
        # repr of an int or a float is json's own text for it; json's None is null
        return f'{{"score": {score!r}, "latencyMs": {latency!r}, "cost": {"null" if cost is None else repr(cost)}}}', True
    return _encode({"score": score, "latencyMs": latency, "cost": cost}), False


def _response_text(r: EvalResult) -> tuple[str, bool] | None:
    """The response's fields when they carry no error, metadata or tokens (else None)."""
    resp = r.response
    finish, latency, retries = resp.finish_reason, resp.latency_ms, resp.retries
    if (resp.error is not None or type(resp.metadata) not in _DICT_TYPES or resp.metadata
            or not (resp.token_usage is ZERO_TOKENS or is_zero_tokens(resp.token_usage))
            or not (finish is None or type(finish) is str) or type(latency) not in _NUMBER_TYPES
            or type(retries) is not int or (not latency and type(latency) is float and _FLOAT_TEXT(latency) != "0.0")):
        return None
    key = ("response", finish, type(latency), latency, retries)  # (no error: "present" is true)
    hit = _TEXTS.get(key)
    if hit is not None:
        return hit[1]
    text = _encode({"present": True, "error": None, "finishReason": finish, "metadata": {},
                    "tokenUsage": resp.token_usage.to_json(), "latencyMs": latency, "retries": retries})
    return _keep(key, None, (text, keys_clean(text)))


def extra_text(r: EvalResult) -> tuple[str, str]:
    """The text of a row's extra field (store/records.to_row: testCase, metadata, response, exact,
    conversation) and its residue (Scrubber.dumps_all): the pieces not known clean, joined by
    "\x00" (numbers hold none of keys_clean's words). ValueError/TypeError as `_encode` raises them."""
    step, resp = r.step, r.response
    parts: list[str] = []
    unchecked: list[str] = []  # texts whose keys are not known to be clean
    clean = True
    for k, v in step.test.raw.items():
        if type(k) is not str:  # JSON turns it into a string: the plain way
            raise TypeError("a key that is not a string")
        if k == "vars":  # stored apart
            parts.append('"vars": null')
            continue
        name, name_clean = _NAMES.get(k) or _name(k)
        clean = clean and name_clean
        kind = type(v)
        if kind is str:
            text = encode_basestring(v)
            unchecked.append(text)
        elif kind is list and k == "assert":
            text, list_clean = _kept_list(v)
            clean = clean and list_clean
        elif kind is dict and not v:
            text = "{}"
        else:
            text = _encode(v)
            unchecked.append(text)
        parts.append(f"{name}: {text}")
    metadata = step.test.metadata
    if type(metadata) in _DICT_TYPES and not metadata:
        metadata = "{}"
    else:
        metadata = _encode(as_dict(metadata))
        unchecked.append(metadata)
    kept = _response_text(r)
    if kept is None:
        response = _encode({"present": resp.error is None or resp.output is not None, "error": resp.error,
                            "finishReason": resp.finish_reason, "metadata": as_dict(resp.metadata),
                            "tokenUsage": resp.token_usage.to_json(), "latencyMs": resp.latency_ms,
                            "retries": resp.retries})
        unchecked.append(response)
    else:
        response, response_clean = kept
        clean = clean and response_clean
    exact, exact_clean = _exact(r.score, r.latency_ms, resp.cost)
    if not exact_clean:
        unchecked.append(exact)
    text = f"{{\"testCase\": {{{', '.join(parts)}}}, \"metadata\": {metadata}, \"response\": {response}, " \
           f"\"exact\": {exact}"
    if r.conversation is not None:
        conversation = _encode(r.conversation)
        unchecked.append(conversation)
        text += f", \"conversation\": {conversation}"
    text += "}"
    return text, "\x00".join(unchecked) if clean else text
