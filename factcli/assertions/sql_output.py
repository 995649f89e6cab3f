"""SQL output assertions, scored as promptfoo 0.121.20 scores them: is-sql (the output is SQL that
parses for `databaseType`, default MySQL, touching only allowedTables / allowedColumns) and
contains-sql (a fenced sql block, or else the whole output, is). promptfoo parses with
node-sql-parser; sqlglot with the matching dialect is used here, plus promptfoo's own pre-checks
(unbalanced backticks, the "missing comma" pattern, MySQL's generate_series). The grammars differ:
sqlglot accepts some statements node-sql-parser rejects and the other way round, a statement sqlglot
can only keep as an opaque command is rejected, and dialects node-sql-parser has but sqlglot lacks
(DB2, FlinkSQL, Noql) are parsed with sqlglot's generic dialect. allowedTables / allowedColumns are
checked against node-sql-parser-style authority strings (`select::null::users`,
`select::users::id`) built from sqlglot's tree; their order in the "Found: […]" reason, and
node-sql-parser's quirks about which statement type a column is attributed to, are approximated.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from factcli import templating
from factcli.assertions.js_semantics import js_regex, js_trim, js_truthy, output_string
from factcli.scoring.registry import AssertionContext, AssertionError_, assertion
from factcli.types import GradingResult



_SELECT_MODIFIERS = "(?:all|distinct)"
_MYSQL_SELECT_MODIFIERS = ("(?:all|distinct(?:row)?|high_priority|straight_join|sql_(?:big_result|buffer_result|"
                           "cache|calc_found_rows|no_cache|small_result))")
_IDENT = "[A-Za-z_][A-Za-z0-9_]*"


def _missing_comma_pattern(modifiers: str) -> re.Pattern:
    return re.compile(rf"\bselect\s+(?:{modifiers}\s+)*(?!{modifiers}\b){_IDENT}\s+{_IDENT}\s+from\b", re.I)


_MISSING_COMMA = _missing_comma_pattern(_SELECT_MODIFIERS)
_MYSQL_MISSING_COMMA = _missing_comma_pattern(_MYSQL_SELECT_MODIFIERS)
_DOLLAR_QUOTE = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$")

# node-sql-parser's databases -> sqlglot dialects ("" = sqlglot's generic dialect)
_SQL_DIALECTS = {
    "mysql": "mysql", "mariadb": "mysql", "postgresql": "postgres", "bigquery": "bigquery", "hive": "hive",
    "sqlite": "sqlite", "transactsql": "tsql", "snowflake": "snowflake", "redshift": "redshift",
    "trino": "trino", "athena": "athena", "db2": "", "flinksql": "", "noql": "",
}


def _quoted_end(sql: str, start: int, quote_char: str) -> int:
    closing = "]" if quote_char == "[" else quote_char
    i = start + 1
    while i < len(sql):
        if closing != "]" and sql[i] == "\\":
            i += 2
            continue
        if sql[i] == closing:
            if i + 1 < len(sql) and sql[i + 1] == closing:
                i += 2
                continue
            return i + 1
        i += 1
    return len(sql)


def _strip_ignored_sql(sql: str, database: str) -> str:
    """Quoted text and comments blanked out, so the heuristics only see SQL keywords."""
    brackets = database in ("TransactSQL", "Sqlite")
    chunks: list[str] = []
    plain = i = 0
    while i < len(sql):
        ch = sql[i]
        end = None
        replacement = " "
        if ch in "'\"`" or (ch == "[" and brackets):
            end, replacement = _quoted_end(sql, i, ch), " ? "
        elif (ch == "-" and sql[i + 1:i + 2] == "-") or ch == "#":
            end = i + 1
            while end < len(sql) and sql[end] not in "\r\n":
                end += 1
        elif ch == "/" and sql[i + 1:i + 2] == "*":
            close = sql.find("*/", i + 2)
            end = len(sql) if close == -1 else close + 2
        elif ch == "$":
            m = _DOLLAR_QUOTE.match(sql, i)
            if m:
                close = sql.find(m.group(0), i + len(m.group(0)))
                end = len(sql) if close == -1 else close + len(m.group(0))
                replacement = " ? "
        if end is None:
            i += 1
            continue
        chunks.extend((sql[plain:i], replacement))
        i = plain = end
    chunks.append(sql[plain:])
    return "".join(chunks)


class _SqlError(Exception):
    pass


def _parse_sql(sql: str, database: Any) -> list:
    """sqlglot standing in for node-sql-parser's parse(sql, {database})."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    if not isinstance(database, str):
        raise _SqlError("database.toLowerCase is not a function")
    key = database.lower()
    if key not in _SQL_DIALECTS:
        raise _SqlError(f"{database} is not supported currently")
    import logging

    log = logging.getLogger("sqlglot")
    level = log.level
    log.setLevel(logging.ERROR)  # "falling back to parsing as a Command" is ours to judge, not to print
    try:
        statements = [s for s in sqlglot.parse(sql.strip(), read=_SQL_DIALECTS[key] or None) if s is not None]
    except (SqlglotError, RecursionError, ValueError) as exc:
        raise _SqlError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    finally:
        log.setLevel(level)
    allowed = tuple(getattr(exp, name) for name in (
        "Query", "Insert", "Update", "Delete", "Create", "Drop", "Alter", "Merge", "Use", "Set", "Describe",
        "TruncateTable", "Transaction", "Commit", "Rollback", "Grant", "Revoke", "Show", "Cache", "Uncache",
        "Pragma", "Analyze", "LoadData", "Copy", "Kill", "Lock",
    ) if hasattr(exp, name))
    pieces = [p for p in re.split(r";", sql) if p.strip()]
    for statement, piece in zip(statements, pieces):
        statement.meta["source"] = piece
    for statement in statements:
        if isinstance(statement, exp.Command):
            if str(statement.this).upper() in ("REPLACE", "SHOW"):  # node-sql-parser knows these
                continue
            raise _SqlError(f"not a SQL statement: {statement.sql()[:60]!r}")
        if not isinstance(statement, allowed):
            raise _SqlError(f"not a SQL statement: {statement.sql()[:60]!r}")
        if isinstance(statement, exp.Select) and not statement.expressions:
            raise _SqlError("SELECT without a column list")
        if isinstance(statement, exp.Select) and not re.search(r"\bselect\b", _source_text(statement), re.I):
            raise _SqlError("a query must start with SELECT")  # sqlglot reads `FROM t` as SELECT * FROM t
        if key in ("mysql", "mariadb", "postgresql"):
            unsupported = (exp.Qualify, exp.Fetch) + ((exp.ILike,) if key != "postgresql" else ())
            if any(True for _ in statement.find_all(*unsupported)):
                raise _SqlError("syntax node-sql-parser does not accept for this database")
        if isinstance(statement, exp.Update) and not statement.expressions:
            raise _SqlError("UPDATE without SET")
        if key in ("mysql", "mariadb") and any(not isinstance(t.this, exp.Identifier)
                                               for t in statement.find_all(exp.Table)):
            raise _SqlError("table functions are not MySQL syntax")  # node-sql-parser rejects them
    if sql.count("`") % 2:
        raise _SqlError("unterminated backquoted identifier")
    if re.search(r",\s*(?:,|from\b|\)|$)", _strip_ignored_sql(sql, database), re.I):
        raise _SqlError("a comma with nothing after it")  # sqlglot tolerates these, node-sql-parser does not
    return statements


