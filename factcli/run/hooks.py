"""Extension hooks (`extensions:`, checked by config/extensions.py): calling `beforeAll`, `beforeEach`,
`afterEach` and `afterAll` as promptfoo 0.121.20 does, and applying what each may change
(promptfoo-features part B §4).

- Order: for each hook, the extensions in list order, each given the context the previous one left.
- beforeAll ({suite}) runs once before the run is planned; its suite's prompts, tests, scenarios,
  defaultTest, derivedMetrics, nunjucksFilters and providerPromptMap are taken (a suite without one of
  them keeps it: promptfoo runs one empty test when `tests` is missing). beforeEach ({test}) runs per
  row before its vars and prompt are built; the test it gives back replaces the row's. afterEach
  ({test, result}) runs per row after grading, before the row is stored: its result's namedScores,
  metadata and response.metadata are merged into the row. afterAll ({prompts, results, suite, evalId,
  config}) runs after the last row; what it returns is ignored.
- Python hooks run in-process and get a JSON copy, so only what they return counts. JavaScript hooks
  run in the Node worker with a third `process` argument; like promptfoo's, a JS hook may also change
  its context in place and return nothing (not the suite's providers, which no hook changes).
- A hook that raises stops the run (HookError, exit 1): beforeAll before any call; later ones keep the
  rows that finished, and the run can be resumed. promptfoo only logs a failing afterEach.
"""

from __future__ import annotations

import asyncio
import dataclasses
import traceback
from typing import Any

from factcli.errors import AbortRun
from factcli.scripting.values import plain


class HookError(AbortRun):
    """A user's hook failed: one line naming the extension and the hook."""

    exit_code = 1  # the user's code is broken, as with bad config (promptfoo exits 1 too)


# A JS hook called in the worker (its `transform` op runs this body with the request as `output` and
# the worker's `process` shim as `process`): the function found as the worker finds a named export,
# providers revived as promptfoo's live objects, and the arguments sent back after the call, since
# a JS hook may change its context in place.
_JS_CALL = """
const req = output;
return globalThis.__factcliNamespace(req.file).then(async (ns) => {
  const d = ns.default;
  const mod = d !== undefined ? (d && d.default !== undefined ? d.default : d) : ns;
  const target = req.fn ? (mod != null && mod[req.fn] !== undefined ? mod[req.fn] : ns[req.fn])
    : (typeof mod === 'function' ? mod : mod && mod.default);
  if (typeof target !== 'function') {
    throw new Error(`${req.name} must export a function, have a default export as a function, or export the specified function "${req.fn}"`);
  }
  const args = req.args;
  for (const a of args) {
    if (a && a.suite && Array.isArray(a.suite.providers)) {
      a.suite.providers = a.suite.providers.map((p) => { const id = p.id; return { ...p, id: () => id }; });
    }
  }
  const value = await target(...args, process);
  return { returned: value === undefined ? null : value, args };
});
"""


