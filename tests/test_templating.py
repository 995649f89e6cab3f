"""Templating rules of contract §3."""

import pytest

from factcli import templating


@pytest.mark.parametrize("template, variables, expected", [
    ("Hi <<name>>!", {"name": "Ada"}, "Hi Ada!"),
    ("Hi {{ name }}!", {"name": "Ada"}, "Hi Ada!"),
    ("<<user.name>> / {{ user.age }}", {"user": {"name": "Ada", "age": 36}}, "Ada / 36"),
    ("literal \\<<name>>", {"name": "Ada"}, "literal <<name>>"),
    ("{{ obj | dump }}", {"obj": {"a": [1, "é"]}}, '{"a":[1,"é"]}'),
    ("{{ obj | json }}", {"obj": [1, 2]}, "[1,2]"),
    ("{{ flag }} {{ n }} {{ f }} {{ items }}", {"flag": True, "n": 3, "f": 2.0, "items": ["a", "b"]}, "true 3 2 a,b"),
    ("{% for x in xs %}[{{x}}]{% endfor %}", {"xs": ["a", "b"]}, "[a][b]"),
    ("<<missing>>|{{ missing.attr }}|", {}, "<<missing>>||"),  # an undefined <<name>> stays as written
    ("what is a<<y>>b? {{y}}", {"y": 4}, "what is a4b? 4"),  # a defined one is the var (contract §3)
    ("what is a\\<<y>>b? {{y}}", {"y": 4}, "what is a<<y>>b? 4"),  # \<< writes it literally
    ("what is a<<y>>b? {{y}}", {}, "what is a<<y>>b? "),
    ("x <<y.z>> <<u.v>>", {"y": {"z": 1}}, "x 1 <<u.v>>"),
])
def test_render(template, variables, expected):
    assert templating.render(template, variables) == expected


def test_values_are_never_rendered_again():
    assert templating.render("<<a>> {{ b }}", {"a": "{{ b }}", "b": "<<a>>"}) == "{{ b }} <<a>>"


def test_undefined_names_are_reported():
    missing = []
    assert templating.render("<<x>> {{ y.z }} {{ ok }}", {"ok": 1}, missing) == "<<x>>  1"
    assert sorted(set(missing)) == ["<<x>>", "y"]  # <<x>> was left as written, y rendered empty


def test_env_reads_environment(monkeypatch):
    monkeypatch.setenv("FACTCLI_T_VAR", "here")
    assert templating.render("{{ env.FACTCLI_T_VAR }}", {}) == "here"


def test_syntax_error_and_sandbox():
    with pytest.raises(templating.TemplateError):
        templating.render("{{ oops ", {})
    with pytest.raises(templating.TemplateError):
        templating.render("{{ ''.__class__.__mro__[1].__subclasses__() }}", {})


@pytest.mark.parametrize("x, digits, expected", [(0.125, 2, "0.13"), (0.5, 0, "1"), (2 / 3, 3, "0.667"), (1.005, 2, "1.00")])
def test_to_fixed_matches_javascript(x, digits, expected):
    assert templating.to_fixed(x, digits) == expected


def test_pad_start_and_pad_end_pad_with_the_whole_fill_string_as_javascript_does():
    assert templating.render("{{ 'ab'.padStart(5, 'xy') }}|{{ 'ab'.padEnd(6, '123') }}|{{ 'abc'.padStart(2) }}"
                             "|{{ 'a'.padEnd(3, '') }}|{{ '7'.padStart(3, 0) }}", {}) == "xyxab|ab1231|abc|a|007"


@pytest.mark.parametrize("template", [
    "{{ 'a'.padStart(300000000) }}", "{{ 'a'.padEnd(300000000, 'xy') }}", "{{ 'a' | center(300000000) }}",
    "{{ 'a\nb' | indent(300000000) }}", "{{ x | replace('', y) }}", "{{ x.replaceAll('a', y) }}",
    "{{ [1] | batch(300000000, 'x') }}", "{{ 'a'.repeat(300000000) }}",
])
def test_a_template_function_adds_at_most_ten_million_characters(template):
    """A stored `{{ 'a'.padStart(300000000) }}` took 3.2 GB (issue 48): each function that makes text
    from a number is capped as `repeat` is, before it makes anything."""
    from factcli.templating import jsvalues

    with pytest.raises(templating.TemplateError) as info:
        templating.render(template, {"x": "a" * 5000, "y": "b" * 5000})
    assert ("10,000,000" in str(info.value) or "repeat" in str(info.value)) and "\n" not in str(info.value)
    assert jsvalues.MAX_TEXT == 10_000_000
    # just under the cap is made
    assert len(templating.render("{{ 'a'.padStart(10000001) }}", {})) == 10_000_001


def test_a_loop_renders_at_most_its_limit(monkeypatch):
    monkeypatch.setattr(templating, "OUTPUT_LIMIT", 1000)
    assert len(templating.render("{% for i in range(10) %}{{ y }}{% endfor %}", {"y": "b" * 100})) == 1000
    with pytest.raises(templating.TemplateError, match="renders more than 1,000 characters"):
        templating.render("{% for i in range(11) %}{{ y }}{% endfor %}", {"y": "b" * 100})
