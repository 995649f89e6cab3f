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
from factcli.stats.agreement import binary_metrics
from factcli.types import FAILURE_ERROR, EvalResult, TestCase

# ---------------------------------------------------------------- the run


def assign_variants(run, variants: list[list[TestCase]]) -> None:
    """Give each step its column's test; with one prompt, a column is a grader configuration."""
    import dataclasses

    run._steps = [dataclasses.replace(s, test=variants[s.test_idx][s.prompt_idx]) for s in run._steps]


# ---------------------------------------------------------------- metrics


def verdict(row: EvalResult) -> tuple[bool | None, str | None]:
    """-> (pass?, None) for a prediction, (None, reason) for a grading error."""
    if row.failure_reason == FAILURE_ERROR or row.grading is None:  # (a row not judged: its component, below)
        return None, row.error or "error"
    comps = row.grading.component_results or [row.grading]
    for c in comps:
        if (c.metadata or {}).get("graderError"):
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
                                    ("--grader", "graders"), ("--filter-first-n", "filter_first_n"))
             if args.get(key)]
    if clash:
        raise FactcliError(f"--ratings reads a stored run's ratings; it does not take {', '.join(clash)}")
    outputs = [Path(o) for o in args.get("output") or []]
    for o in outputs:
        if o.suffix.lower() != ".json":
            raise FactcliError(f"-o {o}: calibrate writes its metrics as JSON (use a .json file)")
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


# ---------------------------------------------------------------- the command


def session_class(suite):
    """The session of a calibration: stored like any eval's run, marked as a calibration (mode
    `calibrate`, with the calibrate arguments that rebuild it), so that `eval --resume` does not
    mistake its labels file for a config; `calibrate --resume` hands it `suite`, rebuilt from them."""
    from factcli.run.session import EvalSession

    class CalibrationSession(EvalSession):
        calibration: dict = {}

        def _options_record(self, run) -> dict:
            record = super()._options_record(run)
            record.update(mode="calibrate", **self.calibration)
            return record

        def _rebuild_suite(self, row: dict, opts: dict, options):
            self.ui.note(f"Rebuilding the rows of calibration {row['id']} from its stored selection.")
            return suite

    return CalibrationSession


def run_command(args: dict) -> int:
    """`factcli calibrate`, from parsed arguments to exit code (contract §2): labels file or benchmark,
    new or resumed (run/benchmark.py)."""
    if args.get("ratings"):
        return ratings_command(args)
    from factcli.run.benchmark import run_command as run

    return run(args)
