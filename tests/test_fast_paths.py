"""Fast paths taken for speed (benchmarks/README.md) give exactly what the slow paths give."""

import json
import math

import pytest

from factcli.store.encode import finite
from factcli.store.redact import Scrubber


def slow_dumps(scrub: Scrubber, value):
    return json.dumps(finite(scrub.data(value)), ensure_ascii=False, default=str)


CONFIG = {"providers": [{"id": "openai:chat:m", "config": {"apiKey": "literal-key-123456",
                                                            "headers": {"X-Token": "hdr-secret-99"}}}]}
VALUES = [
    {"output": "plain text", "n": 1, "f": 0.5, "none": None, "list": [1, "two", {"three": 3}]},
    {"score": math.nan, "inf": math.inf, "nested": [{"x": -math.inf}]},
    {"text": "contains literal-key-123456 inside"},
    {"text": "the env secret sk-env-abcdef0123 leaks"},
    {"text": 'quoted "sk-env-abcdef0123" and \\ backslash'},
    {"api_key": "whatever", "other": 1},
    {"API-KEY": "x1234567"},
    {"\u212aey": 1, "api\u212aey": "kelvin-sign key"},  # IGNORECASE folds the Kelvin sign onto k
    {"Authorization": "Bearer abcdefghijkl"},
    {"headers": {"anything": "goes"}, "extra_headers": {"a": "b"}},
    {"max_tokens": 10, "maxTokens": 5, "tokenUsage": {"total": 3}},
    {"unicode": "naïve café ✓", "password_hint": "none"},
    {"obj": ValueError("sk-env-abcdef0123")},  # encoded by default=str
    {"tuple": (1, 2)},
    {3: "int key"},
    ["a", "b", {"secret": "s3cr3t-value"}],
    "just a string with sk-env-abcdef0123",
    "just a string",
    12.5,
]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_scrubber_dumps_matches_the_walk(monkeypatch, value):
    monkeypatch.setenv("MY_API_KEY", "sk-env-abcdef0123")
    scrub = Scrubber(CONFIG)
    assert scrub.dumps(value) == slow_dumps(scrub, value)


def test_scrubber_dumps_still_redacts(monkeypatch):
    monkeypatch.setenv("MY_API_KEY", "sk-env-abcdef0123")
    scrub = Scrubber(CONFIG)
    out = scrub.dumps({"a": "sk-env-abcdef0123", "b": "literal-key-123456", "apiKey": "zzzzzzzz", "s": math.nan})
    assert "sk-env-abcdef0123" not in out and "literal-key-123456" not in out and "zzzzzzzz" not in out
    assert json.loads(out)["s"] is None


def whole_file_pass(scrub: Scrubber, text: str) -> str:
    for value, replacement in scrub.variants:
        text = text.replace(value, replacement)
    return text


@pytest.mark.parametrize("chunk", [1, 5, 7, 16, 1 << 20])
def test_scrubber_file_reads_in_chunks_and_misses_no_secret(tmp_path, monkeypatch, chunk):
    """The export pass reads a file a chunk at a time: secrets across chunk edges, at both ends,
    back to back and in their JSON and XML forms are replaced exactly as a whole-text pass would."""
    monkeypatch.setenv("MY_API_KEY", "sk-env-abc&def\"0123")
    scrub = Scrubber(CONFIG)
    monkeypatch.setattr(Scrubber, "FILE_CHUNK", chunk)
    text = ("literal-key-123456 start\r\n" + "x" * 13 + "hdr-secret-99hdr-secret-99 é ✓\n"
            + json.dumps("sk-env-abc&def\"0123") + " sk-env-abc&amp;def&quot;0123 " * 3 + "y" * 50
            + "sk-env-abc&def\"0123")
    path = tmp_path / "export.txt"
    path.write_text(text, encoding="utf-8", newline="")
    path.chmod(0o644)
    scrub.file(path)
    out = path.read_bytes().decode("utf-8")
    assert out == whole_file_pass(scrub, text)
    assert "0123" not in out and "literal-key" not in out and "hdr-secret" not in out and "\r\n" in out
    assert path.stat().st_mode & 0o777 == 0o644 and list(tmp_path.iterdir()) == [path]
    clean = tmp_path / "clean.txt"
    clean.write_text("nothing to hide\n" * 100, encoding="utf-8")
    before = clean.stat().st_mtime_ns
    scrub.file(clean)
    assert clean.stat().st_mtime_ns == before and len(list(tmp_path.iterdir())) == 2


def test_family_map_names_the_module_that_registers_each_type():
    from factcli.scoring import registry as core

    core.load_all()
    for name, family in core._FAMILY_OF.items():
        t = core._REGISTRY.get(core._ALIASES.get(name, name))
        assert t is not None, name
        assert t.handler.__module__ == f"factcli.{family}", name
    assert set(core.FAMILIES) >= set(core._FAMILY_OF.values())


def test_a_run_imports_only_the_assertion_families_it_uses():
    import subprocess
    import sys

    code = ("import sys\nfrom factcli.scoring.registry import lookup\n"
            "assert lookup('not-icontains').name == 'icontains'\n"
            "print(sorted(m for m in sys.modules if m.startswith('factcli.assertions.')))\n"
            "assert lookup('no-such-type') is None\n"
            "print('factcli.assertions.structured' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "['factcli.assertions.text']"
    assert out[1] == "True"  # an unknown name loads every family before giving up


TEMPLATE_VALUES = {"q": "question 1", "n": 3, "f": 1.5, "b": True, "none": None, "l": [1, "a", None],
                   "d": {"a": 1, "b": [1, 2]}, "nan": math.nan, "big": 1e21, "neg": -0.0, "u": "é\n"}
SIMPLE = ["Answer: {{q}}", "{{ n }} and {{f}} {{b}}", "{{l}}|{{d}}|{{nan}}|{{big}}|{{neg}}", "x {{ u }} y\n",
          "a}}{{q}}", "{{q}}{{q}}", "<<q>> and {{ n }}", "{{\tq\t}}", "{{q}}}}", "\\<<q>> {{q}}",
          "{{ missing }} {{ q }}"]  # (an undefined name: the fast path hands the row to Jinja)
# constants, self, comments, raw blocks, CRLF, `{{{`: never the fast path
NOT_SIMPLE = ["{{ true }}", "{{ none }}", "{{ self }}", "{% raw %}{{q}}{% endraw %}", "{{ q }}{#c#}",
              "{{q}}\r\nx", "x {{{ q }} }"]


@pytest.mark.parametrize("template", SIMPLE + NOT_SIMPLE)
def test_templates_without_control_flow_render_as_jinja_renders_them(template):
    """templating.render's fast path (literal text and `{{ name }}`) gives Jinja's own output."""
    from factcli import templating

    assert (templating._simple(template) is not None) == (template in SIMPLE)
    missing: list = []
    try:
        expected = templating._compile(template).render(TEMPLATE_VALUES)
    except Exception:  # noqa: BLE001 - a template Jinja refuses is refused by render too
        with pytest.raises(templating.TemplateError):
            templating.render(template, TEMPLATE_VALUES, missing)
        return
    assert templating.render(template, TEMPLATE_VALUES, missing) == expected
    assert missing == (["missing"] if "missing" in template else [])
