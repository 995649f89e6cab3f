"""People's ratings as reports read them: `factcli ratings export` (the labeled items `factcli
calibrate` reads, JSONL or CSV), `factcli ratings list`, and the short marks `show`, `view` and the
exports put beside a row's stored grading."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from factcli.errors import FactcliError
from factcli.store.database import Store
from factcli.store.encode import loads
from factcli.store.ratings import ratings_for_run

# calibrate's item fields (config/labels.py ITEM_FIELDS); a var of the same name is not repeated
ITEM_FIELDS = ("id", "question", "output", "reference", "context", "label")


def verdict_word(passed: bool) -> str:
    return "pass" if passed else "fail"


def mark(passed: bool | None) -> str:
    """The compact mark of a rated row in a table cell (`view`): ✓rated / ✗rated."""
    return "" if passed is None else ("✓rated" if passed else "✗rated")


def describe(r: dict) -> str:
    """One rating on one line: 'fail by ann (assertion 1): too long · 2026-11-24 21:35'."""
    who = f" by {r['rater']}" if r.get("rater") else ""
    what = f" (assertion {r['assertionIdx']})" if r.get("assertionIdx") is not None else ""
    when = (r.get("createdAt") or "")[:16].replace("T", " ")
    text = f"{verdict_word(r['passed'])}{who}{what}" + (f": {r['comment']}" if r.get("comment") else "")
    return text + (f" · {when}" if when else "") + (" · retracted" if r.get("retractedAt") else "")


def ratings_of(run, r) -> list[dict] | None:
    """A row's ratings in force for the exports of a stored run (`run.ratings`, set by
    run/recording/stored.load_run; as {id, testIdx, ...} without the run id), or None for a row nobody rated
    (so an unrated run exports exactly as `eval -o` wrote it)."""
    by_row = run.ratings
    if by_row is None:
        return None
    step = r.step
    found = by_row.get((step.test_idx, step.prompt_idx, step.repeat_idx))
    return [{k: v for k, v in x.items() if k != "runId"} for x in found] if found else None


def cell_text(ratings: list[dict] | None) -> str:
    """The ratings of a row in one line (CSV cell, HTML line): 'fail by ann: too long; pass by bob'."""
    return "; ".join(describe({**x, "createdAt": None}) for x in ratings or [])


def _output_text(rec: dict) -> str:
    from factcli.store.records import output_of

    out = output_of(rec)
    if out is None:
        return ""
    return out if isinstance(out, str) else json.dumps(out, ensure_ascii=False)


def label_items(store: Store, run_id: str) -> list[dict]:
    """One labeled item per row with a row-level rating in force (the latest one): its output, the
    rendered prompt as the question, `reference` and `context` from the test's vars when it has
    them, and the other vars as extra fields."""
    latest: dict[tuple[int, int, int], dict] = {}
    for r in ratings_for_run(store, run_id):  # oldest first: the latest wins
        if r["assertionIdx"] is None:
            latest[(r["testIdx"], r["promptIdx"], r["repeatIdx"])] = r
    items = []
    for (t, p, rep), rating in sorted(latest.items()):
        rec = next(store.results(run_id, "test_idx = ? AND prompt_idx = ? AND repeat_idx = ?", (t, p, rep)), None)
        if rec is None:
            continue
        variables = loads(rec.get("vars_json"), {}) or {}
        item = {"id": f"test{t}-col{p}" + (f"-rep{rep}" if rep else ""), "question": rec.get("rendered_prompt") or "",
                "output": _output_text(rec), "label": verdict_word(rating["passed"])}
        if variables.get("reference") is not None:
            item["reference"] = _scalar(variables["reference"])
        context = variables.get("context")
        if isinstance(context, str) or (isinstance(context, list) and all(isinstance(c, str) for c in context)):
            item["context"] = context
        item.update({k: v for k, v in variables.items() if k not in ITEM_FIELDS})
        items.append(item)
    return items


def _scalar(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def check_labels_file(path: Path) -> None:
    """Raise unless `path` is a .jsonl or .csv file that can be created (report/writable)."""
    from factcli.report.writable import creation_problem

    if path.suffix.lower() not in (".jsonl", ".csv"):
        raise FactcliError(f"-o {path}: ratings export writes .jsonl or .csv (the formats `factcli calibrate` reads)")
    if problem := creation_problem(path):
        raise FactcliError(f"-o {path}: {problem}")


def write_labels(items: list[dict], path: Path) -> None:
    """`.jsonl` (one object a line) or `.csv` (a header row; lists and objects as JSON text; a cell a
    spreadsheet would run as a formula written as text, sources.neutral_cell, which calibrate reads back)."""
    from factcli.settings import private_file
    from factcli.sources import neutral_cell

    check_labels_file(path)
    suffix = path.suffix.lower()
    private_file(path)  # owner-only (0600) when new, its new folders 0700
    if suffix == ".jsonl":
        text = "".join(json.dumps(it, ensure_ascii=False) + "\n" for it in items)
    else:
        fields = list(dict.fromkeys(k for it in items for k in it))
        buf = io.StringIO(newline="")
        writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        for it in items:
            writer.writerow({k: neutral_cell(_scalar(v)) for k, v in it.items()})
        text = buf.getvalue()
    path.write_text(text, encoding="utf-8")


def render_list(console, store: Store, run_id: str, include_retracted: bool = False) -> int:
    """`factcli ratings list`: one line per rating; returns how many were shown."""
    from rich.text import Text

    if include_retracted:
        rows = [dict(r) for r in store.execute("SELECT test_idx, prompt_idx, repeat_idx FROM ratings "
                                                    "WHERE run_id = ? GROUP BY 1, 2, 3 ORDER BY 1, 2, 3", (run_id,))]
        from factcli.store.ratings import ratings_for_row

        ratings = [r for row in rows for r in reversed(ratings_for_row(store, run_id, *row.values()))]
    else:
        ratings = ratings_for_run(store, run_id)
    if not ratings:
        console.print(f"No ratings of run {run_id} yet (rate rows in `factcli view --web`).", markup=False)
        return 0
    for r in ratings:
        where = f"test {r['testIdx']} column {r['promptIdx']}" + (f" repeat {r['repeatIdx']}" if r["repeatIdx"] else "")
        line = Text(f"#{r['id']}  {where}  ")
        line.append(verdict_word(r["passed"]).upper(), style="green" if r["passed"] else "red")
        line.append(describe(r)[len(verdict_word(r["passed"])):])  # rater, assertion, comment, when
        console.print(line, soft_wrap=True)
    return len(ratings)
