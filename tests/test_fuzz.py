"""Property-based fuzzing of bad input: configs, the files they point at, and --model-outputs.

Every generated case either runs (exit 0 or 100, when the input happens to be valid) or is
refused with exit 1 and exactly one line, `error: ...`, naming the file at fault; never a
traceback and never an "internal error". The runs are derandomized: one Hypothesis version draws the
same cases every time, but another version draws others (CI's machine may have another), so a bug
found anywhere is fixed in the code, never by pinning the version.

The fuzzer only ever names the echo provider and assertion types that run no user code and
need no network; a guard refuses any connection beyond 127.0.0.1 all the same.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import os
import socket
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from conftest import without_excerpt
from typer.testing import CliRunner

from factcli.cli import app

runner = CliRunner()


def fuzz(examples: int):
    """Derandomized (the same cases every time, for one Hypothesis version), no example database, no
    deadline on a shared machine; counts chosen so the whole module stays around 20 s. FACTCLI_FUZZ_SCALE=N
    runs N times as many, for a deeper search by hand."""
    examples *= max(1, int(os.environ.get("FACTCLI_FUZZ_SCALE") or 1))
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None, print_blob=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large])


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    real = socket.getaddrinfo

    def local_only(host, *args, **kwargs):
        if host not in ("127.0.0.1", "localhost", "::1", None):
            raise OSError(f"test_fuzz: no network ({host})")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", local_only)


# ---------------------------------------------------------------- the oracle


def check(result, files: list[Path]) -> str | None:
    """The property every case must have. Returns the error line, if any."""
    out = result.output
    # a failure message quoting a 100 kB value helps nobody
    shown = out if len(out) <= 2000 else out[:1000] + " [...] " + out[-1000:]
    assert "Traceback" not in out, shown
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"uncaught {type(result.exception).__name__}: {str(result.exception)[:500]}\n{shown}")
    assert result.exit_code in (0, 1, 100), (result.exit_code, shown)
    if result.exit_code != 1:
        return None
    lines = without_excerpt([ln for ln in out.splitlines() if ln.strip() and not ln.startswith("warning:")])
    if len(lines) > 1 and "problems found before any call" in lines[0]:  # the preflight: one line each
        assert all(ln.startswith("  - ") for ln in lines[1:]), shown
        lines = lines[1:2]
        lines[0] = "error: " + lines[0][4:]
    assert len(lines) == 1, shown
    line = lines[0]
    assert line.startswith("error: ") and "internal error" not in line, line
    assert line.isprintable() and len(line) < 1200, line
    assert any(str(f) in line for f in files), f"the error names none of the input files: {line}"
    return line


def run_eval(*args):
    return runner.invoke(app, ["eval", "--no-progress-bar", "--no-table", "--no-write", *map(str, args)])


# ---------------------------------------------------------------- values

SAFE_TYPES = ["contains", "icontains", "equals", "regex", "starts-with", "is-json", "contains-json",
              "levenshtein", "word-count", "contains-any", "contains-all", "not-contains", "rouge-n", "bleu",
              "latency", "cost", "is-xml", "llm-rubric", "factuality", "g-eval", "model-graded-closedqa",
              "assert-set", "select-best"]

unicode_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10**30, 10**30), st.floats(allow_nan=True, allow_infinity=True),
    unicode_text, st.sampled_from([
        "", " ", "file://", "file://missing.yaml", "file://missing.csv", "file://missing.txt", "file://sub/",
        "file://*.nothing", "file:///", "file://tests.csv", "file://var.json", "file://prompt.txt",
        "{{", "{{ x", "{% if %}", "<<", "${NOPE}", "{{ env.NOPE }}", "#/assertionTemplates/nope", "not-",
        "x" * 100_000, "é" * 5000, "\x00", "a\nb", "\t", "[", "{", "- x", "echo", "openai",
    ]), st.sampled_from(SAFE_TYPES),
)
junk = st.recursive(scalars, lambda kids: st.one_of(
    st.lists(kids, max_size=3), st.dictionaries(st.one_of(unicode_text, st.sampled_from(
        ["type", "value", "id", "vars", "assert", "config", "tests", "prompts"])), kids, max_size=3)), max_leaves=6)

BASE = {
    "description": "fuzz base",
    "prompts": ["Say {{word}} {{extra}}", "file://prompt.txt"],
    "providers": ["echo", {"id": "echo", "label": "second", "config": {"x": 1}}],
    "defaultTest": {"vars": {"extra": "v"}, "assert": [{"type": "contains", "value": "Say"}],
                    "options": {"prefix": "", "suffix": "", "provider": {"id": "echo", "config": {}}}},
    "tests": [
        {"description": "t1", "vars": {"word": "hello", "data": "file://var.json"},
         "assert": [{"type": "contains", "value": "hello", "metric": "m", "weight": 2, "threshold": 0.5},
                    {"type": "assert-set", "threshold": 0.5, "assert": [{"type": "icontains", "value": "HELLO"}]},
                    {"$ref": "#/assertionTemplates/hi"},
                    {"type": "levenshtein", "value": "Say hello", "threshold": 20},
                    {"type": "regex", "value": "^Say"},
                    # the echo provider as a grader: a real model-graded path with no network
                    {"type": "llm-rubric", "value": "is polite", "provider": "echo",
                     "rubricPrompt": "Grade {{output}} against {{rubric}}"}],
         "threshold": 0.5, "metadata": {"k": "v"}, "options": {"prefix": ""}},
        "file://tests.csv",
    ],
    "scenarios": [{"description": "s", "config": [{"vars": {"word": "a"}}],
                   "tests": [{"assert": [{"type": "equals", "value": "x"}]}]}],
    "assertionTemplates": {"hi": {"type": "contains", "value": "h"}},
    "derivedMetrics": [{"name": "double", "value": "m * 2"}],
    "evaluateOptions": {"maxConcurrency": 2, "cache": False},
    "metadata": {"owner": "fuzz"},
}
GOOD_CSV = "word,__expected,__description\nhi,contains:hi,row one\nyo,icontains:YO,row two\n"
GOOD_FILES = {"tests.csv": GOOD_CSV, "var.json": '{"a": [1, 2]}', "prompt.txt": "Prompt {{word}}"}


def paths(obj, prefix=()):
    """Every key path in a config, the root included."""
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from paths(v, prefix + (i,))


BASE_PATHS = [p for p in paths(BASE) if p]


def mutate(cfg, path, op, value):
    *parent_path, last = path
    parent = cfg
    for k in parent_path:
        parent = parent[k]
    if op == "delete":
        del parent[last]
    elif op == "unknown-key":
        target = parent[last]
        if isinstance(target, dict):
            target["unknownKey" if not isinstance(value, str) or not value else value[:20]] = value
        elif isinstance(target, list):
            target.append(value)
        else:
            parent[last] = value
    else:
        parent[last] = value
    return cfg


def dump(cfg) -> str:
    return yaml.safe_dump(cfg, allow_unicode=True, sort_keys=False, width=10**6)


def workdir(files: dict[str, str | bytes]) -> tuple[tempfile.TemporaryDirectory, Path]:
    tmp = tempfile.TemporaryDirectory(prefix="factcli-fuzz-")
    root = Path(tmp.name)
    (root / "sub").mkdir()
    for name, content in {**GOOD_FILES, **files}.items():
        p = root / name
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")
    return tmp, root


def test_the_base_config_is_valid():
    tmp, root = workdir({"c.yaml": dump(BASE)})
    with tmp:
        result = run_eval("-c", root / "c.yaml")
        assert result.exit_code in (0, 100) and "Errors: 0" in result.output, result.output  # some rows FAIL


# ---------------------------------------------------------------- configs


@fuzz(50)
@given(mutations=st.lists(st.tuples(st.sampled_from(BASE_PATHS), st.sampled_from(["replace", "delete", "unknown-key"]),
                                    junk), min_size=1, max_size=3))
def test_mutated_configs(mutations):
    cfg = copy.deepcopy(BASE)
    for path, op, value in mutations:
        try:
            cfg = mutate(cfg, path, op, value)
        except (KeyError, IndexError, TypeError):
            pass  # an earlier mutation removed or replaced this path
    tmp, root = workdir({"c.yaml": dump(cfg)})
    with tmp:
        files = [root / name for name in ("c.yaml", *GOOD_FILES)] + [root]
        check(run_eval("-c", root / "c.yaml"), files)


@fuzz(40)
@given(path=st.sampled_from(BASE_PATHS), value=junk)
def test_one_wrong_value_names_its_key(path, value):
    """One key given a wrong value: when refused, the message names the file and a key of the path."""
    cfg = mutate(copy.deepcopy(BASE), path, "replace", value)
    tmp, root = workdir({"c.yaml": dump(cfg)})
    with tmp:
        line = check(run_eval("-c", root / "c.yaml"), [root])
        # None or an empty value is the key left out: the error may rightly name what needed it
        if line is not None and str(root / "c.yaml") in line and value not in (None, "", [], {}):
            keys = [str(k) for k in path if isinstance(k, str)] + [f"[{k}]" for k in path if isinstance(k, int)]
            assert any(k in line for k in keys) or "YAML" in line, (path, line)


YAML_ALPHABET = st.sampled_from(list("abc:-[]{},'\"&*!|>%@`#?\n \t\\") + ["prompts", "providers", "tests", "echo",
                                                                          "file://", "{{", "}}", "\x00", "é"])


@fuzz(60)
@given(text=st.one_of(st.lists(YAML_ALPHABET, max_size=60).map("".join),
                      st.tuples(st.integers(0, 2000), st.integers(0, 5), st.text(max_size=5)).map(
                          lambda t: (lambda s: s[:t[0]] + t[2] + s[t[0] + t[1]:])(dump(BASE)))),
       suffix=st.sampled_from([".yaml", ".yml", ".json"]))
def test_broken_yaml_and_json(text, suffix):
    tmp, root = workdir({"c" + suffix: text})
    with tmp:
        check(run_eval("-c", root / ("c" + suffix)), [root])


def test_deeply_nested_and_exotic_yaml(tmp_path):
    cases = {
        "deep-list.yaml": "prompts: " + "[" * 3000 + "]" * 3000 + "\nproviders: [echo]\n",
        "deep-map.yaml": "prompts: [x]\nproviders: [echo]\ntests:\n  - vars: {a: " + "{b: " * 2000 + "1" + "}" * 2000 + "}\n",
        "nul.yaml": "prompts: [\"a\x00b\"]\nproviders: [echo]\n",
        "bom.yaml": "\ufeffprompts: [x]\nproviders: [echo]\n",
        "latin1.yaml": "prompts: [caf\xe9]\n".encode("latin-1"),
        "python-tag.yaml": "prompts: !!python/object/apply:os.system [echo hi]\nproviders: [echo]\n",
        "unhashable.yaml": "prompts: [x]\nproviders: [echo]\ntests: [{vars: {[1]: c}}]\n",
        "int-keys.yaml": "prompts: [x]\nproviders: [echo]\ntests: [{vars: {1: a, null: b}}]\n",
        "dup.yaml": "prompts: [x]\nprompts: [y]\nproviders: [echo]\n",
        "empty.yaml": "",
        "list.yaml": "- a\n- b\n",
        "huge-int.yaml": "prompts: [x]\nproviders: [echo]\nevaluateOptions: {maxConcurrency: 1e400}\n",
        "bad-repeat.yaml": "prompts: [x]\nproviders: [echo]\nevaluateOptions: {repeat: abc}\n",
        "bad-mc.yaml": "prompts: [x]\nproviders: [echo]\nevaluateOptions: {maxConcurrency: [1]}\n",
        "bad-delay.yaml": "prompts: [x]\nproviders: [echo]\nevaluateOptions: {delay: {a: 1}}\n",
        "dir-prompt.yaml": "prompts: [file://sub]\nproviders: [echo]\n",
        "dir-tests.yaml": "prompts: [x]\nproviders: [echo]\ntests: file://sub\n",
        "bin-prompt.yaml": "prompts: [file://bin.txt]\nproviders: [echo]\n",
        "bin-tests.yaml": "prompts: [x]\nproviders: [echo]\ntests: file://bin.csv\n",
        "alias-bomb.yaml": "".join(f"{k}: &{k} [" + ",".join([f"*{p}" if p else '"lol"'] * 9) + "]\n"
                                   for p, k in zip(["", *"abcdefgh"], "abcdefghi")) + "prompts: [x]\nproviders: [echo]\n",
        "alias-loop.yaml": "prompts: &p [x, *p]\nproviders: [echo]\n",
    }
    (tmp_path / "sub").mkdir()
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe\xfa")
    (tmp_path / "bin.csv").write_bytes(b"a,b\n\xff,\xfe\n")
    # what the line must say, beyond naming the file (each was a traceback or a two-line message once)
    expected = {
        "deep-list.yaml": "nested more than 100 levels", "deep-map.yaml": "nested more than 100 levels",
        "nul.yaml": "line 1, column 13", "latin1.yaml": "not UTF-8", "python-tag.yaml": "line 1, column 10",
        "bad-repeat.yaml": "evaluateOptions.repeat", "bad-mc.yaml": "evaluateOptions.maxConcurrency",
        "bad-delay.yaml": "evaluateOptions.delay", "huge-int.yaml": "evaluateOptions.maxConcurrency",
        "dir-prompt.yaml": "prompts[0]: ", "dir-tests.yaml": "tests: ", "bin-prompt.yaml": "not UTF-8",
        "bin-tests.yaml": "bin.csv: not UTF-8", "dup.yaml": "duplicate key 'prompts'",
        "alias-bomb.yaml": "its YAML aliases expand to 490,329,059 values from 106 written",
        "alias-loop.yaml": "a YAML alias refers to itself",
    }
    for name, text in cases.items():
        p = tmp_path / name
        p.write_bytes(text) if isinstance(text, bytes) else p.write_text(text, encoding="utf-8")
        try:
            line = check(run_eval("-c", p), [tmp_path])
            if name in expected:
                assert line is not None and expected[name] in line, line
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None


def test_yaml_aliases_that_repeat_data_still_load(tmp_path):
    """Anchors are for sharing: 3,000 tests that each alias one assertion list expand to 10x what
    is written, far from an alias bomb's ratio."""
    text = ("prompts: [x]\nproviders: [echo]\ntests:\n"
            "  - {vars: {n: '0'}, assert: &c [{type: contains, value: x}, {type: icontains, value: X}]}\n"
            + "".join(f"  - {{vars: {{n: '{i}'}}, assert: *c}}\n" for i in range(1, 3000)))
    (tmp_path / "c.yaml").write_text(text, encoding="utf-8")
    result = run_eval("-c", tmp_path / "c.yaml")
    assert result.exit_code == 0, result.output


