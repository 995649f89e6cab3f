"""The shape of the package (docs/architecture.md): imports flow down the stages, no module imports
itself back through a circle, no module is over 700 lines, and the top level stays small."""

import contextlib
import io

import grimp
from conftest import ROOT
from importlinter.cli import lint_imports

PACKAGE = ROOT / "factcli"
MAX_LINES = 700
MAX_TOP_LEVEL = 21


def test_imports_flow_down_the_stages():
    """The contracts in pyproject.toml: a layers contract over all of factcli (exhaustive, so a new
    package must be placed in it) with independent siblings on a level."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.chdir(ROOT):
        code = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True)
    assert code == 0, out.getvalue()


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_back():
    """Function-level imports count too: grimp reads every import statement."""
    graph = grimp.build_graph("factcli", cache_dir=None)
    edges = {m: {i for i in graph.find_modules_directly_imported_by(m) if i.split(".")[0] == "factcli"}
             for m in graph.modules}
    assert _cycles(edges) == []


def test_no_file_is_over_700_lines():
    sizes = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
             for p in PACKAGE.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_every_module_path_the_docs_and_docstrings_name_is_there():
    """A path such as `run/calling/caller.py`, `run/planning/row_vars.build_row` or `factcli/store/clock.py`
    in the docs, the README or any module names a file or package that exists: a module that moves takes
    the texts naming it along (docs/architecture.md is the map)."""
    import re

    packages = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__")
    named = re.compile(r"(?<![\w/.])(?:factcli/)?((?:%s)/[\w/]+?)(?:\.py)?(?=[^\w/]|$)" % "|".join(packages))
    texts = [*PACKAGE.rglob("*.py"), *(ROOT / "docs").glob("*.md"), ROOT / "README.md"]
    missing = set()
    for path in texts:
        for m in named.finditer(path.read_text(encoding="utf-8")):
            where = PACKAGE / m.group(1).rstrip("/")
            if not (where.with_suffix(".py").exists() or where.exists()
                    or any(where.parent.glob(where.name + ".*"))):
                missing.add(f"{path.relative_to(ROOT)}: {m.group(1)}")
    assert sorted(missing) == []


def test_the_top_level_shows_the_stages():
    entries = sorted(p.name for p in PACKAGE.iterdir() if p.name != "__pycache__")
    assert len(entries) <= MAX_TOP_LEVEL, entries


def test_a_call_travels_as_a_typed_request():
    """Issue 50: what a call asks travels as providers/request.CallRequest, from the step that calls through
    run/calling/caller to the provider class that translates it. No dict of `overrides`, `adapt` or `timeout_s`
    keys comes back (docs/architecture.md, "How a grader call travels"), every provider's `call` takes the
    request alone, and no provider's family is guessed from its module's name."""
    import importlib
    import inspect
    import tokenize

    keyed = []
    for path in sorted(PACKAGE.rglob("*.py")):
        with tokenize.open(path) as f:
            for tok in tokenize.generate_tokens(f.readline):
                if tok.type == tokenize.STRING and tok.string.strip("\"'") in ("overrides", "adapt", "timeout_s"):
                    keyed.append(f"{path.relative_to(ROOT)}:{tok.start[0]} {tok.string}")
    assert keyed == []
    guessed = [str(p.relative_to(ROOT)) for p in (PACKAGE / "providers").rglob("*.py")
               if "__module__" in p.read_text(encoding="utf-8")]
    assert guessed == []

    from factcli.providers.base import Provider
    from factcli.run.calling.caller import Caller

    for name in ("echo", "openai_provider", "script", "litellm_provider", "embedding", "search.knowledge",
                 "search.serper", "search.brave", "search.tavily", "search.google", "search.searxng"):
        importlib.import_module(f"factcli.providers.{name}")
    classes, todo = [], [Provider]
    while todo:
        cls = todo.pop()
        classes.append(cls)
        todo.extend(cls.__subclasses__())
    calls = {f"{c.__module__}.{c.__qualname__}": list(inspect.signature(c.call).parameters)
             for c in classes if c.__module__.startswith("factcli.") and "call" in vars(c)}
    assert len(calls) >= 8 and {k: v for k, v in calls.items() if v != ["self", "request"]} == {}
    assert list(inspect.signature(Caller.call).parameters) == ["self", "provider", "request", "accept"]