def _statement_kind(statement) -> str:
    from sqlglot import exp

    for cls, kind in ((exp.Insert, "insert"), (exp.Update, "update"), (exp.Delete, "delete"),
                      (exp.Create, "create"), (exp.Drop, "drop"), (exp.Alter, "alter")):
        if isinstance(statement, cls):
            return kind
    return "select"


def _authorities(statements) -> tuple[list[str], list[str]]:
    """node-sql-parser-style (tableList, columnList): `type::db::table`, `type::table::column`."""
    from sqlglot import exp

    tables: list[str] = []
    columns: list[str] = []
    for statement in statements:
        kind = _statement_kind(statement)
        target = statement.this if kind != "select" else None
        if isinstance(target, exp.Schema):
            target = target.this
        targets = {id(target)} | {id(t) for t in statement.args.get("tables") or [] if kind == "drop"}
        aliases: dict[str, str] = {}
        own: list[str] = []
        label = kind
        if kind in ("drop", "alter"):  # node-sql-parser keeps these keywords as written
            written = re.match(r"\s*([A-Za-z]+)", _source_text(statement))
            label = written.group(1) if written else kind
        for table in statement.find_all(exp.Table):
            if table.alias:
                aliases[table.alias] = table.name
            mine = id(table) in targets
            entry = f"{label if mine else 'select'}::{table.db or 'null'}::{table.name}"
            (own if mine else tables).append(entry)
        tables.extend(own)
        stmt_columns: list[str] = []
        for column in statement.find_all(exp.Column):
            if isinstance(column.this, exp.Star):
                name = "(.*)"
            else:
                name = column.name
            owner = aliases.get(column.table, column.table) if column.table else "null"
            stmt_columns.append((column, f"select::{owner}::{name}"))
        stmt_columns.sort(key=lambda item: _position(item[0]))
        late: list[str] = []
        set_targets = set()
        if kind == "update":
            for assignment in statement.args.get("expressions") or []:
                if isinstance(assignment, exp.EQ) and isinstance(assignment.this, exp.Column):
                    set_targets.add(id(assignment.this))
                    late.append(f"update::null::{assignment.this.name}")
        for column, entry in stmt_columns:
            if id(column) not in set_targets:
                columns.append(entry)
        if any(isinstance(e, exp.Star) for e in getattr(statement, "expressions", []) or []) \
                and isinstance(statement, exp.Select):
            columns.insert(0, "select::null::(.*)")
        if kind == "insert" and isinstance(statement.this, exp.Schema):
            late.extend(f"insert::{target.name}::{c.name}" for c in statement.this.expressions)
        if kind == "create" and isinstance(statement.this, exp.Schema):
            for column_def in statement.this.expressions:
                if isinstance(column_def, exp.ColumnDef):
                    late.extend((f"select::null::{column_def.name}", f"create::null::{column_def.name}"))
        if kind == "delete" and target is not None:
            late.append(f"delete::{target.name}::(.*)")
        columns.extend(late)
    return list(dict.fromkeys(tables)), list(dict.fromkeys(columns))


