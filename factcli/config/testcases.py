"""A test and its assertions, validated: vars (and var files), options, thresholds, assert-sets, each
assertion type checked against the registry, and defaultTest merged into every test."""

from __future__ import annotations

from typing import Any

from factcli import sources
from factcli.config.context import Ctx, check_keys, check_method_keys, expect, number, record
from factcli.config.judge_calibration import read_calibration
from factcli.errors import ConfigError, did_you_mean
from factcli.types import EMPTY_DICT, Assertion, TestCase

TEST_KEYS = {"description", "vars", "assert", "options", "threshold", "metadata", "providerOutput",
             "assertScoringFunction"}
# promptfoo test keys factcli does not run: ignoring them would run the test against other columns
TEST_UNSUPPORTED = {
    "provider": "a test's own provider is not supported; give the providers at the top level",
    "providers": "choosing columns per test is not supported; use a separate config",
    "prompts": "choosing prompts per test is not supported; use a separate config",
}


# promptfoo refuses a test with none of these ("Test case must contain one of ..."): its other keys are
# typos or misplaced vars, and running it would send an empty prompt to every provider
RUNNABLE_TEST_KEYS = ("vars", "assert", "options", "metadata", "provider", "providerOutput", "threshold")


ASSERT_KEYS = {"type", "value", "threshold", "weight", "provider", "rubricPrompt", "metric",
               "transform", "contextTransform", "config", "assert", "$ref"}


OPTION_KEYS = {"provider", "rubricPrompt", "factuality", "prefix", "suffix", "transform",
               "postprocess", "disableDefaultAsserts", "disableVarExpansion", "runSerially",
               "storeOutputAs", "transformVars", "disableConversationVar"}
# promptfoo test options factcli does not run (any other key of `options` is a request parameter)
OPTION_UNSUPPORTED = {
    "repeat": "a test's own repeat is not supported; use --repeat or evaluateOptions.repeat",
}


def _runnable(t: dict) -> bool:
    """promptfoo's test: one of its properties set to a value JavaScript finds truthy (`vars: {}` is)."""
    threshold = t.get("threshold")
    if isinstance(threshold, (int, float)) and not isinstance(threshold, bool):
        return True
    for k in _RUNNABLE_BUT_THRESHOLD:  # a loop, not any(): this runs once per test of a large suite
        if t.get(k) not in (None, "", 0, False):
            return True
    return False


_RUNNABLE_BUT_THRESHOLD = tuple(k for k in RUNNABLE_TEST_KEYS if k != "threshold")


# the keys of a test that is only vars: a CSV row without special columns, most JSONL lines
_PLAIN_TEST_KEYS = frozenset(("description", "vars", "assert", "options"))


def _plain_test(t: dict, ctx: Ctx, where: str, from_config: bool) -> TestCase | None:
    """parse_test's TestCase for a test of string vars and assertions (no option, vars that are not
    `file://` references), made without the general path's steps, each of which would leave it as it
    is; None for any other test (tests/test_load_fast_paths.py)."""
    if not t.keys() <= _PLAIN_TEST_KEYS or t.get("options"):
        return None
    vars_ = t.get("vars")
    if type(vars_) is not dict or not vars_:  # (a var mapping that is not empty makes the test runnable)
        return None
    for k, v in vars_.items():
        if type(v) is not str or type(k) is not str or v.startswith("file://"):
            return None
    asserts = t.get("assert")
    if not asserts:
        parsed = []
    elif type(asserts) is list:  # (the general path's next check: every step before it passes)
        parsed = [parse_assertion(a, ctx, f"{where}.assert[{i}]") for i, a in enumerate(asserts)]
    else:
        return None
    desc = t.get("description")
    return TestCase(None if desc is None else str(desc), vars_, parsed, None, {}, {}, None, dict(t), (ctx.file, where),
                    False, {}, template_names(vars_, vars_) if from_config else frozenset())


def test_maker(default: TestCase, cli_vars: dict | None = None, placeholder: bool = False) -> "TestMaker":
    return TestMaker(default, cli_vars, placeholder)


