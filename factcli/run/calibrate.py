"""`factcli calibrate`: measure grader configurations against human labels, as the FACTS Grounding
paper does for its judges (Table 2) and FActScore does for its estimators (error rate, ER).

A calibration is an ordinary stored run, so `factcli view/show/export` work on it: one test per
labeled item (the item's output given as `providerOutput`, so nothing but the graders is called),
one column per grader configuration (an `echo` provider labelled with the configuration's name),
and each column's steps carry only that configuration's assertion. Grader calls therefore go
through the runner's cache, retries, concurrency and store like any eval's.

The positive class is "pass" (the output is acceptable: truthful, accurate, grounded), as in the
FACTS paper, where "accurate" is positive: FPR is the share of gold-negative items a grader passes,
FNR the share of gold-positive items it fails.
"""

from __future__ import annotations

from pathlib import Path

from factcli.config.labels import GraderConfig, LabeledItem
from factcli.errors import FactcliError
from factcli.report.calibration import render, write_json
from factcli.scoring.outcome import grader_errored
from factcli.stats.agreement import binary_metrics
from factcli.types import FAILURE_ERROR, EvalResult, TestCase

# ---------------------------------------------------------------- the run


def assign_variants(run, variants: list[list[TestCase]]) -> None:
    """Give each step its column's test; with one prompt, a column is a grader configuration."""
    import dataclasses

    run.steps.map(lambda s: dataclasses.replace(s, test=variants[s.test_idx][s.prompt_idx]))


# ---------------------------------------------------------------- metrics


def verdict(row: EvalResult) -> tuple[bool | None, str | None]:
    """-> (pass?, None) for a prediction, (None, reason) for a grading error."""
    if row.failure_reason == FAILURE_ERROR or row.grading is None:  # (a row not judged: its component, below)
        return None, row.error or "error"
    comps = row.grading.component_results or [row.grading]
    for c in comps:
        if grader_errored(c):
            return None, c.reason or "grading error"
    return bool(row.success), None


def report(run, items: list[LabeledItem], configs: list[GraderConfig]) -> dict:
    """The calibration report of a run (finished or not): per configuration, the metrics over the
    items it judged, and its grading errors apart."""
    from factcli.settings import VERSION

    cells: dict[tuple[int, int], EvalResult] = {(r.step.test_idx, r.step.prompt_idx): r for r in run.all_rows()}
    gold_pos = sum(it.gold for it in items)
    out = {
        "factcli": {"version": VERSION, "runId": run.run_id, "status": run.status},
        "items": len(items),
        "gold": {"positive": gold_pos, "negative": len(items) - gold_pos,
                 "positiveRate": gold_pos / len(items) if items else None},
        "positiveClass": "pass",
        "graders": [],
    }
    for j, gc in enumerate(configs):
        tp = fn = fp = tn = 0
        errors, missing = [], 0
        for i, it in enumerate(items):
            row = cells.get((i, j))
            if row is None:
                missing += 1
                continue
            pred, why = verdict(row)
            if pred is None:
                errors.append({"id": it.id, "reason": why})
            elif it.gold:
                tp, fn = tp + pred, fn + (not pred)
            else:
                fp, tn = fp + pred, tn + (not pred)
        entry = {"label": gc.label, "grader": gc.grader, "assertion": gc.raw,
                 **binary_metrics(tp, fn, fp, tn), "gradingErrors": len(errors), "errors": errors}
        if missing:
            entry["notRun"] = missing
        out["graders"].append(entry)
    return out


# ---------------------------------------------------------------- calibrate --ratings


def _group_label(key: tuple, keys: list[tuple]) -> str:
    kind, grader, _ = key
    label = f"{kind} · {grader}" if grader else str(kind)
    same = [k for k in keys if (f"{k[0]} · {k[1]}" if k[1] else str(k[0])) == label]
    return label if len(same) == 1 else f"{label} #{same.index(key) + 1}"  # another rubric prompt


