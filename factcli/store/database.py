"""The run store: every eval kept in one database, SQLite (`FACTCLI_HOME/factcli.db`, or `--db FILE`)
or PostgreSQL (`--db postgresql://user@host/db`, or `FACTCLI_DB`).

- `Store.open(target)` picks the backend (store/sqlite_backend.py, store/postgres_backend.py); what
  it returns is a `BaseStore` (store/base.py), the interface every command uses. Both backends apply
  the one schema and ordered list of migrations of store/schema.py; a database from a newer factcli
  is refused with one line, and nothing is ever dropped.
- SQL in base.py and in the read paths (report/, web/, store/ratings.py) is the common subset of
  SQLite and PostgreSQL, written with `?` placeholders: the PostgreSQL backend rewrites the few
  spellings that differ (`?`, LIKE's case, instr). What differs more (reading a number out of stored
  JSON) is a method of the backend (`json_number`).
- Rows are written in batches through `write_results` (the backend's bulk upsert) and committed by
  the caller (`commit`).
- Every text written passes through the `Scrubber` of store/redact.py (contract §9). A database URL's
  password is never stored or printed: `path` is what messages show (`postgresql://user:***@host/db`),
  `target` is what opens the store again and stays in memory.
"""

from __future__ import annotations

from pathlib import Path

from factcli.store.base import (  # noqa: F401  (the store's names, from one place)
    FINAL_STATUSES,
    LEASE_TIMEOUT_S,
    MIGRATION_NAMES,
    MIGRATION_SET,
    RESULT_FIELDS,
    BaseStore,
    check_url,
    default_path,
    default_target,
    holder_alive,
    is_url,
    lease_timeout,
    now,
    pid_alive,
    redact,
    seconds_since,
    shown,
    shown_status,
    store_errors,
    upsert_sql,
)


class Store(BaseStore):
    """The interface (BaseStore) and the one way to open a store."""

    @classmethod
    def open(cls, target: str | Path | None = None, *, create: bool = False) -> BaseStore:
        """Open (and migrate) the store: a SQLite path or a postgresql:// URL (default FACTCLI_DB,
        else FACTCLI_HOME/factcli.db). `create`: make a missing SQLite file (eval); otherwise a
        missing file is an error. Any problem is a FactcliError naming the store; nothing is replaced."""
        if target is None or (isinstance(target, str) and not target.strip()):
            target = default_target()
        if is_url(target):
            from factcli.store.postgres_backend import PostgresStore

            return PostgresStore.connect(check_url(str(target)), create=create)
        from factcli.store.sqlite_backend import SQLiteStore

        return SQLiteStore.connect(Path(target), create=create)