class TestMaker:
    """make(t, ctx, where, from_config) -> merge_default(parse_test(t, ctx, where, from_config=from_config,
    placeholder=placeholder), default, cli_vars), for every test of a suite. When defaultTest adds only
    assertions (no vars, options, metadata, threshold, providerOutput, scoring function; no --var), a
    test of string vars is made merged at once (`_plain_merged`), and a CSV row of vars alone from
    its mapping as it is (`plain_row`; tests/test_load_fast_paths.py)."""

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(self, default: TestCase, cli_vars: dict | None = None, placeholder: bool = False):
        self.default, self.cli_vars, self.placeholder = default, cli_vars, placeholder
        self.only_assertions = not (
            cli_vars or default.vars or default.options or default.metadata or default.request_params
            or default.template_vars or default.threshold is not None or default.provider_output is not None
            or default.raw.get("assertScoringFunction"))

    def __call__(self, t: Any, ctx: Ctx, where: str, from_config: bool) -> TestCase:
        if self.only_assertions and type(t) is dict:
            test = _plain_merged(t, ctx, where, from_config, self.default.assertions)
            if test is not None:
                return test
        return merge_default(parse_test(t, ctx, where, from_config=from_config, placeholder=self.placeholder),
                             self.default, self.cli_vars)

    def plain_row(self, t: dict, ctx: Ctx, where: str) -> TestCase:
        """self(t, ctx, where, False) for a test file's mapping of a CSV row without special columns, as
        config/testsets makes it afresh for this call alone ({vars: string cells by string names,
        assert: [], options: {}, description}), when defaultTest adds only assertions: the mapping is
        the test's raw, none of its parts looked at again but its values for a `file://`."""
        vars_ = t["vars"]
        if not vars_:
            return self(t, ctx, where, False)
        for v in vars_.values():
            if v.startswith("file://"):  # a file var: loaded
                return self(t, ctx, where, False)
        asserts = self.default.assertions
        if asserts:
            t["assert"] = _shared_raws(asserts)
        return TestCase(t["description"], vars_, asserts, None, EMPTY_DICT, EMPTY_DICT, None, t, (ctx.file, where),
                        False, EMPTY_DICT, frozenset())


def _plain_merged(t: dict, ctx: Ctx, where: str, from_config: bool, default_asserts: list) -> TestCase | None:
    """merge_default(_plain_test(t, ...), default) for a defaultTest that adds only the assertions
    `default_asserts`, without the test made first and copied by the merge; None where _plain_test
    gives None."""
    if not t.keys() <= _PLAIN_TEST_KEYS or t.get("options"):
        return None
    vars_ = t.get("vars")
    if type(vars_) is not dict or not vars_:
        return None
    for k, v in vars_.items():
        if type(v) is not str or type(k) is not str or v.startswith("file://"):
            return None
    asserts = t.get("assert")
    raw = dict(t)
    if not asserts:  # (merge_default's shared case: defaultTest's list, its raws one list too)
        merged = default_asserts
        if merged:
            raw["assert"] = _shared_raws(merged)
    elif type(asserts) is list:
        merged = list(default_asserts) + [parse_assertion(a, ctx, f"{where}.assert[{i}]") for i, a in enumerate(asserts)]
        raw["assert"] = [a.raw for a in merged]
    else:
        return None
    desc = t.get("description")
    return TestCase(None if desc is None else str(desc), vars_, merged, None, EMPTY_DICT, EMPTY_DICT, None, raw,
                    (ctx.file, where), False, EMPTY_DICT, template_names(vars_, vars_) if from_config else frozenset())


