"""Templates render as promptfoo's Nunjucks does (promptfoo-features.md part A §1; the n.. tags are
the reference's checked experiments), custom filters (`nunjucksFilters:`), the `load` filter, and
template faults as one-line config errors or ERROR rows."""

import json
import shutil

import pytest
from conftest import TS_REFUSED, ts_refused, write
from typer.testing import CliRunner

from factcli import templating
from factcli.cli import app

runner = CliRunner()
needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")

V = {
    "s": "hello world", "n_int": 3, "n_float": 1.0, "n_float2": 2.5, "big": 12345678901234567890,
    "b_true": True, "b_false": False, "nul": None, "obj": {"a": 1, "b": "two", "c": [1, 2]},
    "arr": [1, 2, 3], "sarr": ["x", "y"], "n": 5, "html": "<b>Tom & Jerry</b> \"q\" 'a'",
    "msgs": [{"user": "Who?"}, {"assistant": "Me"}], "pairs": [[1, 2], [3, 4]],
    "people": [{"name": "ann", "team": "x", "age": 3}, {"name": "bob", "team": "y", "age": 0}],
    "empty": [], "eobj": {},
}


def r(template: str, **extra) -> str:
    return templating.render(template, {**V, **extra})


# ---------------------------------------------------------------- §1.4 how values print


def test_values_print_as_javascript_prints_them_n01():
    template = ("obj={{ obj }} arr={{ arr }} sarr={{ sarr }} b={{ b_true }}/{{ b_false }} nul=[{{ nul }}] "
                "int={{ n_int }} f={{ n_float }} f2={{ n_float2 }} big={{ big }} s={{ s }}")
    # objects print as compact JSON: factcli's documented departure from `[object Object]`
    assert r(template) == ('obj={"a":1,"b":"two","c":[1,2]} arr=1,2,3 sarr=x,y b=true/false nul=[] int=3 f=1 '
                           "f2=2.5 big=12345678901234567000 s=hello world")


@pytest.mark.parametrize("template, expected", [
    ("{{ 1.5 * 2 }} {{ 10 / 4 }} {{ 1 / 3 }}", "3 2.5 0.3333333333333333"),
    ("{{ 0.0000001 }} {{ 123456789012345678 }}", "1e-7 123456789012345680"),
    ("{{ 1 / 0 }} {{ 0 / 0 }}", "Infinity NaN"),
    ("{{ [1, [2, 3]] }} {{ [1.0, none, 'x'] }}", "1,2,3 1,,x"),
])
def test_numbers_and_arrays_n20(template, expected):
    assert r(template) == expected


# ---------------------------------------------------------------- §1.5 loops


def test_for_key_value_over_an_object_n01():
    assert r("{% for k, v in obj %}{{ loop.index }}:{{ k }}={{ v }};{% endfor %}") == "1:a=1;2:b=two;3:c=1,2;"


def test_loop_variables_n01():
    assert r("{% for x in arr %}i={{ loop.index }} i0={{ loop.index0 }} first={{ loop.first }} last={{ loop.last }} "
             "len={{ loop.length }} rev={{ loop.revindex }} rev0={{ loop.revindex0 }};{% endfor %}") == (
        "i=1 i0=0 first=true last=false len=3 rev=3 rev0=2;"
        "i=2 i0=1 first=false last=false len=3 rev=2 rev0=1;"
        "i=3 i0=2 first=false last=true len=3 rev=1 rev0=0;")


def test_chat_history_idiom_n01():
    assert r("{% for m in msgs %}{% for role, content in m %}[{{ role }}|{{ content }}]{% endfor %}{% endfor %}") \
        == "[user|Who?][assistant|Me]"


def test_object_key_order_is_javascripts_n16():
    order = {"b": 1, "a": 2, "10": "ten", "2": "two", "-1": "neg", "01": "zero-one"}
    assert r("{% for k, v in o %}{{ k }}={{ v }};{% endfor %}", o=order) == "2=two;10=ten;b=1;a=2;-1=neg;01=zero-one;"
    assert r("{{ o | dump }}", o=order) == '{"2":"two","10":"ten","b":1,"a":2,"-1":"neg","01":"zero-one"}'