# ---------------------------------------------------------------- the files a config points at

CSV_COLUMNS = ["word", "extra", "__expected", "__expected2", "__description", "__threshold", "__metric",
               "__config:__expected:threshold", "__config:__expected9:threshold", "__config:bad",
               "__config:__expected:weight", "__metadata:x", "__metadata:x[]", "__metadata", "__prefix",
               "__suffix", "__providerOutput", "_expected", " word ", ""]
CELL_PREFIXES = ["", "contains:", "icontains:", "equals:", "regex:", "regex:[", "starts-with:", "not-contains:",
                 "contains-any:", "contains-all:", "levenshtein(3):", "levenshtein(x):", "rouge-n(0.5):",
                 "is-json", "is-json:", "contains-json:", "word-count:", "llm-rubric:", "grade:", "factuality:",
                 "not-", "bleu(2):", "latency(1):", "cost:"]
cell = st.one_of(st.tuples(st.sampled_from(CELL_PREFIXES), unicode_text).map("".join), unicode_text,
                 st.sampled_from(["", "0.5", "-1", "nan", "inf", "1e400", '"', '""', "a,b", "a\nb", "\\,"]))


@st.composite
def csv_files(draw):
    header = draw(st.lists(st.sampled_from(CSV_COLUMNS), min_size=1, max_size=6))
    rows = draw(st.lists(st.lists(cell, min_size=0, max_size=len(header) + 2), max_size=5))
    buf = io.StringIO()
    writer = csv.writer(buf, quoting=draw(st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL, csv.QUOTE_NONE])),
                        escapechar="\\")
    for row in [header, *rows]:
        try:
            writer.writerow(row)
        except csv.Error:  # QUOTE_NONE cannot write some rows: write them raw, broken as they are
            buf.write(",".join(row) + "\n")
    text = buf.getvalue()
    if draw(st.booleans()):  # raw damage: stray quotes, NULs, cut in half
        pos = draw(st.integers(0, len(text)))
        text = text[:pos] + draw(st.sampled_from(['"', '\x00', '"\n"', "\r", ""])) + text[pos:]
    return text