def parse_test(t: Any, ctx: Ctx, where: str, is_default: bool = False, from_config: bool = False,
               placeholder: bool = False) -> TestCase:
    """`from_config`: the test is written in the config itself (not a test file), so its var values that
    hold templates are rendered per row (contract §3); defaultTest is always from the config.
    `placeholder`: the one empty test a config without tests runs its prompts with."""
    if type(t) is dict and not is_default:  # (is_default: written = True, whatever `from_config` says)
        test = _plain_test(t, ctx, where, from_config)
        if test is not None:
            return test
    expect(isinstance(t, dict), f"expected a test mapping, got {type(t).__name__}", ctx.file, where)
    check_keys(t, TEST_KEYS, ctx.file, where, TEST_UNSUPPORTED)
    if not (is_default or placeholder or _runnable(t)):
        has = ", ".join(map(str, t)) or "nothing"
        raise ConfigError(f"a test needs one of {', '.join(RUNNABLE_TEST_KEYS)} (as in promptfoo); this one has "
                          f"{has}" + (" (vars go under `vars:`)" if any(k != "description" for k in t) else ""),
                          ctx.file, where)
    vars_ = t.get("vars") or {}
    # `vars:` given as a file, a list of files or a glob (promptfoo-features §5.4)
    vars_file = isinstance(vars_, str) or (isinstance(vars_, list) and all(isinstance(x, str) for x in vars_))
    if vars_file:
        vars_ = sources.load_vars_files(vars_, ctx.base, ctx.file, where + ".vars")
    expect(isinstance(vars_, dict), "expected a mapping of variables", ctx.file, where + ".vars")
    resolved = {}
    same = True
    for k, v in vars_.items():
        if type(v) is str and not v.startswith("file://"):  # most values: nothing to resolve
            resolved[str(k)] = v
            same = same and type(k) is str
            continue
        value = resolved[str(k)] = _resolve_var(v, ctx, f"{where}.vars.{k}")
        same = same and value is v and type(k) is str
    if same:  # nothing to resolve: share the mapping as written (vars are never written to)
        resolved = vars_
    options = t.get("options") or {}
    expect(isinstance(options, dict), "expected a mapping", ctx.file, where + ".options")
    params = {}
    if options:  # (the imports too: this runs once per test of a large suite)
        from factcli.config.providers import request_params

        params = request_params(options, OPTION_KEYS, OPTION_UNSUPPORTED, ctx, where + ".options")
    options = dict(options)
    for key in ("transform", "postprocess", "transformVars"):
        if key in options:
            from factcli.scripting.transforms import check_transform

            options[key] = check_transform(options[key], ctx.file, f"{where}.options.{key}", ctx.base)
    for key in ("prefix", "suffix"):
        if key in options and not isinstance(options[key], str):
            raise ConfigError("expected a string", ctx.file, f"{where}.options.{key}")
    if "storeOutputAs" in options and not (isinstance(options["storeOutputAs"], str) and options["storeOutputAs"]):
        raise ConfigError("expected the name of a var (a string) that later tests read the output as",
                          ctx.file, f"{where}.options.storeOutputAs")
    asserts = t.get("assert") or []
    expect(isinstance(asserts, list), "expected a list of assertions", ctx.file, where + ".assert")
    parsed = [parse_assertion(a, ctx, f"{where}.assert[{i}]") for i, a in enumerate(asserts)]
    threshold = t.get("threshold")
    if threshold is not None:
        threshold = number(threshold, ctx.file, where + ".threshold")
    metadata = t.get("metadata") or {}
    expect(isinstance(metadata, dict), "expected a mapping", ctx.file, where + ".metadata")
    desc = t.get("description")
    if "rubricPrompt" in options:
        from factcli.scoring.grading import load_rubric_prompt

        options["rubricPrompt"] = load_rubric_prompt(options["rubricPrompt"], ctx.base, ctx.file,
                                                     where + ".options.rubricPrompt")
    raw = dict(t)
    if raw.get("assertScoringFunction") is not None:
        from factcli.assertions.scripts import check_scoring_function

        raw["assertScoringFunction"] = check_scoring_function(raw["assertScoringFunction"], ctx.base, ctx.file,
                                                              where + ".assertScoringFunction")
    written = (from_config or is_default) and not vars_file
    return TestCase(
        description=None if desc is None else str(desc), vars=resolved, assertions=parsed,
        threshold=threshold, options=options, metadata=dict(metadata),  # (options: already a copy)
        provider_output=t.get("providerOutput"), raw=raw, source=(ctx.file, where), request_params=params,
        template_vars=template_names(vars_, resolved) if written else frozenset(),
    )


def template_names(written: dict, resolved: dict) -> frozenset:
    """The vars whose value, as written (not read from a file), is a string holding a template."""
    from factcli.templating import has_template

    return frozenset(str(k) for k, v in written.items()
                     if isinstance(v, str) and resolved.get(str(k)) is v and has_template(v))


