"""Rows that depend on earlier rows: multi-turn conversations (`_conversation`, `metadata.conversationId`),
outputs stored for later tests (`options.storeOutputAs`) and tests that run alone (`options.runSerially`).

What a row sees (promptfoo-features part B §3):
- a column whose prompt text mentions `_conversation` holds one thread per `metadata.conversationId`
  (tests without one share the column's default thread); a row of such a column gets `_conversation`,
  the list of `{prompt, input, output, metadata}` entries of the thread's earlier rows, in test order;
- a test with `storeOutputAs: name` stores its final output (after transforms) as `name`; the later
  rows of the same column see it as a var, over a test var of the same name. A failed or empty
  output keeps the previous value.

Where factcli departs from promptfoo (docs/promptfoo-departures.md): registers are kept per column
(promptfoo shares one map, so a later test sees whichever column finished last); each `--repeat`
repetition is its own conversation (promptfoo makes repeats extra turns of the same thread); a turn
after a turn that got no answer is an ERROR row instead of a call with an empty answer in its
history; a `runSerially` test runs alone at its place in the file (promptfoo runs those tests first).

Scheduling: a row waits for the rows it depends on, and nothing else: the previous turn of its
thread, the last earlier `storeOutputAs` row of its column, and for `runSerially`, everything before
it (and everything after waits for it). Rows are identified by (test_idx, prompt_idx, repeat_idx);
"earlier" means a smaller test_idx, the order promptfoo numbers them in, so what a row sees never
depends on how many run at once.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

from factcli.store.records import turn_entry
from factcli.types import EvalResult, EvalStep

CONVERSATION_VAR = "_conversation"


class TurnBroken(Exception):
    """An earlier turn of the row's conversation got no answer: the row is an ERROR, not sent."""


def uses_conversation(prompt) -> bool:
    """promptfoo's test: the prompt's text (a prompt function's file) mentions `_conversation`."""
    return CONVERSATION_VAR in (prompt.raw or "")


def key_of(step: EvalStep) -> tuple[int, int, int]:
    return step.test_idx, step.prompt_idx, step.repeat_idx


def conversation_label(conversation_id: Any) -> str:
    return "the default conversation" if conversation_id is None else f"conversation '{conversation_id}'"


@dataclass(slots=True)
class Place:
    """A step's place in the plan's conversations: its thread, conversation id and turn, and whether its
    prompt reads the history."""

    thread: tuple | None  # (prompt_idx, repeat_idx, conversationId) in a column that uses _conversation
    conversation_id: Any
    turn: int  # 1-based position in its thread
    reads_history: bool  # the prompt gets `_conversation` (not disabled by disableConversationVar)


@dataclass(slots=True)
class _Turn:
    """A finished turn of a thread: its number, the history entry it left (None: no answer) and its error."""

    number: int
    entry: dict | None  # None: no answer (the row failed before or during the call)
    error: str | None


