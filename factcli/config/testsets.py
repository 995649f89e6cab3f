"""Test loaders by file type (YAML, JSON, JSONL, CSV), and a CSV header's columns (the `__expected` cell
grammar: config/expected_cells)."""

from __future__ import annotations

import copy
import csv
import functools
import io
import itertools
import json
import re
from pathlib import Path
from typing import Any

from factcli import sources
from factcli.config import csv_text, keys, remote
from factcli.config.expected_cells import assertion_from_string, cell_near_miss, parse_number
from factcli.config.lines import ReadLimit, jsonl_lines, text_chunks
from factcli.config.context import check_keys, load_warning, record
from factcli.config.user_code import code_file
from factcli.errors import ConfigError
from factcli.sources import JS_SUFFIXES, PY_SUFFIXES, TS_SUFFIXES
from factcli.scoring.registry import AssertionError_
from factcli.types import row_description

SPECIAL_COLUMNS = ("__expected", "__prefix", "__suffix", "__description", "__providerOutput", "__metric",
                   "__threshold", "__metadata", "__config")
# the special columns that set one field of the test from their cell, by the field
_FIELD_COLUMNS = {"__prefix": "prefix", "__suffix": "suffix", "__description": "description",
                  "__providerOutput": "providerOutput", "__metric": "metric", "__threshold": "threshold"}
# a special column's name with one underscore: a var, with a warning
_SINGLE_UNDERSCORE = tuple("_" + name.lstrip("_") for name in SPECIAL_COLUMNS)
# what a column is (CsvHeader.columns); a role not here is a field of _FIELD_COLUMNS
_VAR, _SKIP, _EXPECTED, _METADATA, _METADATA_LIST, _CONFIG = "var", "skip", "expected", "metadata", "list", "config"
_NEAR_MISS, _BAD_CONFIG = "near miss", "bad config"


def _near_miss(key: str) -> str | None:
    """The error of a column that is almost one of promptfoo's special columns (a typo, not a var)."""
    import difflib

    close = difflib.get_close_matches(key.split(":")[0], SPECIAL_COLUMNS, n=1, cutoff=0.75)
    if close:
        return (f'column "{key}" is not a special column; did you mean "{close[0]}"? '
                "(a column that is meant as a var should not start with __)")
    return None


_NO_COLUMN = (_SKIP, "", None, None)


@functools.lru_cache(maxsize=1024)
def _column(key: str) -> tuple[str, str, Any, str | None]:
    """What a CSV column named `key` (stripped) is: (role, name, what the role needs, a warning or
    None). (Kept: test_from_csv_row reads a header again for each row it is given.)"""
    warning = None
    if key.startswith(_SINGLE_UNDERSCORE) and not key.startswith("__"):
        warning = f'column "{key}" has a single underscore; did you mean "_{key}"? It is used as a var'
    if key.startswith("__expected"):
        return _EXPECTED, key, None, warning
    if key in _FIELD_COLUMNS:
        return _FIELD_COLUMNS[key], key, None, warning
    if key.startswith("__metadata:"):
        mkey = key[len("__metadata:"):]
        return (_METADATA_LIST, key, mkey[:-2], warning) if mkey.endswith("[]") else (_METADATA, key, mkey, warning)
    if key == "__metadata":
        return _SKIP, key, None, 'the "__metadata" column needs a key, e.g. "__metadata:category"; ignored'
    if key.startswith("__config:"):
        parts = key[len("__config:"):].split(":")
        if len(parts) != 2:
            return _SKIP, key, None, f'column "{key}" should look like __config:__expected<N>:threshold; ignored'
        target, ckey = parts
        m = re.match(r"^__expected(\d*)$", target)
        index = None if not m else 0 if m.group(1) == "" else int(m.group(1)) - 1
        if index is None or index < 0:
            return _BAD_CONFIG, key, f"invalid expected key '{target}' (use __expected or __expected<N>)", warning
        if ckey != "threshold":
            return _BAD_CONFIG, key, f"invalid config key '{ckey}' (only 'threshold' is allowed)", warning
        return _CONFIG, key, (index, ckey), warning
    if key.startswith("__"):
        error = _near_miss(key)
        if error:
            return _NEAR_MISS, key, error, warning
    return _VAR, key, None, warning


