"""Runs evaluation steps: the row's vars and prompt (run/planning/row_vars.py), the call (through
run/calling/caller.Caller), the output transforms, the assertions; reports each row as it finishes.

Concurrency is a fixed pool of workers pulling steps in order, so at most `concurrency` steps are
in flight and nothing builds an unbounded set of tasks. When rows depend on earlier rows (conversation
turns, `storeOutputAs`, `runSerially`: run/planning/conversations.py), a worker takes the first step, in step
order, whose rows it waits for have finished; the other rows keep running concurrently.
"""

from __future__ import annotations

import asyncio
import heapq
from pathlib import Path
from typing import Callable, Iterable

from factcli.errors import AbortRun, bug_message, is_bug
from factcli.providers.base import Provider, RenderedPrompt
from factcli.providers.request import CallRequest
from factcli.run.calling.budget import BudgetReached
from factcli.run.calling.caller import Caller
from factcli.run.planning.conversations import Conversations, TurnBroken
from factcli.run.planning.row_vars import RowError, build_row, data_row
from factcli.scoring.grading import grader_ledger, note_grader_spend
from factcli.scoring.outcome import failure_of
from factcli.scoring.scorer import run_assertions, score_now
from factcli.types import (
    FAILURE_ERROR,
    FAILURE_NONE,
    EvalResult,
    EvalStep,
    GradingResult,
    ProviderResponse,
)


def _note_missing(step: EvalStep, missing: list[str], missing_out: dict | None) -> None:
    if missing and missing_out is not None:
        where = step.test.description or f"test {step.test_idx}"
        for name in set(missing):
            tests = missing_out.setdefault((step.prompt.label, name), [])
            if where not in tests:
                tests.append(where)


def _short(text: str, n: int = 40) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


YIELD_EVERY = 100  # rows a worker runs between two turns of the event loop (Executor.run)


def _bug(exc: BaseException, step: EvalStep, where: str) -> str:
    """A factcli bug inside a row (errors.is_bug): the row's error names it, counted apart from the
    providers' errors (scoring/metrics: bugs); with FACTCLI_DEBUG=1 (`factcli --debug`) its traceback
    goes to stderr as it happens."""
    from factcli import settings

    if settings.debug():
        import sys
        import traceback

        print(f"factcli bug in {where} of test {step.test_idx}, column {step.prompt_idx}:", file=sys.stderr)
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    return bug_message(exc, where)


