"""Load promptfoo-compatible configs into a Suite: keys checked, files resolved, defaultTest merged.

Every problem is a ConfigError naming the file and the key path; nothing is called before
the whole config has loaded.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from factcli import sources, templating
from factcli.config.context import Ctx, as_list, check_keys, expect, number
from factcli.errors import ConfigError, did_you_mean
from factcli.types import EMPTY_DICT, Assertion, Prompt, ProviderSpec, TestCase

TOP_KEYS = {
    "description", "prompts", "providers", "targets", "tests", "defaultTest", "scenarios",
    "evaluateOptions", "derivedMetrics", "assertionTemplates", "env", "outputPath", "metadata",
    "tags", "sharing",
}
UNSUPPORTED_TOP = {
    "redteam": "red teaming is not part of factcli",
    "extensions": "promptfoo extension hooks are not supported",
    "nunjucksFilters": "custom nunjucks filters are not supported",
    "tracing": "OpenTelemetry tracing is not supported",
    "writeLatestResults": "factcli always stores runs; use --no-write to skip",
    "commandLineOptions": "pass options on the command line instead",
}
TEST_KEYS = {"description", "vars", "assert", "options", "threshold", "metadata", "providerOutput",
             "assertScoringFunction"}
ASSERT_KEYS = {"type", "value", "threshold", "weight", "provider", "rubricPrompt", "metric",
               "transform", "contextTransform", "config", "assert", "$ref"}
PROVIDER_KEYS = {"id", "label", "config", "prompts", "delay", "transform", "env"}
EVAL_OPTION_KEYS = {"maxConcurrency", "repeat", "delay", "showProgressBar", "cache", "timeoutMs",
                    "maxEvalTimeMs", "generateSuggestions"}
OPTION_KEYS = {"provider", "rubricPrompt", "factuality", "prefix", "suffix", "transform",
               "postprocess", "disableDefaultAsserts", "disableVarExpansion", "runSerially",
               "storeOutputAs"}


@dataclass
class Suite:
    description: str | None
    prompts: list[Prompt]
    providers: list[ProviderSpec]
    tests: list[TestCase]
    derived_metrics: list[dict] = field(default_factory=list)
    evaluate_options: dict = field(default_factory=dict)
    default_test: dict = field(default_factory=dict)
    output_path: list[str] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)
    raw: dict = field(default_factory=dict)  # merged config as written, before env expansion
    base_dir: Path = field(default_factory=Path.cwd)
    config_files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


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
            if key not in merged:
                merged[key] = copy.deepcopy(value)
            elif isinstance(merged[key], list) or isinstance(value, list):
                merged[key] = as_list(merged[key]) + as_list(value)
            elif isinstance(merged[key], dict) and isinstance(value, dict):
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = copy.deepcopy(value)
    return merged


def load_suite(paths: list[str | Path], cli_vars: dict | None = None) -> Suite:
    files = [Path(p) for p in paths]
    configs = [(p, read_config_file(p)) for p in files]
    for p, cfg in configs:
        check_keys(cfg, TOP_KEYS, str(p), "", UNSUPPORTED_TOP)
    if len(configs) == 1:
        return build_suite(configs[0][1], configs[0][0], cli_vars)
    # Validate each file on its own first, so errors name the right file and key path; then
    # merge with every relative file:// reference made absolute against its own file.
    for p, cfg in configs:
        build_suite(cfg, p, cli_vars, partial=True)
    merged = merge_configs([(p, absolutize(cfg, p.parent)) for p, cfg in configs])
    suite = build_suite(merged, files[0], cli_vars)
    suite.raw = merge_configs(configs)
    suite.config_files = [str(p) for p in files]
    return suite


def absolutize(value: Any, base: Path) -> Any:
    if isinstance(value, str) and value.startswith("file://"):
        rest = value[len("file://"):]
        return value if os.path.isabs(os.path.expanduser(rest)) else f"file://{base.resolve() / rest}"
    if isinstance(value, list):
        return [absolutize(v, base) for v in value]
    if isinstance(value, dict):
        return {k: absolutize(v, base) for k, v in value.items()}
    return value


def build_suite(cfg: dict, path: Path | None, cli_vars: dict | None = None, partial: bool = False) -> Suite:
    """Build a Suite from one config mapping. `partial`: one of several -c files, which may lack
    prompts or providers of its own."""
    file = str(path) if path else "<config>"
    base = path.parent if path else Path.cwd()
    raw = cfg  # never mutated below: env expansion and parsing build new objects
    warnings: list[str] = []
    check_keys(cfg, TOP_KEYS, file, "", UNSUPPORTED_TOP)

    env_block = cfg.get("env") or {}
    expect(isinstance(env_block, dict), "expected a mapping of environment variables", file, "env")
    for k, v in env_block.items():
        if v is not None:
            os.environ[str(k)] = templating.js_string(v)  # config env wins, as in promptfoo
    cfg = sources.expand_env({k: v for k, v in cfg.items() if k != "env"})

    if "sharing" in cfg:
        warnings.append(f"{file}: sharing: ignored (factcli never uploads results)")

    templates = cfg.get("assertionTemplates") or {}
    expect(isinstance(templates, dict), "expected a mapping of name -> assertion", file, "assertionTemplates")
    for name, template in templates.items():
        expect(isinstance(template, dict), f"expected an assertion mapping, got {type(template).__name__}", file,
                f"assertionTemplates.{name}")
        # only the keys: a template may leave `value` to the assertions that use it
        check_keys(template, ASSERT_KEYS - {"$ref"}, file, f"assertionTemplates.{name}")
    ctx = Ctx(file, base, templates)

    provider_key = "targets" if "targets" in cfg and "providers" not in cfg else "providers"
    prompts = [] if partial and cfg.get("prompts") is None else parse_prompts(cfg.get("prompts"), ctx)
    providers = ([] if partial and cfg.get(provider_key) is None
                 else parse_providers(cfg.get(provider_key), ctx, provider_key))

    default_test = cfg.get("defaultTest") or {}
    if sources.is_file_ref(default_test):
        p, _ = sources.ref_path(default_test, base)
        default_test = sources.load_structured(p)
    expect(isinstance(default_test, dict), "expected a mapping", file, "defaultTest")
    default_parsed = parse_test(default_test, ctx, "defaultTest", is_default=True)

    tests_raw: list[tuple[dict, Ctx, str]] = []
    from factcli.config.testsets import load_tests

    tests_raw.extend(load_tests(cfg.get("tests"), ctx, "tests"))
    tests_raw.extend(_scenario_tests(cfg.get("scenarios"), ctx))
    if not tests_raw:
        tests_raw = [({}, ctx, "tests")]  # promptfoo runs each prompt once with no vars
    tests = [
        merge_default(parse_test(t, c, where), default_parsed, cli_vars)
        for t, c, where in tests_raw
    ]

    derived = cfg.get("derivedMetrics") or []
    expect(isinstance(derived, list), "expected a list of {name, value}", file, "derivedMetrics")
    for i, d in enumerate(derived):
        where = f"derivedMetrics[{i}]"
        expect(isinstance(d, dict), "expected {name, value}", file, where)
        check_keys(d, {"name", "value"}, file, where)
        expect(isinstance(d.get("name"), str) and d["name"], "a derived metric needs a name", file, where + ".name")
        expect(isinstance(d.get("value"), str) and d["value"], "a derived metric needs a value expression",
                file, where + ".value")
        _check_expression(d["value"], file, where + ".value")

    options = cfg.get("evaluateOptions") or {}
    expect(isinstance(options, dict), "expected a mapping", file, "evaluateOptions")
    check_keys(options, EVAL_OPTION_KEYS, file, "evaluateOptions")
    _check_evaluate_options(options, file)

    output_path = as_list(cfg.get("outputPath"))
    metadata = cfg.get("metadata") or {}
    return Suite(
        description=cfg.get("description"),
        prompts=prompts,
        providers=providers,
        tests=tests,
        derived_metrics=list(derived),
        evaluate_options=dict(options),
        default_test=default_test,
        output_path=[str(base / p) if not os.path.isabs(p) else p for p in output_path],
        metadata=metadata if isinstance(metadata, dict) else {},
        raw=raw,
        base_dir=base,
        config_files=[file],
        warnings=warnings,
    )


def _check_expression(expr: str, file: str, where: str) -> None:
    """A derived metric that cannot parse is refused now, not after every row has run."""
    from factcli.scoring.metrics import compile_expression

    try:
        compile_expression(expr)
    except (ValueError, RecursionError, MemoryError) as exc:  # DerivedMetricError is a ValueError
        message = str(exc) if type(exc).__name__ == "DerivedMetricError" else f"invalid expression: {exc}"
        raise ConfigError(message.splitlines()[0] if message else "invalid expression", file, where) from None


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


# ---------------------------------------------------------------- prompts


def _prompt_id(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def _chat_messages(raw: str) -> list[dict] | None:
    text = raw.strip()
    if not text.startswith("["):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, list) and data and all(isinstance(m, dict) and "role" in m for m in data):
        return data
    return None


def make_prompt(raw: str, label: str | None) -> Prompt:
    msgs = _chat_messages(raw)
    return Prompt(raw=raw, label=label if label is not None else raw, messages=msgs, id=_prompt_id(raw))


def parse_prompts(value: Any, ctx: Ctx) -> list[Prompt]:
    if value is None:
        raise ConfigError("no prompts: add a 'prompts:' list (e.g. - 'Answer: {{question}}')", ctx.file, "prompts")
    items: list[tuple[Any, str | None, str]] = []
    if isinstance(value, dict):  # {file://path: label}
        items = [(k, v, f"prompts.{k}") for k, v in value.items()]
    else:
        items = [(p, None, f"prompts[{i}]") for i, p in enumerate(as_list(value))]
    out: list[Prompt] = []
    for item, label, where in items:
        if isinstance(item, dict):
            check_keys(item, {"id", "raw", "label", "config"}, ctx.file, where)
            label = item.get("label")
            if "raw" in item:
                expect(isinstance(item["raw"], str), "expected a string", ctx.file, where + ".raw")
                out.append(make_prompt(item["raw"], label))
                continue
            item = item.get("id")
            expect(isinstance(item, str), "a prompt needs 'raw' text or an 'id' file reference", ctx.file, where)
        if isinstance(item, list):  # inline chat messages
            out.append(make_prompt(json.dumps(item, ensure_ascii=False), label))
            continue
        expect(isinstance(item, str), f"expected a prompt string, got {type(item).__name__}", ctx.file, where)
        if sources.is_file_ref(item):
            out.extend(_prompts_from_file(item, label, ctx, where))
        else:
            _check_template(item, ctx.file, where)
            out.append(make_prompt(item, label))
    expect(bool(out), "no prompts found", ctx.file, "prompts")
    return out


def _check_template(text: str, file: str, where: str) -> None:
    try:
        templating.check(text)
    except templating.TemplateError as exc:
        raise ConfigError(str(exc), file, where) from None


def _prompts_from_file(ref: str, label: str | None, ctx: Ctx, where: str) -> list[Prompt]:
    path, func = sources.ref_path(ref, ctx.base)
    if func or path.suffix.lower() in (".py", ".js", ".cjs", ".mjs", ".ts"):
        raise ConfigError(f"prompt functions ('{ref}') are not supported yet; use a text, JSON or YAML prompt file",
                          ctx.file, where)
    out: list[Prompt] = []
    for p in sources.expand_glob(path, ctx.file, where):
        shown = os.path.relpath(p, ctx.base) if not Path(ref[7:]).is_absolute() else str(p)
        suffix = p.suffix.lower()
        text = sources.read_text(p, ctx.file, where)
        if suffix == ".json":
            try:
                raw = json.dumps(json.loads(text), ensure_ascii=False)
            except ValueError:
                raw = text
            out.append(make_prompt(raw, label or f"{shown}: {raw}"))
        elif suffix == ".jsonl":
            lines = [ln for ln in text.splitlines() if ln]
            for ln in lines:
                lab = (f"{label}: {ln}" if label else f"{shown}: {ln}") if len(lines) > 1 else (label or shown)
                out.append(make_prompt(ln, lab))
        elif suffix in (".yaml", ".yml"):
            data = sources.parse_yaml(text, str(p))
            raw = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
            out.append(make_prompt(raw, label or f"{shown}: {raw[:80]}"))
        else:  # .txt, .md, .j2 and anything else: `---` lines separate prompts
            chunks, buf = [], []
            for line in text.splitlines():
                if line.strip() == "---":
                    chunks.append("\n".join(buf).strip())
                    buf = []
                else:
                    buf.append(line)
            chunks.append("\n".join(buf).strip())
            for raw in (c for c in chunks if c):
                _check_template(raw, str(p), "")
                out.append(make_prompt(raw, f"{label}: {shown}: {raw}" if label else f"{shown}: {raw}"))
    return out


# ---------------------------------------------------------------- providers


def parse_providers(value: Any, ctx: Ctx, key: str = "providers") -> list[ProviderSpec]:
    if value is None:
        raise ConfigError("no providers: add a 'providers:' list (e.g. - echo, or - openai:gpt-5-mini)",
                          ctx.file, key)
    if sources.is_file_ref(value):
        path, _ = sources.ref_path(value, ctx.base)
        value = sources.load_structured(path)
        ctx = Ctx(str(path), path.parent, ctx.templates)
    from factcli.providers.registry import validate_provider_id

    out = []
    for i, item in enumerate(as_list(value)):
        where = f"{key}[{i}]"
        if sources.is_file_ref(item) and item.endswith((".yaml", ".yml", ".json")):
            out.extend(parse_providers(item, ctx, where))
            continue
        spec = parse_provider(item, ctx, where)
        validate_provider_id(spec, ctx.file, where, ctx.base)
        out.append(spec)
    expect(bool(out), "no providers", ctx.file, key)
    return out


def parse_provider(item: Any, ctx: Ctx, where: str) -> ProviderSpec:
    if isinstance(item, str):
        expect(bool(item.strip()), "empty provider id", ctx.file, where)
        return ProviderSpec(id=item.strip())
    expect(isinstance(item, dict), f"expected a provider id or mapping, got {type(item).__name__}", ctx.file, where)
    if "id" not in item and len(item) == 1:  # legacy form {provider-id: {config...}}
        (pid, opts), = item.items()
        opts = opts or {}
        expect(isinstance(opts, dict), "expected provider options", ctx.file, f"{where}.{pid}")
        item = {"id": pid, **opts}
    check_keys(item, PROVIDER_KEYS, ctx.file, where)
    pid = item.get("id")
    expect(isinstance(pid, str) and pid.strip(), "a provider needs an 'id'", ctx.file, where + ".id")
    config = item.get("config") or {}
    expect(isinstance(config, dict), "expected a mapping", ctx.file, where + ".config")
    prompts = item.get("prompts")
    if prompts is not None:
        prompts = [str(p) for p in as_list(prompts)]
    delay = item.get("delay") or 0
    from factcli.scripting.transforms import check_transform

    return ProviderSpec(
        id=pid.strip(), label=item.get("label"), config=config, prompts=prompts,
        delay_ms=number(delay, ctx.file, where + ".delay"),
        transform=check_transform(item.get("transform"), ctx.file, where + ".transform", ctx.base),
    )


# ---------------------------------------------------------------- tests and assertions


def parse_test(t: Any, ctx: Ctx, where: str, is_default: bool = False) -> TestCase:
    expect(isinstance(t, dict), f"expected a test mapping, got {type(t).__name__}", ctx.file, where)
    check_keys(t, TEST_KEYS, ctx.file, where)
    vars_ = t.get("vars") or {}
    if sources.is_file_ref(vars_):
        p, _ = sources.ref_path(vars_, ctx.base)
        vars_ = sources.load_structured(p)
    expect(isinstance(vars_, dict), "expected a mapping of variables", ctx.file, where + ".vars")
    resolved = {}
    same = True
    for k, v in vars_.items():
        value = resolved[str(k)] = _resolve_var(v, ctx, f"{where}.vars.{k}")
        same = same and value is v and type(k) is str
    if same:  # nothing to resolve: share the mapping as written (vars are never written to)
        resolved = vars_
    options = t.get("options") or {}
    expect(isinstance(options, dict), "expected a mapping", ctx.file, where + ".options")
    check_keys(options, OPTION_KEYS, ctx.file, where + ".options")
    from factcli.scripting.transforms import check_transform

    options = dict(options)
    for key in ("transform", "postprocess"):
        if key in options:
            options[key] = check_transform(options[key], ctx.file, f"{where}.options.{key}", ctx.base)
    for key in ("prefix", "suffix"):
        if key in options and not isinstance(options[key], str):
            raise ConfigError("expected a string", ctx.file, f"{where}.options.{key}")
    asserts = t.get("assert") or []
    expect(isinstance(asserts, list), "expected a list of assertions", ctx.file, where + ".assert")
    parsed = [parse_assertion(a, ctx, f"{where}.assert[{i}]") for i, a in enumerate(asserts)]
    threshold = t.get("threshold")
    if threshold is not None:
        threshold = number(threshold, ctx.file, where + ".threshold")
    metadata = t.get("metadata") or {}
    expect(isinstance(metadata, dict), "expected a mapping", ctx.file, where + ".metadata")
    desc = t.get("description")
    from factcli.scoring.grading import load_rubric_prompt

    if "rubricPrompt" in options:
        options["rubricPrompt"] = load_rubric_prompt(options["rubricPrompt"], ctx.base, ctx.file,
                                                     where + ".options.rubricPrompt")
    raw = dict(t)
    if raw.get("assertScoringFunction") is not None:
        from factcli.assertions.scripts import check_scoring_function

        raw["assertScoringFunction"] = check_scoring_function(raw["assertScoringFunction"], ctx.base, ctx.file,
                                                              where + ".assertScoringFunction")
    return TestCase(
        description=None if desc is None else str(desc), vars=resolved, assertions=parsed,
        threshold=threshold, options=dict(options), metadata=dict(metadata),
        provider_output=t.get("providerOutput"), raw=raw, source=(ctx.file, where),
    )


def _resolve_var(v: Any, ctx: Ctx, where: str) -> Any:
    if sources.is_file_ref(v):
        return sources.load_var_file(v, ctx.base, ctx.file, where)
    if isinstance(v, list):
        return [_resolve_var(x, ctx, where) if sources.is_file_ref(x) else x for x in v]
    return v


def parse_assertion(a: Any, ctx: Ctx, where: str, in_set: bool = False) -> Assertion:
    from factcli.scoring import registry as core

    expect(isinstance(a, dict), f"expected an assertion mapping, got {type(a).__name__}", ctx.file, where)
    if "$ref" in a:
        ref = a["$ref"]
        prefix = "#/assertionTemplates/"
        expect(isinstance(ref, str) and ref.startswith(prefix),
                f"$ref must look like '{prefix}NAME'", ctx.file, where + ".$ref")
        name = ref[len(prefix):]
        if name not in ctx.templates:
            raise ConfigError(f"unknown assertion template '{name}'{did_you_mean(name, ctx.templates)}",
                              ctx.file, where + ".$ref")
        a = {**ctx.templates[name], **{k: v for k, v in a.items() if k != "$ref"}}
    check_keys(a, ASSERT_KEYS - {"$ref"}, ctx.file, where)
    typ = a.get("type")
    expect(isinstance(typ, str) and typ, "an assertion needs a 'type'", ctx.file, where + ".type")
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
        raise ConfigError(f"unknown assertion type '{typ}'{did_you_mean(base, core.known_types())}",
                          ctx.file, where + ".type")
    expect("assert" not in a, "only assert-set takes an 'assert' list", ctx.file, where + ".assert")
    metric = a.get("metric")
    expect(metric is None or isinstance(metric, str), "expected a string", ctx.file, where + ".metric")
    config = a.get("config") or {}
    expect(isinstance(config, dict), "expected a mapping", ctx.file, where + ".config")
    value = a.get("value")
    if kind.needs_value and value is None:
        raise ConfigError(f"'{typ}' needs a 'value'", ctx.file, where + ".value")
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
        config=config, raw=a,
    )


def _assertion_value_file(ref: str, typ: str, ctx: Ctx, where: str):
    """promptfoo's processFileReference: .txt trimmed, .json/.yaml parsed; scripts come later."""
    path, _ = sources.ref_path(ref, ctx.base)
    suffix = path.suffix.lower()
    if suffix in (".json", ".yaml", ".yml"):
        return sources.load_structured(path, ctx.file)
    if suffix == ".txt":
        return sources.read_text(path, ctx.file, where).strip()
    raise ConfigError(f"unsupported file type for an assertion value: {path.name} (use .txt, .json or .yaml)",
                      ctx.file, where)