class CsvHeader:
    """What each column of a CSV header is (promptfoo-semantics §7): a var, one of promptfoo's
    special columns, or a mistake (a near miss of a special column is an error when a row reaches
    it; a single underscore, `__metadata` without a key, a `__config:` column of the wrong shape, a
    warning). Every row of the header is read by it (`test`)."""

    def __init__(self, keys, file: str):
        self.file = file
        # (role, the name stripped, what the role needs, a warning) a column; a key None is
        # csv.DictReader's list of a row's cells beyond the header's
        self.columns = [_NO_COLUMN if k is None else _column(k.strip()) for k in keys]
        self.warnings = list(dict.fromkeys(f"{file}: {c[3]}" for c in self.columns if c[3]))

    def var_names(self) -> list[str] | None:
        """The vars' names, a column each, when every column is a var under a name of its own that
        does not start with `_` (the special columns' space): then a row's vars are its cells
        (CsvRows._plain); else None."""
        names = [name for _, name, _, _ in self.columns]
        plain = all(role == _VAR and not name.startswith("_") for role, name, _, _ in self.columns)
        return names if plain and len(set(names)) == len(names) else None

    def say(self, warnings: list[str]) -> None:
        """Add the header's warnings to `warnings` (each once)."""
        for msg in self.warnings:
            if msg not in warnings:
                warnings.append(msg)

    def test(self, cells, rownum: int) -> dict:
        """The test mapping of row `rownum`, its cells in the header's order (a missing one None)."""
        file = self.file
        vars_: dict = {}
        asserts: list[dict] = []
        fields: dict = {}
        metadata: dict = {}
        configs: dict[int, dict] = {}
        for (role, key, arg, _), value in zip(self.columns, cells):
            if value is None:
                value = ""
            if role == _VAR:
                vars_[key] = value
            elif role == _EXPECTED:
                if value.strip():
                    try:
                        asserts.append(assertion_from_string(value.strip()))
                    except AssertionError_ as exc:
                        # promptfoo aborts the whole eval on such a cell while loading the CSV
                        raise ConfigError(str(exc), file, f"row {rownum}, column {key}") from None
            elif role == _METADATA_LIST:
                if value.strip():
                    parts = re.split(r"(?<!\\),", value)
                    metadata[arg] = [p.strip().replace("\\,", ",") for p in parts]
            elif role == _METADATA:
                if value.strip():
                    metadata[arg] = value
            elif role == _CONFIG:
                number = parse_number(value)
                if number is None:
                    raise ConfigError(f"invalid numeric value {value!r} for threshold", file,
                                      f"row {rownum}, column {key}")
                configs.setdefault(arg[0], {})[arg[1]] = number
            elif role == _BAD_CONFIG:
                raise ConfigError(arg, file, f"row {rownum}, column {key}")
            elif role == _NEAR_MISS:
                raise ConfigError(arg, file, f"column {key}")
            elif role != _SKIP:
                fields[role] = value
        metric = fields.get("metric")
        for i, a in enumerate(asserts):
            if metric is not None:
                a["metric"] = metric
            for ckey, cval in configs.get(i, {}).items():
                a[ckey] = cval
                metadata[ckey] = cval
        options = {k: v for k, v in fields.items() if k in ("prefix", "suffix")}
        threshold = parse_number(fields["threshold"]) if "threshold" in fields else None
        return row_mapping(vars_, rownum, asserts, options, fields.get("description"), fields.get("providerOutput"),
                            threshold, metadata)


def row_mapping(vars_: dict, rownum: int, asserts: list | None = None, options: dict | None = None,
                 description: str | None = None, provider_output: str | None = None, threshold: float | None = None,
                 metadata: dict | None = None) -> dict:
    """A CSV row's test mapping, as promptfoo makes it (its keys in promptfoo's order)."""
    test: dict[str, Any] = {"vars": vars_, "assert": [] if asserts is None else asserts,
                            "options": {} if options is None else options,
                            "description": description or row_description(rownum)}
    if provider_output:
        test["providerOutput"] = provider_output
    if threshold is not None:
        test["threshold"] = threshold
    if metadata:
        test["metadata"] = metadata
    return test