@fuzz(40)
@given(csv_text=csv_files(), var_json=st.one_of(st.just('{"a": 1}'), unicode_text, junk.map(json.dumps)),
       prompt_txt=st.one_of(st.just("P {{word}}"), unicode_text, st.sampled_from(["{{", "{% for %}", "---", "\x00"])),
       strict=st.booleans())
def test_bad_referenced_files(csv_text, var_json, prompt_txt, strict, monkeypatch):
    monkeypatch.setenv("FACTCLI_CSV_STRICT", "true" if strict else "")
    files = {"c.yaml": dump(BASE), "tests.csv": csv_text, "var.json": var_json, "prompt.txt": prompt_txt}
    tmp, root = workdir(files)
    with tmp:
        check(run_eval("-c", root / "c.yaml"), [root])


@fuzz(40)
@given(ref=st.sampled_from(["file://missing.yaml", "file://sub", "file://sub/*.csv", "file://c.yaml", "file://var.json",
                            "file://tests.csv", "file://prompt.txt", "file://x.py", "file://x.py:fn", "file://x.js",
                            "file:///nonexistent/dir/file.yaml", "file://" + "a" * 5000 + ".yaml",
                            "file://\x00.yaml", "file://~nobody/x.yaml", "file://.", "file://*", "file://[",
                            "file://nested.yaml", "file://sub/../var.json"]),
       where=st.sampled_from([("prompts", 0), ("providers", 0), ("tests", 1), ("defaultTest",), ("scenarios", 0),
                              ("tests", 0, "vars", "word"), ("tests", 0, "assert", 0, "value"),
                              ("tests", 0, "vars"), ("providers",), ("tests",), ("scenarios", 0, "tests"),
                              ("defaultTest", "assert", 0, "value"), ("tests", 0, "options", "transform"),
                              ("tests", 0, "assert", 0, "transform")]),
       nested=st.one_of(st.just("- {vars: {word: hi}}"), st.just("[1, 2"), junk.map(dump)))