@pytest.mark.parametrize("template, expected", [
    ("{% for x in missing %}a{% else %}else-branch{% endfor %}", "else-branch"),
    ("{% for x in empty %}a{% else %}none{% endfor %}", "none"),
    ("{% for c in 'abc' %}{{ c }}.{% endfor %}", "a.b.c."),
    ("{% for k in obj %}X{% endfor %}", ""),  # one loop variable over an object iterates nothing
    ("{% for a, b in msgs %}({{ a }},{{ b }}){% endfor %}", "(,)(,)"),
    ("{% for a, b in pairs %}({{ a }},{{ b }}){% endfor %}", "(1,2)(3,4)"),
    ("{% for m in msgs %}{{ m }}{% endfor %}", '{"user":"Who?"}{"assistant":"Me"}'),
    ("{% for i in range(3) %}{{ i }}{% endfor %} {% for i in range(1, 7, 2) %}{{ i }}{% endfor %}", "012 135"),
])
def test_loop_shapes_n19(template, expected):
    assert r(template) == expected


# ---------------------------------------------------------------- §1.8 truthiness and operators


@pytest.mark.parametrize("template, expected", [
    ("{% if empty %}T{% else %}F{% endif %}{% if eobj %}T{% else %}F{% endif %}", "TT"),
    ("{% if 0 %}T{% elif '' %}T{% elif nul %}T{% elif missing %}T{% else %}F{% endif %}", "F"),
    ("{{ 'yes' if empty else 'no' }} {{ not eobj }} {{ not 0 }}", "yes false true"),
    ("{{ empty and 'x' }}|{{ 0 or 'y' }}|{{ 'a' or 'b' }}|{{ b_true and b_false }}", "x|y|a|false"),
    ("{{ empty | default('D', true) }}|{{ nul | default('D', true) }}", "|D"),
    ("{{ '42' == 42 }} {{ 3 != '3' }} {{ nul == missing }} {{ '10' < 9 }}", "true false true false"),
    ("{{ 'hello' in s }} {{ 2 in arr }} {{ 'a' in obj }}", "true true true"),
    ("{{ s ~ '-' ~ n }} {{ s + '-' + n }} {{ '42' + 1 }} {{ 1.0 ~ '' }}", "hello world-5 hello world-5 421 1"),
    ("{{ 7 / 2 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ 2 ** 3 }} {{ -7 % 3 }}", "3.5 3 1 8 -1"),
    ("{% if n > 5 %}big{% elif n > 2 %}mid{% else %}small{% endif %} {{ 'yes' if n > 2 else 'no' }}", "mid yes"),
])
def test_javascript_truthiness_and_operators_n03(template, expected):
    assert r(template) == expected


@pytest.mark.parametrize("template, expected", [
    ("A\n  {%- if true -%}\n  B\n  {%- endif -%}\n  C", "ABC"),
    ("{% if true %}\nD\n{% endif %}", "\nD\n"),
    ("{% raw %}{{ not_rendered }} {% if %}{% endraw %}", "{{ not_rendered }} {% if %}"),
    ("{# c #}C1 {#- t -#} C2", "C1C2"),
    ("{% set x = s ~ '!' %}{{ x }} {% set y = n + 2 %}{{ y }} {% set b %}blk{{ n }}{% endset %}{{ b }}",
     "hello world! 7 blk5"),
    ("{% set s = 'shadow' %}{{ s }}", "shadow"),
    ("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') }}", "Hi Ann!"),
    (("{{ n is defined }} {{ nul is none }} {{ nul is null }} {{ s is string }} {{ n is number }} {{ n is odd }} "
     "{{ 9 is divisibleby(3) }} {{ b_true is number }}"), "true true true true true true true false"),
    ("{{ s.toUpperCase() }} {{ s.split(' ') }} {{ s.length }} {{ arr.length }}", "HELLO WORLD hello,world 11 3"),
])
def test_syntax_n03(template, expected):
    assert r(template) == expected


# ---------------------------------------------------------------- §1.6 filters


