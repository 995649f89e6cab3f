"""The run store: every eval kept in SQLite (`FACTCLI_HOME/factcli.db`, or `--db FILE`).

- Schema changes are sqlite-utils `Migrations` (set "factcli"); an old database upgrades in place,
  a database from a newer factcli is refused with one line, and nothing is ever dropped.
- The read path (view, list, show, ...) uses plain sqlite3 and imports sqlite-utils only when a
  migration is pending, so `factcli view` starts fast.
- Every text written passes through a `Scrubber` (contract §9): no API key, header value or
  secret-looking environment value reaches the file.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from factcli.errors import FactcliError
from factcli.store.redact import SECRET_KEY as _SECRET_KEY_TEXT

_SECRET_KEY_LOWER = re.compile(_SECRET_KEY_TEXT.pattern)  # the pattern is lower case

MIGRATION_SET = "factcli"
MIGRATION_NAMES = ("m001_initial",)  # keep in step with _migrations()
FINAL_STATUSES = ("complete", "interrupted", "aborted", "error")

RESULT_FIELDS = (
    "run_id", "test_idx", "prompt_idx", "repeat_idx", "provider_idx", "seq", "test_key", "description",
    "success", "failure_reason", "score", "error", "output", "output_json", "named_scores_json",
    "grading_json", "latency_ms", "tokens_prompt", "tokens_completion", "tokens_total", "grader_tokens",
    "cost", "cached", "vars_json", "rendered_prompt", "extra_json", "created_at",
)
_UPSERT = (
    f"INSERT INTO results ({', '.join(RESULT_FIELDS)}) VALUES ({', '.join('?' for _ in RESULT_FIELDS)}) "
    "ON CONFLICT(run_id, test_idx, prompt_idx, repeat_idx) DO UPDATE SET "
    + ", ".join(f"{f} = excluded.{f}" for f in RESULT_FIELDS[4:])
)


def default_path() -> Path:
    from factcli.settings import home

    return home() / "factcli.db"


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _migrations():
    from sqlite_utils import Migrations

    migrations = Migrations(MIGRATION_SET)

    @migrations(name="m001_initial")
    def m001_initial(db) -> None:
        db["runs"].create({
            "id": str, "created_at": str, "updated_at": str, "finished_at": str, "description": str,
            "status": str, "config_json": str, "config_files_json": str, "base_dir": str,
            "options_json": str, "graders_json": str, "total_steps": int, "rows_done": int,
            "successes": int, "failures": int, "errors": int, "tokens_json": str, "cost": float,
            "duration_ms": int, "retries": int, "calls": int, "abort_reason": str, "warnings_json": str,
            "factcli_version": str, "pid": int, "host": str, "attempts": int,
        }, pk="id")
        db["runs"].create_index(["created_at"])
        db["results"].create({
            "id": int, "run_id": str, "test_idx": int, "prompt_idx": int, "repeat_idx": int,
            "provider_idx": int, "seq": int, "test_key": str, "description": str, "success": int,
            "failure_reason": int, "score": float, "error": str, "output": str, "output_json": int,
            "named_scores_json": str, "grading_json": str, "latency_ms": float, "tokens_prompt": int,
            "tokens_completion": int, "tokens_total": int, "grader_tokens": int, "cost": float,
            "cached": int, "vars_json": str, "rendered_prompt": str, "extra_json": str, "created_at": str,
        }, pk="id", foreign_keys=[("run_id", "runs", "id")])
        db["results"].create_index(["run_id", "test_idx", "prompt_idx", "repeat_idx"], unique=True)
        db["results"].create_index(["run_id", "failure_reason", "test_idx"])  # view --failures / --errors
        db["results"].create_index(["run_id", "prompt_idx", "failure_reason", "success"])  # counts per column
        db["columns"].create({
            "run_id": str, "prompt_idx": int, "provider_idx": int, "provider_id": str,
            "provider_label": str, "prompt_label": str, "prompt_raw": str, "prompt_id": str,
            "metrics_json": str,
        }, pk=("run_id", "prompt_idx"), foreign_keys=[("run_id", "runs", "id")])

    names = tuple(m.name for m in migrations._migrations)
    assert names == MIGRATION_NAMES, names
    return migrations


# ---------------------------------------------------------------- secrets

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\benv\.([A-Za-z_][A-Za-z0-9_]*)")
_SECRET_HEADER = re.compile(r"auth|key|token|secret|cookie|password", re.IGNORECASE)
_ENV_NAME_KEY = re.compile(r"env[_-]?var|envar", re.IGNORECASE)
REDACTED = "[redacted]"


class Scrubber:
    """Everything written to the store or an export goes through here (contract §9).

    Secret values are the values of secret-looking environment variables (replaced by `${NAME}`),
    plus literal secrets found in the config: values of api-key-like keys, secret-looking header
    values, and the values of variables such keys reference (replaced by `[redacted]`).
    """

    def __init__(self, config: Any = None):
        from factcli.store.redact import secret_env_values

        self.env = secret_env_values()
        pairs = {value: "${" + name + "}" for value, name in self.env.items()}
        for value, replacement in _config_secrets(config):
            pairs.setdefault(value, replacement)
        self.pairs = sorted(pairs.items(), key=lambda kv: -len(kv[0]))
        variants = []
        for value, replacement in self.pairs:
            forms = {value, json.dumps(value, ensure_ascii=False)[1:-1], _xml_escape(value)}
            variants.extend((form, replacement) for form in forms if form)
        self.variants = sorted(set(variants), key=lambda kv: -len(kv[0]))
        # what, seen in a value's JSON text, means redaction may change it: each secret as it
        # appears inside a JSON string, and a secret-looking or header key (matched anywhere)
        self._json_forms = [f for f in {json.dumps(v, ensure_ascii=False)[1:-1] for v, _ in self.pairs} if f]

    def text(self, text: str | None) -> str | None:
        if not text or not self.pairs:
            return text
        for value, replacement in self.pairs:
            if value in text:
                text = text.replace(value, replacement)
        return text

    def data(self, value: Any) -> Any:
        """A redacted copy (secret keys, headers, env values) with literal secrets scrubbed."""
        from factcli.store.redact import redact

        out = redact(value, self.env)
        if any(v not in self.env for v, _ in self.pairs):
            out = self._walk(out)
        return out

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self._walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._walk(v) for v in value]
        return value

    def dumps(self, value: Any) -> str | None:
        if value is None:
            return None
        # Fast path (every stored row goes through here several times): encode once in C and keep
        # the text when nothing in it could be redacted, which is then exactly what the walk
        # below would produce. Measured: 10,000 echo rows 6.8 s -> see benchmarks/README.md.
        try:
            text = json.dumps(value, ensure_ascii=False, default=str, allow_nan=False)
        except (ValueError, TypeError):
            text = None
        if text is not None and not self._may_redact(text):
            return text
        from factcli.report.results_json import finite

        return json.dumps(finite(self.data(value)), ensure_ascii=False, default=str)

    def _may_redact(self, text: str) -> bool:
        if "headers" in text:
            return True
        # re.IGNORECASE costs ~40 us on a typical row; lowering ASCII text first is ~8x cheaper
        # (non-ASCII keeps IGNORECASE: it also folds e.g. the Kelvin sign onto k)
        if _SECRET_KEY_LOWER.search(text.lower()) if text.isascii() else _SECRET_KEY_TEXT.search(text):
            return True
        return any(form in text for form in self._json_forms)

    FILE_CHUNK = 1 << 20  # characters read at a time by file()

    def file(self, path: Path) -> None:
        """A last pass over a written export: replace any secret in its text, however encoded. The
        file is read a chunk at a time (an export of a large run is hundreds of MB); each chunk
        keeps the last len(longest secret) - 1 characters for the next, so a secret split across
        two chunks is still found. The file is replaced only if something changed."""
        if not self.variants:
            return
        import tempfile

        carry_len = max(len(v) for v, _ in self.variants) - 1
        changed = False
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        try:
            with open(path, encoding="utf-8", newline="") as src, \
                    open(fd, "w", encoding="utf-8", newline="") as out:
                buffer = ""
                while True:
                    chunk = src.read(self.FILE_CHUNK)
                    buffer += chunk
                    for value, replacement in self.variants:
                        if value in buffer:
                            buffer = buffer.replace(value, replacement)
                            changed = True
                    if not chunk:
                        out.write(buffer)
                        break
                    keep = min(carry_len, len(buffer))
                    out.write(buffer[:len(buffer) - keep])
                    buffer = buffer[len(buffer) - keep:]
            if changed:
                import shutil

                shutil.copymode(path, tmp)
                os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


def _xml_escape(value: str) -> str:
    import html

    return html.escape(value, quote=True)


def _config_secrets(config: Any) -> Iterable[tuple[str, str]]:
    from factcli.store.redact import is_secret_key

    def env_refs(text: str):
        for m in _ENV_REF.finditer(text):
            name = m.group(1) or m.group(2)
            value = os.environ.get(name)
            if value and len(value) >= 6:
                yield value, "${" + name + "}"

    def secret(value: Any):
        if not isinstance(value, str) or not value:
            return
        refs = list(env_refs(value))
        yield from refs
        if not refs and len(value) >= 6:
            yield value, REDACTED
            if value.lower().startswith("bearer ") and len(value) > 13:
                yield value[7:].strip(), REDACTED

    def walk(node: Any):
        if isinstance(node, dict):
            for k, v in node.items():
                key = str(k)
                if key in ("headers", "extra_headers") and isinstance(v, dict):
                    for hk, hv in v.items():
                        if _SECRET_HEADER.search(str(hk)):
                            yield from secret(hv)
                elif _ENV_NAME_KEY.search(key) and isinstance(v, str):
                    value = os.environ.get(v)
                    if value and len(value) >= 6:
                        yield value, "${" + v + "}"
                elif is_secret_key(key) and isinstance(v, str):
                    yield from secret(v)
                else:
                    yield from walk(v)
        elif isinstance(node, list):
            for v in node:
                yield from walk(v)

    yield from walk(config)


# ---------------------------------------------------------------- the database


class Store:
    """One open database. Writes go through `upsert_result` / `update_run` and are committed at once."""

    def __init__(self, path: Path, conn: sqlite3.Connection):
        self.path = path
        self.conn = conn

    # -- opening

    @classmethod
    def open(cls, path: str | Path | None = None, *, create: bool = False) -> "Store":
        """Open (and migrate) the database. `create`: make it if missing (eval); otherwise a missing
        file is an error. Any problem is a FactcliError naming the file; the file is never replaced."""
        p = Path(path) if path else default_path()
        if p.is_dir():
            raise FactcliError(f"{p}: is a directory, not a database file")
        if not p.exists():
            if not create:
                raise FactcliError(f"no runs stored yet: {p} does not exist (run `factcli eval` first)")
            try:
                p.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise FactcliError(f"{p}: cannot create the database: {exc.strerror or exc} "
                                   "(--db FILE stores runs elsewhere; --no-write does not store them)") from None
        try:
            conn = sqlite3.connect(str(p), timeout=10)
        except sqlite3.Error as exc:
            raise FactcliError(f"{p}: cannot open the database: {exc}") from None
        store = cls(p, conn)
        try:
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA busy_timeout = 10000")
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
                "SELECT name FROM _sqlite_migrations WHERE migration_set = ? ORDER BY rowid", (MIGRATION_SET,))]
        unknown = [n for n in applied if n not in MIGRATION_NAMES]
        if unknown:
            raise FactcliError(f"{self.path} was written by a newer factcli (schema {unknown[-1]}); "
                               "upgrade factcli to use it")
        if not applied and tables & {"runs", "results", "columns"}:
            raise FactcliError(f"{self.path}: not a factcli database (it has tables factcli did not create)")
        pending = [n for n in MIGRATION_NAMES if n not in applied]
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

    def close(self) -> None:
        try:
            self.conn.commit()
        finally:
            self.conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- runs

    def run_count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]

    def resolve(self, ref: str | None) -> dict:
        """A run row from an id, a unique prefix of one, or `latest` (the default)."""
        ref = (ref or "latest").strip()
        if ref == "latest":
            row = self.conn.execute("SELECT * FROM runs ORDER BY created_at DESC, rowid DESC LIMIT 1").fetchone()
            if row is None:
                raise FactcliError(f"no runs stored yet in {self.path}")
            return dict(row)
        row = self.conn.execute("SELECT * FROM runs WHERE id = ?", (ref,)).fetchone()
        if row is not None:
            return dict(row)
        escaped = ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = self.conn.execute("SELECT * FROM runs WHERE id LIKE ? ESCAPE '\\' ORDER BY created_at DESC LIMIT 6",
                                 (escaped + "%",)).fetchall()
        if len(rows) == 1:
            return dict(rows[0])
        if not rows:
            raise FactcliError(f"no run '{ref}' in {self.path} (`factcli list` shows the runs)")
        shown = ", ".join(r["id"] for r in rows[:5]) + (", …" if len(rows) > 5 else "")
        raise FactcliError(f"run id prefix '{ref}' is ambiguous: it matches {shown}")

    def list_runs(self, limit: int = 20) -> list[dict]:
        return [dict(r) for r in self.conn.execute(
            "SELECT * FROM runs ORDER BY created_at DESC, rowid DESC LIMIT ?", (limit,))]

    def insert_run(self, record: dict) -> None:
        fields = list(record)
        self.conn.execute(f"INSERT INTO runs ({', '.join(fields)}) VALUES ({', '.join('?' for _ in fields)})",
                          [record[f] for f in fields])
        self.conn.commit()

    def update_run(self, run_id: str, fields: dict, commit: bool = True) -> None:
        if not fields:
            return
        sets = ", ".join(f"{k} = ?" for k in fields)
        self.conn.execute(f"UPDATE runs SET {sets} WHERE id = ?", [*fields.values(), run_id])
        if commit:
            self.conn.commit()

    def set_columns(self, run_id: str, columns: list[dict]) -> None:
        for c in columns:
            fields = ["run_id", *c]
            self.conn.execute(
                f"INSERT INTO columns ({', '.join(fields)}) VALUES ({', '.join('?' for _ in fields)}) "
                f"ON CONFLICT(run_id, prompt_idx) DO UPDATE SET "
                + ", ".join(f"{f} = excluded.{f}" for f in c if f != "prompt_idx"),
                [run_id, *c.values()])
        self.conn.commit()

    def set_column_metrics(self, run_id: str, metrics: list[str], commit: bool = True) -> None:
        self.conn.executemany("UPDATE columns SET metrics_json = ? WHERE run_id = ? AND prompt_idx = ?",
                              [(m, run_id, i) for i, m in enumerate(metrics)])
        if commit:
            self.conn.commit()

    def columns(self, run_id: str) -> list[dict]:
        return [dict(r) for r in self.conn.execute(
            "SELECT * FROM columns WHERE run_id = ? ORDER BY prompt_idx", (run_id,))]

    def delete_run(self, run_id: str) -> int:
        with self.conn:
            n = self.conn.execute("DELETE FROM results WHERE run_id = ?", (run_id,)).rowcount
            self.conn.execute("DELETE FROM columns WHERE run_id = ?", (run_id,))
            self.conn.execute("DELETE FROM runs WHERE id = ?", (run_id,))
        return n

    # -- results

    def upsert_result(self, record: dict, commit: bool = True) -> None:
        self.conn.execute(_UPSERT, [record.get(f) for f in RESULT_FIELDS])
        if commit:
            self.conn.commit()

    def commit(self) -> None:
        self.conn.commit()

    def results(self, run_id: str, where: str = "", params: Iterable = (), order: str = "seq",
                fields: str = "*") -> Iterable[dict]:
        sql = f"SELECT {fields} FROM results WHERE run_id = ?" + (f" AND ({where})" if where else "")
        cursor = self.conn.execute(sql + f" ORDER BY {order}", [run_id, *params])
        for row in cursor:
            yield dict(row)

    def done_keys(self, run_id: str) -> dict[tuple[int, int, int], tuple[int, str]]:
        """(test_idx, prompt_idx, repeat_idx) -> (failure_reason, test_key) for every stored row."""
        return {(r[0], r[1], r[2]): (r[3], r[4]) for r in self.conn.execute(
            "SELECT test_idx, prompt_idx, repeat_idx, failure_reason, test_key FROM results WHERE run_id = ?",
            (run_id,))}

    def counts(self, run_id: str) -> dict[int, dict[str, int]]:
        """prompt_idx -> {pass, fail, error} counted in SQL (exact even while a run is writing)."""
        out: dict[int, dict[str, int]] = {}
        for p, s, f, n in self.conn.execute(
                "SELECT prompt_idx, success, failure_reason, COUNT(*) FROM results WHERE run_id = ? "
                "GROUP BY prompt_idx, failure_reason, success", (run_id,)):
            c = out.setdefault(p, {"pass": 0, "fail": 0, "error": 0})
            c["pass" if s else ("error" if f == 2 else "fail")] += n
        return out


def pid_alive(pid: int | None, host: str | None) -> bool:
    import socket

    if not pid or host != socket.gethostname():
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def shown_status(run: dict) -> str:
    """The stored status, with `started` told apart: still running, or killed without finishing."""
    if run["status"] == "started":
        return "running" if pid_alive(run.get("pid"), run.get("host")) else "interrupted"
    return run["status"]


def loads(text: str | None, default: Any = None) -> Any:
    if text is None or text == "":
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default