def test_file_references_anywhere(ref, where, nested):
    cfg = mutate(copy.deepcopy(BASE), where, "replace", ref)
    tmp, root = workdir({"c.yaml": dump(cfg), "nested.yaml": nested})
    with tmp:
        check(run_eval("-c", root / "c.yaml"), [root, "/nonexistent", "a" * 200])


# ---------------------------------------------------------------- --assertions / --model-outputs


outputs_json = st.one_of(
    junk.map(json.dumps),
    st.lists(st.one_of(unicode_text, st.fixed_dictionaries({"output": junk}, optional={"tags": junk, "x": junk}),
                       junk), max_size=4).map(json.dumps),
    st.text(max_size=40),
    st.sampled_from(["", "[", '["a"', "\ufeff[]", "[]", '[{"output": "a", "tags": ["t"]}]', "\x00"]),
)
assertions_yaml = st.one_of(
    st.lists(st.fixed_dictionaries({"type": st.sampled_from(SAFE_TYPES)}, optional={"value": junk, "threshold": junk,
                                                                                   "metric": junk}),
             max_size=3).map(dump),
    junk.map(dump),
    st.sampled_from(["- type: contains\n  value: a\n", "[", "- type: nope\n", ""]),
)


@fuzz(60)
@given(outputs=outputs_json, asserts=assertions_yaml,
       names=st.sampled_from([("a.yaml", "o.json"), ("a.json", "o.json"), ("a.yaml", "missing.json"),
                              ("missing.yaml", "o.json"), ("a.yaml", "sub")]))