@pytest.mark.parametrize("template, expected", [
    ("{{ obj | dump }}", '{"a":1,"b":"two","c":[1,2]}'),
    ("{{ obj | dump(2) }}", '{\n  "a": 1,\n  "b": "two",\n  "c": [\n    1,\n    2\n  ]\n}'),
    ("{{ s | dump }} {{ 3 | dump }} {{ nul | dump }} {{ b_true | dump }} [{{ missing | dump }}]",
     '"hello world" 3 null true []'),
    ("{{ ['café', 1.0, '<'] | dump }}", '["café",1,"<"]'),
    ("{{ html | safe }}", "<b>Tom & Jerry</b> \"q\" 'a'"),
    ("{{ html }}", "<b>Tom & Jerry</b> \"q\" 'a'"),
    ("{{ html | escape }}|{{ html | e }}", ("&lt;b&gt;Tom &amp; Jerry&lt;/b&gt; &quot;q&quot; &#39;a&#39;|"
     "&lt;b&gt;Tom &amp; Jerry&lt;/b&gt; &quot;q&quot; &#39;a&#39;")),
    ("{{ arr | join('-') }} {{ arr | join }} {{ [true, none, 1.0] | join(',') }}", "1-2-3 123 true,,1"),
    ("{{ s | length }} {{ arr | length }} {{ obj | length }} {{ missing | length }}", "11 3 3 0"),
    ("{{ arr | first }} {{ arr | last }} {{ s | first }} {{ s | last }}", "1 3 h d"),
    ("{{ missing | default('D') }}|{{ nul | default('D') }}|{{ b_false | default('D') }}|{{ '' | default('D') }}",
     "D||false|"),
    ("{{ nul | default('D', true) }}|{{ '' | default('D', true) }}|{{ missing | d('X') }}", "D|D|X"),
    ("{{ s | upper }} {{ 'ABC' | lower }} {{ s | title }} {{ s | capitalize }} {{ 'a-b c' | title }}",
     "HELLO WORLD abc Hello World Hello world A-b C"),
    ("{{ s | replace('o','0') }} {{ s | replace('o','0',1) }} {{ 'abc' | replace('', '.') }}",
     "hell0 w0rld hell0 world .a.b.c."),
    ("{{ '3.7' | int }} {{ 2.5 | int }} [{{ 'abc' | int }}] {{ 'abc' | int(7) }} {{ '12px' | int }}", "3 2 [] 7 12"),
    (("{{ 2.5 | round }} {{ 3.5 | round }} {{ 2.45 | round(1) }} {{ 2.7 | round(0,'floor') }} "
     "{{ 2.1 | round(0,'ceil') }}"), "3 4 2.5 2 3"),
    ("{{ '42' | float }} [{{ 'x' | float }}] {{ 'x' | float(1.5) }}", "42 [] 1.5"),
    ("{{ 'hello world' | truncate(8) }}|{{ 'hello world' | truncate(8, true) }}|{{ '  t  ' | trim }}",
     "hello...|hello wo...|t"),
    ("{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort }} {{ [3, 1, 2] | sort(true) }}", "1,2,3 A,b,c 3,2,1"),
    ("{{ s | reverse }} {{ arr | reverse }} {{ 'ab' | list }} {{ s | wordcount }}", "dlrow olleh 3,2,1 a,b 2"),
    ("{{ obj | list | dump }}", '[{"key":"a","value":1},{"key":"b","value":"two"},{"key":"c","value":[1,2]}]'),
    ("[{{ 'ab' | center(6) }}] [{{ 'ab' | center(5) }}]", "[  ab  ] [ ab  ]"),
    ("{{ 'a\nb' | indent(2) }}|{{ 'a\n\nb' | indent(2, true) }}", "a\n  b|  a\n  \n  b"),
    ("{{ 'a\nb' | nl2br }} {{ 'a b&c/d' | urlencode }} {{ '<p>x  <b>y</b></p>' | striptags }}",
     "a<br />\nb a%20b%26c%2Fd x y"),
    ("{{ [1, 2, 3] | batch(2) | dump }} {{ [1, 2, 3] | batch(2, 'x') | dump }} {{ [1, 2, 3] | sum }}",
     '[[1,2],[3]] [[1,2],[3,"x"]] 6'),
    ("{{ [1, 2, 3, 4, 5] | slice(2) | dump }}", "[[1,2,3],[4,5]]"),
    ("{{ {'b': 1, 'a': 2} | dictsort | dump }}", '[["a",2],["b",1]]'),
    ("{{ [1, 2, 3, 4] | select('odd') | join }} {{ [1, 2, 3, 4] | reject('odd') | join }}", "13 24"),
    (("{{ people | selectattr('age') | map(attribute='name') | join }} "
     "{{ people | rejectattr('age') | map(attribute='name') | join }}"), "ann bob"),
    (("{% for g in people | groupby('team') %}X{% endfor %}|"
     "{% for team, ms in people | groupby('team') %}{{ team }}:{{ ms | length }};{% endfor %}"), "|x:1;y:1;"),
    ("{{ missing | upper }}|{{ missing | replace('a', 'b') }}|{{ missing | int }}|{{ missing | wordcount }}", "|||"),
    # factcli departure: where Nunjucks throws a TypeError on undefined, these are empty
    ("{{ missing | trim }}|{{ missing | join(',') }}", "|"),
])
def test_filters_n02_n04_n20(template, expected):
    assert r(template) == expected