class Executor:
    def __init__(self, caller: Caller, providers: dict[int, Provider], *, concurrency: int = 4,
                 delay_ms: float = 0, base_dir: Path | None = None, grader=None, eval_id: str = "",
                 vars_errors: dict[int, str] | None = None, conversations: Conversations | None = None,
                 hooks=None):
        self.eval_id = eval_id  # the runtime var __evalId
        self.vars_errors = vars_errors or {}  # id(test) -> why its transformVars failed (run/planning/row_vars.py)
        self.conversations = conversations  # threads, registers and the order they impose
        self.hooks = hooks  # extension hooks: beforeEach and afterEach around each row (run/hooks.py)
        self.caller = caller
        self.providers = providers
        self.concurrency = max(1, concurrency)
        self.delay_ms = delay_ms
        self.base_dir = base_dir
        self.grader = grader
        self.missing_vars: dict[tuple[str, str], list[str]] = {}
        self.stopped: str | None = None  # why no more steps start (the budget), once it is so
        self._bare = False  # (set by run)

    def missing_var_warnings(self, skip: set | frozenset = frozenset()) -> list[str]:
        """One line per (prompt, undefined var), naming the tests where it happened; `skip`: names
        the check before the run already warned of."""
        lines = []
        for (label, name), tests in self.missing_vars.items():
            if name in skip:
                continue
            shown = ", ".join(tests[:5]) + (f" and {len(tests) - 5} more" if len(tests) > 5 else "")
            if name.startswith("<<"):  # an undefined <<name>> is sent as written (templating.render)
                lines.append(f"'{name}' names no var: left as written in prompt '{_short(label)}' ({shown})")
            else:
                lines.append(f"undefined var '{name}' rendered empty in prompt '{_short(label)}' ({shown})")
        return lines

    # A row that never waits (a reply that needs no I/O) never hands the event loop its turn: the
    # timers each call sets and cancels (run/calling/caller.py's per-attempt timeout) stay in the loop's heap
    # until it runs, growing with every row (issue 30). A worker gives the loop a turn every YIELD_EVERY rows, which also lets
    # the store's group-commit timer fire.
    async def run(self, steps: Iterable[EvalStep], on_result: Callable[[EvalResult], None]) -> None:
        """`steps`: a list, or the plan (config/plan.Plan), whose steps are made as the workers pull
        them; rows that wait for others are ordered over the list of their steps."""
        waits = None
        # neither hooks nor rows that depend on others: process() comes to _process(), called directly
        self._bare = self.hooks is None and (self.conversations is None or not self.conversations.active)
        if self.conversations is not None and self.conversations.active:
            steps = list(steps)
            waits = self.conversations.waits(steps)
        if waits is not None and any(waits):
            worker = self._ordered_worker(steps, waits, on_result)
        else:
            iterator = iter(steps)

            async def worker() -> None:
                done = 0
                for step in iterator:  # shared iterator: each step is taken by exactly one worker
                    if not await self._one(step, on_result):
                        return
                    done += 1
                    if done % YIELD_EVERY == 0:
                        await asyncio.sleep(0)

        workers = [asyncio.create_task(worker()) for _ in range(min(self.concurrency, len(steps)) or 1)]
        try:
            await asyncio.gather(*workers)
        finally:
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def _one(self, step: EvalStep, on_result: Callable[[EvalResult], None]) -> bool:
        """Run one step and report it; False once no more steps should start (the budget, an endpoint the
        circuit breaker stopped: run/calling/breaker.py)."""
        if self.stopped:
            return False
        trip = self.caller.breakers.trip if self.caller.breakers is not None else None
        if trip is not None:
            self.stopped = trip.error()
            return False
        try:
            if self.caller.batches is None:
                result = await (self._process(step, None) if self._bare else self.process(step))
            else:
                with self.caller.batches.row():  # batch mode: the row's rounds (run/calling/batches.py)
                    result = await (self._process(step, None) if self._bare else self.process(step))
        except BudgetReached as exc:  # this step is not kept: a resumed run does it again
            self.stopped = str(exc)
            return False
        on_result(result)
        delay = self.delay_ms or step.provider.delay_ms
        if delay and not result.response.cached:
            await asyncio.sleep(delay / 1000)
        return True

    def _ordered_worker(self, steps: list[EvalStep], waits: list[list[int]],
                        on_result: Callable[[EvalResult], None]):
        """Workers that take the first step (in step order) whose awaited rows have finished."""
        left = [len(w) for w in waits]
        after: list[list[int]] = [[] for _ in steps]
        for i, w in enumerate(waits):
            for j in w:
                after[j].append(i)
        ready = [i for i, n in enumerate(left) if n == 0]  # a heap; already sorted
        started = 0
        changed = asyncio.Event()

        async def worker() -> None:
            nonlocal started
            while not self.stopped:
                if not ready:
                    if started == len(steps):
                        return
                    changed.clear()
                    await changed.wait()
                    continue
                i = heapq.heappop(ready)
                started += 1
                try:
                    going = await self._one(steps[i], on_result)
                finally:
                    for j in after[i]:
                        left[j] -= 1
                        if left[j] == 0:
                            heapq.heappush(ready, j)
                    changed.set()
                if not going:
                    return
                if started % YIELD_EVERY == 0:
                    await asyncio.sleep(0)

        return worker

    async def process(self, step: EvalStep) -> EvalResult:
        """One row: its vars and prompt, the call, transforms and assertions. A conversation turn or a
        `storeOutputAs` row also leaves what later rows see (run/planning/conversations.py)."""
        if self.hooks is not None and id(step.test) not in self.vars_errors:  # a failed transformVars: ERROR
            step = await self.hooks.before_each(step)
        raw: list = [None]  # the model's output before transforms, for `_conversation`
        result = await self._process(step, raw)
        if self.conversations is not None and self.conversations.active:  # (inactive: it records nothing)
            self.conversations.record(result, raw[0])
        if self.hooks is not None:  # after grading, before the row is stored and counted
            result = await self.hooks.after_each(result)
        return result

    async def _process(self, step: EvalStep, raw: list | None) -> EvalResult:
        """The row itself; `raw`, when given, receives the model's output before transforms."""
        provider = self.providers[step.provider_idx]
        failed = self.vars_errors.get(id(step.test))
        extra = None
        if failed is None and self.conversations is not None and self.conversations.active:  # (inactive: no vars)
            try:
                extra = self.conversations.vars_for(step)
            except TurnBroken as exc:
                failed = str(exc)
        if failed is None:
            try:
                row = data_row(step, self.eval_id, extra)  # (no coroutine for a row that runs no code)
                if row is None:
                    row = await build_row(step, eval_id=self.eval_id, provider_label=provider.label,
                                          base_dir=self.base_dir, extra_vars=extra)
            except RowError as exc:
                failed = str(exc)
        if failed is not None:  # nothing was sent: promptfoo's ERROR row with an empty prompt
            return EvalResult(step, "", ProviderResponse(error=failed), None, False, 0.0, {}, FAILURE_ERROR,
                              error=failed)
        if row.missing:
            _note_missing(step, row.missing, self.missing_vars)
        rendered, variables = row.prompt, row.vars
        test = step.test
        if test.provider_output is not None:
            response = ProviderResponse(output=test.provider_output)
        else:
            response = await self.caller.call(provider, CallRequest(rendered, repeat_idx=step.repeat_idx))
        if raw is not None:
            raw[0] = response.output
        if response.error is None and (step.provider.transform or test.options.get("transform")
                                       or test.options.get("postprocess")):
            try:
                response.output = await self._transform_output(step, response, rendered, variables)
            except Exception as exc:
                response = ProviderResponse(error=_bug(exc, step, "the output transform") if is_bug(exc) else
                                            f"transform failed: {type(exc).__name__}: {exc}",
                                            token_usage=response.token_usage, cost=response.cost,
                                            latency_ms=response.latency_ms, cached=response.cached)
        if response.error is not None:
            return EvalResult(step, rendered.text, response, None, False, 0.0, {}, FAILURE_ERROR,
                              error=response.error, latency_ms=response.latency_ms)
        try:  # prebound checks, which call no grader: no ledger, no coroutine (scoring/scorer.py)
            grading = score_now(test, response.output, variables, rendered.text, response, provider, self.grader, True)
        except Exception as exc:  # as below
            message = _bug(exc, step, "the assertions") if is_bug(exc) else str(exc) or type(exc).__name__
            return EvalResult(step, rendered.text, response, GradingResult(False, 0.0, message), False, 0.0, {},
                              FAILURE_ERROR, error=message, latency_ms=response.latency_ms)
        if grading is None:
            grading = await self._grade(step, provider, response, rendered, variables)
            if grading.__class__ is EvalResult:
                return grading
        named = {k: v for k, v in grading.named_scores.items() if isinstance(v, (int, float)) and v == v
                 and v not in (float("inf"), float("-inf"))} if grading.named_scores else {}
        failure = FAILURE_NONE if grading.passed else failure_of(grading, test)
        return EvalResult(step, rendered.text, response, grading, grading.passed, grading.score, named,
                          failure, error=None if grading.passed else grading.reason,
                          latency_ms=response.latency_ms)

    async def _grade(self, step: EvalStep, provider: Provider, response: ProviderResponse,
                     rendered: RenderedPrompt, variables: dict) -> GradingResult | EvalResult:
        """The general scoring path, counting the grader calls its assertions make; an EvalResult
        (an ERROR row) when a handler rejected its input."""
        with grader_ledger() as spent:
            try:
                grading = await run_assertions(
                    step.test, output=response.output, variables=variables, prompt=rendered.text,
                    response=response, provider=provider, grader=self.grader,
                )
            except AbortRun:  # a grader rejected the credentials: the whole run stops (contract §2), as for providers
                raise
            except Exception as exc:  # a handler rejected its input: promptfoo makes this an ERROR row
                message = _bug(exc, step, "the assertions") if is_bug(exc) else str(exc) or type(exc).__name__
                grading = GradingResult(False, 0.0, message)
                note_grader_spend(grading, spent)
                return EvalResult(step, rendered.text, response, grading, False, 0.0, {}, FAILURE_ERROR,
                                  error=message, latency_ms=response.latency_ms)
        note_grader_spend(grading, spent)
        return grading

    async def _transform_output(self, step: EvalStep, response: ProviderResponse, rendered: RenderedPrompt,
                                variables: dict):
        from factcli.scripting.transforms import apply_transform

        output = response.output
        context = {"vars": variables, "prompt": {"raw": rendered.text, "label": rendered.label}}
        for spec in (step.provider.transform, step.test.options.get("transform"), step.test.options.get("postprocess")):
            if spec:
                output = await apply_transform(spec, output, context, self.base_dir)
        return output