def test_model_outputs_files(outputs, asserts, names):
    tmp, root = workdir({"o.json": outputs, "a.yaml": asserts, "a.json": asserts})
    with tmp:
        a, o = root / names[0], root / names[1]
        check(run_eval("--assertions", a, "--model-outputs", o), [root])


@pytest.mark.parametrize("mutation, needle", [
    ((("scenarios", 0, "config", 0, "vars"), True), "scenarios[0].config[0].vars: expected a mapping"),
    ((("scenarios", 0, "tests", 0, "assert"), "x"), "scenarios[0].tests[0].assert: expected a list"),
    ((("scenarios", 0, "tests", 0), 5), "scenarios[0].tests[0]: expected a test mapping"),
    ((("assertionTemplates", "hi"), {"type": "contains", "": 1}), "assertionTemplates.hi.: unknown key ''"),
    ((("assertionTemplates", "hi"), None), "assertionTemplates.hi: expected an assertion mapping"),
    ((("derivedMetrics", 0, "value"), ":"), "derivedMetrics[0].value: invalid expression"),
    ((("evaluateOptions", "maxConcurrency"), "abc"), "evaluateOptions.maxConcurrency"),
    ((("prompts", 1), "file://sub"), "prompts[1]: "),
])
def test_found_by_the_fuzzer(mutation, needle):
    """Cases the fuzzer once turned into tracebacks or unclear lines, kept as plain regressions."""
    (path, value) = mutation
    tmp, root = workdir({"c.yaml": dump(mutate(copy.deepcopy(BASE), path, "replace", value))})
    with tmp:
        line = check(run_eval("-c", root / "c.yaml"), [root / "c.yaml"])
        assert line is not None and needle in line, line


