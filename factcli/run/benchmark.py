"""`factcli calibrate --benchmark NAME`: score the user's own judge (an assertion type, its grader,
prompt and threshold) on a labeled grounding benchmark read from where it lives (config/benchmarks.py),
and report balanced accuracy per dataset beside the published leaderboard (report/benchmark.py).

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
               ("--tune-threshold", "tune_threshold"), ("--filter-first-n", "filter_first_n"))


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


def _record(args: dict) -> dict:
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


def _cells(run, n_configs: int) -> list[dict]:
    from factcli.run.calibrate import verdict

    cells: list[dict] = [{} for _ in range(n_configs)]
    for r in run.all_rows():
        pred, why = verdict(r)
        cells[r.step.prompt_idx][r.step.test_idx] = (pred, why, r.score)
    return cells


def _usage(run, n: int) -> list[dict]:
    out = []
    for j in range(n):
        m = run.metrics[j]
        out.append({"tokens": m.grader_tokens.to_json(),
                    "cost": None if m.grader_unpriced and not m.grader_cost else m.grader_cost,
                    "costUnpriced": m.grader_unpriced})
    return out


def run_command(args: dict) -> int:
    """`factcli calibrate --benchmark NAME` (or `--resume RUN` of a calibration), to an exit code."""
    from factcli import settings
    from factcli.config.benchmarks import Selection, load
    from factcli.config.labels import build_suite, check_items, load_items, name_configs, plan
    from factcli.report import benchmark as bench_report
    from factcli.report.calibration import write_json
    from factcli.report.view import console_for_stdout
    from factcli.run import runner
    from factcli.run.calibrate import assign_variants, report as labels_report, session_class
    from factcli.run.options import EvalOptions
    from factcli.scoring.grading import GraderSource

    if args.get("env_file"):
        settings.load_env_file(str(args["env_file"]))
    args = resolve_args(args)
    outputs = [Path(o) for o in args.get("output") or []]
    for o in outputs:
        if o.suffix.lower() != ".json":
            raise FactcliError(f"-o {o}: calibrate writes its metrics as JSON (use a .json file)")
    tune = args.get("tune_threshold")
    if tune is not None and tune != "dev":
        raise FactcliError(f"--tune-threshold {tune}: the threshold is tuned on the dev split (--tune-threshold dev)")
    is_bench = bool(args.get("benchmark"))
    if not is_bench and tune:
        raise FactcliError("--tune-threshold needs --benchmark (a dev split to tune on)")
    options = runner.RunOptions(max_concurrency=args.get("max_concurrency"),
                                cache=False if args.get("no_cache") else None, description=args.get("description"),
                                max_cost=args.get("max_cost"))
    p = plan(Path(args["config"]) if args.get("config") else None,
             Path(args["labels"]) if args.get("labels") else None, list(args.get("assert_types") or []),
             list(args.get("graders") or []), args.get("description"), benchmark=is_bench)
    console, _ = console_for_stdout()
    loaded = None
    if is_bench:
        sel = Selection(args["benchmark"], args.get("split"), args.get("columns"), args.get("per_dataset"),
                        args.get("seed") or 0, args.get("datasets"))
        from factcli.config.benchmarks import BENCHMARKS

        splits = None
        if tune:
            known = BENCHMARKS.get(sel.name)
            if known is not None and "dev" not in known.splits:
                raise FactcliError(f"--tune-threshold dev: {known.name} has no dev split (splits: "
                                   f"{', '.join(known.splits)})")
            test = sel.split or "test"
            if test == "dev":
                raise FactcliError("--tune-threshold dev tunes on dev and reports another split: give --split test")
            splits = ["dev", test]
        with runner.downloads(options):
            loaded = load(sel, splits)
        items = loaded.items
        p.source, p.benchmark = loaded.source, {**sel.record(), "tuneThreshold": tune}
        for line in loaded.counts:
            console.print(line, markup=False, highlight=False)
    else:
        if p.labels is None:
            raise FactcliError("no labels file: give one (factcli calibrate LABELS.jsonl) or name it in the config's "
                               "'labels:'")
        items = load_items(Path(p.labels))
    if args.get("filter_first_n") is not None:
        items = items[: args["filter_first_n"]]
        if not items:
            raise FactcliError("--filter-first-n 0 leaves no items to grade")
    name_configs(p.graders, GraderSource())
    check_items(items, p.graders, str(p.labels) if p.labels else p.source)
    suite, variants = build_suite(items, p.graders, p)
    if args.get("dry_run"):
        from factcli.run.estimate import describe

        run = runner.prepare(suite, options)
        assign_variants(run, variants)
        for line in describe(run):
            print(line)
        return 0
    cls = session_class(suite)
    session = cls.open(EvalOptions(run=options, store=not args.get("no_write"), db=args.get("db"),
                                   resume=args.get("resume")))
    session.calibration = {"labels": str(Path(p.labels).resolve()) if p.labels else None,
                           "calibrationConfig": str(p.config_file.resolve()) if p.config_file else None,
                           "calibrate": _record(args)}
    session.filter_suite(suite)
    run = runner.prepare(suite, session.options.run)
    session.begin(run)
    assign_variants(run, variants)
    from factcli.run.session import drive

    interrupted = drive(session, run, progress_bar=not args.get("no_progress_bar"))
    if is_bench:
        meta = {"factcli": {"version": settings.VERSION, "runId": run.run_id, "status": run.status},
                "benchmark": loaded.benchmark, "source": loaded.source, "split": loaded.split,
                "selection": p.benchmark, "counts": loaded.counts, "tune": bool(tune)}
        rep = bench_report.build(items, p.graders, _cells(run, len(p.graders)), meta, _usage(run, len(p.graders)))
        bench_report.render(console, rep)
        failed = any(g["gradingErrors"] or g.get("notRun") for g in rep["graders"])
    else:
        from factcli.report.calibration import render

        rep = labels_report(run, items, p.graders)
        render(console, rep, str(p.labels))
        failed = any(e["gradingErrors"] or e.get("notRun") for e in rep["graders"])
    return _finish(console, session, run, rep, outputs, interrupted, failed, write_json)


def _finish(console, session, run, rep, outputs, interrupted, failed, write_json) -> int:
    from factcli import settings
    from factcli.report import summary as reporting
    from factcli.run import runner

    if session.writing:
        console.print(f"Stored as run {run.run_id}: factcli view {run.run_id}")
    if run.abort_reason and run.status == runner.STATUS_ABORTED:
        from rich.markup import escape

        console.print(f"[bold red]Aborted:[/] {escape(run.abort_reason)}")
    for o in outputs:
        write_json(rep, o)
        console.print(f"Wrote {o}")
    if interrupted:
        reporting.stderr_console().print("[yellow]Interrupted:[/] the items graded so far are reported and kept; "
                                         f"go on with factcli calibrate --resume {run.run_id}")
        return 130
    if run.status == runner.STATUS_INTERRUPTED:  # the budget: no more calls started
        from rich.markup import escape

        reporting.stderr_console().print(f"[yellow]Stopped:[/] {escape(run.abort_reason or '')}. Go on with a larger "
                                         f"budget: factcli calibrate --resume {run.run_id} --max-cost USD", soft_wrap=True)
        return 130
    if run.status == runner.STATUS_ABORTED:
        return 3
    if failed:
        return int(settings.env_float("FACTCLI_FAILED_TEST_EXIT_CODE", 100))
    return 0