def test_from_csv_row(row: dict[str, str], file: str, rownum: int, warnings: list[str]) -> dict:
    """The test mapping of a CSV row, as csv.DictReader reads it (its header's warnings added to
    `warnings`)."""
    header = CsvHeader(row, file)
    test = header.test(row.values(), rownum)
    header.say(warnings)
    return test


def csv_tests(text: str, file: str, warnings: list[str]) -> list[dict]:
    """The tests of a CSV text (a local file's or a downloaded one's); `file` names it in errors."""
    rows = CsvRows(text, file, warnings)
    return [t for _, t in rows]


class CsvRows:
    """The test mappings of a CSV text, converted a row at a time each time they are iterated: a
    100,000-row file is never held as 100,000 row mappings and test mappings at once (issue 30).

    Checked whole when made, as when the file was read into a list: the quoting (promptfoo's relaxed
    retry when strict parsing fails) and every row's cell count; the first row is converted then too,
    since the column warnings (a header's business) are said while the config loads. With a `limit`,
    the text is read, checked and iterated no further than its first `limit` rows (ReadLimit)."""

    def __init__(self, source: str | Path, file: str, warnings: list[str], limit: int | None = None):
        """`source`: the CSV's text (a downloaded file's), or its path, read again each time it is iterated."""
        self.source, self.file, self.limit = source, file, limit
        self.delimiter, strict_only = csv_text.settings()
        self.strict = True
        try:
            self.count = self._scan()
        except csv.Error as exc:
            if strict_only or "field limit" in str(exc):
                raise ConfigError(_csv_error(exc, "invalid CSV"), file, f"line {self._scanning.line_num}") from None
            # promptfoo retries with relaxed quoting; Python's non-strict reader is the same idea
            self.strict = False
            try:
                self.count = self._scan()
            except csv.Error as again:
                raise ConfigError(_csv_error(again), file, f"line {self._scanning.line_num}") from None
        for _ in zip(range(1), self._tests(warnings)):
            pass
        if self.empty:  # promptfoo runs them (with empty vars), so factcli does: said before they are paid for
            shown = ", ".join(map(str, self.empty[:5])) + (f" and {len(self.empty) - 5} more" if len(self.empty) > 5 else "")
            many = len(self.empty) > 1
            warnings.append(f"{file}: row{'s' if many else ''} {shown}: every cell is empty or blank; promptfoo runs "
                            f"such a row too (empty vars, a call each): delete {'them' if many else 'it'} to leave "
                            f"{'them' if many else 'it'} out")
        for (column, written, meant), rows in self.near_misses.items():
            warnings.append(f"{file}: row {rows[0]}{f' and {len(rows) - 1} more' if len(rows) > 1 else ''}, column "
                            f"{column}: '{written}' is no assertion type, so the whole cell is an equals value (as "
                            f"promptfoo reads it); did you mean '{meant}:'?")

    def _reader(self):
        chunks = (text_chunks(self.source) if isinstance(self.source, str)
                  else sources.read_chunks(self.source, self.file, ""))
        return csv_text.reader(chunks, self.delimiter, self.strict)

    def _scan(self) -> int:
        """The number of rows (csv.DictReader's: blank lines are none), each row's cells checked."""
        reader = self._scanning = self._reader()
        header = next(reader, None)
        count, wide = 0, None
        self.empty, self.near_misses = [], {}  # rows of empty cells; {(column, prefix, type meant): rows}
        if header is not None and self.limit != 0:
            width = len(header)
            expected = [(i, k.strip()) for i, k in enumerate(header) if k.strip().startswith("__expected")]
            for row in reader:
                if row:
                    count += 1
                    if not any(row) or (len(row) == 1 and not row[0].strip()):  # (any() first: it is fast)
                        self.empty.append(count)
                    for i, column in expected:
                        if i < len(row) and (miss := cell_near_miss(row[i])):
                            self.near_misses.setdefault((column, *miss), []).append(count)
                    if len(row) > width and wide is None:
                        wide = ConfigError(f"row has {len(row)} cells but the header has {width}", self.file,
                                           f"row {count}")
                    if count == self.limit:  # the next row is not read
                        break
        del self._scanning
        if wide is not None:  # only once the whole text parsed in this mode, as before
            raise wide
        return count

    def __len__(self) -> int:
        return self.count

    def __iter__(self):
        return self._tests([])

    def _tests(self, warnings: list[str]):
        """(row number, test mapping) per row, as csv.DictReader reads them (a short row's missing
        cells are None)."""
        reader = self._reader()
        header = next(reader, None)
        if header is None:
            return
        names = CsvHeader(header, self.file).var_names()
        if names is not None:
            yield from self._plain(reader, names, self.limit)
            return
        for n, cells in _cells(reader, header, None, self.limit):
            yield n, test_from_csv_row(cells, self.file, n, warnings)

    def plain_tests(self):
        """(row number, test mapping) per row, as iterating gives them, when every column of the header
        is a var (CsvHeader.var_names): each mapping is {vars: the row's cells by the header's names,
        assert: [], options: {}, description}, made afresh. None for any other header."""
        reader = self._reader()
        header = next(reader, None)
        names = None if header is None else CsvHeader(header, self.file).var_names()
        return None if names is None else self._plain(reader, names, self.limit)

    @staticmethod
    def _plain(reader, names: list[str], limit: int | None):
        """The rows of a header whose every column is a var (CsvHeader.var_names): each row's cells are its
        vars, a missing cell empty."""
        for n, vars_ in _cells(reader, names, "", limit):
            yield n, row_mapping(vars_, n)


