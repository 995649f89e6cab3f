"""`extensions:`: promptfoo's extension hooks, checked when the config loads, and the suite as a
beforeAll hook sees it and gives it back.

An entry is `file://hooks.py:fn` or `file://hooks.js:fn` (`.cjs`, `.mjs`), or a file without a
function: `file://hooks.js` (the module, else its default export) and `file://hooks.py`
(`get_transform`). A function named exactly `beforeAll`, `beforeEach`, `afterEach` or `afterAll` runs
for that hook only, called as fn(context, {hookName}); any other runs for all four as
fn(hookName, context) (promptfoo-features part B §4.2). run/hooks.py calls them.

Every problem is a one-line ConfigError naming `extensions[i]` before any model call: an entry that is
not a `file://` reference, a missing or TypeScript file, a Python module that does not import or lacks
the function, a JavaScript module that does not load or export it, JavaScript without Node.

A beforeAll hook gets the suite as promptfoo builds it (tests as written, before defaultTest, scenarios
and var arrays are applied) and may give back `prompts`, `tests`, `scenarios`, `defaultTest`,
`derivedMetrics`, `nunjucksFilters` and `providerPromptMap` (§4.5). `HookSource.rebuild` validates what
it changed with the loader's own checks, so a test a hook adds is checked like one in the config.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from factcli import sources, templating
from factcli.config import keys
from factcli.config.context import Ctx, as_list, check_keys, expect, unknown_key_lines, unknown_keys_collected
from factcli.config.user_code import check_js_export, code_file, python_function
from factcli.errors import ConfigError, did_you_mean

HOOK_NAMES = ("beforeAll", "beforeEach", "afterEach", "afterAll")
# the parts of a returned suite promptfoo takes; every other key stays as it was (§4.5)
SUITE_TAKES = ("prompts", "providerPromptMap", "tests", "scenarios", "defaultTest", "nunjucksFilters",
               "derivedMetrics", "redteam")
PY_DEFAULT_FN = "get_transform"  # promptfoo's function for a .py extension without :fn


@dataclass(frozen=True)
class Extension:
    index: int
    ref: str  # as written
    path: Path  # absolute
    fn: str | None

    @property
    def is_python(self) -> bool:
        return self.path.suffix.lower() in sources.PY_SUFFIXES

    @property
    def hook(self) -> str | None:
        """The one hook this function serves (promptfoo's new convention), or None: all four."""
        return self.fn if self.fn in HOOK_NAMES else None

    def runs_for(self, hook: str) -> bool:
        return self.hook is None or self.hook == hook

    @property
    def label(self) -> str:
        """`extensions[0] hooks.py:before_all`: how errors name it."""
        return f"extensions[{self.index}] {self.path.name}" + (f":{self.fn}" if self.fn else "")


def parse_extensions(value: Any, ctx: Ctx, warnings: list[str] | None = None) -> list[Extension]:
    """Check every entry now (files, imports, functions); `warnings` gets a line for a function whose
    name is a hook's but for case or `_` (it runs for every hook, as promptfoo calls it)."""
    if value is None:
        return []
    expect(isinstance(value, (list, str)), "expected a list of file://hooks.py:function or "
           "file://hooks.js:function", ctx.file, "extensions")
    out = []
    for i, ref in enumerate(as_list(value)):
        ext = _extension(i, ref, ctx, f"extensions[{i}]")
        folded = (ext.fn or "").replace("_", "").lower()
        if warnings is not None and ext.hook is None and folded in {h.lower() for h in HOOK_NAMES}:
            warnings.append(f"{ctx.file}: extensions[{i}]: '{ext.fn}' is not a hook name (beforeAll, beforeEach, "
                            f"afterEach, afterAll are, in that case): it runs for every hook as "
                            f"{ext.fn}(hook_name, context)")
        out.append(ext)
    return out


def _extension(i: int, ref: Any, ctx: Ctx, where: str) -> Extension:
    expect(isinstance(ref, str) and bool(ref.strip()), "expected file://hooks.py:function or "
           "file://hooks.js:function", ctx.file, where)
    ref = ref.strip()
    if not ref.startswith("file://"):
        # promptfoo runs such an entry as inline JavaScript, which fails on the `:`
        hint = f" (did you mean 'file://{ref}'?)" if sources.is_file(sources.ref_path("file://" + ref, ctx.base)[0]) \
            else ""
        raise ConfigError(f"an extension is a file reference, file://hooks.py:function or file://hooks.js:function; "
                          f"got '{ref}'{hint}", ctx.file, where)
    path, fn = sources.ref_path(ref, ctx.base)
    if fn is None and ":" in path.name:  # x.mts:fn and the like: ref_path splits known suffixes only
        name, _, fn = path.name.rpartition(":")
        path = path.with_name(name)
    code_file(path, "an extension must be a .py or .js file (file://hooks.py:function)", "extension file not found",
              ctx.file, where)
    ext = Extension(i, ref, path.resolve(), fn)
    if ext.is_python:
        python_function(ext.path, ext.fn or PY_DEFAULT_FN, ctx.file, where,
                        hint="" if ext.fn else f" (without :fn promptfoo calls {PY_DEFAULT_FN}(hook_name, context); "
                                               f"or name one: file://{ext.path.name}:fn)")
    else:  # the function run/hooks.py will call, found the way it finds it
        check_js_export(ext.path, ext.fn, ctx.file, where, what="JavaScript extension hooks",
                        instead="a Python hook (file://hooks.py:fn)")
    return ext


# ---------------------------------------------------------------- the suite a beforeAll hook sees


def _plain(value: Any) -> Any:
    from factcli.scripting.values import plain

    return plain(value)


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


@dataclass
class HookSource:
    """What the config gave before defaultTest, scenarios and var arrays were applied: the part of a
    suite a beforeAll hook sees as written and may give back changed."""

    ctx: Ctx
    entries: list  # [(test mapping, Ctx, key path)]: `tests` first, then the scenarios' tests
    n_tests: int  # how many of `entries` come from `tests`
    default_test: dict
    scenarios: Any
    filters: Any  # nunjucksFilters as written
    tags: Any
    cli_vars: dict | None
    expand_scenarios: Callable  # loader._scenario_tests (config/loader imports this module, not back)

    def suite_json(self, suite) -> dict:
        """promptfoo's `context.suite` as JSON (a JS hook gets providers whose id is a method)."""
        data = {
            "description": suite.description,
            "prompts": [_prompt_json(p) for p in suite.prompts],
            "providers": [{"id": s.id, "label": s.label or "", "config": s.config,
                           **({"prompts": s.prompts} if s.prompts is not None else {})} for s in suite.providers],
            "providerPromptMap": {s.label or s.id: list(s.prompts) for s in suite.providers if s.prompts is not None},
            "tests": [t for t, _, _ in self.entries[:self.n_tests]],
            "scenarios": self.scenarios,
            "defaultTest": {**self.default_test, "assert": self.default_test.get("assert") or []},
            "derivedMetrics": suite.derived_metrics,
            "nunjucksFilters": self.filters,
            "extensions": [e.ref for e in suite.extensions],
            "tags": self.tags,
        }
        return _plain({k: v for k, v in data.items() if v is not None})

    def rebuild(self, suite, before: dict, after: dict, label: str):
        """The suite with what the hook changed in `after` (compared with `before`, the suite it was
        given), checked as the loader checks a config; None when it changed nothing."""
        changed = [k for k in SUITE_TAKES if k in after and after[k] != before.get(k)]
        if not changed:
            return None
        hook_ctx = Ctx(f"{label} returned suite", self.ctx.base, self.ctx.templates)
        updates: dict = {}
        with unknown_keys_collected() as found:
            if "redteam" in changed and after["redteam"]:
                raise ConfigError("'redteam' is not supported by factcli: red teaming is not part of factcli",
                                  hook_ctx.file, "redteam")
            filters, in_force = self.filters, suite.filters
            if "nunjucksFilters" in changed:  # before the prompts: their templates may use them
                from factcli.config.filters import suite_filters

                filters = after["nunjucksFilters"]
                in_force = suite_filters(filters, hook_ctx)
                updates.update(filters=in_force)  # the Suite's field
            source = self
            with templating.filters_used(in_force):
                if "prompts" in changed:
                    updates["prompts"] = _prompts(suite.prompts, after["prompts"], hook_ctx)
                if "providerPromptMap" in changed:
                    updates["providers"] = _provider_prompts(suite.providers, after["providerPromptMap"], hook_ctx)
                if "derivedMetrics" in changed:
                    updates["derived_metrics"] = _derived(after["derivedMetrics"], hook_ctx)
                if {"tests", "scenarios", "defaultTest"} & set(changed):
                    updates["tests"], source = self._tests(after, hook_ctx)
                    updates["default_test"] = source.default_test
            source = dataclasses.replace(source, filters=filters)
        warnings = [w for w in unknown_key_lines(found) if w not in suite.warnings]
        return dataclasses.replace(suite, **updates, hook_source=source, transform_errors=None,
                                   warnings=suite.warnings + warnings, unknown_keys=suite.unknown_keys + warnings)

    def _tests(self, after: dict, hook_ctx: Ctx) -> tuple[list, HookSource]:
        from factcli.config.testcases import parse_test, test_maker

        default, default_ctx = self.default_test, self.ctx
        if "defaultTest" in after and _key(after["defaultTest"]) != _key(self.suite_default()):
            default, default_ctx = after["defaultTest"], hook_ctx
        expect(isinstance(default, dict), "expected a mapping", hook_ctx.file, "defaultTest")
        default_parsed = parse_test(default, default_ctx, "defaultTest", is_default=True)
        tests = self._entries(after["tests"], hook_ctx, "tests", self.entries[:self.n_tests]) \
            if "tests" in after else self.entries[:self.n_tests]
        if "scenarios" in after and _key(after["scenarios"]) != _key(self.scenarios):
            scenario_tests = self.expand_scenarios(after["scenarios"], hook_ctx)
            scenarios = after["scenarios"]
        else:
            scenario_tests, scenarios = self.entries[self.n_tests:], self.scenarios
        entries = list(tests) + list(scenario_tests)
        make = test_maker(default_parsed, self.cli_vars)
        parsed = [make(t, c, where, c is self.ctx)
                  for t, c, where in (entries or [({}, self.ctx, "tests")])]  # no tests: one empty test
        source = dataclasses.replace(self, entries=entries, n_tests=len(tests), default_test=default,
                                     scenarios=scenarios)
        return parsed, source

    def suite_default(self) -> dict:
        return _plain({**self.default_test, "assert": self.default_test.get("assert") or []})

    def _entries(self, value: Any, hook_ctx: Ctx, key: str, originals: list) -> list:
        """The returned tests, each one the hook passed through unchanged keeping its own file (paths in
        it are relative to that file); a new or changed one is read as the hook's."""
        expect(isinstance(value, list), "expected a list of tests", hook_ctx.file, key)
        pool: dict[str, list] = {}
        for entry in originals:
            pool.setdefault(_key(_plain(entry[0])), []).append(entry)
        out = []
        for i, item in enumerate(value):
            same = pool.get(_key(item))
            if same:
                out.append(same.pop(0))
            else:
                expect(isinstance(item, dict), f"expected a test mapping, got {type(item).__name__}",
                       hook_ctx.file, f"{key}[{i}]")
                out.append((item, hook_ctx, f"{key}[{i}]"))
        return out


def hook_source(ctx: Ctx, entries: list, cfg: dict, default_test: dict, cli_vars: dict | None,
                expand_scenarios: Callable) -> HookSource:
    """Called by the loader with `entries` holding the `tests` entries (the scenarios' are appended to
    the same list after this call)."""
    return HookSource(ctx=ctx, entries=entries, n_tests=len(entries), default_test=default_test,
                      scenarios=cfg.get("scenarios"), filters=cfg.get("nunjucksFilters"), tags=cfg.get("tags"),
                      cli_vars=cli_vars, expand_scenarios=expand_scenarios)


def _prompt_json(p) -> dict:
    return {"raw": p.raw, "label": p.label, **({"config": p.config} if p.config else {})}


def _prompts(originals: list, value: Any, ctx: Ctx) -> list:
    from factcli.config.prompts import parse_prompts

    expect(isinstance(value, list) and bool(value), "expected a list of prompts", ctx.file, "prompts")
    by_key = {_key(_plain(_prompt_json(p))): p for p in originals}
    out = []
    for i, item in enumerate(value):
        if _key(item) in by_key:
            out.append(by_key[_key(item)])
            continue
        function = next((p for p in originals if p.function and isinstance(item, dict)
                         and item.get("raw") == p.raw), None)
        if function is not None:  # a prompt function relabelled: still the function
            out.append(dataclasses.replace(function, label=item.get("label") or function.label,
                                           config=item.get("config") or function.config))
            continue
        try:
            out.extend(parse_prompts([item], ctx))
        except ConfigError as exc:
            raise ConfigError(exc.detail, ctx.file, (exc.path or "").replace("prompts[0]", f"prompts[{i}]", 1)) \
                from None
    return out


def _provider_prompts(providers: list, value: Any, ctx: Ctx) -> list:
    expect(isinstance(value, dict), "expected a mapping of provider -> list of prompt labels", ctx.file,
           "providerPromptMap")
    for k, v in value.items():
        expect(isinstance(v, list) and all(isinstance(x, str) for x in v), "expected a list of prompt labels",
               ctx.file, f"providerPromptMap.{k}")
    known = {s.label or s.id for s in providers} | {s.id for s in providers}
    for k in value:
        expect(k in known, f"no provider '{k}'{did_you_mean(str(k), known)}", ctx.file, f"providerPromptMap.{k}")
    return [dataclasses.replace(s, prompts=value.get(s.label or s.id, value.get(s.id))) for s in providers]


def _derived(value: Any, ctx: Ctx) -> list:
    from factcli.scoring.metrics import compile_expression

    value = value or []
    expect(isinstance(value, list), "expected a list of {name, value}", ctx.file, "derivedMetrics")
    for i, d in enumerate(value):
        where = f"derivedMetrics[{i}]"
        expect(isinstance(d, dict), "expected {name, value}", ctx.file, where)
        check_keys(d, keys.names("derivedMetric"), ctx.file, where)
        expect(isinstance(d.get("name"), str) and bool(d["name"]), "a derived metric needs a name", ctx.file,
               where + ".name")
        expect(isinstance(d.get("value"), str) and bool(d["value"]), "a derived metric needs a value expression",
               ctx.file, where + ".value")
        try:
            compile_expression(d["value"])
        except (ValueError, RecursionError, MemoryError) as exc:
            raise ConfigError(f"invalid expression: {str(exc).splitlines()[0] if str(exc) else exc!r}", ctx.file,
                              where + ".value") from None
    return list(value)


# ---------------------------------------------------------------- the test a beforeEach hook gives back


def test_json(test, variables: dict) -> dict:
    """promptfoo's `context.test` for one step: the merged test with this step's vars."""
    data = {k: v for k, v in dict(test.raw).items() if v is not None}
    data["vars"] = variables
    for key, empty in (("assert", []), ("options", {}), ("metadata", {})):
        data.setdefault(key, empty)
    return _plain(data)


def hooked_test(test, before: dict, after: dict, ctx: Ctx | None, label: str):
    """The TestCase a beforeEach hook's `test` stands for (it replaces the step's test entirely). Only
    vars changed, the common case, keeps the parsed test; anything else is read like a test in a config."""
    from factcli.config.testcases import parse_test

    if {k: v for k, v in after.items() if k != "vars"} == {k: v for k, v in before.items() if k != "vars"}:
        new_vars = after.get("vars") or {}
        expect(isinstance(new_vars, dict), "expected a mapping of variables", f"{label} returned test", "vars")
        old = test.vars
        kept = frozenset(k for k in test.template_vars if k in new_vars and _key(new_vars[k]) == _key(old.get(k)))
        return dataclasses.replace(test, vars=new_vars, raw={**test.raw, "vars": new_vars}, template_vars=kept)
    where = test.source[1]
    base = ctx.base if ctx is not None else Path.cwd()
    hook_ctx = Ctx(f"{label} returned test", base, ctx.templates if ctx is not None else {})
    with unknown_keys_collected():  # an extra key a hook left in is not worth stopping the run for
        parsed = parse_test(after, hook_ctx, where or "test")
    return dataclasses.replace(parsed, source=test.source, grader_from_default=test.grader_from_default)