# ---------------------------------------------------------------- §1.7 undefined names


def test_undefined_names_and_attributes_render_empty_n03():
    missing = []
    out = templating.render("{{ missing }}|{{ obj.nope }}|{{ obj.nope.deeper }}|{{ missing.attr.x }}|"
                            "{{ arr[10] }}|{{ nul.x }}|{{ arr[-1] }}", V, missing)
    assert out == "||||||"
    assert "missing" in missing
    assert r("{% if missing %}T{% else %}F{% endif %} {{ 'D' if missing is defined else 'U' }}") == "F U"


def test_object_keys_win_over_python_methods():
    assert r("{{ d.items }} {{ d.keys }} {{ d.get }}", d={"items": 1, "keys": 2, "get": 3}) == "1 2 3"


def test_sandbox_still_refuses_private_attributes_and_mutation():
    with pytest.raises(templating.TemplateError, match="unsafe"):
        r("{{ ''.__class__.__mro__[1].__subclasses__() }}")
    with pytest.raises(templating.TemplateError, match="unsafe"):
        r("{{ arr.append(4) }}")
    assert V["arr"] == [1, 2, 3]


# ---------------------------------------------------------------- §1.13 load, §1.11 env


def test_load_filter_n09():
    assert r("{{ (style_config | load).tone }} {{ ('[1,2]' | load) | length }}",
             style_config='{"tone": "formal"}') == "formal 2"
    with pytest.raises(templating.TemplateError, match=r'load: "hello" is not valid JSON'):
        r("{{ s2 | load }}", s2="hello")


def test_env_global(monkeypatch):
    monkeypatch.setenv("FACTCLI_NJ_VAR", "here")
    assert r("{{ env.FACTCLI_NJ_VAR }}|{{ env['FACTCLI_NJ_VAR'] }}|{{ env.FACTCLI_NJ_UNSET }}") == "here|here|"


# ---------------------------------------------------------------- custom filters


def test_custom_filters_are_python_callables_used_everywhere_while_in_force():
    custom = templating.Filters({"allcaps": lambda s: str(s).upper(), "wrap": lambda v, left, right: f"{left}{v}{right}"})
    with templating.filters_used(custom):
        assert r("{{ s | allcaps }} {{ s | wrap('[', ']') }}") == "HELLO WORLD [hello world]"
        assert templating.render_value(["{{ s | allcaps }}", {"k": "{{ s | wrap('<', '>') }}"}], V) == [
            "HELLO WORLD", {"k": "<hello world>"}]
        assert "allcaps" in templating.filter_names()
    # the block ended: the same template (compiled above, with the filter) is not rendered with it again
    with pytest.raises(templating.TemplateError, match="unknown filter 'allcaps'"):
        r("{{ s | allcaps }}")
    assert "allcaps" not in templating.filter_names()


def test_two_sets_of_filters_never_see_each_other():
    """Each suite's filters have their own environment and compiled templates: a filter of the same
    name means each set's own function, and a set without it does not know it."""
    one = templating.Filters({"tag": lambda v: f"one:{v}"})
    two = templating.Filters({"tag": lambda v: f"two:{v}", "upper": lambda v: "overridden"})
    for _ in range(2):  # (the second time from each set's compiled templates)
        with templating.filters_used(one):
            assert r("{{ s | tag }} {{ s | upper }}") == "one:hello world HELLO WORLD"
            with templating.filters_used(two):
                assert r("{{ s | tag }} {{ s | upper }}") == "two:hello world overridden"
            assert r("{{ s | tag }}") == "one:hello world"
        with templating.filters_used(None), pytest.raises(templating.TemplateError, match="unknown filter 'tag'"):
            r("{{ s | tag }}")


