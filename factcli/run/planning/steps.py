"""The steps a run executes (`EvalRun.steps`): the plan `config/plan.expand` made, and the few ways a
run narrows it. One object owns them, so no module reaches into the run for its list:

- `--resume` and `--retry-errors` leave the rows they keep out (run/recording/resume: `keyed`, `leave_out`);
- the pytest plugin runs the rows its items select (`keep_only`, from run/api.Evaluation);
- calibrate gives each step its column's variant of the test (`map`);
- the stored run's record of which tests the run selected (`tests_selected`);
- the executor iterates them and everyone counts them (`len`; `first` for a one-row check).

Until it is narrowed the plan stays what `expand` made (config/plan.Plan: each step made as a worker
pulls it, issue 30); narrowed, it is the list of the steps left. A row is known by its key
(test_idx, prompt_idx, repeat_idx), never by its step's identity: each iteration of a plan makes new
steps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from factcli.types import EvalStep

Key = tuple[int, int, int]


def key_of(step: EvalStep) -> Key:
    return (step.test_idx, step.prompt_idx, step.repeat_idx)


class Steps:
    __slots__ = ("_plan",)

    def __init__(self, plan: Iterable[EvalStep] = ()):
        self._plan = plan

    def __iter__(self) -> Iterator[EvalStep]:
        return iter(self._plan)

    def __len__(self) -> int:
        return len(self._plan)

    def __repr__(self) -> str:
        return f"Steps({len(self)})"

    def first(self) -> EvalStep:
        return next(iter(self._plan))

    def keyed(self) -> dict[Key, EvalStep]:
        """Every step by its key, in order (one iteration of the plan: these are the steps' objects)."""
        return {key_of(s): s for s in self._plan}

    def leave_out(self, keys: set[Key], keyed: dict[Key, EvalStep] | None = None) -> None:
        """Run only the steps whose key is not in `keys`; `keyed`: this plan's steps by key (`keyed()`),
        when the caller holds them already (they stay the objects it holds)."""
        keyed = self.keyed() if keyed is None else keyed
        self._plan = [s for k, s in keyed.items() if k not in keys]

    def keep_only(self, keys: set[Key]) -> None:
        """Run only the steps whose key is in `keys`."""
        self._plan = [s for s in self._plan if key_of(s) in keys]

    def map(self, change: Callable[[EvalStep], EvalStep]) -> None:
        """Each step replaced by `change(step)` (the same key)."""
        self._plan = [change(s) for s in self._plan]

    def tests_selected(self, all_tests) -> list[int] | None:
        """The places in `all_tests` (the suite's tests) of the tests these steps run, in order; None
        when they are every test (a 100,000-test plan learns that without an index, issue 30)."""
        plan = self._plan
        if getattr(plan, "every_test_planned", False) and (plan.tests is all_tests or (
                len(plan.tests) == len(all_tests) and all(a is b for a, b in zip(plan.tests, all_tests)))):
            return None
        if getattr(plan, "positions", None) is not None:  # a filtered streamed suite (config/plan.expand)
            selected = [i for i, n in zip(plan.positions, plan.counts) if n] if plan.cols and plan.repeat > 0 else []
            return selected if len(selected) != len(all_tests) else None
        if hasattr(all_tests, "materialize"):  # a streamed suite's tests, the same objects as the plan's
            all_tests = all_tests.materialize()
        index = {id(t): i for i, t in enumerate(all_tests)}
        selected = sorted({index[id(s.test)] for s in plan if id(s.test) in index})
        return selected if len(selected) != len(all_tests) else None