class Hooks:
    """The extension hooks of one suite."""

    def __init__(self, suite):
        self.suite = suite
        self.extensions = list(suite.extensions)
        self.columns: list = []  # the run's columns, for the rows afterEach sees (set by runner.execute)

    @classmethod
    def of(cls, suite) -> Hooks | None:
        return cls(suite) if getattr(suite, "extensions", None) else None

    def has(self, hook: str) -> bool:
        return any(e.runs_for(hook) for e in self.extensions)

    # ------------------------------------------------------------ calling one hook

    async def _call(self, ext, hook: str, context: dict) -> list[dict]:
        """What this extension gives back, in the order promptfoo reads it: for JS the context as the
        hook changed it in place, then its return value (a falsy one leaves the context unchanged)."""
        args = [context, {"hookName": hook}] if ext.hook else [hook, context]
        at = 0 if ext.hook else 1
        try:
            if ext.is_python:
                changed, value = None, await self._python(ext, args)
            else:
                changed, value = await self._js(ext, args, at)
        except Exception as exc:  # noqa: BLE001 - the user's code: any failure stops the run, named
            raise HookError(f"{ext.label} ({hook}) raised {_describe(exc, ext)}") from None
        if value and not isinstance(value, dict):
            raise HookError(f"{ext.label} ({hook}) returned {type(value).__name__}; a hook returns its context "
                            f"(a mapping) or nothing")
        return [c for c in (changed if changed != context else None, value) if c]

    async def _python(self, ext, args: list) -> Any:
        from factcli.config.extensions import PY_DEFAULT_FN
        from factcli.scripting.python import call_python, load_python_function

        fn = load_python_function(ext.path, ext.fn or PY_DEFAULT_FN)
        return plain(await call_python(fn, *plain(args)))

    async def _js(self, ext, args: list, at: int) -> Any:
        from factcli.scripting.node import get_worker

        request = {"file": str(ext.path.resolve()), "fn": ext.fn, "name": ext.path.name, "args": plain(args)}
        answer = await get_worker().call("transform", {"code": _JS_CALL, "input": request, "context": {},
                                                       "inputType": "output"})
        value = answer.get("value") or {}
        return (value.get("args") or [None, None])[at], value.get("returned")

    async def _each(self, hook: str, context: dict, take) -> dict:
        """Every extension that runs for `hook`, in order; `take(before, returned, ext)` makes the
        next context from a return value."""
        for ext in self.extensions:
            if ext.runs_for(hook):
                for returned in await self._call(ext, hook, context):
                    context = take(context, returned, ext)
        return context

    # ------------------------------------------------------------ beforeAll

    def before_all(self, suite):
        """Run beforeAll; the suite it leaves (a new Suite), or `suite` itself when it changed nothing."""
        return asyncio.run(self.before_all_async(suite))

    async def before_all_async(self, suite):
        if not self.has("beforeAll"):
            return suite
        source = suite.hook_source
        given = source.suite_json(suite)
        changers: list[str] = []

        def take(context: dict, returned: dict, ext) -> dict:
            new = returned.get("suite")
            if not isinstance(new, dict):
                raise HookError(f"{ext.label} (beforeAll) returned no suite: return {{suite: ...}} (the context "
                                f"it was given, changed) or nothing")
            from factcli.config.extensions import SUITE_TAKES

            taken = {k: new[k] for k in SUITE_TAKES if k in new}
            if any(context["suite"].get(k) != v for k, v in taken.items()):
                changers.append(ext.label)
            return {**context, "suite": {**context["suite"], **taken}}

        final = await self._each("beforeAll", {"suite": given}, take)
        if not changers:
            return suite
        from factcli.errors import ConfigError

        label = changers[0] if len(set(changers)) == 1 else "the beforeAll hooks"
        try:
            rebuilt = source.rebuild(suite, given, final["suite"], f"{label} (beforeAll)")
        except ConfigError as exc:
            raise HookError(str(exc)) from None  # names the hook: "<extension> (beforeAll) returned suite: …"
        return rebuilt if rebuilt is not None else suite

    # ------------------------------------------------------------ beforeEach / afterEach

    async def before_each(self, step):
        """The step with the test beforeEach left (promptfoo replaces the step's test with it)."""
        if not self.has("beforeEach"):
            return step
        from factcli.config.extensions import hooked_test, test_json

        given = test_json(step.test, step.vars)
        last: list = []

        def take(context: dict, returned: dict, ext) -> dict:
            new = returned.get("test")
            if not isinstance(new, dict):
                raise HookError(f"{ext.label} (beforeEach) returned no test: return {{test: ...}} (the context "
                                f"it was given, changed) or nothing")
            last.append(ext.label)
            return {"test": new}

        final = (await self._each("beforeEach", {"test": given}, take))["test"]
        if final == given:
            return step
        from factcli.errors import ConfigError

        source = getattr(self.suite, "hook_source", None)
        try:
            test = hooked_test(step.test, given, final, getattr(source, "ctx", None), f"{last[-1]} (beforeEach)")
        except ConfigError as exc:
            raise HookError(str(exc)) from None  # "<extension> (beforeEach) returned test: …"
        return dataclasses.replace(step, test=test, vars=test.vars)

    async def after_each(self, result):
        """The row with what afterEach added: namedScores (finite numbers; not on an ERROR row, which
        has no score), metadata and response.metadata."""
        if not self.has("afterEach"):
            return result
        from factcli.config.extensions import test_json
        from factcli.report.results_json import row_json

        row = row_json(result, self.columns)
        row["promptId"] = self.columns[result.step.prompt_idx].prompt.id
        if result.step.test.description is not None:
            row["description"] = result.step.test.description
        given = {"test": test_json(result.step.test, result.step.vars), "result": plain(row)}
        added: dict = {"namedScores": {}, "metadata": {}, "response": {}}

        def take(context: dict, returned: dict, ext) -> dict:
            new = returned.get("result")
            if not isinstance(new, dict):
                return context
            res = dict(context["result"])
            scores = {k: v for k, v in (new.get("namedScores") or {}).items() if _finite_number(v)} \
                if isinstance(new.get("namedScores"), dict) else {}
            meta = new.get("metadata") if isinstance(new.get("metadata"), dict) else {}
            response = new.get("response") if isinstance(new.get("response"), dict) else {}
            resp_meta = response.get("metadata") if isinstance(response.get("metadata"), dict) else {}
            added["namedScores"].update(scores)
            added["metadata"].update(meta)
            added["response"].update(resp_meta)
            res["namedScores"] = {**(res.get("namedScores") or {}), **scores}
            res["metadata"] = {**(res.get("metadata") or {}), **meta}
            res["response"] = {**(res.get("response") or {}),
                               "metadata": {**((res.get("response") or {}).get("metadata") or {}), **resp_meta}}
            return {**context, "result": res}

        await self._each("afterEach", given, take)
        return _with_additions(result, added)

    # ------------------------------------------------------------ afterAll

    async def after_all(self, run) -> None:
        """afterAll sees every row (also the rows a resumed run kept); its return value is ignored."""
        if not self.has("afterAll"):
            return
        doc = run.to_promptfoo()
        rows = doc["results"]["results"]
        for row in rows:
            col = run.columns[row["promptIdx"]]
            row.setdefault("promptId", col.prompt.id)
            description = (row.get("testCase") or {}).get("description")
            if description is not None:
                row.setdefault("description", description)
        source = getattr(self.suite, "hook_source", None)
        context = {"prompts": doc["results"]["prompts"], "results": rows,
                   "suite": source.suite_json(self.suite) if source is not None else {},
                   "evalId": run.run_id, "config": doc["config"]}
        await self._each("afterAll", plain(context), lambda context, returned, ext: context)


