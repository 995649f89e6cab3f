"""The JSON texts of a stored row's grading and extra fields, joined from texts kept across rows.

Most of a row's grading and extra fields is the same text row after row: each grading leaf (one
assertion's verdict), the aggregate's own fields, the test's assertions, the response's fields when
they carry no tokens, named scores or metadata. Their texts are kept here, each with whether a
secret-looking key is in it (redact.keys_clean), and a row's text is joined from them, with the
pieces of it that are not known clean (its residue: Scrubber.dumps_all looks at these only): the same
text, byte for byte, that encoding the whole value gives (its encoding was half of a stored echo
row's work). A kept text is keyed by what decides it and, when that is an object (an assertion, a
test's list of assertions, never changed once loaded), by the object itself, held so that its id is
not reused. Bounded: cleared when full.
"""

from __future__ import annotations

from typing import Any

from factcli.store.redact import _encode, keys_clean
from factcli.types import EMPTY_DICT, ZERO_TOKENS, EvalResult, GradingResult, grading_json, is_zero_tokens

_TEXTS: dict = {}
_TEXTS_MAX = 2048
_VERDICT_TYPES = (bool, float, int, str)
_NUMBER_TYPES = (int, float)


def as_dict(value: Any) -> dict:
    """A mapping as the record stores it: a dict as it is (JSON encodes it without a copy), any
    other mapping copied into one."""
    return value if isinstance(value, dict) else dict(value)


def _keep(key: tuple, anchor: Any, found: tuple[str, bool]) -> tuple[str, bool]:
    if len(_TEXTS) >= _TEXTS_MAX:
        _TEXTS.clear()
    _TEXTS[key] = (anchor, found)
    return found


def _kept_grading(g: GradingResult, top: bool) -> tuple[str, bool]:
    """(_encode(grading_json(g)), keys_clean of it); for `top`, without componentResults and the
    closing brace."""
    a, passed, score, reason = g.assertion, g.passed, g.score, g.reason
    plain = (not (g.named_scores or g.named_score_weights or g.metadata) and (top or not g.component_results)
             and (g.tokens_used is ZERO_TOKENS or is_zero_tokens(g.tokens_used)) and type(passed) is bool
             and type(score) in _VERDICT_TYPES and type(reason) is str)
    if plain:
        key = ("grading", top, id(a), passed, type(score), score, reason)  # 1 == 1.0 == True, not as JSON
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
    for c in g.component_results:
        text, leaf_clean = _kept_grading(c, False)
        leaves.append(text)
        clean = clean and leaf_clean
    text = f"{head}, \"componentResults\": [{', '.join(leaves)}]}}"
    return text, "" if clean else text


def _kept_list(value: list) -> tuple[str, bool]:
    """A test's raw assertions: one list shared by the tests that take defaultTest's."""
    key = ("list", id(value), len(value))
    hit = _TEXTS.get(key)
    if hit is not None and hit[0] is value:
        return hit[1]
    text = _encode(value)
    return _keep(key, value, (text, keys_clean(text)))


def _response_text(r: EvalResult) -> tuple[str, bool] | None:
    """The response's fields when they carry no error, metadata or tokens (else None)."""
    resp = r.response
    finish, latency, retries = resp.finish_reason, resp.latency_ms, resp.retries
    if (resp.error is not None or type(resp.metadata) not in (dict, type(EMPTY_DICT)) or resp.metadata
            or not (resp.token_usage is ZERO_TOKENS or is_zero_tokens(resp.token_usage))
            or not (finish is None or type(finish) is str) or type(latency) not in _NUMBER_TYPES
            or type(retries) is not int):
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
    conversation) and its residue (Scrubber.dumps_all). ValueError/TypeError as `_encode` raises
    them."""
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
        name = _encode(k)
        unchecked.append(name)
        if k == "assert" and type(v) is list:
            text, list_clean = _kept_list(v)
            clean = clean and list_clean
        else:
            text = _encode(v)
            unchecked.append(text)
        parts.append(f"{name}: {text}")
    metadata = _encode(as_dict(step.test.metadata))
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
    exact = _encode({"score": r.score, "latencyMs": r.latency_ms, "cost": resp.cost})
    unchecked += (metadata, exact)
    text = f"{{\"testCase\": {{{', '.join(parts)}}}, \"metadata\": {metadata}, \"response\": {response}, " \
           f"\"exact\": {exact}"
    if r.conversation is not None:
        conversation = _encode(r.conversation)
        unchecked.append(conversation)
        text += f", \"conversation\": {conversation}"
    text += "}"
    return text, "\x00".join(unchecked) if clean else text