def _csv_error(exc: csv.Error, what: str = "not a readable CSV file") -> str:
    if "field limit" in str(exc):  # csv.field_size_limit: sources.VALUE_LIMIT
        return f"a cell is larger than the {sources.VALUE_LIMIT_TEXT} a value may hold"
    return f"{what}: {exc}"


def _cells(reader, keys: list[str], missing: str | None, limit: int | None = None):
    """(row number, {key: cell}) per row of `reader` under the header `keys`, as csv.DictReader reads
    them: blank lines are no row, a short row's missing cells are `missing`; no row past `limit` is read."""
    width, n = len(keys), 0
    if limit == 0:
        return
    for row in reader:
        if not row:
            continue
        n += 1
        cells = dict(zip(keys, row))
        if len(row) < width:
            for key in keys[len(row):]:
                cells[key] = missing
        yield n, cells
        if n == limit:
            return


class JsonlRows:
    """The tests of a JSONL text, each line parsed again each time they are iterated. Checked whole
    when made, as when the file was read into a list (each line's JSON, its depth); `plain` says
    whether every line is a test itself, not a test file or a URL to read in its place. With a
    `limit`, no line past the first `limit` non-blank ones is read (ReadLimit)."""

    def __init__(self, source: str | Path, file: str, limit: int | None = None):
        """`source`: the JSONL's text, or its path, read again each time it is iterated."""
        self.source, self.file, self.limit = source, file, limit
        self.count, self.plain = 0, True
        for n, line in self._lines():
            try:
                t = sources.check_depth(json.loads(line), file)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"invalid JSON: {exc.msg}", file, f"line {n}") from None
            except RecursionError:
                raise ConfigError("invalid JSON: nested too deeply", file, f"line {n}") from None
            self.count += 1
            self.plain = self.plain and not (sources.is_file_ref(t) or remote.is_remote(t))

    def _lines(self):
        """(line number, line) of the text's non-blank lines, as str.splitlines() numbers them, a
        piece of the text at a time (a cut after a newline splits no line)."""
        chunks = (text_chunks(self.source, 1 << 20) if isinstance(self.source, str)
                  else sources.read_chunks(self.source, self.file, ""))
        return itertools.islice(jsonl_lines(chunks, self.file), self.limit)  # (islice reads no line past it)

    def __len__(self) -> int:
        return self.count

    def __iter__(self):
        loads = json.loads
        return ((j, loads(line)) for j, (_, line) in enumerate(self._lines()))