def _counts(pairs: list[dict]) -> dict:
    from factcli.stats.agreement import binary_metrics

    tp = sum(x["judge"] and x["people"] for x in pairs)
    fn = sum(not x["judge"] and x["people"] for x in pairs)
    fp = sum(x["judge"] and not x["people"] for x in pairs)
    tn = sum(not x["judge"] and not x["people"] for x in pairs)
    return binary_metrics(tp, fn, fp, tn)


def ratings_report(store, run_row: dict) -> dict:
    """A calibration report from people's ratings of a stored run: the judge's stored verdicts are
    the predictions, the raters' verdicts the gold labels (no model is called). One `graders` entry
    per judge configuration (assertion type, grader, rubric prompt), over every rater, with each
    rater's own figures under `raters`; the same shape as a labeled-file report, so an assertion's
    `config.calibration` can name it."""
    from factcli.settings import VERSION
    from factcli.store.encode import loads
    from factcli.store.ratings import comparisons

    graders = loads(run_row.get("graders_json"), []) or []
    pairs, errors = comparisons(store, run_row["id"], graders[0] if len(graders) == 1 else None)
    if not pairs and not errors:
        raise FactcliError(f"run {run_row['id']} has no rating of a model-graded assertion (rate rows in "
                           "`factcli view --web`; `factcli ratings list` shows the ratings)")
    gold_pos = sum(x["people"] for x in pairs)
    out = {
        "factcli": {"version": VERSION, "runId": run_row["id"], "status": run_row.get("status"), "source": "ratings"},
        "items": len(pairs),
        "gold": {"positive": gold_pos, "negative": len(pairs) - gold_pos,
                 "positiveRate": gold_pos / len(pairs) if pairs else None},
        "positiveClass": "pass",
        "raters": sorted({x["rater"] for x in pairs + errors}),
        "graders": [],
    }
    keys = list(dict.fromkeys(_judge_key(x) for x in pairs + errors))
    for k in keys:
        mine = [x for x in pairs if _judge_key(x) == k]
        errs = [{"id": _pair_id(x), "rater": x["rater"], "reason": x["reason"]} for x in errors if _judge_key(x) == k]
        assertion = {"type": k[0], **({"provider": k[1]} if k[1] else {}),
                     **({"rubricPrompt": k[2]} if k[2] is not None else {})}
        raters = [{"rater": r, **_counts([x for x in mine if x["rater"] == r])}
                  for r in sorted({x["rater"] for x in mine})]
        out["graders"].append({"label": _group_label(k, keys), "grader": k[1], "assertion": assertion,
                               **_counts(mine), "gradingErrors": len(errs), "errors": errs, "raters": raters,
                               "disagreements": [{"id": _pair_id(x), "rater": x["rater"], "judge": x["judge"],
                                                  "people": x["people"]} for x in mine if x["judge"] != x["people"]]})
    return out


def _judge_key(x: dict) -> tuple:
    """A judge configuration: assertion type, grader, rubric prompt."""
    return x["type"], x["grader"], x["rubricPrompt"]


def _pair_id(x: dict) -> str:
    return (f"test {x['testIdx']} column {x['promptIdx']}" + (f" repeat {x['repeatIdx']}" if x["repeatIdx"] else "")
            + f" assert {x['assertionIdx']}")


def _with_raters(rep: dict) -> dict:
    """The report as the table shows it: each judge configuration over all raters, then per rater."""
    rows = []
    for g in rep["graders"]:
        rows.append(g)
        if len(g["raters"]) > 1 or (g["raters"] and g["raters"][0]["rater"]):
            rows += [{**r, "label": f"  rater {r['rater'] or '(unnamed)'}", "gradingErrors": 0, "errors": []}
                     for r in g["raters"]]
    return {**rep, "graders": rows}