class Conversations:
    """The plan's threads and registers, and what the rows that finished put in them."""

    def __init__(self, steps: list[EvalStep]):
        self.places: dict[tuple, Place] = {}
        self.any_serial = False
        self.any_register = False
        counts: dict[tuple, int] = {}
        for step in steps:  # step order: test_idx ascending
            opts = step.test.options
            self.any_serial = self.any_serial or bool(opts.get("runSerially"))
            self.any_register = self.any_register or bool(opts.get("storeOutputAs"))
            if not uses_conversation(step.prompt):
                continue
            cid = (step.test.metadata or {}).get("conversationId")
            thread = (step.prompt_idx, step.repeat_idx, _hashable(cid))
            counts[thread] = counts.get(thread, 0) + 1
            self.places[key_of(step)] = Place(thread, cid, counts[thread],
                                              not opts.get("disableConversationVar"))
        self._turns: dict[tuple, dict[int, _Turn]] = {}  # thread -> test_idx -> turn
        self._registers: dict[tuple, dict[str, list]] = {}  # (prompt_idx, repeat_idx) -> name -> [(test_idx, value)]

    @property
    def active(self) -> bool:
        """Whether any row depends on another: otherwise rows run in any order."""
        return bool(self.places) or self.any_serial or self.any_register

    def place(self, step: EvalStep) -> Place | None:
        return self.places.get(key_of(step))

    # ------------------------------------------------------------ order

    def waits(self, steps: list[EvalStep]) -> list[list[int]]:
        """For each of `steps` (in step order; rows already finished are left out), the positions in
        `steps` of the rows it waits for."""
        out: list[list[int]] = []
        last_in_thread: dict[tuple, int] = {}
        last_writer: dict[tuple, int] = {}
        since_barrier: list[int] = []
        barrier: int | None = None
        for i, step in enumerate(steps):
            deps: list[int] = []
            place = self.places.get(key_of(step))
            if place is not None and place.thread in last_in_thread:
                deps.append(last_in_thread[place.thread])
            scope = (step.prompt_idx, step.repeat_idx)
            if scope in last_writer:
                deps.append(last_writer[scope])
            if step.test.options.get("runSerially"):
                deps.extend(since_barrier)
                barrier, since_barrier = i, [i]
            else:
                if barrier is not None:
                    deps.append(barrier)
                since_barrier.append(i)
            if place is not None:
                last_in_thread[place.thread] = i
            if step.test.options.get("storeOutputAs"):
                last_writer[scope] = i
            out.append(sorted(set(deps)))
        return out

    def downstream(self, steps: list[EvalStep], rerun: set) -> set:
        """The keys of rows whose inputs come from a row in `rerun` (directly or not): the later turns of
        its thread and, after a `storeOutputAs` row, the later rows of its column. --retry-errors runs
        them again too, so that no kept row was answered with a history that changed."""
        out = set(rerun)
        dirty_threads: set = set()
        dirty_scopes: set = set()
        for step in steps:
            key = key_of(step)
            place = self.places.get(key)
            scope = (step.prompt_idx, step.repeat_idx)
            if key not in out and ((place is not None and place.thread in dirty_threads) or scope in dirty_scopes):
                out.add(key)
            if key in out:
                if place is not None:
                    dirty_threads.add(place.thread)
                if step.test.options.get("storeOutputAs"):
                    dirty_scopes.add(scope)
        return out - set(rerun)

    # ------------------------------------------------------------ a row's vars

    def vars_for(self, step: EvalStep) -> dict:
        """The registers this row sees and, when its prompt uses it, `_conversation`. Raises TurnBroken
        when an earlier turn of its thread got no answer."""
        extra: dict = {}
        registers = self._registers.get((step.prompt_idx, step.repeat_idx))
        if registers:
            for name, writes in registers.items():
                at = bisect.bisect_left(writes, step.test_idx, key=lambda w: w[0])
                if at:
                    extra[name] = writes[at - 1][1]
        place = self.places.get(key_of(step))
        if place is not None and place.reads_history:
            turns = self._turns.get(place.thread, {})
            history = []
            for test_idx in sorted(t for t in turns if t < step.test_idx):
                turn = turns[test_idx]
                if turn.entry is None:
                    raise TurnBroken(f"turn {place.turn} of {conversation_label(place.conversation_id)}: an earlier "
                                     f"turn failed (turn {turn.number}: {_one_line(turn.error)})")
                history.append(turn.entry)
            extra[CONVERSATION_VAR] = history
        return extra

    # ------------------------------------------------------------ what a finished row leaves

    def record(self, result: EvalResult, raw_output: Any = None, answered: bool | None = None) -> None:
        """Put a finished row in its thread and its stored output in the registers; mark the row with
        its place in a conversation. `raw_output`: the model's output before transforms."""
        step = result.step
        if answered is None:
            answered = result.response.error is None
        place = self.places.get(key_of(step))
        if place is not None:
            entry = turn_entry(result.rendered_prompt, raw_output, result.response.metadata) if answered else None
            self._turns.setdefault(place.thread, {})[step.test_idx] = _Turn(place.turn, entry, result.error)
            if result.conversation is None:
                result.conversation = {"id": place.conversation_id, "turn": place.turn}
                if answered and raw_output != result.response.output:
                    result.conversation["rawOutput"] = raw_output
        name = step.test.options.get("storeOutputAs")
        output = result.response.output
        if name and answered and output not in (None, ""):
            writes = self._registers.setdefault((step.prompt_idx, step.repeat_idx), {}).setdefault(str(name), [])
            bisect.insort(writes, (step.test_idx, output), key=lambda w: w[0])

    def restore(self, result: EvalResult) -> None:
        """A row kept from a stored run (--resume, --retry-errors): its turn and register, as if it ran."""
        answered = result.response.error is None
        raw = (result.conversation or {}).get("rawOutput", result.response.output)
        self.record(result, raw, answered)


def _hashable(value: Any) -> Any:
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


def _one_line(text: str | None) -> str:
    text = " ".join((text or "no answer").split())
    return text if len(text) <= 120 else text[:119] + "…"
