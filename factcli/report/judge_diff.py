"""`factcli diff A B` of two calibration runs (two judges on the same labeled rows): the difference of
their balanced accuracy, paired by row, per dataset and over datasets, with its 95% interval
(stats/balanced.paired_bacc_difference: Newcombe's paired intervals of the TPR and TNR differences,
combined by MOVER). A row either judge could not grade is left out of the pairing and counted apart.

Rows pair by their test key (description and vars: the same benchmark row, sampled with the same
seed, has the same key in both runs); the gold label is the one calibrate wrote into the description,
the dataset the row's `dataset` var (one group, "all", for a labels file)."""

from __future__ import annotations

import re

from factcli.scoring.outcome import json_errored
from factcli.stats.balanced import balanced_accuracy, mover_mean, paired_bacc_difference
from factcli.store.encode import loads
from factcli.types import FAILURE_ERROR, json_components

_GOLD = re.compile(r"\(gold: (pass|fail)\)$")


def is_calibration(run: dict) -> bool:
    return (loads(run.get("options_json"), {}) or {}).get("mode") == "calibrate"


def _verdict(rec: dict) -> bool | None:
    if rec.get("failure_reason") == FAILURE_ERROR:
        return None
    grading = loads(rec.get("grading_json"), None)
    if not isinstance(grading, dict):
        return None
    for c in json_components(grading) or [grading]:
        if json_errored(c):
            return None
    return bool(rec.get("success"))


def _rows(store, run_id: str, column: int) -> dict:
    out = {}
    for rec in store.results(run_id, "prompt_idx = ?", (column,), order="test_idx"):
        m = _GOLD.search(rec.get("description") or "")
        if m is None:
            continue
        dataset = (loads(rec.get("vars_json"), {}) or {}).get("dataset") or "all"
        out[rec["test_key"]] = {"gold": m.group(1) == "pass", "dataset": str(dataset), "verdict": _verdict(rec),
                                "id": (rec.get("description") or "").rsplit(" (gold:", 1)[0]}
    return out


def _bacc(pairs: list[tuple[bool, bool]]) -> float | None:
    tp = sum(p and g for p, g in pairs)
    fn = sum((not p) and g for p, g in pairs)
    fp = sum(p and not g for p, g in pairs)
    tn = sum((not p) and not g for p, g in pairs)
    return balanced_accuracy(tp, fn, fp, tn)["bacc"]


def judge_doc(store, a: dict, b: dict, pairs: list) -> list[dict] | None:
    """Per pair of columns: per dataset and over datasets, BAcc of A, of B, and B − A with its
    interval; the grading errors of each side, apart. None unless both runs are calibrations."""
    if not (is_calibration(a) and is_calibration(b)):
        return None
    out = []
    for ca, cb, _ in pairs:
        ra, rb = _rows(store, a["id"], ca["prompt_idx"]), _rows(store, b["id"], cb["prompt_idx"])
        groups: dict[str, dict] = {}
        errors = {"a": [], "b": []}
        for key, x in ra.items():
            y = rb.get(key)
            if y is None:
                continue
            if x["verdict"] is None or y["verdict"] is None:
                for side, r in (("a", x), ("b", y)):
                    if r["verdict"] is None:
                        errors[side].append(r["id"])
                continue
            g = groups.setdefault(x["dataset"], {"pos": [], "neg": [], "a": [], "b": []})
            g["pos" if x["gold"] else "neg"].append((x["verdict"], y["verdict"]))
            g["a"].append((x["verdict"], x["gold"]))
            g["b"].append((y["verdict"], x["gold"]))
        datasets = []
        for name, g in groups.items():
            d = paired_bacc_difference(g["pos"], g["neg"])
            datasets.append({"dataset": name, "n": len(g["pos"]) + len(g["neg"]), "baccA": _bacc(g["a"]),
                             "baccB": _bacc(g["b"]),
                             **({"delta": d["delta"], "ci95": [d["low"], d["high"]]} if d else
                                {"delta": None, "ci95": None})})
        mean = mover_mean([(d["delta"], d["ci95"][0], d["ci95"][1]) for d in datasets if d["delta"] is not None])
        out.append({"columnA": ca["prompt_idx"], "columnB": cb["prompt_idx"],
                    "labelA": ca.get("provider_label") or ca["provider_id"],
                    "labelB": cb.get("provider_label") or cb["provider_id"], "datasets": datasets,
                    "mean": None if mean is None else {"delta": mean["value"], "ci95": [mean["low"], mean["high"]],
                                                       "k": mean["k"],
                                                       "beyondNoise": mean["low"] > 0 or mean["high"] < 0},
                    "gradingErrors": {"a": len(errors["a"]), "b": len(errors["b"])}, "errorIds": errors,
                    "method": "paired Newcombe (TPR, TNR) + MOVER"})
    return out


def _pts(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 100:.1f}"


def render(console, judges: list[dict], a_id: str, b_id: str) -> None:
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    for j in judges:
        console.print()
        console.print(escape(f"Judges on the same rows: A = {j['labelA']} ({a_id}), B = {j['labelB']} ({b_id}); "
                             "balanced accuracy, B − A paired by row, 95% interval (paired Newcombe + MOVER)."),
                      soft_wrap=True)
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        for h in ("dataset", "N", "BAcc A", "BAcc B", "B − A", "95% CI"):
            table.add_column(h, justify="left" if h == "dataset" else "right", no_wrap=True)
        for d in j["datasets"]:
            ci = "n/a" if d["ci95"] is None else f"[{d['ci95'][0] * 100:+.1f}, {d['ci95'][1] * 100:+.1f}]"
            delta = "n/a" if d["delta"] is None else f"{d['delta'] * 100:+.1f}"
            table.add_row(escape(d["dataset"]), str(d["n"]), _pts(d["baccA"]), _pts(d["baccB"]), delta, ci)
        m = j["mean"]
        if m is not None and len(j["datasets"]) > 1:
            table.add_row(f"mean of {m['k']}", "", "", "", f"{m['delta'] * 100:+.1f}",
                          f"[{m['ci95'][0] * 100:+.1f}, {m['ci95'][1] * 100:+.1f}]")
        console.print(table)
        if m is not None:
            console.print("The difference is " + ("beyond noise." if m["beyondNoise"] else "within noise."))
        ea, eb = j["gradingErrors"]["a"], j["gradingErrors"]["b"]
        if ea or eb:
            names = ", ".join((j["errorIds"]["a"] + j["errorIds"]["b"])[:5])
            console.print(escape(f"Grading errors, left out of the pairing (not counted as wrong): A {ea}, B {eb} "
                                 f"({names})"), soft_wrap=True)
