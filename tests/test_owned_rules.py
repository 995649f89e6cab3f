"""Rules that one module owns, checked over the source so that a new reader cannot go around them:

- a grading error is read through the outcome predicates (`scoring/outcome`: grader_errored,
  meta_errored, json_errored, grader_error_mark; written in `types` for stats/), never by the bare
  `graderError` key (writing the mark where a result is made is fine);
- every parallel call of a row's grading goes through `scoring/gather` (its docstring says so): no
  `asyncio.gather`, `TaskGroup`, `create_task` or `ensure_future` in scoring/, methods/ or assertions/
  outside it;
- an assertion tree is walked by `types.walk` (`walk_keyed` with key paths), a grading read back as JSON by
  `types.json_walk`: no hand-written stack over an assertion's `children` or a result's components.
"""

import ast
import re

import pytest
from conftest import ROOT

from factcli.types import Assertion, json_walk, walk, walk_keyed

PACKAGE = ROOT / "factcli"
KEY = "graderError"
# the modules that own the key: the predicates (types.py for stats/, scoring/outcome.py for the rest)
KEY_OWNERS = {"types.py", "scoring/outcome.py"}
PARALLEL = {"gather", "TaskGroup", "create_task", "ensure_future"}
GATHERED = ("scoring", "methods", "assertions")
# Justified exceptions (module -> why); none today.
GATHER_ALLOWED: dict[str, str] = {}


def _is_key(node) -> bool:
    return isinstance(node, ast.Constant) and node.value == KEY


def key_reads(source: str) -> list[int]:
    """Lines that read the grader-error key by hand: `x["graderError"]` (not as an assignment's target),
    `x.get("graderError")`, `"graderError" in x`."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and _is_key(node.slice) and isinstance(node.ctx, ast.Load):
            lines.append(node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "pop")
              and node.args and _is_key(node.args[0])):
            lines.append(node.lineno)
        elif (isinstance(node, ast.Compare) and _is_key(node.left)
              and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)):
            lines.append(node.lineno)
    return lines


def parallel_calls(source: str) -> list[int]:
    """Lines that start calls side by side without scoring/gather: asyncio's gather, TaskGroup,
    create_task, ensure_future (as `asyncio.X`, `loop.create_task` or imported from asyncio)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in PARALLEL:
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "asyncio" and any(
                alias.name in PARALLEL for alias in node.names):
            lines.append(node.lineno)
    return lines


def _modules(*packages: str):
    roots = [PACKAGE / p for p in packages] if packages else [PACKAGE]
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            yield path.relative_to(PACKAGE).as_posix(), path.read_text(encoding="utf-8")


@pytest.mark.parametrize("source, found", [
    ('ok = meta.get("graderError")', [1]),
    ('ok = result.metadata["graderError"]', [1]),
    ('ok = "graderError" in meta', [1]),
    ('meta = {"graderError": True}\nmeta["graderError"] = False', []),  # writes
    ('ok = grader_errored(result)', []),
])
def test_the_key_scan_sees_a_bare_read(source, found):
    assert key_reads(source) == found


def test_no_bare_grader_error_read_outside_its_owners():
    bare = [f"factcli/{name}:{line}" for name, text in _modules() if name not in KEY_OWNERS
            for line in key_reads(text)]
    assert not bare, f"read a grading error with scoring.outcome's predicates, not the bare key: {bare}"


@pytest.mark.parametrize("source, found", [
    ("await asyncio.gather(*aws)", [1]),
    ("async with asyncio.TaskGroup() as tg:\n    tg.create_task(x())", [1, 2]),
    ("from asyncio import gather", [1]),
    ("await gather_all(aws)", []),
])
def test_the_parallel_scan_sees_asyncio(source, found):
    assert parallel_calls(source) == found


def test_every_parallel_call_of_a_grading_goes_through_gather():
    outside = [f"factcli/{name}:{line}" for name, text in _modules(*GATHERED)
               if name != "scoring/gather.py" and name not in GATHER_ALLOWED for line in parallel_calls(text)]
    assert not outside, f"run a row's calls side by side with scoring.gather.gather_all: {outside}"


def test_one_walk_of_an_assertion_tree():
    members = [Assertion("contains", "b"), Assertion("llm-rubric", "c")]
    tree = [Assertion("equals", "a"), Assertion("assert-set", children=members), Assertion("icontains", "d")]
    assert [a.value for a in walk(tree) if a.value] == ["a", "b", "c", "d"]  # a set before its members, as written
    assert [(where, a.type) for where, a in walk_keyed(tree)][1:4] == [
        ("assert[1]", "assert-set"), ("assert[1].assert[0]", "contains"), ("assert[1].assert[1]", "llm-rubric")]
    grading = {"componentResults": [{"reason": "a"}, "not a result", {"reason": "set", "componentResults": [
        {"reason": "b"}]}]}
    assert [c["reason"] for c in json_walk(grading)] == ["a", "set", "b"]


# a stack that a walk extends with an assertion's members or a result's components
HAND_WALK = re.compile(r"(?:extend|append)\([^)\n]*(?:\.children|component_results|componentResults)")
WALK_OWNERS = {"types.py", "scoring/outcome.py"}  # outcome.errored_metrics descends into errored sets alone


def test_no_hand_written_walk():
    found = [f"factcli/{name}:{i}" for name, text in _modules() if name not in WALK_OWNERS
             for i, line in enumerate(text.splitlines(), 1) if HAND_WALK.search(line)]
    assert not found, f"walk an assertion tree with types.walk, a JSON grading with types.json_walk: {found}"
    assert HAND_WALK.search("        stack.extend(a.children or [])")


def test_one_declaration_of_a_methods_concurrency():
    """`maxConcurrency`, its older spellings and its default are methods/settings.py's: each method that has
    it declares it with `max_concurrency()` and reads it with `concurrency(given)`."""
    from factcli.methods.settings import DEFAULT_CONCURRENCY, max_concurrency

    declared = re.compile(r"""Setting\(\s*["']maxConcurrency|DEFAULT_(?:MAX_)?CONCURRENCY\s*="""
                          r"""|get\(\s*["']maxConcurrency""")
    own = [f"factcli/{name}" for name, text in _modules("methods")
           if name != "methods/settings.py" and declared.search(text)]
    assert not own, f"declare a method's maxConcurrency with methods.settings.max_concurrency(): {own}"
    assert DEFAULT_CONCURRENCY is None  # no limit of a method's own: the run's -j
    assert max_concurrency("max_concurrency").old == ("concurrency", "max_concurrency")