def ratings_command(args: dict) -> int:
    """`factcli calibrate --ratings RUN`: the judge's stored verdicts against the people's ratings."""
    from factcli.report.view import console_for_stdout
    from factcli.store.database import Store

    clash = [flag for flag, key in (("LABELS", "labels"), ("-c", "config"), ("--assert", "assert_types"),
                                    ("--grader", "graders"), ("--filter-first-n", "filter_first_n"),
                                    ("--benchmark", "benchmark"), ("--resume", "resume"), ("--dry-run", "dry_run"),
                                    ("--max-cost", "max_cost"))
             if args.get(key) not in (None, [], False)]
    if clash:
        raise FactcliError(f"--ratings reads a stored run's ratings; it does not take {', '.join(clash)}")
    outputs = _outputs(args)
    with Store.open(args.get("db")) as store:
        run_row = store.resolve(args["ratings"])
        rep = ratings_report(store, run_row)
    console, _ = console_for_stdout()
    render(console, _with_raters(rep), f"the ratings of run {run_row['id']}")
    for g in rep["graders"]:
        if g["disagreements"]:
            shown = ", ".join(f"{d['id']} ({d['rater'] or 'unnamed'})" for d in g["disagreements"][:5])
            more = f" (and {len(g['disagreements']) - 5} more)" if len(g["disagreements"]) > 5 else ""
            console.print(f"Disagreements [{g['label']}]: {shown}{more}", markup=False, soft_wrap=True)
    for o in outputs:
        write_json(rep, o)
        console.print(f"Wrote {o}", markup=False)
    return 0


def _outputs(args: dict) -> list[Path]:
    """The -o files, each a .json file that can be created, checked before any item is graded."""
    from factcli.report.writable import creation_problem

    outputs = [Path(o) for o in args.get("output") or []]
    for o in outputs:
        if o.suffix.lower() != ".json":
            raise FactcliError(f"-o {o}: calibrate writes its metrics as JSON (use a .json file)")
        if problem := creation_problem(o):
            raise FactcliError(f"-o {o}: {problem}")
    return outputs


# ---------------------------------------------------------------- the command


def session_class(suite):
    """The session of a calibration: stored like any eval's run, marked as a calibration (mode
    `calibrate`, with the calibrate arguments that rebuild it, `session.source.calibration`), so that
    `eval --resume` does not mistake its labels file for a config; `calibrate --resume` hands it
    `suite`, rebuilt from them."""
    from factcli.run.recording.session import EvalSession
    from factcli.run.recording.source import Source

    class CalibrationSource(Source):
        calibration: dict = {}

        def options_record(self, run) -> dict:
            record = super().options_record(run)
            record.update(mode="calibrate", **self.calibration)
            return record

        def rebuild_suite(self, row: dict, opts: dict, options):
            self.ui.note(f"Rebuilding the rows of calibration {row['id']} from its stored selection.")
            return suite

    class CalibrationSession(EvalSession):
        source_class = CalibrationSource

    return CalibrationSession


def _cells(run, n_configs: int) -> list[dict]:
    cells: list[dict] = [{} for _ in range(n_configs)]
    for r in run.all_rows():
        pred, why = verdict(r)
        cells[r.step.prompt_idx][r.step.test_idx] = (pred, why, r.score)
    return cells


