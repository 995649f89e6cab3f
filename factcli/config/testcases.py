"""A test and its assertions, validated: vars (and var files), options, thresholds, assert-sets, each
assertion type checked against the registry, and defaultTest merged into every test."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from factcli import sources
from factcli.config import keys
from factcli.config.context import Ctx, check_keys, check_method_keys, expect, number, record, unit_range
from factcli.config.judge_calibration import read_calibration
from factcli.errors import ConfigError, did_you_mean
from factcli.scoring import registry
from factcli.types import EMPTY_DICT, EMPTY_LIST, Assertion, TestCase

TEST_KEYS = keys.names("test")
# promptfoo test keys factcli does not run: ignoring them would run the test against other columns
TEST_UNSUPPORTED = {
    "provider": "a test's own provider is not supported; give the providers at the top level",
    "providers": "choosing columns per test is not supported; use a separate config",
    "prompts": "choosing prompts per test is not supported; use a separate config",
}


# promptfoo refuses a test with none of these ("Test case must contain one of ..."): its other keys are
# typos or misplaced vars, and running it would send an empty prompt to every provider
RUNNABLE_TEST_KEYS = ("vars", "assert", "options", "metadata", "provider", "providerOutput", "threshold")


ASSERT_KEYS = keys.names("assert")


OPTION_KEYS = keys.names("test.options")
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


def test_maker(default: TestCase, cli_vars: dict | None = None, placeholder: bool = False) -> "TestMaker":
    return TestMaker(default, cli_vars, placeholder)


class TestMaker:
    """make(t, ctx, where, from_config): the suite's test `t`, parsed and merged with defaultTest (and
    --var) by the merge compiled once for the suite (Merge); parse_test hands the merge the parts of
    the test it read, so that no test is made twice."""

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(self, default: TestCase, cli_vars: dict | None = None, placeholder: bool = False):
        self.merge, self.placeholder = Merge(default, cli_vars), placeholder
        self.only_assertions = self.merge.only_assertions

    def __call__(self, t: Any, ctx: Ctx, where: str, from_config: bool) -> TestCase:
        return parse_test(t, ctx, where, from_config=from_config, placeholder=self.placeholder, make=self.merge)

    def plain_row(self, t: dict, ctx: Ctx, where: str) -> TestCase:
        """self(t, ctx, where, False) for the mapping of a CSV row whose header's every column is a var
        (config/testsets.CsvHeader.var_names), made for this call alone: {vars: string cells by string
        names, assert: [], options: {}, description}. Of parse_test's steps only reading the vars
        applies to such a mapping (its shape was settled by its header, once); the mapping itself is
        the test's raw."""
        return self.merge(t["description"], _resolve_vars(t["vars"], ctx, where), EMPTY_LIST, None, EMPTY_DICT,
                          EMPTY_DICT, None, t, (ctx.file, where), False, EMPTY_DICT, frozenset())


