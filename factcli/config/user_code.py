"""Checks of a user's code file at load time, shared by every config key that names one (prompt
functions, `nunjucksFilters`, `extensions`, test generators, script vars): the file is Python,
JavaScript or TypeScript and exists, a Python module imports and has the function, a JavaScript module
loads and exports it, a TypeScript file has a way to run (Node's own type stripping, else the
`typescript` package found from the config's folder). Each failure is one ConfigError naming the
config key, before any call; the code itself runs later through scripting/.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from factcli import sources
from factcli.errors import ConfigError, did_you_mean


def code_file(path: Path, wrong_kind: str, missing: str, file: str, where: str) -> str:
    """The suffix of a Python, JavaScript or TypeScript file that exists (TypeScript: and can run);
    `wrong_kind` is the start of the message for another suffix (`a filter must be a .js or .py file`),
    `missing` that for no file."""
    suffix = path.suffix.lower()
    if suffix not in sources.SCRIPT_SUFFIXES:
        raise ConfigError(f"{wrong_kind}, got '{path.name}'", file, where)
    if not sources.is_file(path):
        raise ConfigError(f"{missing}: {path}", file, where)
    if suffix in sources.TS_SUFFIXES:
        from factcli.scripting.node import check_typescript

        check_typescript(path, file, where)
    return suffix


def python_function(path: Path, name: str, file: str, where: str, hint: str = "", expected: str = "") -> Callable:
    """`name` (or `Class.method`) of the module at `path`, imported once; `hint` follows the error when
    no function of a close name exists, `expected` (what the function takes and returns) the error when
    the name is there but is no function."""
    from factcli.scripting.python import load_module

    try:
        module = load_module(path)
    except Exception as exc:  # noqa: BLE001 - the user's module failed to import: say so now, not on every row
        raise ConfigError(f"{path.name} does not import: {type(exc).__name__}: {exc}", file, where) from None
    owner, _, attr = name.partition(".")
    target = getattr(module, owner, None)
    if attr and target is not None:
        target = getattr(target, attr, None)
    if target is not None and not callable(target):  # the name is there: say what it is, not that it is missing
        raise ConfigError(f"{path.name}:{name} is a {type(target).__name__}, not a function"
                          f"{': ' + expected if expected else ''}", file, where)
    if not callable(target):
        names = [n for n, v in vars(module).items() if callable(v) and not n.startswith("_")]
        raise ConfigError(f"{path.name} has no function '{name}'{did_you_mean(name, names) or hint}", file, where)
    return target


# The function the caller will run, found the way it finds it: a named export (on the module, else on
# the namespace), else the module itself or its default export (`unnamed` says which member of an
# object module stands in for it). The module is imported once: the worker's later imports reuse it.
_PROBE = ("globalThis.__factcliNamespace({file}).then((ns) => {{ const d = ns.default; "
          "const m = d !== undefined ? (d && d.default !== undefined ? d.default : d) : ns; "
          "const fn = {fn}; const t = fn ? (m != null && m[fn] !== undefined ? m[fn] : ns[fn]) "
          ": (typeof m === 'function' ? m : m && ({unnamed})); return typeof t; }})")


def check_js_export(path: Path, fn: str | None, file: str, where: str, *, what: str, instead: str,
                    unnamed: str = "m.default", expected: str = "") -> None:
    """The JavaScript module at `path` loads in the Node worker and exports `fn` (or, without one, a
    function as module.exports or default export). `what`/`instead` word the error without Node;
    `expected` (what the function takes and returns) follows the error for a named export that is
    there but is no function."""
    from factcli.scripting.node import JSError, NodeNotFound, NodeWorkerError, get_worker, require_node

    try:
        require_node(what, instead)
    except NodeNotFound as exc:
        raise ConfigError(str(exc), file, where) from None
    code = _PROBE.format(file=json.dumps(str(path.resolve())), fn=json.dumps(fn), unnamed=unnamed)
    try:
        answer = get_worker().call_sync("transform", {"code": code, "input": None, "context": {}}, timeout=30)
    except JSError as exc:
        raise ConfigError(f"{path.name} does not load: {exc.name}: {exc.js_message}", file, where) from None
    except NodeWorkerError as exc:
        raise ConfigError(f"cannot check {path.name}: {exc}", file, where) from None
    kind = answer.get("value")
    if fn and kind not in ("function", "undefined"):
        raise ConfigError(f"{path.name}:{fn} is {'an' if kind == 'object' else 'a'} {kind}, not a function"
                          f"{': ' + expected if expected else ''}", file, where)
    if kind != "function":
        wanted = f'a function named "{fn}"' if fn else "a function (module.exports = fn or export default fn)"
        raise ConfigError(f"{path.name} does not export {wanted}", file, where)