def _source_text(statement) -> str:
    return statement.meta.get("source", "") if hasattr(statement, "meta") else ""


def _position(node) -> int:
    meta = getattr(node, "meta", None) or {}
    if "start" in meta:
        return meta["start"]
    inner = getattr(node, "this", None)
    inner_meta = getattr(inner, "meta", None) or {}
    return inner_meta.get("start", 1 << 30)


def _whitelist_violation(authorities: list[str], whitelist: list) -> str | None:
    for authority in authorities:
        if not any(_js_regex_i("^" + templating.js_string(w) + "$").search(authority) for w in whitelist):
            return authority
    return None


@functools.lru_cache(maxsize=256)
def _js_regex_i(pattern: str) -> re.Pattern:
    return re.compile(js_regex(pattern).pattern, re.I)


def check_sql(output: str, value: Any, inverse: bool) -> tuple[bool, str]:
    """promptfoo's handleIsSql."""
    database, allowed_tables, allowed_columns = "MySQL", None, None
    if js_truthy(value) and isinstance(value, (dict, list)):
        if isinstance(value, dict):
            database = value.get("databaseType") or "MySQL"
            allowed_tables, allowed_columns = value.get("allowedTables"), value.get("allowedColumns")
    elif js_truthy(value):
        raise AssertionError_("is-sql assertion must have a object value.")
    for name, lst in (("allowedTables", allowed_tables), ("allowedColumns", allowed_columns)):
        if lst is not None and not isinstance(lst, list):
            raise AssertionError_(f"is-sql {name} must be a list")
    syntax = f"SQL statement does not conform to the provided {templating.js_string(database)} database syntax."
    failures: list[str] = []
    normalized = js_trim(output)
    if not normalized:
        failures.append(syntax)
    if normalized.count("`") % 2:
        failures.append(syntax)
    pattern = _MYSQL_MISSING_COMMA if database in ("MySQL", "MariaDB") else _MISSING_COMMA
    if pattern.search(_strip_ignored_sql(normalized, database)):
        failures.append(syntax)
    if database == "MySQL" and re.search(r"\bgenerate_series\s*\(", normalized, re.I):
        failures.append(syntax)
    statements = None
    parse_error = ""
    try:
        statements = _parse_sql(output, database)
        passed = not inverse
    except _SqlError as exc:
        passed = inverse
        parse_error = str(exc)
        failures.append(syntax)
    if failures:
        passed = inverse
    tables, columns = _authorities(statements) if statements is not None else ([], [])

    def whitelist(kind: str, found: list[str], allowed: list, matched: list) -> None:
        """node-sql-parser's whitelist check of the tables or columns the SQL names."""
        nonlocal passed
        denied = parse_error or None if statements is None else _whitelist_violation(found, matched)
        if denied is None:
            return
        passed = inverse
        if found:
            failures.append(f"SQL references unauthorized {kind}(s). Found: [{', '.join(found)}]. "
                            f"Allowed: [{', '.join(templating.js_string(t) for t in allowed)}].")
        else:
            failures.append(f"SQL validation failed: {_whitelist_message(denied, kind, output, statements)}.")

    if allowed_tables:
        whitelist("table", tables, allowed_tables, allowed_tables)
    if allowed_columns:
        normalized_columns = [templating.js_string(c) for c in allowed_columns]
        for item in list(normalized_columns):
            parts = item.split("::")
            if len(parts) == 3 and parts[1] != "null":
                alt = f"{parts[0]}::null::{parts[2]}"
                if alt not in normalized_columns:
                    normalized_columns.append(alt)
        whitelist("column", columns, allowed_columns, normalized_columns)
    if inverse and not passed and not failures:
        failures.append("The output SQL statement is valid")
    return passed, " ".join(failures)