def parse_test(t: Any, ctx: Ctx, where: str, is_default: bool = False, from_config: bool = False,
               placeholder: bool = False, make: Callable = TestCase) -> TestCase:
    """`from_config`: the test is written in the config itself (not a test file), so its var values that
    hold templates are rendered per row (contract §3); defaultTest is always from the config.
    `placeholder`: the one empty test a config without tests runs its prompts with. `make`: what is
    given the test's parts, TestCase's fields in order (a Merge: the test made merged). Each step
    looks at its key only when the test has it: most tests are a few vars."""
    if not isinstance(t, dict):
        raise ConfigError(f"expected a test mapping, got {type(t).__name__}", ctx.file, where)
    if not t.keys() <= TEST_KEYS:
        check_keys(t, TEST_KEYS, ctx.file, where, TEST_UNSUPPORTED)
    if not (is_default or placeholder or _runnable(t)):
        has = ", ".join(map(str, t)) or "nothing"
        raise ConfigError(f"a test needs one of {', '.join(RUNNABLE_TEST_KEYS)} (as in promptfoo); this one has "
                          f"{has}" + (" (vars go under `vars:`)" if any(k != "description" for k in t) else ""),
                          ctx.file, where)
    vars_ = t.get("vars") or {}
    vars_file = False
    if not isinstance(vars_, dict):
        # `vars:` given as a file, a list of files or a glob (promptfoo-features §5.4)
        vars_file = isinstance(vars_, str) or (isinstance(vars_, list) and all(isinstance(x, str) for x in vars_))
        if vars_file:
            vars_ = sources.load_vars_files(vars_, ctx.base, ctx.file, where + ".vars")
        if not isinstance(vars_, dict):
            raise ConfigError("expected a mapping of variables", ctx.file, where + ".vars")
    resolved = _resolve_vars(vars_, ctx, where)
    options = t.get("options")
    params: dict = {}
    if options:
        options, params = _options(options, ctx, where + ".options")
    else:
        options = {}  # (a test's own: merging may write to it)
    asserts = t.get("assert")
    parsed = []
    if asserts:
        expect(isinstance(asserts, list), "expected a list of assertions", ctx.file, where + ".assert")
        parsed = [parse_assertion(a, ctx, f"{where}.assert[{i}]") for i, a in enumerate(asserts)]
    threshold = t.get("threshold")
    if threshold is not None:
        threshold = number(threshold, ctx.file, where + ".threshold")
    # factcli's own: a test whose failure fails the run's gates whatever the means (run/recording/gates.py)
    expect(isinstance(t.get("critical", False), bool), "expected true or false", ctx.file, where + ".critical")
    expect(not (is_default and "critical" in t), "critical is a test's own key: set it on the tests that must "
           "pass", ctx.file, where + ".critical")
    metadata = t.get("metadata")
    if not metadata:
        metadata = {}
    elif not isinstance(metadata, dict):
        raise ConfigError("expected a mapping", ctx.file, where + ".metadata")
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
    # (positional, in the order of TestCase's fields: made once per test of a large suite)
    return make(None if desc is None else str(desc), resolved, parsed, threshold, options, dict(metadata),
                t.get("providerOutput"), raw, (ctx.file, where), False, params,
                template_names(vars_, resolved) if written else frozenset())


def _options(options: Any, ctx: Ctx, where: str) -> tuple[dict, dict]:
    """A test's `options` checked (a copy, its transforms' paths made absolute), and the request
    parameters among them."""
    from factcli.config.providers import request_params

    expect(isinstance(options, dict), "expected a mapping", ctx.file, where)
    params = request_params(options, OPTION_KEYS, OPTION_UNSUPPORTED, ctx, where)
    options = dict(options)
    for key in ("transform", "postprocess", "transformVars"):
        if key in options:
            from factcli.scripting.transforms import check_transform

            options[key] = check_transform(options[key], ctx.file, f"{where}.{key}", ctx.base)
    for key in ("prefix", "suffix"):
        if key in options and not isinstance(options[key], str):
            raise ConfigError("expected a string", ctx.file, f"{where}.{key}")
    if "storeOutputAs" in options and not (isinstance(options["storeOutputAs"], str) and options["storeOutputAs"]):
        raise ConfigError("expected the name of a var (a string) that later tests read the output as",
                          ctx.file, f"{where}.storeOutputAs")
    return options, params


def _resolve_vars(vars_: dict, ctx: Ctx, where: str) -> dict:
    """A test's vars with each `file://` value loaded (_resolve_var), names as strings; `vars_` itself
    when that changes nothing (vars are never written to)."""
    for k, v in vars_.items():  # most values: strings to keep as they are
        if type(v) is not str or type(k) is not str or v.startswith("file://"):
            break
    else:
        return vars_
    resolved = {}
    same = True
    for k, v in vars_.items():
        if type(v) is str and not v.startswith("file://"):
            resolved[str(k)] = v
            same = same and type(k) is str
            continue
        value = resolved[str(k)] = _resolve_var(v, ctx, f"{where}.vars.{k}")
        same = same and value is v and type(k) is str
    return vars_ if same else resolved


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


_ASSERT_KEYS_BUT_REF = frozenset(ASSERT_KEYS - {"$ref"})


