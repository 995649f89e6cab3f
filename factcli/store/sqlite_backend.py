"""The SQLite store: one file (FACTCLI_HOME/factcli.db, or --db FILE), the embedded default.

- The schema's migrations (store/schema.py) are applied as sqlite-utils `Migrations` (set
  "factcli", recorded in `_sqlite_migrations`), so the file is what earlier factcli versions wrote.
- The read path uses plain sqlite3 and imports sqlite-utils only when a migration is pending, so
  `factcli view` starts fast.
- WAL journal: readers (view, the web view) never wait for a run that is writing.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Iterable

from factcli.errors import FactcliError
from factcli.store import schema
from factcli.store.base import BaseStore


def _migrations():
    from sqlite_utils import Migrations

    migrations = Migrations(schema.MIGRATION_SET)
    for m in schema.MIGRATIONS:
        migrations(name=m.name)(lambda db, ops=m.operations: _apply(db, ops))
    return migrations


def _apply(db, operations) -> None:
    for op in operations:
        if isinstance(op, schema.CreateTable):
            db[op.name].create(dict(op.columns), pk=op.pk, foreign_keys=list(op.foreign_keys) or None)
        elif isinstance(op, schema.CreateIndex):
            db[op.table].create_index(list(op.columns), unique=op.unique)
        elif isinstance(op, schema.AddColumn):
            db[op.table].add_column(op.name, op.kind)
        else:  # pragma: no cover - a new kind of operation needs code here and in postgres_backend
            raise TypeError(op)


# The page size of a database factcli creates. A stored row is ~2 KB of text: on SQLite's default
# 4 KB pages one row fills most of a page and the rest stays empty, and every page written costs
# its own work. On 16 KB pages a row takes less CPU to write, commit and checkpoint, and less room on
# disk (issue 30; benchmarks/README.md). A file that exists keeps the
# size it was made with (SQLite fixes it with the first table).
PAGE_SIZE = 16384
BUSY_TIMEOUT_MS = 10_000  # how long a write waits for another process's


class SQLiteStore(BaseStore):
    kind = "sqlite"
    _NEWEST = "ORDER BY created_at DESC, rowid DESC"

    def __init__(self, path: Path, conn: sqlite3.Connection):
        self.path = self.target = path
        self.conn = conn

    @classmethod
    def connect(cls, p: Path, *, create: bool) -> "SQLiteStore":
        if p.is_dir():
            raise FactcliError(f"{p}: is a directory, not a database file")
        new = not p.exists()
        if new:
            if not create:
                raise FactcliError(f"no runs stored yet: {p} does not exist (run `factcli eval` first)")
            try:
                from factcli.settings import private_file

                private_file(p)  # 0600 in a new folder 0700: SQLite gives its -wal and -shm the same mode
            except OSError as exc:
                raise FactcliError(f"{p}: cannot create the database: {exc.strerror or exc} "
                                   "(--db FILE stores runs elsewhere; --no-write does not store them)") from None
        try:
            conn = sqlite3.connect(str(p), timeout=BUSY_TIMEOUT_MS / 1000)
        except sqlite3.Error as exc:
            raise FactcliError(f"{p}: cannot open the database: {exc}") from None
        store = cls(p, conn)
        try:
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            if new:  # before its first table
                conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
            store._migrate(write=create)
        except sqlite3.Error as exc:
            conn.close()
            raise FactcliError(f"{p}: not a readable factcli database ({exc})") from None
        except BaseException:
            conn.close()
            raise
        return store

    def _migrate(self, write: bool) -> None:
        conn = self.conn
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        applied: list[str] = []
        if "_sqlite_migrations" in tables:
            applied = [r[0] for r in conn.execute(
                "SELECT name FROM _sqlite_migrations WHERE migration_set = ? ORDER BY rowid", (schema.MIGRATION_SET,))]
        unknown = [n for n in applied if n not in schema.MIGRATION_NAMES]
        if unknown:
            raise FactcliError(f"{self.path} was written by a newer factcli (schema {unknown[-1]}); "
                               "upgrade factcli to use it")
        if not applied and tables & {"runs", "results", "columns"}:
            raise FactcliError(f"{self.path}: not a factcli database (it has tables factcli did not create)")
        pending = [n for n in schema.MIGRATION_NAMES if n not in applied]
        if pending:
            from sqlite_utils import Database

            db = Database(conn, execute_plugins=False)
            _migrations().apply(db)
            conn.commit()
            write = True
        if write:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")

    def execute(self, sql: str, params: Iterable = ()):
        return self.conn.execute(sql, tuple(params))

    def executemany(self, sql: str, rows: Iterable) -> None:
        self.conn.executemany(sql, rows)

    def close(self) -> None:
        try:
            self.conn.commit()
        finally:
            self.conn.close()

    def json_number(self, column: str, key: str) -> tuple[str, list]:
        return f"json_extract({column}, ?)", ['$."' + key.replace('"', '') + '"']
