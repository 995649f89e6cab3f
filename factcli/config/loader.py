"""Load promptfoo-compatible configs into a Suite: keys checked, files resolved, defaultTest merged.

Every problem is a ConfigError naming the file and the key path; nothing is called before
the whole config has loaded.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from factcli import sources, templating
from factcli.config import keys
from factcli.config.context import (
    Ctx,
    as_list,
    check_keys,
    expect,
    given,
    load_warnings_collected,
    problems_collected,
    record,
    settle,
    unknown_key_lines,
    unknown_keys_collected,
)
from factcli.config.prompts import make_prompt, parse_prompts
from factcli.config.providers import parse_providers
from factcli.config.testcases import ASSERT_KEYS, parse_test, test_maker
from factcli.errors import ConfigError
from factcli.types import Prompt, ProviderSpec, TestCase

TOP_KEYS = keys.names("top")
UNSUPPORTED_TOP = {
    "redteam": "red teaming is not part of factcli",
    "tracing": "OpenTelemetry tracing is not supported",
    "writeLatestResults": "factcli always stores runs; use --no-write to skip",
    "plugins": "red teaming is not part of factcli",  # promptfoo moves these two under redteam
    "strategies": "red teaming is not part of factcli",
}
EVAL_OPTION_KEYS = keys.names("evaluateOptions")
# promptfoo evaluateOptions that change what runs: ignoring them would run (and pay for) the wrong rows
EVAL_OPTION_UNSUPPORTED = {
    "filterRange": "use --filter-first-n, --filter-sample or --filter-pattern",
    "isRedteam": "red teaming is not part of factcli",
}


@dataclass
class Suite:
    """A loaded config: prompts, providers and tests (each test merged with defaultTest), the config's other
    settings, and what loading found (warnings, unknown keys, extension hooks)."""

    description: str | None
    prompts: list[Prompt]
    providers: list[ProviderSpec]
    tests: list[TestCase]  # or config/stream.StreamedTests: tests read again from CSV files, not held
    derived_metrics: list[dict] = field(default_factory=list)
    gates: list = field(default_factory=list)  # config/gates.Gate: the config's release gates
    evaluate_options: dict = field(default_factory=dict)
    default_test: dict = field(default_factory=dict)
    output_path: list[str] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)
    raw: dict = field(default_factory=dict)  # merged config as written, before env expansion
    base_dir: Path = field(default_factory=Path.cwd)
    config_files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # one line per key the config has that nothing reads (also in `warnings`); --strict refuses them
    unknown_keys: list[str] = field(default_factory=list)
    # problems found while loading that did not stop it (config/context.record), when the caller
    # reports them with its own checks' (the eval flow: run/planning/preflight); empty otherwise
    problems: list[str] = field(default_factory=list)
    problem_error: Any = None  # the ConfigError when `problems` holds just one (raised as itself)
    # id(test) -> why its transformVars failed, once the transforms have run (they run once per
    # test: --filter-failing needs the transformed vars before the run is prepared)
    transform_errors: dict | None = None
    # extension hooks (config/extensions.py, run by run/hooks.py) and, when there are any, the suite as a
    # beforeAll hook sees it
    extensions: list = field(default_factory=list)
    hook_source: object = None
    # N when --filter-first-n N stopped the reading of a tests file (config/lines.ReadLimit): `tests` are
    # the first tests the files hold, as many as the run keeps, not all of them
    tests_read_first: int | None = None
    # the config's nunjucksFilters: in force while it loads, plans and runs (templating.filters_used),
    # never in another suite's
    filters: templating.Filters | None = None


def default_config_path(cwd: Path | None = None) -> Path | None:
    cwd = cwd or Path.cwd()
    for name in ("promptfooconfig.yaml", "promptfooconfig.yml", "promptfooconfig.json"):
        if (cwd / name).is_file():
            return cwd / name
    return None


# ---------------------------------------------------------------- loading and merging


def read_config_file(path: Path) -> dict:
    name = str(path)
    if not sources.is_file(path):
        raise ConfigError("config file not found" + ("" if sources.exists(path.parent) else " (its folder does not exist)"),
                          name)
    data = sources.load_structured(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"the config must be a mapping of keys, got {type(data).__name__}", name)
    return data


def merge_configs(configs: list[tuple[Path, dict]]) -> dict:
    """Several -c files merge in order: lists concatenate, mappings merge, scalars: last wins."""
    merged: dict = {}
    for _, cfg in configs:
        for key, value in cfg.items():
            if key == "outputPath" and key in merged:  # promptfoo writes every file's outputPath
                merged[key] = as_list(merged[key]) + as_list(value)
            elif key not in merged:
                merged[key] = copy.deepcopy(value)
            elif isinstance(merged[key], list) or isinstance(value, list):
                merged[key] = as_list(merged[key]) + as_list(value)
            elif isinstance(merged[key], dict) and isinstance(value, dict):
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = copy.deepcopy(value)
    return merged


def with_providers(cfg: dict, ids: list[str] | None, first: bool = True) -> dict:
    """`-r/--providers ID…` (promptfoo's flag): these providers instead of the config's (`first`: the
    file that gets them when several are merged). A relative `file://` id is the current directory's,
    as every path given on the command line."""
    if not ids:
        return cfg
    cfg = {k: v for k, v in cfg.items() if k not in ("providers", "targets")}
    if first:
        cfg["providers"] = [f"file://{Path(i[7:]).resolve()}" if i.startswith("file://") and not os.path.isabs(i[7:])
                            else i for i in ids]
    return cfg


def load_suite(paths: list[str | Path], cli_vars: dict | None = None, providers: list[str] | None = None) -> Suite:
    with problems_collected() as found:
        suite = _load_suite(paths, cli_vars, providers)
    settle(found, suite)
    return suite


def _read_configs(paths: list[str | Path], providers: list[str] | None) -> list[tuple[Path, dict]]:
    return [(p, with_providers(read_config_file(p), providers, i == 0)) for i, p in enumerate(map(Path, paths))]


def raw_config(paths: list[str | Path], providers: list[str] | None = None) -> dict:
    """The config `load_suite(paths, …, providers)` would have as `Suite.raw`, read without loading it
    (nothing imported, no file it names read): what a run stores, and a resume compares with."""
    configs = _read_configs(paths, providers)
    return configs[0][1] if len(configs) == 1 else merge_configs(configs)


def _load_suite(paths: list[str | Path], cli_vars: dict | None, providers: list[str] | None) -> Suite:
    files = [Path(p) for p in paths]
    configs = _read_configs(files, providers)
    with unknown_keys_collected():  # only the errors here: build_suite reports the unknown keys
        for p, cfg in configs:
            check_keys(cfg, TOP_KEYS, str(p), "", UNSUPPORTED_TOP)
    if len(configs) == 1:
        return build_suite(configs[0][1], configs[0][0], cli_vars)
    # Every file's nunjucksFilters first, each resolved against its own folder: a prompt in one file
    # may use a filter another file defines.
    filters = _all_filters(configs)
    # Validate each file on its own first, so errors name the right file and key path; then
    # merge with every relative file:// reference made absolute against its own file.
    partials = [build_suite(cfg, p, cli_vars, partial=True, filters=filters) for p, cfg in configs]
    merged = merge_configs([(p, _keep_output_path(absolutize(cfg, p.parent), cfg)) for p, cfg in configs])
    suite = build_suite(merged, files[0], cli_vars, filters=filters)
    # the merged config's unknown keys would all name the first file: each file's own lines instead
    _set_unknown_keys(suite, [line for part in partials for line in part.unknown_keys])
    suite.raw = merge_configs(configs)
    suite.config_files = [str(p) for p in files]
    return suite


def _all_filters(configs: list[tuple[Path, dict]]) -> templating.Filters:
    from factcli.config.filters import parse_filters

    found: dict = {}
    for p, cfg in configs:
        if cfg.get("nunjucksFilters") is not None:
            found.update(parse_filters(cfg["nunjucksFilters"], Ctx(str(p), p.parent, {})))
    return templating.Filters(found)


def _keep_output_path(absolute: dict, cfg: dict) -> dict:
    """outputPath is the current directory's (promptfoo's rule), never made absolute against the config."""
    return {**absolute, "outputPath": cfg["outputPath"]} if "outputPath" in cfg else absolute


def absolutize(value: Any, base: Path) -> Any:
    if isinstance(value, str) and value.startswith("file://"):
        rest = value[len("file://"):]
        return value if os.path.isabs(os.path.expanduser(rest)) else f"file://{base.resolve() / rest}"
    if isinstance(value, list):
        return [absolutize(v, base) for v in value]
    if isinstance(value, dict):
        return {k: absolutize(v, base) for k, v in value.items()}
    return value


def build_suite(cfg: dict, path: Path | None, cli_vars: dict | None = None, partial: bool = False,
                filters: templating.Filters | None = None) -> Suite:
    """Build a Suite from one config mapping. `partial`: one of several -c files, which may lack
    prompts or providers of its own. Unknown keys become `suite.unknown_keys` (contract §4). Its
    `nunjucksFilters` (or `filters`, every -c file's) are in force while it loads, and after only
    where the suite is used (templating.filters_used)."""
    with problems_collected() as problems, templating.filters_used(filters) as use_filters:
        with unknown_keys_collected() as found, load_warnings_collected() as said:
            suite = _build_suite(cfg, path, cli_vars, partial, filters, use_filters)
        suite.warnings.extend(w for w in said if w not in suite.warnings)
        _set_unknown_keys(suite, unknown_key_lines(found))
    settle(problems, suite)
    return suite


def _set_unknown_keys(suite: Suite, lines: list[str]) -> None:
    """The unknown-key lines lead the suite's warnings: they are printed before any call."""
    old = set(suite.unknown_keys)
    suite.unknown_keys = list(dict.fromkeys(lines))
    suite.warnings = suite.unknown_keys + [w for w in suite.warnings if w not in old]


def _build_suite(cfg: dict, path: Path | None, cli_vars: dict | None, partial: bool,
                 filters: templating.Filters | None, use_filters: Callable) -> Suite:
    file = str(path) if path else "<config>"
    base = path.parent if path else Path.cwd()
    raw = cfg  # never mutated below: env expansion and parsing build new objects
    warnings: list[str] = []
    check_keys(cfg, TOP_KEYS, file, "", UNSUPPORTED_TOP)

    env_block = given(cfg.get("env"), {})
    expect(isinstance(env_block, dict), "expected a mapping of environment variables", file, "env")
    for k, v in env_block.items():
        if v is not None:
            os.environ[str(k)] = templating.js_string(v)  # config env wins, as in promptfoo
    cfg = sources.expand_env({k: v for k, v in cfg.items() if k != "env"})

    from factcli.config import cli_options

    cli_options.check(cfg.get(cli_options.KEY), file)  # applied by `factcli eval` (cli/eval_cmd.py)
    if "sharing" in cfg:
        warnings.append(f"{file}: sharing: ignored (factcli never uploads results)")

    templates = given(cfg.get("assertionTemplates"), {})
    expect(isinstance(templates, dict), "expected a mapping of name -> assertion", file, "assertionTemplates")
    for name, template in templates.items():
        expect(isinstance(template, dict), f"expected an assertion mapping, got {type(template).__name__}", file,
                f"assertionTemplates.{name}")
        # only the keys: a template may leave `value` to the assertions that use it
        check_keys(template, ASSERT_KEYS - {"$ref"}, file, f"assertionTemplates.{name}")
    ctx = Ctx(file, base, templates)
    if filters is None:  # (several -c files: every file's filters, parsed by load_suite, already in force)
        from factcli.config.filters import suite_filters

        filters = suite_filters(cfg.get("nunjucksFilters"), ctx)
        use_filters(filters)  # before prompts: their templates may use them

    provider_key = "targets" if "targets" in cfg and "providers" not in cfg else "providers"
    if partial and not _has_prompts(cfg):
        prompts = []
    elif not _has_prompts(cfg):
        prompts = [make_prompt(DEFAULT_PROMPT, None)]
        if not _tests_have_prompt_var(cfg.get("tests")):
            warnings.append(f"{file}: no 'prompts:': each test's 'prompt' var is sent ({DEFAULT_PROMPT}, as promptfoo "
                            "does), but no test has one: add 'prompts:' or a 'prompt' var")
    else:
        prompts = parse_prompts(cfg.get("prompts"), ctx)
    providers = ([] if partial and cfg.get(provider_key) is None
                 else parse_providers(cfg.get(provider_key), ctx, provider_key))

    default_test = given(cfg.get("defaultTest"), {})
    if sources.is_file_ref(default_test):
        p, _ = sources.ref_path(default_test, base)
        default_test = sources.load_structured(p)
    expect(isinstance(default_test, dict), "expected a mapping", file, "defaultTest")
    default_parsed = parse_test(default_test, ctx, "defaultTest", is_default=True)

    from factcli.config.lines import ReadLimit
    from factcli.config.testsets import load_tests

    # a beforeAll hook sees every test of the config, before the filters: its files are read whole
    limit = None if cfg.get("extensions") else ReadLimit.now()
    tests_raw = load_tests(cfg.get("tests"), ctx, "tests", limit)  # a CSV file's rows are made as they are parsed
    extensions, hooks_see = [], None
    if cfg.get("extensions") is not None:  # the extensions' code is imported only for a config with some
        from factcli.config.extensions import hook_source, parse_extensions

        extensions = parse_extensions(cfg.get("extensions"), ctx, warnings)
        hooks_see = hook_source(ctx, tests_raw, cfg, default_test, cli_vars, _scenario_tests) if extensions else None
    tests_raw.extend(_scenario_tests(cfg.get("scenarios"), ctx))
    placeholder = not tests_raw
    if placeholder:
        tests_raw = [({}, ctx, "tests")]  # promptfoo runs each prompt once with no vars

    make = test_maker(default_parsed, cli_vars, placeholder)

    def parse(entry) -> TestCase:
        t, c, where = entry
        try:
            return make(t, c, where, c is ctx)
        except ConfigError as exc:  # (a var file that is not there): the other tests are still checked
            if not record(exc):
                raise
            return TestCase(description=f"{where} (not loaded)", source=(c.file, where))  # never run

    from factcli.config import stream

    # a list, or tests read again from their CSV files as they are iterated (config/stream.py)
    # (a CSV file's rows are never the config's own tests: plain_row takes them as data)
    plain_row = None
    if make.only_assertions:
        def plain_row(t, c, where) -> TestCase:  # as parse: a row that cannot be read is one problem
            try:
                return make.plain_row(t, c, where)
            except ConfigError as exc:
                if not record(exc):
                    raise
                return TestCase(description=f"{where} (not loaded)", source=(c.file, where))  # never run
    tests = (stream.load(tests_raw, parse, plain_row) if not (extensions or placeholder)
             else [parse(e) for e in tests_raw])

    derived = given(cfg.get("derivedMetrics"), [])
    expect(isinstance(derived, list), "expected a list of {name, value}", file, "derivedMetrics")
    for i, d in enumerate(derived):
        where = f"derivedMetrics[{i}]"
        expect(isinstance(d, dict), "expected {name, value}", file, where)
        check_keys(d, keys.names("derivedMetric"), file, where)
        expect(isinstance(d.get("name"), str) and d["name"], "a derived metric needs a name", file, where + ".name")
        expect(isinstance(d.get("value"), str) and d["value"], "a derived metric needs a value expression",
                file, where + ".value")
        _check_expression(d["value"], file, where + ".value")

    gates = []
    if cfg.get("gates") is not None:  # (its module only for a config with gates)
        from factcli.config.gates import parse_gates

        gates = parse_gates(cfg.get("gates"), file)
    options = given(cfg.get("evaluateOptions"), {})
    expect(isinstance(options, dict), "expected a mapping", file, "evaluateOptions")
    check_keys(options, EVAL_OPTION_KEYS, file, "evaluateOptions", EVAL_OPTION_UNSUPPORTED)
    _check_evaluate_options(options, file)

    output_path = _output_paths(cfg.get("outputPath"), file)
    metadata = given(cfg.get("metadata"), {})
    expect(isinstance(metadata, dict), "expected a mapping", file, "metadata")
    return Suite(
        description=cfg.get("description"),
        prompts=prompts,
        providers=providers,
        tests=tests,
        derived_metrics=list(derived),
        gates=gates,
        evaluate_options=dict(options),
        default_test=default_test,
        output_path=output_path,
        metadata=metadata if isinstance(metadata, dict) else {},
        raw=raw,
        base_dir=base,
        config_files=[file],
        warnings=warnings,
        extensions=extensions,
        hook_source=hooks_see,
        tests_read_first=limit.n if limit is not None and limit.cut else None,
        filters=filters,
    )


def _output_paths(value: Any, file: str) -> list[str]:
    """outputPath as promptfoo 0.121.20 writes it: a path or a list of paths, each relative to the current
    directory (not to the config's folder), its folders made when it is written, the format from its
    extension; `-o` replaces them all (run/flow.py). `file://x.csv` names x.csv (promptfoo would make a
    folder named `file:`)."""
    out = []
    for i, p in enumerate(as_list(value)):
        where = "outputPath" if not isinstance(value, list) else f"outputPath[{i}]"
        expect(isinstance(p, str) and bool(p.strip()), f"expected the path of a results file, got {p!r}", file, where)
        if p.startswith(("https://docs.google.com/spreadsheets/", "http://", "https://")):
            raise ConfigError("writing results to a Google Sheet or a URL is not supported: write a .csv file "
                              "(e.g. outputPath: results.csv) and import it", file, where)
        out.append(p.removeprefix("file://"))
    return out


DEFAULT_PROMPT = "{{prompt}}"  # promptfoo's prompt for a config without `prompts:`


def _has_prompts(cfg: dict) -> bool:
    """promptfoo uses its default prompt when `prompts` is missing, null or an empty string (an empty list
    is "no prompts", an error)."""
    return cfg.get("prompts") not in (None, "")


def _tests_have_prompt_var(tests: Any) -> bool:
    """promptfoo's condition for not warning about the default prompt: no `tests:`, tests from a file, or
    a test written in the config with a `prompt` var."""
    if not tests or isinstance(tests, str):
        return True
    return isinstance(tests, list) and any(isinstance(t, dict) and isinstance(t.get("vars"), dict)
                                           and "prompt" in t["vars"] for t in tests)


def _check_expression(expr: str, file: str, where: str) -> None:
    """A derived metric that cannot parse is refused now, not after every row has run."""
    from factcli.scoring.metrics import JsDerived, compile_metric

    try:
        compiled = compile_metric(expr)
    except (ValueError, RecursionError, MemoryError) as exc:  # DerivedMetricError is a ValueError
        message = str(exc) if type(exc).__name__ == "DerivedMetricError" else f"invalid expression: {exc}"
        raise ConfigError((message.splitlines()[0] if message else "invalid expression") +
                          " (a mathjs expression such as 'correct / __count', or a JavaScript function body "
                          "such as 'return namedScores.correct / namedScores.__count')", file, where) from None
    if isinstance(compiled, JsDerived):
        _check_js_metric(expr, file, where)


def _check_js_metric(code: str, file: str, where: str) -> None:
    """A JavaScript derived metric needs Node and must compile: told now, not after every row has run."""
    from factcli.scripting.node import JSError, NodeWorkerError, get_worker, require_node

    try:
        require_node("JavaScript derived metrics", "a mathjs expression")
        get_worker().call_sync("derivedCheck", {"code": code}, timeout=30)
    except JSError as exc:
        raise ConfigError(f"JavaScript does not compile: {exc.name}: {exc.js_message}", file, where) from None
    except NodeWorkerError as exc:
        raise ConfigError(str(exc), file, where) from None


def _check_evaluate_options(options: dict, file: str) -> None:
    """The runner turns these into ints and floats; a wrong type is a config error, not a crash later."""
    for key in ("maxConcurrency", "repeat"):
        value = options.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ConfigError(f"expected a whole number of at least 1, got {value!r}", file, f"evaluateOptions.{key}")
    for key in ("delay", "timeoutMs", "maxEvalTimeMs"):
        value = options.get(key)
        if value is not None and not (isinstance(value, (int, float)) and not isinstance(value, bool)
                                      and 0 <= value < float("inf")):
            raise ConfigError(f"expected a number of milliseconds (0 or more), got {value!r}", file,
                              f"evaluateOptions.{key}")
    value = options.get("maxCost")
    if value is not None and not (isinstance(value, (int, float)) and not isinstance(value, bool)
                                  and 0 <= value < float("inf")):
        raise ConfigError(f"expected a budget in USD (0 or more), got {value!r}", file, "evaluateOptions.maxCost")
    value = options.get("breakerFailures")  # run/calling/breaker.py: 0 turns that rule off
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ConfigError(f"expected a whole number of calls (0 or more), got {value!r}", file,
                          "evaluateOptions.breakerFailures")
    value = options.get("breakerSeconds")
    if value is not None and not (isinstance(value, (int, float)) and not isinstance(value, bool)
                                  and 0 <= value < float("inf")):
        raise ConfigError(f"expected a number of seconds (0 or more), got {value!r}", file,
                          "evaluateOptions.breakerSeconds")


def _scenario_tests(value: Any, ctx: Ctx) -> list[tuple[dict, Ctx, str]]:
    """promptfoo scenarios: every `config` entry combined with every test of the scenario."""
    from factcli.config.testsets import load_tests

    out = []
    n = 0  # each config entry of each scenario is its own conversation, `__scenario_<n>__` (promptfoo)
    for i, sc in enumerate(as_list(value)):
        where = f"scenarios[{i}]"
        if sources.is_file_ref(sc):
            p, _ = sources.ref_path(sc, ctx.base)
            sc = sources.load_structured(p)
        expect(isinstance(sc, dict), "expected a scenario mapping", ctx.file, where)
        check_keys(sc, keys.names("scenario"), ctx.file, where)
        configs = sc.get("config") or [{}]
        expect(isinstance(configs, list), "expected a list", ctx.file, where + ".config")
        tests = load_tests(sc.get("tests"), ctx, where + ".tests")
        for j, base_cfg in enumerate(configs):
            expect(isinstance(base_cfg, dict), "expected a mapping", ctx.file, f"{where}.config[{j}]")
            for t, c, w in tests:
                expect(isinstance(t, dict), f"expected a test mapping, got {type(t).__name__}", c.file, w)
                vars_, asserts, options = {}, [], {}
                # checked here, since merging is the first thing to touch them
                for part, pc, pw in ((base_cfg, ctx, f"{where}.config[{j}]"), (t, c, w)):
                    v = part.get("vars") or {}
                    if isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v)):
                        v = sources.load_vars_files(v, pc.base, pc.file, pw + ".vars")
                    expect(isinstance(v, dict), "expected a mapping of variables", pc.file, pw + ".vars")
                    a = part.get("assert") or []
                    expect(isinstance(a, list), "expected a list of assertions", pc.file, pw + ".assert")
                    o = part.get("options") or {}
                    expect(isinstance(o, dict), "expected a mapping", pc.file, pw + ".options")
                    vars_.update(v)
                    asserts += a
                    options.update(o)
                merged = {**base_cfg, **t, "vars": vars_, "assert": asserts, "options": options}
                metadata = merged.get("metadata")
                if isinstance(metadata, dict) or metadata is None:
                    merged["metadata"] = {"conversationId": f"__scenario_{n}__", **(metadata or {})}
                merged = {k: v for k, v in merged.items() if v not in ({}, []) or k == "vars"}
                out.append((merged, c, w))
            n += 1
    return out