class FileEntries:
    """A test file's entries of `tests:`, (test mapping, its context, `row N` or `[j]`), made as they
    are iterated from its rows (CsvRows, JsonlRows)."""

    def __init__(self, rows, ctx, label: str):
        self.rows, self.ctx, self.label = rows, ctx, label

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self):
        ctx, label = self.ctx, self.label
        return ((t, ctx, label.format(n)) for n, t in self.rows)

    def plain_tests(self):
        """(row number, test mapping) of a CSV file without special columns (CsvRows.plain_tests), else None."""
        return self.rows.plain_tests() if isinstance(self.rows, CsvRows) else None


class Entries:
    """What load_tests gives, [(test mapping, Ctx, key path)] in order: a list whose CSV files' entries
    are made as it is iterated, so the loader parses a test at a time. Indexing or slicing it (the
    suite a beforeAll hook sees) makes the whole list once; the same mappings are read after that."""

    def __init__(self, parts: list | None = None):
        self.parts: list = parts or []

    def append(self, entry) -> None:
        if not self.parts or not isinstance(self.parts[-1], list):
            self.parts.append([])
        self.parts[-1].append(entry)

    def extend(self, entries) -> None:
        if isinstance(entries, Entries):
            self.parts.extend(entries.parts)
        elif isinstance(entries, FileEntries):
            self.parts.append(entries)
        else:
            entries = list(entries)
            if entries:
                self.parts.append(entries)

    def __len__(self) -> int:
        return sum(len(p) for p in self.parts)

    def __bool__(self) -> bool:
        return any(len(p) for p in self.parts)

    def __iter__(self):
        return itertools.chain.from_iterable(self.parts)

    def __getitem__(self, index):
        if len(self.parts) != 1 or not isinstance(self.parts[0], list):
            self.parts = [list(self)]
        return self.parts[0][index]


TEST_FILE_SUFFIXES = (".yaml", ".yml", ".json", ".jsonl", ".csv")
GENERATOR_SUFFIXES = PY_SUFFIXES + JS_SUFFIXES
_GENERATOR_REF = re.compile(r"\.(?:py|js|cjs|mjs|ts|mts|cts|tsx)(?::[A-Za-z_$][\w.$]*)?$")
_NO_CONFIG = object()
_generated_once: dict[tuple, Any] = {}  # what each generator returned, this process (its module is imported once too)


def load_tests(value: Any, ctx, key: str, limit: ReadLimit | None = None) -> Entries:
    """`tests:` -> [(test mapping, context whose file/base it came from, key path)]: test mappings, test
    files and globs of them (YAML, JSON, JSONL, CSV), and test generators (promptfoo-features §4-5), each
    spliced in at its place in the list. `limit`: how far the CSV and JSONL files are read (--filter-first-n)."""
    if value is None:
        return Entries()
    items = value if isinstance(value, list) else [value]
    out = Entries()
    for i, item in enumerate(items):
        where = f"{key}[{i}]" if isinstance(value, list) else key
        if isinstance(item, dict) and "path" in item:  # {path: file://gen.py:fn, config: {...}}
            check_keys(item, keys.names("testGenerator"), ctx.file, where)
            ref = item["path"]
            if not isinstance(ref, str) or not _GENERATOR_REF.search(ref):
                raise ConfigError("expected a test generator, e.g. file://tests.py:generate", ctx.file, where + ".path")
            out.extend(_generated(_as_ref(ref), item.get("config"), ctx, where, limit))
            continue
        if isinstance(item, dict):
            out.append((item, ctx, where))
            continue
        if remote.is_remote(item):
            out.extend(_remote_tests(item, ctx, where))
            continue
        if not isinstance(item, str) or not (sources.is_file_ref(item) or _looks_like_path(item)):
            raise ConfigError(f"expected a test mapping or a file:// reference, got {item!r}", ctx.file, where)
        ref = _as_ref(item)
        path, func = sources.ref_path(ref, ctx.base)
        if func or (path.suffix.lower() in GENERATOR_SUFFIXES + TS_SUFFIXES and not sources.is_glob(ref[7:])):
            out.extend(_generated(ref, _NO_CONFIG, ctx, where, limit))
            continue
        try:
            files = sources.expand_glob(path, ctx.file, where)  # a file, or each file of a glob, sorted
        except ConfigError as exc:  # a missing test file: the rest of the config is still checked
            if not record(exc):
                raise
            continue
        for p in files:
            out.extend(_tests_from_file(p, ctx, where, limit))
    return out