def _opt_num(a: dict, key: str, ctx: Ctx, where: str, default=None):
    if a.get(key) is None:
        return default
    return number(a[key], ctx.file, f"{where}.{key}")


_raws_cache: tuple[list, list] = ([], [])


def _shared_raws(asserts: list) -> list:
    """[a.raw for a in asserts], one list for consecutive tests sharing defaultTest's assertions."""
    global _raws_cache
    if _raws_cache[0] is not asserts:
        _raws_cache = (asserts, [a.raw for a in asserts])
    return _raws_cache[1]


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
    return TestCase(
        description=test.description, vars=vars_, assertions=asserts, threshold=threshold,
        options=options, metadata=meta,
        provider_output=test.provider_output if test.provider_output is not None else default.provider_output,
        raw=raw, source=test.source,
        grader_from_default="provider" not in test.options and "provider" in default.options,
    )


def _scenario_tests(value: Any, ctx: Ctx) -> list[tuple[dict, Ctx, str]]:
    """promptfoo scenarios: every `config` entry combined with every test of the scenario."""
    from factcli.config.testsets import load_tests

    out = []
    for i, sc in enumerate(as_list(value)):
        where = f"scenarios[{i}]"
        if sources.is_file_ref(sc):
            p, _ = sources.ref_path(sc, ctx.base)
            sc = sources.load_structured(p)
        expect(isinstance(sc, dict), "expected a scenario mapping", ctx.file, where)
        check_keys(sc, {"description", "config", "tests"}, ctx.file, where)
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
                    if sources.is_file_ref(v):
                        v = sources.load_structured(sources.ref_path(v, pc.base)[0], pc.file)
                    expect(isinstance(v, dict), "expected a mapping of variables", pc.file, pw + ".vars")
                    a = part.get("assert") or []
                    expect(isinstance(a, list), "expected a list of assertions", pc.file, pw + ".assert")
                    o = part.get("options") or {}
                    expect(isinstance(o, dict), "expected a mapping", pc.file, pw + ".options")
                    vars_.update(v)
                    asserts += a
                    options.update(o)
                merged = {**base_cfg, **t, "vars": vars_, "assert": asserts, "options": options}
                merged = {k: v for k, v in merged.items() if v not in ({}, []) or k == "vars"}
                out.append((merged, c, w))
    return out
