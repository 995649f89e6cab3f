"""The store's one schema: its tables and one ordered list of migrations, as data that both
backends apply (store/sqlite_backend.py through sqlite-utils, store/postgres_backend.py as
PostgreSQL DDL).

A migration is a name and a list of operations; it is applied once, in order, and recorded by name.
Never edit a migration that shipped: add the next one (and its name to MIGRATION_NAMES). A store
holding a migration name this factcli does not know was written by a newer factcli and is refused.
"""

from __future__ import annotations

from typing import NamedTuple

MIGRATION_SET = "factcli"


# Named tuples, not frozen dataclasses: every command that opens the store imports this module, and
# frozen dataclasses slow each start (each generates five methods from source).


class CreateTable(NamedTuple):
    name: str
    columns: dict  # column -> int | float | str, in order
    pk: str | tuple[str, ...]
    foreign_keys: tuple[tuple[str, str, str], ...] = ()  # (column, other table, other column)


class CreateIndex(NamedTuple):
    table: str
    columns: tuple[str, ...]
    unique: bool = False


class AddColumn(NamedTuple):
    table: str
    name: str
    kind: type  # int | float | str


class Migration(NamedTuple):
    name: str
    operations: tuple = ()


_RUN = ("run_id", "runs", "id")

MIGRATIONS: tuple[Migration, ...] = (
    Migration("m001_initial", (
        CreateTable("runs", {
            "id": str, "created_at": str, "updated_at": str, "finished_at": str, "description": str,
            "status": str, "config_json": str, "config_files_json": str, "base_dir": str,
            "options_json": str, "graders_json": str, "total_steps": int, "rows_done": int,
            "successes": int, "failures": int, "errors": int, "tokens_json": str, "cost": float,
            "duration_ms": int, "retries": int, "calls": int, "abort_reason": str, "warnings_json": str,
            "factcli_version": str, "pid": int, "host": str, "attempts": int,
        }, pk="id"),
        CreateIndex("runs", ("created_at",)),
        CreateTable("results", {
            "id": int, "run_id": str, "test_idx": int, "prompt_idx": int, "repeat_idx": int,
            "provider_idx": int, "seq": int, "test_key": str, "description": str, "success": int,
            "failure_reason": int, "score": float, "error": str, "output": str, "output_json": int,
            "named_scores_json": str, "grading_json": str, "latency_ms": float, "tokens_prompt": int,
            "tokens_completion": int, "tokens_total": int, "grader_tokens": int, "cost": float,
            "cached": int, "vars_json": str, "rendered_prompt": str, "extra_json": str, "created_at": str,
        }, pk="id", foreign_keys=(_RUN,)),
        CreateIndex("results", ("run_id", "test_idx", "prompt_idx", "repeat_idx"), unique=True),
        CreateIndex("results", ("run_id", "failure_reason", "test_idx")),  # view --failures / --errors
        CreateIndex("results", ("run_id", "prompt_idx", "failure_reason", "success")),  # counts per column
        CreateTable("columns", {
            "run_id": str, "prompt_idx": int, "provider_idx": int, "provider_id": str,
            "provider_label": str, "prompt_label": str, "prompt_raw": str, "prompt_id": str,
            "metrics_json": str,
        }, pk=("run_id", "prompt_idx"), foreign_keys=(_RUN,)),
    )),
    # People's pass/fail verdicts on stored rows (store/ratings.py); `results` is never touched.
    Migration("m002_ratings", (
        CreateTable("ratings", {
            "id": int, "run_id": str, "test_idx": int, "prompt_idx": int, "repeat_idx": int,
            "assertion_idx": int, "passed": int, "comment": str, "rater": str, "created_at": str,
            "retracted_at": str,
        }, pk="id", foreign_keys=(_RUN,)),
        CreateIndex("ratings", ("run_id", "test_idx", "prompt_idx", "repeat_idx")),
    )),
    # A finished run's gate verdicts (run/recording/gates.GateResult.to_json, a list), so that `export`, `show`
    # and `view` of the run tell what its eval told; NULL for a run without gates.
    Migration("m003_run_gates", (AddColumn("runs", "gates_json", str),)),
    # Batch mode (run/calling/batches.py, store/batches.py): a run's batches at the vendors, and the custom_id of
    # every line it submitted, so that --resume collects them and never submits a line twice.
    Migration("m004_batches", (
        CreateTable("batches", {
            "run_id": str, "batch_id": str, "kind": str, "endpoint": str, "base_url": str, "round": int, "status": str,
            "total": int, "done": int, "failed": int, "error": str, "created_at": str, "updated_at": str,
        }, pk=("run_id", "batch_id"), foreign_keys=(_RUN,)),
        CreateTable("batch_lines", {"run_id": str, "custom_id": str, "batch_id": str},
                    pk=("run_id", "custom_id"), foreign_keys=(_RUN,)),
    )),
)

MIGRATION_NAMES = tuple(m.name for m in MIGRATIONS)

RESULT_FIELDS = (
    "run_id", "test_idx", "prompt_idx", "repeat_idx", "provider_idx", "seq", "test_key", "description",
    "success", "failure_reason", "score", "error", "output", "output_json", "named_scores_json",
    "grading_json", "latency_ms", "tokens_prompt", "tokens_completion", "tokens_total", "grader_tokens",
    "cost", "cached", "vars_json", "rendered_prompt", "extra_json", "created_at",
)
RESULT_KEY = ("run_id", "test_idx", "prompt_idx", "repeat_idx")


def table(name: str) -> CreateTable:
    for m in MIGRATIONS:
        for op in m.operations:
            if isinstance(op, CreateTable) and op.name == name:
                return op
    raise KeyError(name)


def upsert_sql(placeholder: str = "?") -> str:
    """The results upsert both backends run (INSERT … ON CONFLICT on the row's key)."""
    marks = ", ".join(placeholder for _ in RESULT_FIELDS)
    return (f"INSERT INTO results ({', '.join(RESULT_FIELDS)}) VALUES ({marks}) "
            f"ON CONFLICT({', '.join(RESULT_KEY)}) DO UPDATE SET "
            + ", ".join(f"{f} = excluded.{f}" for f in RESULT_FIELDS[len(RESULT_KEY):]))