def _remote_tests(ref: str, ctx, where: str) -> list[tuple[dict, Any, str]]:
    """A Hugging Face dataset's rows, or a test file at a URL read by the rules of its format; each is
    data with a context of its own (never rendered), named in errors by its row."""
    from factcli.config.context import Ctx

    if ref.startswith(remote.HF_PREFIX):
        sub = Ctx(ctx.file, ctx.base, ctx.templates)
        return [(t, sub, f"{where}: row {n}") for n, t in enumerate(remote.dataset_tests(ref, ctx.file, where), 1)]
    url = remote.sheet_csv_url(ref) or ref
    suffix = ".csv" if url != ref else remote.url_suffix(ref)
    if not suffix:
        raise ConfigError(f"cannot tell the format of {remote.shown(ref)}: tests at a URL are a .csv, .json, .jsonl, .yaml or "
                          ".yml file (or a Google Sheet)", ctx.file, where)
    data = remote.download(url, ctx.file, where)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{remote.shown(ref)}: not UTF-8 text (byte {exc.start})", ctx.file, where) from None
    sub = Ctx(remote.shown(ref), ctx.base, ctx.templates)
    if suffix == ".csv":
        warnings: list[str] = []
        rows = csv_tests(text, remote.shown(ref), warnings)
        for msg in warnings:
            load_warning(msg)
        return [(t, sub, f"row {n}") for n, t in enumerate(rows, 1)]
    value = sources.parse_structured(text, suffix, remote.shown(ref))
    value = [value] if isinstance(value, dict) else value
    if not isinstance(value, list):
        raise ConfigError("expected a list of tests", remote.shown(ref))
    out: list[tuple[dict, Any, str]] = []
    for j, t in enumerate(value):
        if remote.is_remote(t):
            out.extend(_remote_tests(t, sub, f"[{j}]"))
        else:
            out.append((t, sub, f"[{j}]"))
    return out


def _looks_like_path(item: str) -> bool:
    """promptfoo takes a test entry without `file://` as a path too: a test file, a glob or a generator."""
    return "\n" not in item and (item.lower().endswith(TEST_FILE_SUFFIXES) or sources.is_glob(item)
                                 or bool(_GENERATOR_REF.search(item)))


def _as_ref(item: str) -> str:
    return item if sources.is_file_ref(item) else "file://" + item


def _tests_from_file(p: Path, ctx, where: str, limit: ReadLimit | None) -> Entries | list[tuple[dict, Any, str]]:
    from factcli.config.context import Ctx

    suffix = p.suffix.lower()
    if suffix in GENERATOR_SUFFIXES + TS_SUFFIXES:  # a generator a glob matched
        return _generated(f"file://{p}", _NO_CONFIG, ctx, where, limit)
    if suffix not in TEST_FILE_SUFFIXES:
        hint = " (save it as CSV)" if suffix in (".xlsx", ".xls") else ""
        raise ConfigError(f"unsupported test file type: {p.name}{hint}; tests are read from .yaml, .json, .jsonl "
                          ".csv, or a generator (.py, .js)", ctx.file, where)
    sub = Ctx(str(p), p.parent, ctx.templates)
    if suffix == ".csv":
        warnings: list[str] = []
        # the cells keep their bytes: a CRLF inside a quoted cell reaches the model as CRLF, as in promptfoo
        # read as a stream, each time it is iterated
        rows = CsvRows(p, str(p), warnings, None if limit is None else limit.left)
        if limit is not None:
            limit.took(rows.count)
        for msg in warnings:
            load_warning(msg)
        return Entries([FileEntries(rows, sub, "row {}")])
    if suffix == ".jsonl":
        lines = JsonlRows(p, str(p), None if limit is None else limit.left)
        if lines.plain:  # every line a test: made as it is iterated
            if limit is not None:
                limit.took(lines.count)
            return Entries([FileEntries(lines, sub, "[{}]")])
        # a line that names other tests gives any number of them, none maybe: every line is read
        data = [t for _, t in (lines if limit is None else JsonlRows(p, str(p)))]
    else:
        data = sources.load_structured(p)
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise ConfigError("expected a list of tests", str(p))
    out: list[tuple[dict, Any, str]] = []
    for j, t in enumerate(data):
        if sources.is_file_ref(t) or remote.is_remote(t):
            out.extend(load_tests(t, sub, f"[{j}]", limit))
        else:
            out.append((t, sub, f"[{j}]"))
    return out


