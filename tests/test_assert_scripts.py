"""Script assertions (javascript, python), JS/Python transforms, assertScoringFunction and the
shared Node worker; parity with promptfoo 0.121.20 on tests/parity/scripts/."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import write
from parity_compare import differences
from typer.testing import CliRunner

from factcli.assertions.scripts import parse_float
from factcli.cli import app
from factcli.config.context import Ctx
from factcli.config.testcases import parse_test
from factcli.errors import ConfigError
from factcli.scoring.registry import AssertionError_
from factcli.scoring.scorer import run_assertions
from factcli.scripting.node import JSError, NodeNotFound, NodeTimeout, NodeWorker, NodeWorkerError
from factcli.scripting.python import build_python_script
from factcli.scripting.transforms import TransformError, apply_transform, check_transform
from factcli.types import ProviderResponse, ProviderSpec

HAS_NODE = shutil.which("node") is not None
needs_node = pytest.mark.skipif(not HAS_NODE, reason="Node.js is not installed")
SCRIPTS = Path(__file__).parent / "parity" / "scripts"


def grade(tmp_path: Path, asserts: list, output="hello world", vars=None, extra: dict | None = None,
          provider=None):
    """Parse one test as config/ would (relative to tmp_path) and grade `output` with it."""
    test = parse_test({"vars": vars or {}, "assert": asserts, **(extra or {})},
                      Ctx(str(tmp_path / "c.yaml"), tmp_path, {}), "tests[0]")
    return asyncio.run(run_assertions(test, output=output, variables=test.vars, prompt="the prompt",
                                      response=ProviderResponse(output=output), provider=provider))


def one(tmp_path: Path, assertion: dict, output="hello world", **kw):
    result = grade(tmp_path, [assertion], output, **kw)
    return result.component_results[0]


# ---------------------------------------------------------------- javascript

JS_CASES = [
    # (assertion, output, pass, score, reason)
    ({"type": "javascript", "value": "output.includes('hello')"}, "hello world", True, 1, "Assertion passed"),
    ({"type": "javascript", "value": "output.includes('hello')"}, "bye", False, 0,
     "Custom function returned false\noutput.includes('hello')"),
    ({"type": "javascript", "value": "const n = output.split(' ').length; n === 2;"}, "a b", True, 1, "Assertion passed"),
    ({"type": "javascript", "value": "const s = output; s === 'a;b'"}, "a;b", True, 1, "Assertion passed"),
    ({"type": "javascript", "value": "if (output.length > 3) {\n  return true;\n}\nreturn false;\n"}, "abcd", True, 1,
     "Assertion passed"),
    ({"type": "javascript", "value": "output.length / 100"}, "eleven char", True, 0.11, "Assertion passed"),
    ({"type": "javascript", "value": "output.length / 10", "threshold": 0.8}, "short", False, 0.5,
     "Custom function returned false\noutput.length / 10"),
    ({"type": "javascript", "value": "output.length"}, "", False, 0, "Custom function returned false\noutput.length"),
    ({"type": "javascript", "value": "({pass: false, score: 0.3, reason: 'too short: ' + output})"}, "tiny", False, 0.3,
     "too short: tiny"),
    ({"type": "not-javascript", "value": "output.includes('hello')"}, "hello", False, 0,
     "Custom function returned true\noutput.includes('hello')"),
    ({"type": "not-javascript", "value": "output.includes('zzz')"}, "hello", True, 1, "Assertion passed"),
    ({"type": "not-javascript", "value": "({pass: true, score: 1, reason: 'yes'})"}, "x", False, 1,
     "Custom function returned true"),
    ({"type": "not-javascript", "value": "({pass: false, score: 0, reason: 'no'})"}, "x", True, 0, "Assertion passed"),
    ({"type": "not-javascript", "value": "0.25", "threshold": 0.5}, "x", True, 0.25, "Assertion passed"),
    ({"type": "javascript", "value": "Promise.resolve(output === 'x')"}, "x", True, 1, "Assertion passed"),
    ({"type": "javascript", "value": "output.a === 1 && Array.isArray(output.b)"}, {"a": 1, "b": []}, True, 1,
     "Assertion passed"),
    ({"type": "javascript", "value": "console.log('noise on stdout'); return output === 'x';\n"}, "x", True, 1,
     "Assertion passed"),
]


@needs_node
@pytest.mark.parametrize("assertion, output, passed, score, reason", JS_CASES)
def test_javascript_inline(tmp_path, assertion, output, passed, score, reason):
    r = one(tmp_path, assertion, output)
    assert (r.passed, r.score, r.reason) == (passed, pytest.approx(score), reason)


@needs_node
@pytest.mark.parametrize("code, message", [
    ("'abc'", 'Custom function must return a boolean, number, or GradingResult object. Got type string: "abc"'),
    ("({pass: true, score: 1})", "Custom function must return a boolean, number, or GradingResult object. "
                                 'Got type object: {"pass":true,"score":1}'),
    ("(() => { throw new Error('inline boom'); })()", "inline boom"),
    ("output ===", "Unexpected token '}'"),
    ("await 1;\nreturn true", "await is only valid in async functions and the top level bodies of modules"),
])
def test_javascript_inline_errors_fail_with_the_stack(tmp_path, code, message):
    r = one(tmp_path, {"type": "javascript", "value": code})
    assert not r.passed and r.score == 0
    assert r.reason.startswith(f"Custom function threw error: {message}\nStack Trace: ")
    assert r.reason.endswith("\n" + code.rstrip())
    assert "worker.js" not in r.reason  # the worker's own frames are left out


@needs_node
def test_javascript_context_and_rendering(tmp_path):
    provider = type("P", (), {"id": "echo", "config": {"k": 1}, "spec": ProviderSpec(id="echo", label="E")})()
    code = ("output.endsWith('{{word}}') && context.vars.word === 'world' && context.prompt === 'the prompt' "
            "&& context.test.vars.word === 'world' && context.config.min === 5 && context.provider.id() === 'echo' "
            "&& context.providerResponse.output === output && typeof process.env === 'object'")
    r = one(tmp_path, {"type": "javascript", "value": code, "config": {"min": 5}}, vars={"word": "world"},
            provider=provider)
    assert (r.passed, r.reason) == (True, "Assertion passed")
    assert r.metadata["renderedAssertionValue"].startswith("output.endsWith('world')")


@needs_node
def test_javascript_grading_result_named_scores_and_metric(tmp_path):
    result = grade(tmp_path, [{"type": "javascript", "metric": "main",
                               "value": "({pass: true, score: 0.5, reason: 'half', namedScores: {extra: 0.25}})"}])
    assert result.named_scores == {"main": 0.5, "extra": 0.25}
    assert result.component_results[0].reason == "half"


@needs_node
def test_javascript_files(tmp_path):
    write(tmp_path / "a.js", textwrap.dedent("""\
        module.exports = (output, { vars }) => ({ pass: output.includes(vars.w), score: 0.75, reason: 'looked' });
        module.exports.len = (output) => output.length / 100;
        module.exports.boom = () => { throw new Error('file boom'); };
        module.exports.text = () => 'nope';
        """))
    write(tmp_path / "esm.mjs", "export default async function (output) { return output.length > 1; }\n"
                                "export const tiny = (output) => output.length < 3;\n")
    r = one(tmp_path, {"type": "javascript", "value": "file://a.js"}, vars={"w": "world"})
    assert (r.passed, r.score, r.reason) == (True, 0.75, "looked")
    r = one(tmp_path, {"type": "javascript", "value": "file://a.js:len", "threshold": 0.5})
    assert (r.passed, r.score, r.reason) == (False, 0.11, "Custom function returned false\nfile://a.js:len")
    r = one(tmp_path, {"type": "not-javascript", "value": "file://esm.mjs"})
    assert (r.passed, r.reason) == (False, "Custom function returned true\nfile://esm.mjs")
    r = one(tmp_path, {"type": "javascript", "value": "file://esm.mjs:tiny"}, "ab")
    assert (r.passed, r.reason) == (True, "Assertion passed")  # a named export next to a default one
    r = one(tmp_path, {"type": "javascript", "value": "file://a.js:text"})
    assert r.reason.startswith("Custom function threw error: Javascript assertion script must return a boolean, "
                               "number, or object (file://a.js:text)\nStack Trace: ")
    # a file function that throws, or a missing export, is an ERROR row, as in promptfoo
    with pytest.raises(AssertionError_, match="file boom"):
        one(tmp_path, {"type": "javascript", "value": "file://a.js:boom"})
    with pytest.raises(AssertionError_, match='does not export a function named "nope"'):
        one(tmp_path, {"type": "javascript", "value": "file://a.js:nope"})


def test_script_values_are_checked_at_load(tmp_path):
    ctx = Ctx("c.yaml", tmp_path, {})
    write(tmp_path / "a.py", "def get_assert(output, context):\n    return True\n")
    cases = [
        ({"type": "python", "value": "file://missing.py"}, "file not found"),
        ({"type": "python", "value": 5}, "a python assertion's value must be a string"),
        ({"type": "python", "value": "file://a.txt"}, "a python assertion file must be a .py file"),
    ]
    if HAS_NODE:
        cases += [({"type": "javascript", "value": "file://a.py"}, "must be a .js or .cjs or .mjs or .ts"),
                  ({"type": "javascript", "value": "file://x.ts"}, "file not found")]
    for a, message in cases:
        with pytest.raises(ConfigError, match=re.escape(message)):
            parse_test({"assert": [a]}, ctx, "tests[0]")
    test = parse_test({"assert": [{"type": "python", "value": "file://a.py"}]}, ctx, "tests[0]")
    assert test.assertions[0].value == f"file://{(tmp_path / 'a.py').resolve()}"
    assert test.assertions[0].raw["value"] == "file://a.py"  # shown as written


# ---------------------------------------------------------------- python

PY_CASES = [
    ({"type": "python", "value": "'hello' in output"}, "hello world", True, 1, "Assertion passed"),
    ({"type": "python", "value": "'hello' in output"}, "bye", False, 0, "Python code returned false\n'hello' in output"),
    ({"type": "python", "value": "parts = output.split(';')\nif len(parts) != 3:\n    return False\n"
                                 "return parts[1] == 'b'\n"}, "a;b;c", True, 1, "Assertion passed"),
    ({"type": "python", "value": "\tx = len(output)\n\treturn x == 3"}, "abc", True, 1, "Assertion passed"),
    ({"type": "python", "value": "len(output) / 100"}, "eleven char", True, 0.11, "Assertion passed"),
    ({"type": "python", "value": "len(output) / 100", "threshold": 0.5}, "eleven char", False, 0.11,
     "Python code returned false\nlen(output) / 100"),
    ({"type": "python", "value": "{'pass': len(output) > 10, 'score': 0.3, 'reason': 'too short'}"}, "tiny", False, 0.3,
     "too short"),
    ({"type": "python", "value": "{'pass': True, 'score': 0.3, 'reason': 'fine'}", "threshold": 0.5}, "x", False, 0.3,
     "Python score 0.3 is less than threshold 0.5: fine"),
    ({"type": "python", "value": "{'pass': True, 'score': 0.3, 'reason': ''}", "threshold": 0.5}, "x", False, 0.3,
     "Python score 0.3 is less than threshold 0.5"),
    ({"type": "python", "value": "{'pass_': True, 'score': 0.6, 'reason': 'snake'}"}, "x", True, 0.6, "snake"),
    ({"type": "not-python", "value": "'hello' in output"}, "hello", False, 0, "Python code returned true\n'hello' in output"),
    ({"type": "not-python", "value": "{'pass': False, 'score': 0, 'reason': 'nope'}"}, "x", True, 0, "Assertion passed"),
    ({"type": "not-python", "value": "0"}, "x", True, 0, "Assertion passed"),
    ({"type": "python", "value": "'TRUE'"}, "x", True, 1, "Assertion passed"),
    ({"type": "python", "value": "'0.4'"}, "x", True, 0.4, "Assertion passed"),
    ({"type": "python", "value": "'{\"pass\": true, \"score\": 0.9, \"reason\": \"json text\"}'"}, "x", True, 0.9,
     "json text"),
    ({"type": "python", "value": "output['c'] == 2 and isinstance(output, dict)"}, {"c": 2}, True, 1, "Assertion passed"),
    # a YAML block keeps its newline: promptfoo then treats it as a body without `return`
    ({"type": "python", "value": "'hello' in output\n"}, "hello", False, 0,
     "Python code execution failed: Python assertion must return a boolean, number, or {pass, score, reason} "
     "object. Instead got:\nnull"),
    ({"type": "python", "value": "None"}, "x", False, 0,
     "Python code execution failed: Python assertion must return a boolean, number, or {pass, score, reason} "
     "object. Instead got:\nnull"),
    ({"type": "python", "value": "[1, 'two']"}, "x", False, 0,
     "Python code execution failed: Python assertion must return a boolean, number, or {pass, score, reason} "
     'object. Got instead:\n{\n  "0": 1,\n  "1": "two"\n}'),
    ({"type": "python", "value": "{'pass': True}"}, "x", False, 0,
     "Python code execution failed: Python assertion must return a boolean, number, or {pass, score, reason} "
     'object. Got instead:\n{\n  "pass": true\n}'),
]


@pytest.mark.parametrize("assertion, output, passed, score, reason", PY_CASES)
def test_python_inline(tmp_path, assertion, output, passed, score, reason):
    r = one(tmp_path, assertion, output)
    assert (r.passed, r.score, r.reason) == (passed, pytest.approx(score), reason)


def test_python_raising_is_a_fail_with_a_traceback(tmp_path):
    r = one(tmp_path, {"type": "python", "value": "1 / 0"})
    assert not r.passed and r.score == 0
    assert r.reason.startswith("Python code execution failed: Error running Python script: ZeroDivisionError: "
                               "division by zero\nStack Trace: Traceback (most recent call last):\n")
    assert "return 1 / 0" in r.reason and "factcli" not in r.reason
    r = one(tmp_path, {"type": "python", "value": "output ==="})
    assert r.reason.startswith("Python code execution failed: Error running Python script: SyntaxError: invalid syntax")


def test_python_context(tmp_path):
    code = ("import json\nreturn {'pass': True, 'score': 1, 'reason': json.dumps(context, sort_keys=True)}")
    r = one(tmp_path, {"type": "python", "value": code, "config": {"k": 2}}, vars={"w": "x"})
    ctx = json.loads(r.reason)
    assert sorted(ctx) == ["config", "metadata", "prompt", "providerResponse", "test", "vars"]
    assert ctx["vars"] == {"w": "x"} and ctx["test"]["vars"] == {"w": "x"} and ctx["config"] == {"k": 2}
    assert ctx["prompt"] == "the prompt" and ctx["providerResponse"]["output"] == "hello world"
    assert ctx["test"]["assert"][0]["type"] == "python"


def test_python_files(tmp_path):
    write(tmp_path / "sub" / "checks.py", textwrap.dedent("""\
        import threading

        def get_assert(output, context):
            return context["vars"]["w"] in output

        def graded(output, context):
            return {"pass": True, "score": 0.8, "reason": "in " + threading.current_thread().name,
                    "named_scores": {"style": 0.5}}

        async def aio(output, context):
            return 0.7

        def explode(output, context):
            raise ValueError("python file boom")
        """))
    base = {"type": "python"}
    r = one(tmp_path, {**base, "value": "file://sub/checks.py"}, vars={"w": "world"})
    assert (r.passed, r.reason) == (True, "Assertion passed")
    r = one(tmp_path, {"type": "not-python", "value": "file://sub/checks.py"}, vars={"w": "world"})
    assert (r.passed, r.reason) == (False, "Python code returned true\nfile://sub/checks.py")
    result = grade(tmp_path, [{**base, "value": "file://sub/checks.py:graded", "metric": "m"}])
    r = result.component_results[0]
    assert r.score == 0.8 and "MainThread" not in r.reason  # sync user code runs off the event loop
    assert result.named_scores == {"m": 0.8, "style": 0.5}
    r = one(tmp_path, {**base, "value": "file://sub/checks.py:aio", "threshold": 0.5})
    assert (r.passed, r.score) == (True, 0.7)
    r = one(tmp_path, {**base, "value": "file://sub/checks.py:explode"})
    assert not r.passed
    assert r.reason.startswith("Error running Python script: ValueError: python file boom\nStack Trace: ")
    assert 'raise ValueError("python file boom")' in r.reason
    r = one(tmp_path, {**base, "value": "file://sub/checks.py:nope"})
    assert r.reason.startswith("Error running Python script: AttributeError: module 'checks' has no attribute 'nope'")


def test_python_script_wrapper_matches_promptfoo():
    assert build_python_script("len(output) > 3") == "import json\n\ndef main(output, context):\n    return len(output) > 3\n"
    assert build_python_script("x = 1\nif x:\n  return x") == (
        "import json\n\ndef main(output, context):\n  x = 1\n  if x:\n    return x\n")
    assert [parse_float(s) for s in ("0.4", " 3abc", "1e3x", "-Infinity", "abc", "", ".5")] == [
        0.4, 3.0, 1000.0, float("-inf"), None, None, 0.5]


# ---------------------------------------------------------------- transforms


@needs_node
def test_check_transform(tmp_path):
    write(tmp_path / "t.js", "module.exports = (o) => o;\n")
    write(tmp_path / "t.py", "def get_transform(o, c):\n    return o\n")
    assert check_transform("output.trim()", "c.yaml", "t", tmp_path) == "output.trim()"
    assert check_transform("const x = 1;\nreturn output + x;", "c.yaml", "t", tmp_path).startswith("const")
    assert check_transform("file://t.js:fn", "c.yaml", "t", tmp_path) == f"file://{(tmp_path / 't.js').resolve()}:fn"
    assert check_transform("file://t.py", "c.yaml", "t", tmp_path) == f"file://{(tmp_path / 't.py').resolve()}"
    for spec, message in [("output.trim(", "invalid JavaScript transform: SyntaxError"),
                          ("file://t.rb", "a transform file must be .py or .js"),
                          ("file://gone.js", "transform file not found"), ("  ", "empty transform"),
                          (3, "a transform must be a string")]:
        with pytest.raises(ConfigError, match=re.escape(message)):
            check_transform(spec, "c.yaml", "t", tmp_path)


TRANSFORM_CASES = [
    ("output.toUpperCase()", "hello", "HELLO"),
    ("const d = JSON.parse(output);\nreturn {...d, n: d.b.length};", '{"b": [1, 2]}', {"b": [1, 2], "n": 2}),
    ("context.vars.word + '!'", "x", "world!"),
    ("output.split(' ')", "a b", ["a", "b"]),
    ("file://t.js", " hi ", "hi [world]"),
    ("file://t.js:shout", "hi", "HI"),
    ("file://t.py", "foo", "f00"),
    ("file://t.py:words", "a b c", 3),
    ("file://legacy.py", "x", "legacy x"),  # factcli's earlier default name `transform` still works
]


@needs_node
@pytest.mark.parametrize("spec, output, expected", TRANSFORM_CASES)
def test_apply_transform(tmp_path, spec, output, expected):
    write(tmp_path / "t.js", "module.exports = (o, c) => o.trim() + ' [' + c.vars.word + ']';\n"
                             "module.exports.shout = (o) => o.toUpperCase();\n")
    write(tmp_path / "t.py", "def get_transform(o, c):\n    return o.replace('o', '0')\n\n"
                             "def words(o, c):\n    return len(o.split())\n")
    write(tmp_path / "legacy.py", "def transform(o, c):\n    return 'legacy ' + o\n")
    context = {"vars": {"word": "world"}, "prompt": {"label": "p"}}
    assert asyncio.run(apply_transform(spec, output, context, tmp_path)) == expected


@needs_node
@pytest.mark.parametrize("spec, message", [
    ("JSON.parse(output)", "Transform failed ([inline transform]: JSON.parse(output)): Unexpected token"),
    ("undefined", "Transform function did not return a value\n\n[inline transform]: undefined"),
    ("null", "Transform function did not return a value"),
    ("file://bad.py:boom", "Transform failed ([file transform]): KeyError: 'k'"),
    ("file://bad.py:nothing", "Transform function did not return a value\n\n[file transform]"),
])
def test_transform_failures(tmp_path, spec, message):
    write(tmp_path / "bad.py", "def boom(o, c):\n    return {}['k']\n\ndef nothing(o, c):\n    return None\n")
    with pytest.raises(TransformError) as info:
        asyncio.run(apply_transform(spec, "hello", {"vars": {}}, tmp_path))
    assert str(info.value).startswith(message)


@needs_node
def test_transforms_end_to_end(tmp_path):
    write(tmp_path / "c.yaml", textwrap.dedent("""\
        prompts: ["{{text}}"]
        providers:
          - id: echo
            transform: output.trim()
        tests:
          - vars: {text: "  hello world "}
            options: {transform: "output.toUpperCase()"}
            assert:
              - {type: equals, value: HELLO WORLD}
              - {type: equals, value: HELLO, transform: "output.split(' ')[0]"}
          - vars: {text: "x"}
            options: {transform: "JSON.parse(output)"}
            assert: [{type: equals, value: x}]
        """))
    out = tmp_path / "out.json"
    result = CliRunner().invoke(app, ["eval", "-c", str(tmp_path / "c.yaml"), "-o", str(out), "--no-progress-bar",
                                      "--no-table"])
    assert result.exit_code == 100, result.output
    rows = json.loads(out.read_text())["results"]["results"]
    assert rows[0]["success"] and rows[0]["response"]["output"] == "HELLO WORLD"
    assert rows[1]["failureReason"] == 2 and "Transform failed ([inline transform]: JSON.parse(output))" in rows[1]["error"]


# ---------------------------------------------------------------- assertScoringFunction


def scoring_files(root: Path) -> None:
    write(root / "sub" / "score.py", textwrap.dedent("""\
        def weighted(named_scores, context):
            score = (2 * named_scores.get("a", 0) + named_scores.get("b", 0)) / 3
            comps = ",".join(c["assertion"]["type"] + ":" + str(c["pass"]) for c in context["componentResults"])
            return {"pass": score >= 0.5, "score": score,
                    "reason": f"{score:.3f} {comps} thr={context.get('threshold')} tok={context['tokensUsed']['total']}"}

        def func(named_scores, context):
            return {"pass": False, "score": 0.1, "reason": "default func", "namedScores": {"a": 0.5}}

        def explode(named_scores, context):
            raise RuntimeError("scoring boom")

        def partial(named_scores, context):
            return {"pass": True}
        """))
    write(root / "sub" / "score.js", textwrap.dedent("""\
        module.exports.strict = (scores, ctx) => ({ pass: Object.values(scores).every((v) => v >= 0.5),
          score: 0.42, reason: `js ${JSON.stringify(scores)} threshold=${ctx.threshold}` });
        module.exports.explode = () => { throw new Error('js scoring boom'); };
        """))


@pytest.mark.parametrize("spec, passed, score, reason", [
    ("file://score.py:weighted", True, 2 / 3, "0.667 contains:True,contains:False thr=0.9 tok=0"),
    ("file://score.py", False, 0.1, "default func"),
    ("file://score.py:explode", False, 0, "Scoring function error: Error running Python script: RuntimeError: "
                                          "scoring boom\nStack Trace: "),
    ("file://score.py:partial", False, 0, "Scoring function error: assertion scoring function must return a GradingResult"),
    pytest.param("file://score.js:strict", False, 0.42, 'js {"a":1,"b":0} threshold=0.9', marks=needs_node),
    pytest.param("file://score.js:explode", False, 0, "Scoring function error: js scoring boom", marks=needs_node),
])
def test_scoring_function(tmp_path, spec, passed, score, reason):
    scoring_files(tmp_path)
    result = grade(tmp_path / "sub", [{"type": "contains", "value": "hello", "metric": "a"},
                                      {"type": "contains", "value": "nope", "metric": "b"}],
                   extra={"assertScoringFunction": spec, "threshold": 0.9})
    assert (result.passed, result.score) == (passed, pytest.approx(score))
    assert result.reason.startswith(reason)
    assert len(result.component_results) == 2  # the assertions' own results are kept
    if spec == "file://score.py":
        assert result.named_scores == {"a": 0.5}  # a returned namedScores replaces the map, as in promptfoo


def test_scoring_function_from_default_test_and_relative_to_its_file(tmp_path):
    scoring_files(tmp_path)
    write(tmp_path / "sub" / "tests.yaml", textwrap.dedent("""\
        - vars: {text: hello}
          assertScoringFunction: file://score.py:explode
          assert: [{type: contains, value: hello, metric: a}]
        """))
    write(tmp_path / "c.yaml", textwrap.dedent("""\
        prompts: ["{{text}}"]
        providers: [echo]
        defaultTest:
          assertScoringFunction: file://sub/score.py:weighted
        tests:
          - vars: {text: hello}
            assert: [{type: contains, value: hello, metric: a}, {type: contains, value: x, metric: b}]
          - file://sub/tests.yaml
        """))
    out = tmp_path / "out.json"
    result = CliRunner().invoke(app, ["eval", "-c", str(tmp_path / "c.yaml"), "-o", str(out), "--no-progress-bar",
                                      "--no-table"])
    assert result.exit_code == 100, result.output
    rows = json.loads(out.read_text())["results"]["results"]
    assert rows[0]["success"] and rows[0]["gradingResult"]["reason"].startswith("0.667 contains:True,contains:False")
    assert rows[1]["gradingResult"]["reason"].startswith("Scoring function error: Error running Python script: "
                                                         "RuntimeError: scoring boom")
    assert rows[1]["failureReason"] == 1


def test_scoring_function_errors_at_load(tmp_path):
    ctx = Ctx("c.yaml", tmp_path, {})
    for value, message in [("score.py", "assertScoringFunction must be a file reference"),
                           ("file://nope.py:f", "file not found"), ("file://s.rb", "must be a .js or .cjs or .mjs or .ts or .py file")]:
        with pytest.raises(ConfigError, match=re.escape(message)):
            parse_test({"assertScoringFunction": value, "assert": []}, ctx, "tests[0]")


def test_scoring_function_parameter_overrides_the_test(tmp_path):
    scoring_files(tmp_path)
    test = parse_test({"assert": [{"type": "contains", "value": "hello", "metric": "a"}]},
                      Ctx("c.yaml", tmp_path, {}), "tests[0]")
    spec = f"file://{tmp_path / 'sub' / 'score.py'}:func"
    result = asyncio.run(run_assertions(test, output="hello", variables={}, prompt="p",
                                        response=ProviderResponse(output="hello"), scoring_function=spec))
    assert (result.passed, result.reason) == (False, "default func")


# ---------------------------------------------------------------- the Node worker


@pytest.fixture
def worker():
    w = NodeWorker(timeout=10)
    yield w
    w.shutdown()


@needs_node
def test_worker_serves_50_concurrent_calls_in_one_process(worker):
    code = "new Promise((resolve) => setTimeout(() => resolve(output.length), 200))"

    async def main():
        started = time.monotonic()
        answers = await asyncio.gather(*(worker.call("assert", {"code": code, "output": "x" * i, "context": {}})
                                         for i in range(50)))
        return answers, time.monotonic() - started

    answers, elapsed = asyncio.run(main())
    assert [a["value"] for a in answers] == list(range(50))
    assert elapsed < 3  # concurrent, not 50 x 200 ms one after another
    assert worker.starts == 1 and worker.alive
    # the same process serves the next event loop too
    pid = worker.pid
    assert asyncio.run(worker.call("ping"))["value"] == "pong" and worker.pid == pid


@needs_node
def test_worker_crash_fails_calls_in_flight_and_restarts_once(worker):
    async def crash_with_calls_in_flight():
        await worker.call("ping")
        slow = [asyncio.create_task(worker.call("assert", {"code": "new Promise(() => {})", "output": "",
                                                           "context": {}})) for _ in range(5)]
        while len(worker._pending) < 5:
            await asyncio.sleep(0.01)
        crash = asyncio.create_task(worker.call("__crash", {"code": 3}))
        return await asyncio.gather(*slow, crash, return_exceptions=True)

    started = time.monotonic()
    outcomes = asyncio.run(crash_with_calls_in_flight())
    assert time.monotonic() - started < 5  # nobody waited for the 10 s timeout
    assert all(isinstance(o, NodeWorkerError) for o in outcomes)
    assert "exited unexpectedly (exit code 3)" in str(outcomes[0])
    first = worker.pid
    assert asyncio.run(worker.call("ping"))["value"] == "pong"  # restarted
    assert worker.starts == 2 and worker.pid != first and worker.crashes == 1
    with pytest.raises(NodeWorkerError):
        asyncio.run(worker.call("__crash", {}))
    with pytest.raises(NodeWorkerError, match="crashed 2 times; javascript is disabled"):
        asyncio.run(worker.call("ping"))


@needs_node
def test_worker_timeouts(worker):
    worker.timeout, worker.ping_timeout = 0.3, 3
    # a pending promise: the worker still answers pings and is kept
    asyncio.run(worker.call("ping"))
    pid = worker.pid
    with pytest.raises(NodeTimeout, match="did not finish within 0.3s"):
        asyncio.run(worker.call("__hang"))
    assert worker.pid == pid and worker.alive
    # a busy loop blocks the worker: it is killed and replaced, and that is not counted as a crash
    worker.ping_timeout = 0.3
    with pytest.raises(NodeTimeout):
        asyncio.run(worker.call("__block", {"ms": 5000}))
    deadline = time.monotonic() + 3
    while worker.alive and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not worker.alive
    assert asyncio.run(worker.call("ping"))["value"] == "pong"
    assert worker.pid != pid and worker.crashes == 0


@needs_node
def test_worker_reports_user_errors_with_their_phase(worker):
    with pytest.raises(JSError) as info:
        asyncio.run(worker.call("transform", {"code": "output.x.y", "input": "s", "context": {}}))
    assert info.value.phase == "call" and "reading 'y'" in info.value.js_message
    with pytest.raises(JSError) as info:
        worker.call_sync("compile", {"code": "output.("})
    assert info.value.phase == "compile" and info.value.name == "SyntaxError"


def test_node_missing_is_a_clear_error(tmp_path, monkeypatch):
    with pytest.raises(NodeNotFound, match=r"javascript assertions need Node.js: install node \(>=18\) or use a "
                                           r"python assertion"):
        asyncio.run(NodeWorker(node=str(tmp_path / "no-node-here")).call("ping"))
    monkeypatch.setenv("FACTCLI_NODE", "factcli-no-such-node")
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "a.yaml", "prompts: [x]\nproviders: [echo]\ntests:\n  - assert: [{type: javascript, value: 'true'}]\n")
    write(tmp_path / "t.yaml", "prompts: [x]\nproviders: [echo]\ntests:\n  - options: {transform: output.trim()}\n")
    result = CliRunner().invoke(app, ["eval", "-c", "a.yaml", "--no-progress-bar"])
    assert result.exit_code == 1
    assert result.output.strip() == (
        "error: a.yaml: tests[0].assert[0].value: javascript assertions need Node.js: install node (>=18) or use "
        "a python assertion (no 'factcli-no-such-node' executable found on PATH)")
    result = CliRunner().invoke(app, ["eval", "-c", "t.yaml", "--no-progress-bar"])
    assert result.exit_code == 1
    assert "tests[0].options.transform: javascript transforms need Node.js" in result.output
    # python assertions do not need Node
    write(tmp_path / "p.yaml", "prompts: [x]\nproviders: [echo]\ntests:\n  - assert: [{type: python, value: 'True'}]\n")
    assert CliRunner().invoke(app, ["eval", "-c", "p.yaml", "--no-progress-bar", "--no-table"]).exit_code == 0


@needs_node
def test_worker_stops_when_factcli_exits(tmp_path):
    script = ("import asyncio\nfrom factcli.scripting.node import get_worker\n"
              "w = get_worker()\nasyncio.run(w.call('ping'))\nprint(w.pid)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.strip())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the node worker outlived factcli")


# ---------------------------------------------------------------- parity with promptfoo


def _comparable(doc: dict) -> dict:
    """Stack traces are runtime-specific; ERROR rows are compared on outcome only (factcli keeps
    the response and a grading result on them, promptfoo does not)."""
    for row in doc["results"]["results"]:
        if row["failureReason"] == 2:
            row["response"] = None
            row["gradingResult"] = None
            continue
        grading = row.get("gradingResult") or {}
        for part in [grading] + grading.get("componentResults", []):
            if isinstance(part.get("reason"), str):
                part["reason"] = re.sub(r"\nStack Trace:[\s\S]*", "\nStack Trace: …", part["reason"])
    return doc


@needs_node
@pytest.mark.parametrize("config, golden", [("promptfooconfig.yaml", "golden.json"),
                                            ("errors.yaml", "errors.golden.json"),
                                            ("scoring.yaml", "scoring.golden.json")])
def test_parity_with_promptfoo(tmp_path, config, golden):
    out = tmp_path / "ours.json"
    result = CliRunner().invoke(app, ["eval", "-c", str(SCRIPTS / config), "-o", str(out), "--no-progress-bar"])
    assert result.exit_code == 100, result.output
    ours = _comparable(json.loads(out.read_text()))
    theirs = _comparable(json.loads((SCRIPTS / golden).read_text()))
    assert differences(ours, theirs) == []
    stats, gstats = ours["results"]["stats"], theirs["results"]["stats"]
    assert (stats["successes"], stats["failures"], stats["errors"]) == (
        gstats["successes"], gstats["failures"], gstats["errors"])