def parse_assertion(a: Any, ctx: Ctx, where: str, in_set: bool = False) -> Assertion:
    """Each step looks at its key only when the assertion has it: most are a type and a value."""
    if not isinstance(a, dict):
        raise ConfigError(f"expected an assertion mapping, got {type(a).__name__}", ctx.file, where)
    ref = a.get("$ref")
    if "$ref" in a:
        prefix = "#/assertionTemplates/"
        expect(isinstance(ref, str) and ref.startswith(prefix),
                f"$ref must look like '{prefix}NAME'", ctx.file, where + ".$ref")
        name = ref[len(prefix):]
        if name not in ctx.templates:
            known = ", ".join(repr(t) for t in list(ctx.templates)[:8]) or "none"
            hint = did_you_mean(name, ctx.templates) or f" (it names {known})"
            raise ConfigError(f"unknown assertion template '{name}' in assertionTemplates{hint}", ctx.file,
                              where + ".$ref")
        merged = {**ctx.templates[name], **{k: v for k, v in a.items() if k != "$ref"}}  # (a mapping: loader.py)
        via = f" (with its $ref, assertionTemplates.{name})"  # what is wrong may be the template's
        try:
            return _parse_assertion(merged, ctx, where, in_set, via)
        except ConfigError as exc:
            raise ConfigError(exc.detail + via, exc.file, exc.path) from None
    return _parse_assertion(a, ctx, where, in_set)


def _parse_assertion(a: dict, ctx: Ctx, where: str, in_set: bool, via: str = "") -> Assertion:
    """`via`: where the assertion came from when it is a template's, for a problem recorded, not raised."""
    if not a.keys() <= _ASSERT_KEYS_BUT_REF:
        check_keys(a, _ASSERT_KEYS_BUT_REF, ctx.file, where)
    typ = a.get("type")
    if not (isinstance(typ, str) and typ):
        raise ConfigError("an assertion needs a 'type'", ctx.file, where + ".type")
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
    if base in registry.UNSUPPORTED:
        raise ConfigError(f"assertion type '{typ}' is not supported: {registry.UNSUPPORTED[base]}", ctx.file,
                          where + ".type")
    kind = registry.lookup(typ)
    if kind is None:
        problem = ConfigError(f"unknown assertion type '{typ}'{did_you_mean(base, registry.known_types())}{via}",
                              ctx.file, where + ".type")
        if not record(problem):
            raise problem
        return Assertion(type=typ, value=a.get("value"), raw=a)  # never scored: the run stops before any call
    if "assert" in a:
        raise ConfigError("only assert-set takes an 'assert' list", ctx.file, where + ".assert")
    metric = a.get("metric")
    if not (metric is None or isinstance(metric, str)):
        raise ConfigError("expected a string", ctx.file, where + ".metric")
    config = a.get("config") or {}
    calibration = None
    if config:
        expect(isinstance(config, dict), "expected a mapping", ctx.file, where + ".config")
        if kind.settings is not None:
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
    if registry.TYPES[base].code:
        from factcli.assertions.scripts import check_script_value

        value = check_script_value(typ, value, ctx.base, ctx.file, where + ".value")
    elif sources.is_file_ref(value):
        value = _assertion_value_file(value, typ, ctx, where + ".value")
    threshold, weight = _opt_num(a, "threshold", ctx, where), _opt_num(a, "weight", ctx, where, 1.0)
    if threshold is not None and registry.TYPES[base].unit_score:
        unit_range(threshold, ctx.file, where + ".threshold", f"a threshold on {base}'s score")
    rubric, transform, context_transform = a.get("rubricPrompt"), a.get("transform"), a.get("contextTransform")
    if rubric is not None:
        from factcli.scoring.grading import load_rubric_prompt

        rubric = load_rubric_prompt(rubric, ctx.base, ctx.file, where + ".rubricPrompt")
    if transform is not None or context_transform is not None:
        from factcli.scripting.transforms import check_transform

        transform = check_transform(transform, ctx.file, where + ".transform", ctx.base)
        context_transform = check_transform(context_transform, ctx.file, where + ".contextTransform", ctx.base)
    # (positional, in the order of Assertion's fields: made once per assertion of a large suite)
    return Assertion(typ, value, threshold, weight, metric, a.get("provider"), rubric, transform, context_transform,
                     config, None, a, calibration)


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
        return sources.read_text(path, ctx.file, where, limit=sources.VALUE_LIMIT).strip()
    raise ConfigError(f"unsupported file type for an assertion value: {path.name} (use .txt, .json or .yaml)",
                      ctx.file, where)


