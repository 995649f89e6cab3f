"""`factcli calibrate --benchmark NAME` and `--resume RUN` (the flow is run/calibrate.run_command):
score the user's own judge (an assertion type, its grader, prompt and threshold) on a labeled
grounding benchmark read from where it lives (config/benchmarks.py), and report balanced accuracy per
dataset beside the published leaderboard (report/benchmark.py).

The run is an ordinary calibration run (run/calibrate.py builds its suite: one test per row, the
claim given as the output, one column per judge configuration), so it is stored, priced by
`--dry-run`, bounded by `--max-cost`, shown by view/show/export, and resumable:
`factcli calibrate --resume RUN` reads the selection and the judges stored with the run, rebuilds the
same rows (the dataset from the download cache, the sample from the seed) and runs only the rows the
store does not hold, so no grader call is made twice.
"""

from __future__ import annotations

from pathlib import Path

from factcli.errors import FactcliError

# Options that decide what a run judges: a resumed run takes them from the store, never from the command line.
SUITE_FLAGS = (("--benchmark", "benchmark"), ("LABELS", "labels"), ("-c", "config"), ("--assert", "assert_types"),
               ("--grader", "graders"), ("--split", "split"), ("--columns", "columns"),
               ("--per-dataset", "per_dataset"), ("--seed", "seed"), ("--datasets", "datasets"),
               ("--tune-threshold", "tune_threshold"), ("--filter-first-n", "filter_first_n"),
               ("--leaderboard", "leaderboard"))


def stored_args(ref: str, db) -> tuple[str, dict]:
    """-> (run id, the calibrate arguments stored with run `ref`)."""
    from factcli.store.database import Store
    from factcli.store.encode import loads

    with Store.open(db) as store:
        row = store.resolve(ref)
    opts = loads(row.get("options_json"), {}) or {}
    if opts.get("mode") != "calibrate":
        raise FactcliError(f"run {row['id']} is not a calibration: resume it with factcli eval --resume {row['id']}")
    if not isinstance(opts.get("calibrate"), dict):
        raise FactcliError(f"run {row['id']} was stored by an older factcli without its calibrate options; "
                           "run factcli calibrate again (grader replies it already got come from the cache)")
    return row["id"], opts["calibrate"]


def record_args(args: dict) -> dict:
    """The suite-deciding arguments, as stored with the run (paths absolute)."""
    rec = {k: args.get(k) for _, k in SUITE_FLAGS}
    for k in ("config", "labels"):
        rec[k] = str(Path(rec[k]).resolve()) if rec.get(k) else None
    if rec.get("benchmark") and not rec["benchmark"].startswith(("huggingface://", "http://", "https://")) \
            and Path(rec["benchmark"]).is_file():
        rec["benchmark"] = str(Path(rec["benchmark"]).resolve())
    rec["assert_types"] = list(rec.get("assert_types") or [])
    rec["graders"] = list(rec.get("graders") or [])
    rec["description"] = args.get("description")
    return rec


def resolve_args(args: dict) -> dict:
    """The arguments to run with: as given, or (--resume RUN) the stored run's, with the run options
    given now (-j, --max-cost, --no-cache, -o, --no-progress-bar)."""
    if not args.get("resume"):
        return args
    clash = [flag for flag, key in SUITE_FLAGS if args.get(key) not in (None, [], False)]
    if clash:
        raise FactcliError(f"--resume uses the stored run's benchmark, labels and judges; drop {', '.join(clash)}")
    if args.get("no_write"):
        raise FactcliError("--resume updates the stored run; it cannot be combined with --no-write")
    run_id, rec = stored_args(args["resume"], args.get("db"))
    return {**args, **rec, "resume": run_id, "description": rec.get("description") or args.get("description")}


def check_args(args: dict) -> None:
    """Options that do not go together: one line each, before anything is read."""
    tune = args.get("tune_threshold")
    if tune is not None and tune != "dev":
        raise FactcliError(f"--tune-threshold {tune}: the threshold is tuned on the dev split (--tune-threshold dev)")
    is_bench = bool(args.get("benchmark"))
    if is_bench and args.get("labels"):
        raise FactcliError("--benchmark reads its rows from NAME; drop LABELS (or drop --benchmark)")
    given = [flag for flag, key in (("--split", "split"), ("--columns", "columns"), ("--per-dataset", "per_dataset"),
                                    ("--seed", "seed"), ("--datasets", "datasets")) if args.get(key) is not None]
    if given and not is_bench:
        raise FactcliError(f"{', '.join(given)} select rows of a benchmark: add --benchmark NAME")
    if tune and not is_bench:
        raise FactcliError("--tune-threshold needs --benchmark (a dev split to tune on)")
    board = args.get("leaderboard")
    if board is not None:
        from factcli.report.benchmark import leaderboard_names

        names = leaderboard_names()
        if board not in names:
            raise FactcliError(f"--leaderboard {board}: no such leaderboard (factcli ships {', '.join(names)})")
        if not is_bench:
            raise FactcliError("--leaderboard prints published rows beside a benchmark's figures: add --benchmark")


def tune_splits(sel) -> list[str]:
    """--tune-threshold dev: the dev split, then the one reported."""
    from factcli.config.benchmarks import BENCHMARKS

    known = BENCHMARKS.get(sel.name)
    if known is not None and "dev" not in known.splits:
        raise FactcliError(f"--tune-threshold dev: {known.name} has no dev split (splits: {', '.join(known.splits)})")
    test = sel.split or "test"
    if test == "dev":
        raise FactcliError("--tune-threshold dev tunes on dev and reports another split: give --split test")
    return ["dev", test]


def grader_usage(run, n: int) -> list[dict]:
    out = []
    for j in range(n):
        m = run.metrics[j]
        out.append({"tokens": m.grader_tokens.to_json(),
                    "cost": None if m.grader_unpriced and not m.grader_cost else m.grader_cost,
                    "costUnpriced": m.grader_unpriced})
    return out