def _check_script(ref: sources.ScriptRef, ctx: Ctx, where: str) -> None:
    """A TypeScript script var can run (the others are checked when they run, as before)."""
    path, _ = sources.ref_path(ref.target, ctx.base)
    if path.suffix.lower() in sources.TS_SUFFIXES:
        from factcli.scripting.node import check_typescript

        check_typescript(path, ctx.file, where)


def _resolve_var(v: Any, ctx: Ctx, where: str) -> Any:
    """A `file://` value loaded (a glob: one row per file); in a list of strings each `file://` item is
    loaded (a glob's files take its place), and the list still gives one row per item."""
    if sources.is_file_ref(v):
        value = sources.load_var_file(v, ctx.base, ctx.file, where)
        if isinstance(value, sources.ScriptRef):
            _check_script(value, ctx, where)
        return value
    if isinstance(v, list) and any(sources.is_file_ref(x) for x in v):
        if not all(isinstance(x, str) for x in v):  # promptfoo loads only top-level strings and array items
            return v
        rows = sources.Rows()
        for i, x in enumerate(v):
            value = sources.load_var_file(x, ctx.base, ctx.file, f"{where}[{i}]") if sources.is_file_ref(x) else x
            if isinstance(value, sources.ScriptRef):
                _check_script(value, ctx, f"{where}[{i}]")
            if isinstance(value, sources.Rows):
                rows.extend(value)
            else:
                rows.append(value)
        return rows
    return v


# the keys of an assertion that is a type and a value (and a metric) and nothing else
_PLAIN_ASSERT_KEYS = frozenset(("type", "value", "metric"))
_NOT_PLAIN_TYPES = frozenset(("assert-set", "javascript", "python"))


def _plain_assertion(a: dict) -> Assertion | None:
    """parse_assertion's Assertion for `{type, value[, metric]}` of a known type that reads its value as
    written (not a script, not a `file://` value), made without the general path's steps, each of which
    would leave it as it is; None for any other assertion (tests/test_load_fast_paths.py)."""
    from factcli.scoring import registry as core

    if not a.keys() <= _PLAIN_ASSERT_KEYS:
        return None
    typ, value, metric = a.get("type"), a.get("value"), a.get("metric")
    if type(typ) is not str or value is None or not (metric is None or isinstance(metric, str)):
        return None
    if isinstance(value, str) and value.startswith("file://"):
        return None
    base = typ[4:] if typ.startswith("not-") else typ
    if base in _NOT_PLAIN_TYPES or base in core.UNSUPPORTED or core.lookup(typ) is None:
        return None
    # (positional, in the order of Assertion's fields: made once per assertion of a large suite)
    return Assertion(typ, value, None, 1.0, metric, None, None, None, None, {}, None, a, None)