def test_several_config_files_with_one_broken(tmp_path):
    """-c a.yaml -c b.yaml: the error names the file that is wrong, not the first one."""
    good = tmp_path / "a.yaml"
    good.write_text(dump({"prompts": ["p {{word}}"], "providers": ["echo"]}), encoding="utf-8")
    for bad_cfg, needle in [({"tests": [{"vars": True}]}, "tests[0].vars"), ({"tests": "nope"}, "tests"),
                            ({"evaluateOptions": {"repeat": 0}}, "evaluateOptions.repeat"),
                            ({"prompts": [{"raw": 3}]}, "prompts[0].raw")]:
        bad = tmp_path / "b.yaml"
        bad.write_text(dump(bad_cfg), encoding="utf-8")
        line = check(run_eval("-c", good, "-c", bad), [bad])
        assert line is not None and needle in line, line


SPLIT_A = ("description", "prompts", "providers", "evaluateOptions")


@fuzz(25)
@given(path=st.sampled_from(BASE_PATHS), op=st.sampled_from(["replace", "delete", "unknown-key"]), value=junk,
       as_json=st.booleans())
def test_mutated_config_split_over_two_files(path, op, value, as_json):
    """The base config split over two -c files (merged in order), one of them mutated."""
    cfg = mutate(copy.deepcopy(BASE), path, op, value)
    a = {k: v for k, v in cfg.items() if k in SPLIT_A}
    b = {k: v for k, v in cfg.items() if k not in SPLIT_A}
    text_b = json.dumps(b, allow_nan=True) if as_json else dump(b)
    name_b = "b.json" if as_json else "b.yaml"
    tmp, root = workdir({"a.yaml": dump(a), name_b: text_b})
    with tmp:
        check(run_eval("-c", root / "a.yaml", "-c", root / name_b), [root])
