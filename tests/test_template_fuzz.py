"""Random template texts never crash factcli: a template either renders, or fails with a one-line
TemplateError (at render time) or ConfigError (when the config loads), never with another exception."""

import pytest
from conftest import write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from factcli import templating
from factcli.config.loader import load_suite
from factcli.errors import ConfigError

TOKENS = [
    "{{", "}}", "{%", "%}", "{#", "#}", "<<", ">>", "\\<<", " ", "\n", "'", '"', "|", "(", ")", "[", "]", ",", ".",
    ":", "=", "==", "+", "-", "*", "/", "//", "%", "~", "and", "or", "not", "in", "is", "if", "else", "elif",
    "endif", "for", "endfor", "set", "endset", "raw", "endraw", "macro", "endmacro", "loop", "loop.index",
    "x", "obj", "arr", "s", "missing", "k", "v", "k, v", "true", "none", "0", "1.5", "-1", "dump", "dump(2)",
    "join", "length", "upper", "default('d')", "load", "int", "round", "sort", "groupby('a')", "batch(2)",
    "selectattr('a')", "dictsort", "list", "safe", "replace('a', 'b')", "truncate(3)", "range(3)", "env.HOME",
    "defined", "odd", "__class__", "toUpperCase()", "length", "split(',')",
]
VARS = {"x": 1, "obj": {"a": 1, "b": [1, "two"]}, "arr": [1, {"a": 2}, [3, 4]], "s": '{"a": 1}', "k": None}

templates = st.lists(st.sampled_from(TOKENS) | st.text(max_size=3), max_size=25).map("".join)
FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FAST
@given(templates)
def test_check_and_render_fail_only_with_template_errors(text):
    try:
        templating.check(text, name="prompt 'fuzz'")
        out = templating.render(text, VARS, [], name="prompt 'fuzz'")
    except templating.TemplateError as exc:
        message = str(exc)
        assert message.startswith(("template error", "template syntax error")), message
        assert "Traceback" not in message
    else:
        assert isinstance(out, str)


@pytest.fixture(scope="module")
def config_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@FAST
@given(templates)
def test_config_load_fails_only_with_config_errors(config_dir, text):
    import json

    cfg = write(config_dir / "promptfooconfig.yaml",
                "prompts: [" + json.dumps(text) + "]\nproviders: [echo]\ntests: [{vars: {x: 1}}]\n")
    try:
        suite = load_suite([cfg])
    except ConfigError as exc:
        assert "\n" not in str(exc).strip() or "template" in str(exc), str(exc)
        return
    for prompt in suite.prompts:  # what loaded renders, or is a row's TemplateError
        try:
            templating.render(prompt.raw, {"x": 1})
        except templating.TemplateError:
            pass