def parse_assertion(a: Any, ctx: Ctx, where: str, in_set: bool = False) -> Assertion:
    from factcli.scoring import registry as core

    if type(a) is dict:  # (in an assert-set too: a plain assertion is no set)
        plain = _plain_assertion(a)
        if plain is not None:
            return plain
    expect(isinstance(a, dict), f"expected an assertion mapping, got {type(a).__name__}", ctx.file, where)
    ref = a.get("$ref")
    if "$ref" in a:
        prefix = "#/assertionTemplates/"
        expect(isinstance(ref, str) and ref.startswith(prefix),
                f"$ref must look like '{prefix}NAME'", ctx.file, where + ".$ref")
        name = ref[len(prefix):]
        if name not in ctx.templates:
            raise ConfigError(f"unknown assertion template '{name}'{did_you_mean(name, ctx.templates)}",
                              ctx.file, where + ".$ref")
        a = {**ctx.templates[name], **{k: v for k, v in a.items() if k != "$ref"}}  # (a mapping: loader.py)
    check_keys(a, ASSERT_KEYS - {"$ref"}, ctx.file, where)
    typ = a.get("type")
    expect(isinstance(typ, str) and typ, "an assertion needs a 'type'" + (
        f" (its $ref, assertionTemplates.{ref[len('#/assertionTemplates/'):]}, gives none)" if ref else ""),
        ctx.file, where + ".type")
    base = typ[4:] if typ.startswith("not-") else typ
    if base == "assert-set":
        expect(not in_set, "assert-set cannot be nested inside another assert-set", ctx.file, where + ".type")
        expect(not typ.startswith("not-"), "assert-set has no not- form", ctx.file, where + ".type")
        children = a.get("assert")
        expect(isinstance(children, list) and children, "an assert-set needs an 'assert' list",
                ctx.file, where + ".assert")
        kids = [parse_assertion(c, ctx, f"{where}.assert[{i}]", in_set=True) for i, c in enumerate(children)]
        return Assertion(
            type="assert-set", threshold=_opt_num(a, "threshold", ctx, where),
            weight=_opt_num(a, "weight", ctx, where, 1.0), metric=a.get("metric"),
            config=a.get("config") or {}, children=kids, raw=a,
        )
    if base in core.UNSUPPORTED:
        raise ConfigError(f"assertion type '{typ}' is not supported: {core.UNSUPPORTED[base]}", ctx.file, where + ".type")
    kind = core.lookup(typ)
    if kind is None:
        problem = ConfigError(f"unknown assertion type '{typ}'{did_you_mean(base, core.known_types())}",
                              ctx.file, where + ".type")
        if not record(problem):
            raise problem
        return Assertion(type=typ, value=a.get("value"), raw=a)  # never scored: the run stops before any call
    expect("assert" not in a, "only assert-set takes an 'assert' list", ctx.file, where + ".assert")
    metric = a.get("metric")
    expect(metric is None or isinstance(metric, str), "expected a string", ctx.file, where + ".metric")
    config = a.get("config") or {}
    expect(isinstance(config, dict), "expected a mapping", ctx.file, where + ".config")
    if kind.settings is not None and config:
        check_method_keys(kind.settings, base, config, ctx.file, where + ".config")
    if kind.model_graded:
        config = _step_prompts_from_urls(config, ctx, where + ".config")
    calibration = read_calibration(config, ctx, where + ".config")
    if calibration is not None and not kind.model_graded:
        raise ConfigError(f"config.calibration corrects a judge's pass rate, and '{typ}' has no judge",
                          ctx.file, where + ".config.calibration")
    value = a.get("value")
    if kind.needs_value and value is None and not (typ.endswith("factual-correctness") and a.get("contextTransform")):
        raise ConfigError(f"'{typ}' needs a 'value'", ctx.file, where + ".value")  # (or a reference from its transform)
    from factcli.scripting.transforms import check_transform

    if base in ("javascript", "python"):
        from factcli.assertions.scripts import check_script_value

        value = check_script_value(typ, value, ctx.base, ctx.file, where + ".value")
    elif sources.is_file_ref(value):
        value = _assertion_value_file(value, typ, ctx, where + ".value")
    from factcli.scoring.grading import load_rubric_prompt

    return Assertion(
        type=typ, value=value, threshold=_opt_num(a, "threshold", ctx, where),
        weight=_opt_num(a, "weight", ctx, where, 1.0), metric=metric, provider=a.get("provider"),
        rubric_prompt=load_rubric_prompt(a.get("rubricPrompt"), ctx.base, ctx.file, where + ".rubricPrompt"),
        transform=check_transform(a.get("transform"), ctx.file, where + ".transform", ctx.base),
        context_transform=check_transform(a.get("contextTransform"), ctx.file, where + ".contextTransform", ctx.base),
        config=config, raw=a, calibration=calibration,
    )


def _step_prompts_from_urls(config: dict, ctx: Ctx, where: str) -> dict:
    """A step prompt (`config.<step>Prompt`) given as an http(s) URL is downloaded while the config loads
    (through the run's download store, so once), and read as chat messages when the URL names a .json or
    .yaml file, else as the prompt's text: a method runs with a reference implementation's own prompt file."""
    urls = {k: v for k, v in config.items() if k.endswith("Prompt") and isinstance(v, str)
            and v.startswith(("https://", "http://"))}
    if not urls:
        return config
    from factcli.config import remote

    out = dict(config)
    for key, url in urls.items():
        data = remote.download(url, ctx.file, f"{where}.{key}")
        text = data.decode("utf-8", errors="replace")
        suffix = remote.url_suffix(url)
        out[key] = sources.parse_structured(text, suffix, url) if suffix in (".json", ".yaml", ".yml") else text
    return out