def _whitelist_message(denied: str, kind: str, sql: str, statements) -> str:
    if statements is None:  # the parser's own complaint
        return denied
    return f"authority = '{denied}' is required in {kind} whiteList to execute SQL = '{sql}'"


_FENCE_START = re.compile(r"[ \t]{0,3}(`{3,}|~{3,})[ \t]*([^\r\n]*)\Z")
_FENCE_END = re.compile(r"[ \t]{0,3}(`{3,}|~{3,})[ \t]*\Z")


def extract_sql_blocks(text: str) -> list[str]:
    """Fenced code blocks with no language or `sql`, trimmed."""
    blocks: list[str] = []
    active = None
    for line in re.split(r"\r\n?|\n", text):
        if active is None:
            m = _FENCE_START.match(line)
            if m:
                fence, language = m.group(1), m.group(2).strip().lower()
                active = {"body": [], "char": fence[0], "length": len(fence), "sql": language in ("", "sql")}
            continue
        m = _FENCE_END.match(line)
        if m and m.group(1)[0] == active["char"] and len(m.group(1)) >= active["length"]:
            if active["sql"]:
                blocks.append(js_trim("\n".join(active["body"])))
            active = None
        else:
            active["body"].append(line)
    return blocks


@assertion("is-sql")
def is_sql(ctx: AssertionContext) -> GradingResult:
    passed, reason = check_sql(output_string(ctx.output), ctx.value, ctx.inverse)
    return ctx.verdict(passed, reason)


@assertion("contains-sql")
def contains_sql(ctx: AssertionContext) -> GradingResult:
    text = output_string(ctx.output)
    candidates = extract_sql_blocks(text) or [text]
    reason = "Output does not contain valid SQL"
    found = False
    for candidate in candidates:
        if not js_trim(candidate):
            continue
        ok, why = check_sql(candidate, ctx.value, False)
        if ok:
            found = True
            break
        reason = why
    passed = found != ctx.inverse
    return ctx.verdict(passed, "The output SQL statement is valid" if found else reason)
