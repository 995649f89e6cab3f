"""A calibration report as a terminal table (one row per grader configuration) and as JSON."""

from __future__ import annotations

import io
import json
from pathlib import Path


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 100:.2f}"


METRIC_COLUMNS = (("Macro-F1", "macroF1"), ("Acc.", "accuracy"), ("FPR", "fpr"), ("FNR", "fnr"),
                  ("F1(+)", "f1Positive"), ("F1(-)", "f1Negative"))


def _cells(e: dict) -> list[str]:
    """One grader's figures, in the order of the FACTS paper's Table 2, then kappa, ER, the
    confusion matrix and the grading errors."""
    c = e["confusion"]
    er = "n/a" if e["errorRate"] is None else f"{e['errorRate'] * 100:.2f}" + (
        "" if not e["bias"] else (" +" if e["bias"] > 0 else " -"))
    return ([str(e["n"])] + [_pct(e[key]) for _, key in METRIC_COLUMNS]
            + ["n/a" if e["kappa"] is None else f"{e['kappa']:.3f}", er,
               f"{c['tp']} {c['fn']} {c['fp']} {c['tn']}", str(e["gradingErrors"])])


HEADERS = ["N"] + [h for h, _ in METRIC_COLUMNS] + ["kappa", "ER", "TP FN FP TN", "errors"]


def render(console, rep: dict, labels: str) -> None:
    """Graders as rows (the paper's layout) when that fits the width; else graders as columns."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    g = rep["gold"]
    console.print()
    console.print(escape(f"Calibration on {labels}: {rep['items']} items, gold {g['positive']} pass / "
                         f"{g['negative']} fail ({_pct(g['positiveRate'])}% pass); positive class: pass."))
    rows = [(e["label"], _cells(e)) for e in rep["graders"]]
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("grader", no_wrap=True)
    for h in HEADERS:
        table.add_column(h, justify="right", no_wrap=True)
    for label, cells in rows:
        table.add_row(escape(label), *cells)
    if _rendered_width(table) > console.width:
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        table.add_column("", no_wrap=True)
        for label, _ in rows:
            table.add_column(escape(label), justify="right", overflow="fold")
        for i, h in enumerate(HEADERS):
            table.add_row(h, *(cells[i] for _, cells in rows))
    console.print(table)
    console.print("Percentages except kappa. ER = |grader pass rate - gold pass rate| (+ the grader passes "
                  "more items than people did, - fewer). N counts the items with a verdict: grading errors "
                  "are not predictions.", soft_wrap=True)
    for e in rep["graders"]:
        if e["errors"]:
            shown = "; ".join(f"{x['id']}: {_one_line(x['reason'])}" for x in e["errors"][:3])
            more = f" (and {len(e['errors']) - 3} more)" if len(e["errors"]) > 3 else ""
            console.print(escape(f"Grading errors [{e['label']}]: {shown}{more}"), soft_wrap=True)
        if e.get("notRun"):
            console.print(escape(f"[{e['label']}]: {e['notRun']} items were not graded (the run stopped)"),
                          soft_wrap=True)


def _rendered_width(table) -> int:
    from rich.console import Console

    probe = Console(width=10_000, file=io.StringIO(), no_color=True, highlight=False)
    probe.print(table)
    return max((len(line.rstrip()) for line in probe.file.getvalue().splitlines()), default=0)


def _one_line(text: str, limit: int = 100) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def write_json(rep: dict, path: Path) -> None:
    from factcli.store.encode import finite

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(finite(rep), ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