def test_filters_in_force_belong_to_the_task_that_set_them():
    """Two asyncio tasks rendering side by side, each with its own filters in force (what two runs
    in one process are): each renders with its own, whatever the other set meanwhile."""
    import asyncio

    async def run(name: str) -> list[str]:
        out = []
        with templating.filters_used(templating.Filters({"who": lambda v: f"{name}:{v}"})):
            for _ in range(5):
                out.append(r("{{ s | who }}"))
                await asyncio.sleep(0)  # the other task runs here, its own filters in force
        return out

    async def both():
        return await asyncio.gather(run("a"), run("b"))

    a, b = asyncio.run(both())
    assert a == ["a:hello world"] * 5 and b == ["b:hello world"] * 5


def test_a_failing_custom_filter_is_a_template_error_naming_it():
    def boom(value):
        raise RuntimeError("no way")

    with templating.filters_used(templating.Filters({"boom": boom})), pytest.raises(templating.TemplateError) as info:
        templating.render("one\n{{ s | boom }}", V, name="prompt 'p'")
    assert str(info.value) == "template error in prompt 'p' on line 2: filter 'boom' failed: no way"


# ---------------------------------------------------------------- template faults


@pytest.mark.parametrize("template, message", [
    ("{{ s | uper }}", "unknown filter 'uper' (did you mean 'upper'?)"),
    ("a\n\n{% if s %}yes", "Unexpected end of template"),
    ("{% frobnicate %}", "unknown tag 'frobnicate'"),
    ("{{ s + }}", "unexpected"),
])
def test_syntax_errors_name_the_template_and_line(template, message):
    with pytest.raises(templating.TemplateError) as info:
        templating.check(template, name="prompt 'p'")
    assert info.value.syntax and message in str(info.value)
    assert str(info.value).startswith("template syntax error in prompt 'p' on line ")


def test_render_errors_name_the_line():
    with pytest.raises(templating.TemplateError) as info:
        templating.render("a\nb\n{{ missing() }}", {})
    assert info.value.line == 3 and not info.value.syntax


# ---------------------------------------------------------------- through the CLI


def _eval(tmp_path, config: str, *args: str):
    cfg = write(tmp_path / "promptfooconfig.yaml", config)
    return runner.invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-cache", "--no-write", *args])


def test_prompt_syntax_error_is_a_config_error(tmp_path):
    result = _eval(tmp_path, "prompts: ['Hi {{ name }}', 'x\n\n  {% if name %}open']\nproviders: [echo]\n")
    assert result.exit_code == 1
    line = result.output.strip()
    assert "internal error" not in line and "Traceback" not in line
    assert "promptfooconfig.yaml: prompts[1]: template syntax error on line 2" in line, line


def test_template_fault_at_run_time_is_an_error_row(tmp_path):
    out = tmp_path / "r.json"
    result = _eval(tmp_path, "prompts: ['Hi {{ name }}', 'line1\n\n{{ name | load }}']\nproviders: [echo]\n"
                             "tests: [{vars: {name: Ann}}]\n", "-o", str(out))
    assert "internal error" not in result.output, result.output
    rows = json.loads(out.read_text())["results"]["results"]
    assert [row["success"] for row in rows] == [True, False]
    assert 'line 2: load: "Ann" is not valid JSON' in rows[1]["error"]


def test_nunjucks_filters_errors_are_one_line(tmp_path):
    write(tmp_path / "filters.py", "def shout(value):\n    return str(value).upper()\n")
    write(tmp_path / "f.ts", "export default (s: string) => s;\n")
    cases = {
        "./missing.js": "nunjucksFilters.x: filter file not found",
        "file://filters.py:shoot": "nunjucksFilters.x: filters.py has no function 'shoot' (did you mean 'shout'?)",
        "file://filters.py": "nunjucksFilters.x: filters.py has no function 'x'",
    }
    for ref, message in cases.items():
        result = _eval(tmp_path, f"nunjucksFilters: {{x: '{ref}'}}\nprompts: ['{{{{ a | x }}}}']\nproviders: [echo]\n")
        assert result.exit_code == 1, result.output
        assert message in result.output and len(result.output.strip().splitlines()) == 1, result.output