def _generated(ref: str, config: Any, ctx, where: str, limit: ReadLimit | None = None) -> list[tuple[dict, Any, str]]:
    """Run a test generator once, now (before any model call), and give its tests, each checked later by
    parse_test like any other; errors name the generator and the index (`tests[0]: gen.py:fn[2].vars`)."""
    from factcli.config.context import Ctx
    from factcli.scripting.generators import GeneratorError, generator_name, run_generator

    path, func = sources.ref_path(ref, ctx.base)
    suffix = code_file(path, "a test generator must be a .py or .js file", "test generator file not found", ctx.file,
                       where)
    if config is not _NO_CONFIG:
        config = _config_files(config, ctx, where + ".config")
    name = generator_name(path, func)
    key = (str(path.resolve()), func, "" if config is _NO_CONFIG else json.dumps(config, sort_keys=True, default=str))
    if key not in _generated_once:  # several -c files are checked one by one, then merged: still one call
        try:
            _generated_once[key] = run_generator(path, func, *(() if config is _NO_CONFIG else (config,)))
        except GeneratorError as exc:
            raise ConfigError(str(exc), ctx.file, where) from None
    value = copy.deepcopy(_generated_once[key])
    if isinstance(value, dict) and suffix not in PY_SUFFIXES and func is None:
        value = [value]  # a JS module exporting one test (promptfoo accepts it)
    if not isinstance(value, list):
        got = "nothing" if value is None else {"dict": "an object", "str": "a string"}.get(
            type(value).__name__, type(value).__name__)
        raise ConfigError(f"test generator {name} must return a list of test cases, got {got}", ctx.file, where)
    # generated values are data: the tests get a context of their own, so no var value is rendered
    sub = Ctx(ctx.file, ctx.base, ctx.templates)
    out: list[tuple[dict, Any, str]] = []
    for j, t in enumerate(value):
        at = f"{where}: {name}[{j}]"
        if isinstance(t, dict):
            out.append((t, sub, at))
        elif isinstance(t, str):  # a test file or glob, as in a tests file
            out.extend(load_tests(t, sub, at, limit))
        else:
            raise ConfigError(f"expected a test mapping, got {type(t).__name__} {t!r}", ctx.file, at)
    return out


def _config_files(value: Any, ctx, where: str) -> Any:
    """A generator's `config:` with every `file://` value loaded first, as promptfoo does: JSON and YAML
    parsed, CSV as a list of row mappings (one column: a list of its values), other files as text; a glob
    gives the files' contents one after another."""
    if isinstance(value, dict):
        return {k: _config_files(v, ctx, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_config_files(v, ctx, f"{where}[{i}]") for i, v in enumerate(value)]
    if not sources.is_file_ref(value):
        return value
    path, func = sources.ref_path(value, ctx.base)
    if func or path.suffix.lower() in GENERATOR_SUFFIXES + TS_SUFFIXES:
        return value  # code is passed on as its reference
    if not sources.is_glob(value[len("file://"):]):
        return _config_file(path, ctx.file, where)
    out: list = []
    for p in sources.expand_glob(path, ctx.file, where):
        data = _config_file(p, ctx.file, where)
        if data is None:
            continue
        if isinstance(data, list):
            out.extend(data)
        else:
            out.append(data)
    return out


def _config_file(path: Path, file: str, where: str) -> Any:
    suffix = path.suffix.lower()
    if not sources.is_file(path):
        raise ConfigError(f"file not found: {path}", file, where)
    if suffix in (".json", ".yaml", ".yml", ".jsonl"):
        return sources.load_structured(path)
    text = sources.read_text(path, file, where)
    if suffix != ".csv":
        return text
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    if rows and len(rows[0]) == 1:
        return [next(iter(r.values())) for r in rows]
    return rows