def _opt_num(a: dict, key: str, ctx: Ctx, where: str, default=None):
    if a.get(key) is None:
        return default
    return number(a[key], ctx.file, f"{where}.{key}")


class Merge:
    """promptfoo-semantics §1, defaultTest merged into a test: assert appended, vars/options/metadata
    shallow, threshold falls back; --var over every test's vars. Made once for a suite's defaultTest;
    called with a test's parts (TestCase's fields in order) it gives the merged test, reusing the
    test's dicts where the merge would copy them unchanged (a large suite holds one set per test)."""

    def __init__(self, default: TestCase, cli_vars: dict | None = None):
        self.default, self.cli_vars = default, cli_vars or None
        # the common case, a test without assertions: defaultTest's list, one list of raws shared by every such test
        self.shared_raws = [a.raw for a in default.assertions]
        self.scoring_function = default.raw.get("assertScoringFunction")
        # defaultTest adds only assertions (no vars, options, metadata, threshold, providerOutput,
        # scoring function; no --var)
        self.only_assertions = not (
            cli_vars or default.vars or default.options or default.metadata or default.request_params
            or default.template_vars or default.threshold is not None or default.provider_output is not None
            or self.scoring_function)

    def test(self, test: TestCase) -> TestCase:
        """`test` merged; `test` is a freshly parsed test that the merged one replaces: its dicts are
        reused where the merge would copy them unchanged."""
        return self(test.description, test.vars, test.assertions, test.threshold, test.options, test.metadata,
                    test.provider_output, test.raw, test.source, test.grader_from_default, test.request_params,
                    test.template_vars)

    def __call__(self, description, vars_, assertions, threshold, options, metadata, provider_output, raw, source,
                 grader_from_default, request_params, template_vars) -> TestCase:
        default, cli_vars = self.default, self.cli_vars
        test_options = options
        if default.options:
            options = {**default.options, **options} if options else default.options
        elif not options:
            options = EMPTY_DICT
        no_defaults = options and options.get("disableDefaultAsserts")
        shared = not assertions and not no_defaults
        if shared:
            asserts = default.assertions
        else:
            asserts = list(assertions)
            if not no_defaults:
                asserts = list(default.assertions) + asserts
        test_vars = vars_
        if default.vars or cli_vars:
            vars_ = {**default.vars, **vars_, **(cli_vars or {})}
        raw["vars"] = vars_
        if asserts:
            raw["assert"] = self.shared_raws if shared else [a.raw for a in asserts]
        if options:
            raw["options"] = options
        if default.metadata:
            metadata = {**default.metadata, **metadata} if metadata else default.metadata
        elif not metadata:
            metadata = EMPTY_DICT
        if metadata:
            raw["metadata"] = metadata
        if threshold is None:
            threshold = default.threshold
        if threshold is not None:
            raw["threshold"] = threshold
        if self.scoring_function and not raw.get("assertScoringFunction"):
            raw["assertScoringFunction"] = self.scoring_function
        if default.template_vars or cli_vars:  # a name's value comes from the last of default, test, --var
            template_vars = (default.template_vars - test_vars.keys()) | template_vars
            if cli_vars:
                template_vars = (template_vars - cli_vars.keys()) | template_names(cli_vars, cli_vars)
        if default.request_params:
            request_params = ({**default.request_params, **request_params} if request_params
                              else default.request_params)
        elif not request_params:
            request_params = EMPTY_DICT
        # (positional, in the order of TestCase's fields: made once per test of a large suite)
        return TestCase(description, vars_, asserts, threshold, options, metadata,
                        default.provider_output if provider_output is None else provider_output, raw, source,
                        bool(default.options) and "provider" in default.options and "provider" not in test_options,
                        request_params, template_vars)