def _with_additions(result, added: dict):
    from factcli.types import FAILURE_ERROR

    if added["namedScores"] and result.failure_reason != FAILURE_ERROR:
        result.named_scores = {**result.named_scores, **added["namedScores"]}
    if added["metadata"]:
        test = dataclasses.replace(result.step.test, metadata={**result.step.test.metadata, **added["metadata"]})
        result.step = dataclasses.replace(result.step, test=test)
    if added["response"]:  # a new response: a cached one may be shared
        result.response = dataclasses.replace(result.response, metadata={**result.response.metadata,
                                                                         **added["response"]})
    return result


def _finite_number(v: Any) -> bool:
    import math

    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _describe(exc: BaseException, ext) -> str:
    """`ValueError: boom (hooks.py:12)`: the error's first line and the user's innermost frame."""
    from factcli.scripting.node import JSError, NodeWorkerError

    if isinstance(exc, JSError):
        where = _js_frame(exc.stack, ext)
        return f"{exc.name}: {_first_line(exc.js_message)}{where}"
    if isinstance(exc, NodeWorkerError):
        return f"{type(exc).__name__}: {_first_line(str(exc))}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(ext.path)]
    where = f" ({ext.path.name}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {_first_line(str(exc))}{where}"


def _first_line(text: str) -> str:
    lines = [ln for ln in str(text).splitlines() if ln.strip()]
    return lines[0].strip() if lines else ""


def _js_frame(stack: str, ext) -> str:
    import re

    m = re.search(re.escape(ext.path.name) + r":(\d+):\d+", stack or "")
    return f" ({ext.path.name}:{m.group(1)})" if m else ""
