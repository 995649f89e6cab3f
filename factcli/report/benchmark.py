"""`factcli calibrate --benchmark`'s report: per grader configuration and per dataset, the confusion
counts, TPR, TNR and balanced accuracy with its 95% interval (stats/balanced.py), their mean over the
datasets, grading errors apart, tokens and cost, and the published leaderboard rows beside them
(leaderboards.json, shipped with factcli: model names and figures with their source and date only).

Positive class: supported (a gold-positive row is one whose claim the document supports; a judge's
pass is a prediction of "supported").
"""

from __future__ import annotations

import json
from importlib import resources

from factcli.stats.balanced import balanced_accuracy, best_threshold, mover_mean


def _boards() -> dict:
    return json.loads(resources.files("factcli.report").joinpath("leaderboards.json").read_text(encoding="utf-8"))


def leaderboard_names() -> list[str]:
    return sorted(_boards())


def leaderboard(name: str | None, asked: str | None = None) -> dict | None:
    """The published rows of benchmark `name`; or of `asked` (--leaderboard) when the rows judged are
    another set (a labeled set of the user's own): then marked `otherData`, so they are printed for
    scale only, never as the same measurement."""
    boards = _boards()
    if name and name in boards:
        return boards[name]
    if asked and asked in boards:
        return {**boards[asked], "otherData": asked}
    return None


def _pct(v: float | None, digits: int = 1) -> str:
    return "n/a" if v is None else f"{v * 100:.{digits}f}"


def _counts(pairs: list[tuple[bool, bool]]) -> dict:
    """pairs of (predicted supported, gold supported) -> the confusion counts and BAcc."""
    tp = sum(p and g for p, g in pairs)
    fn = sum((not p) and g for p, g in pairs)
    fp = sum(p and not g for p, g in pairs)
    tn = sum((not p) and not g for p, g in pairs)
    return {"n": len(pairs), "confusion": {"tp": tp, "fn": fn, "fp": fp, "tn": tn}, **balanced_accuracy(tp, fn, fp, tn)}


def grader_figures(items: list, cells: dict, tune: bool) -> dict:
    """One grader configuration's figures. `cells[i]` = (pass or None, reason, score) for item i, or
    absent (not run). With `tune`, items whose `split` var is "dev" pick the threshold and only the
    others are counted, each passing when its score reaches the threshold."""
    threshold = None
    if tune:
        dev = [(it.extra["dataset"], cells[i][2], it.gold) for i, it in enumerate(items)
               if it.extra.get("split") == "dev" and i in cells and cells[i][0] is not None]
        threshold = best_threshold(dev)
    by_dataset: dict[str, list] = {}
    errors, not_run = [], 0
    for i, it in enumerate(items):
        if tune and it.extra.get("split") == "dev":
            continue
        ds = by_dataset.setdefault(it.extra["dataset"], [])
        if i not in cells:
            not_run += 1
            continue
        pred, why, score = cells[i]
        if pred is None:
            errors.append({"id": it.id, "dataset": it.extra["dataset"], "reason": why})
            continue
        if threshold is not None:
            pred = score >= threshold["threshold"]
        ds.append((pred, it.gold))
    datasets = []
    for name, pairs in by_dataset.items():
        datasets.append({"dataset": name, **_counts(pairs),
                         "gradingErrors": sum(1 for e in errors if e["dataset"] == name)})
    mean = mover_mean([(d["bacc"], d["low"], d["high"]) for d in datasets if d["bacc"] is not None])
    pooled = _counts([p for pairs in by_dataset.values() for p in pairs])
    out = {"datasets": datasets, "mean": mean, "pooled": pooled, "gradingErrors": len(errors), "errors": errors}
    if not_run:
        out["notRun"] = not_run
    if tune:
        out["threshold"] = ({"tunedOn": "dev", **threshold} if threshold is not None else
                            {"tunedOn": "dev", "threshold": None})
    return out