def _assertion_value_file(ref: str, typ: str, ctx: Ctx, where: str):
    """promptfoo's processFileReference: .txt trimmed, .json/.yaml parsed; scripts come later."""
    path, _ = sources.ref_path(ref, ctx.base)
    suffix = path.suffix.lower()
    if suffix in (".json", ".yaml", ".yml"):
        return sources.load_structured(path, ctx.file, where)
    if suffix == ".txt":
        return sources.read_text(path, ctx.file, where).strip()
    raise ConfigError(f"unsupported file type for an assertion value: {path.name} (use .txt, .json or .yaml)",
                      ctx.file, where)


def _opt_num(a: dict, key: str, ctx: Ctx, where: str, default=None):
    if a.get(key) is None:
        return default
    return number(a[key], ctx.file, f"{where}.{key}")


# (defaultTest's assertions, their raws): the last list asked for, held, so that it is told by
# identity and its id never reused; read and replaced as one tuple, so that two loads at once (two
# threads) each get the raws of their own list, at worst made again.
_raws_cache: tuple[list, list] = ([], [])


def _shared_raws(asserts: list) -> list:
    """[a.raw for a in asserts], one list for consecutive tests sharing defaultTest's assertions."""
    global _raws_cache
    cached = _raws_cache
    if cached[0] is not asserts:
        cached = _raws_cache = (asserts, [a.raw for a in asserts])
    return cached[1]


def merge_default(test: TestCase, default: TestCase, cli_vars: dict | None = None) -> TestCase:
    """promptfoo-semantics §1: assert appended, vars/options/metadata shallow, threshold falls back.

    `test` is a freshly parsed test that the merged one replaces: its dicts are reused where the
    merge would copy them unchanged (a large suite holds one set per test, not two)."""
    options = ({**default.options, **test.options} if default.options and test.options
               else test.options or default.options or EMPTY_DICT)
    shared = not test.assertions and not options.get("disableDefaultAsserts")
    if shared:  # the common case: only defaultTest's assertions, one list shared by every such test
        asserts = default.assertions
    else:
        asserts = list(test.assertions)
        if not options.get("disableDefaultAsserts"):
            asserts = list(default.assertions) + asserts
    vars_ = {**default.vars, **test.vars, **(cli_vars or {})} if default.vars or cli_vars else test.vars
    raw = test.raw
    raw["vars"] = vars_
    if asserts:
        raw["assert"] = _shared_raws(asserts) if shared else [a.raw for a in asserts]
    if options:
        raw["options"] = options
    meta = ({**default.metadata, **test.metadata} if default.metadata and test.metadata
            else test.metadata or default.metadata or EMPTY_DICT)
    if meta:
        raw["metadata"] = meta
    threshold = test.threshold if test.threshold is not None else default.threshold
    if threshold is not None:
        raw["threshold"] = threshold
    if not raw.get("assertScoringFunction") and default.raw.get("assertScoringFunction"):
        raw["assertScoringFunction"] = default.raw["assertScoringFunction"]
    templates = test.template_vars
    if default.template_vars or cli_vars:  # a name's value comes from the last of default, test, --var
        templates = (default.template_vars - test.vars.keys()) | test.template_vars
        if cli_vars:
            templates = (templates - cli_vars.keys()) | template_names(cli_vars, cli_vars)
    # (positional, in the order of TestCase's fields: made once per test of a large suite)
    return TestCase(
        test.description, vars_, asserts, threshold, options, meta,
        test.provider_output if test.provider_output is not None else default.provider_output,  # provider_output
        raw, test.source,
        "provider" not in test.options and "provider" in default.options,  # grader_from_default
        ({**default.request_params, **test.request_params}  # request_params
         if default.request_params and test.request_params
         else test.request_params or default.request_params or EMPTY_DICT),
        templates,  # template_vars
    )