def run_command(args: dict) -> int:
    """`factcli calibrate`, from parsed arguments to exit code (contract §2): a labels file or a
    benchmark (run/benchmark.py), new or resumed."""
    if args.get("ratings"):
        return ratings_command(args)
    from factcli import settings
    from factcli.config.benchmarks import Selection, load
    from factcli.config.labels import build_suite, check_items, load_items, name_configs, plan
    from factcli.report import benchmark as bench_report
    from factcli.report.view import console_for_stdout
    from factcli.run import runner
    from factcli.run.benchmark import check_args, grader_usage, record_args, resolve_args, tune_splits
    from factcli.run.options import EvalOptions
    from factcli.scoring.grading import GraderSource

    if args.get("env_file"):
        settings.load_env_file(str(args["env_file"]))
    args = resolve_args(args)
    outputs = _outputs(args)
    check_args(args)
    tune = args.get("tune_threshold")
    is_bench = bool(args.get("benchmark"))
    options = runner.RunOptions(max_concurrency=args.get("max_concurrency"),
                                cache=False if args.get("no_cache") else None, description=args.get("description"),
                                max_cost=args.get("max_cost"))
    p = plan(Path(args["config"]) if args.get("config") else None,
             Path(args["labels"]) if args.get("labels") else None, list(args.get("assert_types") or []),
             list(args.get("graders") or []), args.get("description"), benchmark=is_bench)
    if args.get("as_json"):  # stdout holds the report alone; what a person reads goes to stderr
        from factcli.report.summary import stderr_console

        console = stderr_console()
    else:
        console, _ = console_for_stdout()
    loaded = None
    if is_bench:
        sel = Selection(args["benchmark"], args.get("split"), args.get("columns"), args.get("per_dataset"),
                        args.get("seed") or 0, args.get("datasets"))
        with runner.downloads(options):
            loaded = load(sel, tune_splits(sel) if tune else None)
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
        from factcli.run.planning.estimate import describe

        run = runner.prepare(suite, options)
        assign_variants(run, variants)
        for line in describe(run):
            print(line)
        return 0
    cls = session_class(suite)
    session = cls.open(EvalOptions(run=options, store=not args.get("no_write"), db=args.get("db"),
                                   resume=args.get("resume")))
    session.source.calibration = {"labels": str(Path(p.labels).resolve()) if p.labels else None,
                                  "calibrationConfig": str(p.config_file.resolve()) if p.config_file else None,
                                  "calibrate": record_args(args)}
    session.filter_suite(suite)
    run = runner.prepare(suite, session.options.run)
    session.begin(run)
    assign_variants(run, variants)
    interrupted = drive(session, run, progress_bar=not args.get("no_progress_bar"))
    if is_bench:
        meta = {"factcli": {"version": settings.VERSION, "runId": run.run_id, "status": run.status},
                "benchmark": loaded.benchmark, "source": loaded.source, "split": loaded.split,
                "selection": p.benchmark, "counts": loaded.counts, "tune": bool(tune),
                "leaderboard": args.get("leaderboard")}
        n = len(p.graders)
        rep = bench_report.build(items, p.graders, _cells(run, n), meta, grader_usage(run, n))
        bench_report.render(console, rep)
        failed = any(g["gradingErrors"] or g.get("notRun") for g in rep["graders"])
    else:
        from factcli.report.calibration import render

        rep = report(run, items, p.graders)
        render(console, rep, str(p.labels))
        failed = any(e["gradingErrors"] or e.get("notRun") for e in rep["graders"])
    if args.get("as_json"):
        from factcli.report.view import print_json
        from factcli.store.encode import finite

        print_json(finite(rep))
    return _finish(console, session, run, rep, outputs, interrupted, failed)


def _finish(console, session, run, rep, outputs, interrupted, failed) -> int:
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
        again = f"; go on with factcli calibrate --resume {run.run_id}" if session.writing else ""
        reporting.stderr_console().print(f"[yellow]Interrupted:[/] the items graded so far are reported and kept{again}.")
        return 130
    if run.status == runner.STATUS_INTERRUPTED:  # the budget: no more calls started
        from rich.markup import escape

        reporting.stderr_console().print(f"[yellow]Stopped:[/] {escape(run.abort_reason or '')}. Go on with a larger "
                                         f"budget: factcli calibrate --resume {run.run_id} --max-cost USD",
                                         soft_wrap=True)
        return 130
    if run.status == runner.STATUS_ABORTED:
        return 3
    if failed:
        return int(settings.env_float("FACTCLI_FAILED_TEST_EXIT_CODE", 100))
    return 0


def drive(session, run, *, progress_bar: bool) -> bool:
    """Execute a prepared calibration run with a progress bar, storing rows as they finish and the run at
    the end (also when it fails). Returns True when Ctrl-C stopped it: finished rows are kept."""
    import asyncio

    from factcli.report import summary as report
    from factcli.run import runner

    for message in run.warnings[run.warnings_shown:]:  # eval prints the config's own earlier
        report.print_warning(message)
    progress = report.Progress(run.total_steps, enabled=progress_bar, done=run.metrics)
    interrupted = False
    try:
        asyncio.run(runner.execute(run, on_result=session.recorder(progress.advance), warn=progress.warn))
    except KeyboardInterrupt:
        interrupted = True
        run.status = runner.STATUS_INTERRUPTED
    except BaseException as exc:
        session.finish(run, exc)
        raise
    finally:
        progress.stop()
    session.finish(run)
    return interrupted