def build(items: list, configs: list, cells: list[dict], meta: dict, usage: list[dict]) -> dict:
    """The report: meta has factcli/benchmark/source/split/counts/tune; usage[j] the tokens and cost of
    configuration j."""
    board = leaderboard(meta.get("benchmark"), meta.get("leaderboard"))
    graders = []
    for j, gc in enumerate(configs):
        figures = grader_figures(items, cells[j], meta.get("tune", False))
        graders.append({"label": gc.label, "grader": gc.grader, "assertion": gc.raw, **figures, **usage[j]})
    return {"factcli": meta["factcli"], "benchmark": {k: meta.get(k) for k in ("benchmark", "source", "split",
                                                                                "selection", "counts")},
            "positiveClass": "supported", "interval": "95%: Wilson for TPR and TNR, MOVER for their mean "
                                                      "and for the mean over datasets (docs/statistics.md)",
            "graders": graders, "leaderboard": board}


def _ci(d: dict) -> str:
    return "n/a" if d.get("bacc") is None else f"[{_pct(d['low'])}, {_pct(d['high'])}]"


def render(console, rep: dict) -> None:
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    b = rep["benchmark"]
    console.print()
    console.print(escape(f"Benchmark {b['source']}: positive class supported; BAcc = (TPR + TNR) / 2, "
                         "95% intervals (Wilson + MOVER)."), soft_wrap=True)
    for g in rep["graders"]:
        console.print()
        console.print(escape(f"Judge: {g['label']}"), soft_wrap=True)
        t = g.get("threshold")
        if t is not None:
            if t["threshold"] is None:
                console.print("Threshold: no dev row was judged, so none was tuned; verdicts as the judge gave them.")
            else:
                console.print(escape(f"Threshold tuned on the dev split: score >= {t['threshold']:g} passes (dev mean "
                                     f"BAcc {_pct(t['bacc'])}); the figures below are the test split's with it."),
                              soft_wrap=True)
        published = _published_ranges(rep.get("leaderboard"))
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        for h, right in (("dataset", False), ("N", True), ("TP FN FP TN", True), ("TPR", True), ("TNR", True),
                         ("BAcc", True), ("95% CI", True), ("errors", True)) + ((("published", True),) if published
                                                                                 else ()):
            table.add_column(h, justify="right" if right else "left", no_wrap=True)
        for d in g["datasets"]:
            c = d["confusion"]
            extra = [published.get(d["dataset"], "")] if published else []
            table.add_row(escape(d["dataset"]), str(d["n"]), f"{c['tp']} {c['fn']} {c['fp']} {c['tn']}",
                          _pct(d["tpr"]), _pct(d["tnr"]), _pct(d["bacc"]), _ci(d), str(d["gradingErrors"]), *extra)
        m = g["mean"]
        if m is not None and len(g["datasets"]) > 1:
            extra = [published.get("", "")] if published else []
            table.add_row(f"mean of {m['k']}", "", "", "", "", _pct(m["value"]),
                          f"[{_pct(m['low'])}, {_pct(m['high'])}]", str(g["gradingErrors"]), *extra)
        console.print(table)
        tok = g.get("tokens") or {}
        cost = g.get("cost")
        money = "n/a (no price known)" if cost is None else f"${cost:.4f}"
        console.print(escape(f"Grader tokens: {tok.get('total', 0):,} ({tok.get('prompt', 0):,} in, "
                             f"{tok.get('completion', 0):,} out); cost {money}."), soft_wrap=True)
        if g["errors"]:
            shown = "; ".join(f"{e['id']}: {_one_line(e['reason'])}" for e in g["errors"][:3])
            more = f" (and {len(g['errors']) - 3} more)" if len(g["errors"]) > 3 else ""
            console.print(escape(f"Grading errors (not counted as wrong, left out of every figure): {shown}{more}"),
                          soft_wrap=True)
        if g.get("notRun"):
            console.print(f"{g['notRun']} rows were not judged (the run stopped).")
    _render_board(console, rep)


