"""Each grader step's reply definition (factcli/scoring/replies.py): the JSON schema it sends and the
parser it reads with agree. Property tests: every value the schema allows parses back to itself, and on
any JSON value (random, or a valid reply with one thing broken) the parser accepts exactly what
jsonschema accepts."""

import json

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from factcli.scoring import replies
from factcli.scoring.registry import TYPES, lookup

# every type that asks a text grader (importing its family registers its replies); `similar` only embeds
MODEL_GRADED = list(dict.fromkeys(lookup(name).name for name, facts in TYPES.items()
                                  if facts.model_graded and "text" in facts.graders))
ALL = sorted(replies.REPLIES)


def values_of(schema: dict):
    """A hypothesis strategy for the values a schema (of the subset replies.py writes) allows."""
    if "anyOf" in schema:
        return st.one_of(*(values_of(s) for s in schema["anyOf"]))
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema["type"]
    if kind == "null":
        return st.none()
    if kind == "string":
        return st.text(max_size=30)
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        return st.integers(min_value=schema.get("minimum"), max_value=10**6)
    if kind == "number":
        low, high = schema.get("minimum"), schema.get("maximum")
        return st.one_of(st.floats(low, high, allow_nan=False, allow_infinity=False),
                         st.integers(int(low) if low is not None else None, int(high) if high is not None else None))
    if kind == "array":
        return st.lists(values_of(schema["items"]), min_size=schema.get("minItems", 0), max_size=3)
    assert kind == "object", schema
    return st.fixed_dictionaries({k: values_of(v) for k, v in schema["properties"].items()})


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                    | st.text(max_size=10),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=8)


def parses(reply, value) -> bool:
    try:
        reply.read(json.dumps(value))
    except replies.ReplyError:
        return False
    return True


def break_one(value, data):
    """A valid reply with one thing changed: a key dropped or added, or a value replaced anywhere."""
    if isinstance(value, dict) and value:
        key = data.draw(st.sampled_from(sorted(value)))
        action = data.draw(st.sampled_from(["drop", "add", "replace", "recurse"]))
        if action == "drop":
            return {k: v for k, v in value.items() if k != key}
        if action == "add":
            return {**value, data.draw(st.text(min_size=1, max_size=5)): data.draw(JSON)}
        if action == "replace":
            return {**value, key: data.draw(JSON)}
        return {**value, key: break_one(value[key], data)}
    if isinstance(value, list) and value:
        i = data.draw(st.integers(0, len(value) - 1))
        return value[:i] + [break_one(value[i], data)] + value[i + 1:]
    return data.draw(JSON)


def test_every_step_declares_a_capped_strict_schema():
    assert len(ALL) >= 20
    for name in ALL:
        reply = replies.REPLIES[name]
        assert reply.cap <= replies.MAX_CAP == 2048
        schema = reply.json_schema()
        jsonschema.Draft202012Validator.check_schema(schema)
        fmt = reply.response_format()
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
        assert fmt["json_schema"]["name"] == name

        def strict(s):  # OpenAI's strict mode: every object closed, every property required
            if s.get("type") == "object":
                assert s["additionalProperties"] is False and s["required"] == list(s["properties"])
                for sub in s["properties"].values():
                    strict(sub)
            for sub in s.get("anyOf", []):
                strict(sub)
            if "items" in s:
                strict(s["items"])

        strict(schema)


def test_every_model_graded_type_has_its_calls_capped():
    for kind in MODEL_GRADED:
        caps = replies.caps_for(kind)
        assert caps and all(0 < c <= 2048 for c in caps), kind
    assert replies.caps_for("g-eval") == [1024, 512]
    assert replies.caps_for("not-factuality") == [512]


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_replies_valid_under_the_schema_parse(name, data):
    reply = replies.REPLIES[name]
    value = data.draw(values_of(reply.json_schema()))
    jsonschema.validate(value, reply.json_schema())
    assert reply.read(json.dumps(value)) == value
    # where servers that ignore the schema put it: a ```json fence, or after some words
    assert reply.read(f"```json\n{json.dumps(value, indent=2)}\n```") == value
    assert reply.read(f"Here is my verdict: {json.dumps(value)}") == value
    reply.text_of(reply.read(json.dumps(value)))  # the text form the step's reader reads never fails


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_parser_rejects_what_the_schema_rejects(name, data):
    reply = replies.REPLIES[name]
    schema = reply.json_schema()
    valid = data.draw(values_of(schema))
    for value in (break_one(valid, data), data.draw(JSON)):
        assert parses(reply, value) == jsonschema.Draft202012Validator(schema).is_valid(value), value