@needs_node
@ts_refused
def test_a_typescript_filter_with_no_way_to_run_is_one_line(tmp_path):
    write(tmp_path / "f.ts", "export default (s: string) => s;\n")
    result = _eval(tmp_path, "nunjucksFilters: {x: 'f.ts'}\nprompts: ['{{ a | x }}']\nproviders: [echo]\n")
    assert result.exit_code == 1 and f"nunjucksFilters.x: f.ts {TS_REFUSED}" in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1


def test_js_filter_that_exports_nothing_is_a_config_error(tmp_path):
    write(tmp_path / "bad.mjs", "export const nope = 1;\n")
    result = _eval(tmp_path, "nunjucksFilters: {x: bad.mjs}\nprompts: ['{{ a | x }}']\nproviders: [echo]\n")
    assert result.exit_code == 1
    assert "nunjucksFilters.x: bad.mjs does not export a function" in result.output


def _openai(model: str = "m1") -> str:
    return f'{{id: "openai:chat:{model}", config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"}}}}'


def test_for_key_value_prompt_reaches_the_model(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    config = (f"prompts: ['{{% for role, content in message %}}{{{{ role }}}}: {{{{ content }}}}\n\n{{% endfor %}}']\n"
              f"providers: [{_openai()}]\n"
              "tests:\n  - vars:\n      message: {system: be brief, user: hi}\n")
    result = _eval(tmp_path, config)
    assert result.exit_code == 0, result.output
    messages = fake_openai.requests[-1]["json"]["messages"]
    assert messages == [{"role": "user", "content": "system: be brief\nuser: hi\n"}]


@needs_node
def test_python_and_js_filters_in_prompts_and_assertions(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(tmp_path / "allcaps.js", "module.exports = function (str) { return String(str).toUpperCase(); };\n")
    write(tmp_path / "filters" / "wrap.mjs", "export default function (v, l, r) { return `${l}${v}${r}`; }\n")
    write(tmp_path / "filters.py", "def shout(value, times=1):\n    return str(value).upper() + '!' * int(times)\n")
    fake_openai.add_rule("HELLO", "HELLO back")
    config = ("nunjucksFilters:\n  allcaps: ./allcaps.js\n  wrap: filters/*.mjs\n  shout: file://filters.py:shout\n"
              "prompts: [\"{{ body | allcaps }} {{ body | wrap('[', ']') }} {{ body | shout(2) }}\"]\n"
              f"providers: [{_openai()}]\n"
              "tests:\n  - vars: {body: hello}\n"
              "    assert:\n      - {type: contains, value: '{{ body | allcaps }}'}\n"
              "      - {type: icontains, value: '{{ body | shout(0) }}'}\n")
    result = _eval(tmp_path, config)
    assert result.exit_code == 0, result.output
    assert fake_openai.requests[-1]["json"]["messages"] == [{"role": "user", "content": "HELLO [hello] HELLO!!"}]


def test_a_filter_defined_in_a_second_config_file_works_in_the_first(tmp_path, fake_openai, monkeypatch):
    """-c main.yaml -c sub/extra.yaml: every file's filters are registered first, each path read
    against its own file's folder."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(tmp_path / "sub" / "shout.py", "def shout(value):\n    return str(value).upper() + '!'\n")
    extra = write(tmp_path / "sub" / "extra.yaml", "nunjucksFilters:\n  shout: shout.py:shout\n")
    main = write(tmp_path / "main.yaml", "prompts: ['{{ body | shout }}']\n"
                                         f"providers: [{_openai()}]\ntests: [{{vars: {{body: hi}}}}]\n")
    result = runner.invoke(app, ["eval", "-c", str(main), "-c", str(extra), "--no-progress-bar", "--no-cache"])
    assert result.exit_code == 0, result.output
    assert fake_openai.requests[-1]["json"]["messages"] == [{"role": "user", "content": "HI!"}]