def _published_ranges(board: dict | None) -> dict:
    """dataset -> "low–high" of the published rows' BAcc on it ("" -> of their means); {} when the
    snapshot has no per-dataset figures."""
    if not board or board.get("otherData") or not any(r.get("datasets") for r in board["rows"]):
        return {}
    out = {}
    names = {k for r in board["rows"] for k in (r.get("datasets") or {})}
    for name in names:
        vals = [r["datasets"][name] for r in board["rows"] if name in (r.get("datasets") or {})]
        out[name] = f"{min(vals):.1f}–{max(vals):.1f}"
    means = [r["value"] for r in board["rows"]]
    out[""] = f"{min(means):.1f}–{max(means):.1f}"
    return out


def _render_board(console, rep: dict) -> None:
    from rich.markup import escape

    board = rep.get("leaderboard")
    if not board:
        return
    console.print()
    console.print(escape(f"Published ({board['source']}, {board['date']}; {board['metric']}):"), soft_wrap=True)
    if board.get("otherData"):
        console.print(escape(f"(measured on {board['otherData']}, not on the rows judged here: for scale only, "
                             "not a comparison)"), soft_wrap=True)
    if board.get("kind") == "accuracy":  # compared with what it publishes: accuracy over all rows
        mine = [(f"your judge: {g['label']} (accuracy)", _accuracy(g["pooled"])) for g in rep["graders"]]
        mine = [(label, m) for label, m in mine if m is not None]
    else:
        mine = [(f"your judge: {g['label']}", g["mean"]) for g in rep["graders"] if g["mean"]]
    same = _same_datasets(board, rep["graders"])
    if same:  # a subset measured: the published rows' mean over those datasets is the comparable figure
        console.print(escape(f"(each published row as its mean over the {len(same)} datasets measured here, "
                             "from its per-dataset figures; its published mean after it)"), soft_wrap=True)
        rows = [(r["model"], sum(r["datasets"][d] for d in same) / len(same), None, f"  ({r['value']:.1f} over "
                 f"{board.get('datasets')})") for r in board["rows"]]
    else:
        rows = [(r["model"], r["value"], None, "") for r in board["rows"]]
    rows += [(label, m["value"] * 100, m, "") for label, m in mine]
    for model, value, m, extra in sorted(rows, key=lambda r: -r[1]):
        if m is not None:
            extra = f"  [{_pct(m['low'])}, {_pct(m['high'])}]"
            if "k" in m:
                extra += f" over {m['k']} dataset{'s' if m['k'] != 1 else ''}"
            if "k" in m and m["k"] != board.get("datasets") and not same and not board.get("otherData"):
                extra += f" (the published figure is over {board.get('datasets')})"
        console.print(escape(f"  {value:5.1f}  {model}{extra}"), soft_wrap=True)
    if _published_ranges(board):
        console.print(escape(f"'published' is the range of these rows on each dataset; per dataset: "
                             f"{board.get('perDatasetSource')}; -o writes every figure."), soft_wrap=True)
    console.print("Model versions, prompts, thresholds and dates differ between these rows: see "
                  "docs/judge-accuracy.md.", soft_wrap=True)


def _same_datasets(board: dict, graders: list[dict]) -> list[str]:
    """The datasets measured here, when they are fewer than the published mean covers and every
    published row has a figure for each; else []."""
    measured = sorted({d["dataset"] for g in graders for d in g["datasets"] if d["bacc"] is not None})
    if board.get("otherData") or not measured or len(measured) >= (board.get("datasets") or 0):
        return []
    if all(all(name in (r.get("datasets") or {}) for name in measured) for r in board["rows"]):
        return measured
    return []


def _accuracy(pooled: dict) -> dict | None:
    from factcli.stats.intervals import wilson_interval

    c = pooled["confusion"]
    return wilson_interval(c["tp"] + c["tn"], pooled["n"]) if pooled["n"] else None


def _one_line(text: str, limit: int = 100) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