def test_non_json_and_constants_are_rejected():
    reply = replies.REPLIES["factuality"]
    for text in ("", "no json here", "(A) it agrees", '{"category": "A", "reason": NaN}', "[1, 2]"):
        with pytest.raises(replies.ReplyError):
            reply.read(text)
    with pytest.raises(replies.ReplyError, match="category must be one of A, B, C, D, E"):
        reply.read('{"category": "Z", "reason": "r"}')


def test_the_docs_table_lists_every_step_and_its_cap():
    import re
    from pathlib import Path

    text = (Path(__file__).parent.parent / "docs" / "judges.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z_]+)` \|[^\n]*\| (\d+) \|$", text, re.M))
    assert {k: int(v) for k, v in rows.items()} == {k: r.cap for k, r in replies.REPLIES.items()}


BOUNDED = replies.Obj(score=replies.Number(0, 10), n=replies.Maybe(replies.Int(1)),
                      items=replies.ListOf(replies.Choice("a", "b"), 1))


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_bounded_shapes_agree_with_their_schema_too(data):
    """The steps leave bounds out of their schemas (not every strict mode takes them); the shapes
    that can carry them still agree with jsonschema."""
    schema = BOUNDED.schema()
    valid = data.draw(values_of(schema))
    assert BOUNDED.check(json.loads(json.dumps(valid)), "x") == valid
    for value in (break_one(valid, data), data.draw(JSON)):
        try:
            BOUNDED.check(value, "x")
            ok = True
        except replies.ReplyError:
            ok = False
        assert ok == jsonschema.Draft202012Validator(schema).is_valid(value), value


@given(items=st.one_of(st.none(), st.integers(0, 10**6)))
def test_caps_that_follow_the_input_stay_within_the_steps_cap(items):
    for reply in replies.REPLIES.values():
        cap = reply.cap_for(items)
        assert 1 <= cap <= reply.cap <= 2048
        if items is None or not reply.per_item:
            assert cap == reply.cap
    assert replies.REPLIES["claims"].cap_for(50) == 64 + 150 and replies.REPLIES["claims"].cap_for(10**4) == 2048


# the verdict a schema-valid reply carries, and what the step's text form (`protocol`) reads from its text
VERDICTS = {
    "closedqa": (lambda v: v["verdict"] == "Y", lambda read: read),
    "simpleqa_grade": (lambda v: v["grade"], lambda read: {"CORRECT": "A", "INCORRECT": "B", "NOT_ATTEMPTED": "C"}[read[0]]),
    "select_best": (lambda v: v["index"] if v["index"] >= 0 else None, lambda read: read),
    "eligibility": (lambda v: v["Instruction Following"], lambda read: read),
    "grounding_span": (lambda v: v["final_answer"] == "Accurate", lambda read: read[0]),
    "grounding_response": (lambda v: v["final_answer"] == "Accurate", lambda read: read),
}


@pytest.mark.parametrize("name", sorted(VERDICTS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_replys_text_form_is_read_by_the_steps_text_form_to_the_same_verdict(name, data):
    """The schema and the step's text form agree: any reply the schema allows, written in the step's text
    form (`as_text`, what a server without the schema would write), is read by the step's `protocol`
    (promptfoo's or the reference's reader) to the verdict the structured reply carries."""
    for kind in TYPES:
        lookup(kind)
    reply = replies.REPLIES[name]
    value = data.draw(values_of(reply.json_schema()))
    verdict, of = VERDICTS[name]
    if verdict(value) is None:  # a negative index: no verdict, refused either way
        with pytest.raises(replies.ReplyError):
            reply.read_protocol(reply.text_of(value))
        return
    assert of(reply.read_protocol(reply.text_of(value))) == verdict(value)
