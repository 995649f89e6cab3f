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

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from factcli import sources
from factcli.config.loader import Suite, make_prompt, parse_assertion
from factcli.config.context import Ctx, check_keys
from factcli.errors import ConfigError, FactcliError, did_you_mean
from factcli.types import FAILURE_ERROR, Assertion, EvalResult, ProviderSpec, TestCase

# Field names of a labels file; any other field becomes a var that grader values and rubric
# prompts can use (e.g. `correct_answers` in the TruthfulQA set).
ITEM_FIELDS = ("id", "question", "output", "reference", "context", "label")
POSITIVE = {"pass", "true", "yes", "1"}
NEGATIVE = {"fail", "false", "no", "0"}
LABEL_HELP = "pass/fail, true/false, yes/no or 1/0"

# Types whose `value` is the reference answer: without one, it is the item's `reference`.
REFERENCE_VALUED = ("factuality", "model-graded-factuality", "factual-correctness")
# Types that show the grader the question (the rendered prompt) and refuse an empty one.
NEEDS_QUESTION = ("factuality", "model-graded-factuality", "model-graded-closedqa")
# Comparisons pick among a test's columns; here the columns are graders, not candidates.
REFUSED_TYPES = ("select-best", "max-score")

GRADER_KEYS = {"label", "options", "type", "value", "threshold", "weight", "provider", "rubricPrompt", "metric",
               "transform", "contextTransform", "config", "assert"}
GRADER_OPTION_KEYS = {"factuality"}  # test-level options a grader reads (factuality's category weights)
FILE_KEYS = {"description", "labels", "graders"}


# ---------------------------------------------------------------- the labeled items


@dataclass
class LabeledItem:
    id: str
    output: str
    gold: bool
    where: str  # "line 3" (JSONL) or "row 3" (CSV), for errors
    question: str = ""
    reference: str | None = None
    context: Any = None
    extra: dict = field(default_factory=dict)

    def vars(self) -> dict:
        v = {"question": self.question, "output": self.output}
        if self.reference is not None:
            v["reference"] = self.reference
        if self.context is not None:
            v["context"] = self.context
        v.update(self.extra)
        return v


def parse_label(value: Any) -> bool | None:
    """pass/fail, true/false, yes/no, 1/0 (any case, JSON booleans and 0/1 too) -> True/False; else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in POSITIVE:
            return True
        if text in NEGATIVE:
            return False
    return None


def _text_field(rec: dict, key: str, file: str, where: str, required: bool = False) -> str | None:
    value = rec.get(key)
    if value is None or (isinstance(value, str) and not value.strip() and not required):
        if required:
            raise ConfigError(f"missing '{key}'", file, where)
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ConfigError(f"'{key}' must be text, got {type(value).__name__}", file, where)
    return str(value)


def _item(rec: dict, file: str, where: str, number: int) -> LabeledItem:
    if "label" not in rec or rec["label"] is None or rec["label"] == "":
        near = [k for k in rec if k not in ITEM_FIELDS and did_you_mean(str(k), ["label"])]
        hint = f" (found '{near[0]}')" if near else ""
        raise ConfigError(f"missing 'label' ({LABEL_HELP}){hint}", file, where)
    gold = parse_label(rec["label"])
    if gold is None:
        raise ConfigError(f"label {rec['label']!r} is not one of {LABEL_HELP}", file, where)
    output = _text_field(rec, "output", file, where, required=True)
    context = rec.get("context")
    if context is not None:
        ok = isinstance(context, str) or (isinstance(context, list) and all(isinstance(c, str) for c in context))
        if not ok:
            raise ConfigError("'context' must be text or a list of texts", file, where)
        if context == "" or context == []:
            context = None
    item_id = _text_field(rec, "id", file, where) or f"#{number}"
    extra = {}
    for k, v in rec.items():
        if k in ITEM_FIELDS:
            continue
        extra[k] = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
    return LabeledItem(id=item_id, output=output, gold=gold, where=where,
                       question=_text_field(rec, "question", file, where) or "",
                       reference=_text_field(rec, "reference", file, where), context=context, extra=extra)


def load_items(path: Path) -> list[LabeledItem]:
    """A labels file: JSONL (one object per line) or CSV (a header row), with the fields of ITEM_FIELDS."""
    file = str(path)
    if not path.is_file():
        raise ConfigError("labels file not found" + ("" if path.parent.exists() else " (its folder does not exist)"),
                          file)
    suffix = path.suffix.lower()
    text = sources.read_text(path, file, "")
    items: list[LabeledItem] = []
    if suffix == ".jsonl":
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"invalid JSON: {exc.msg} (column {exc.colno})", file, f"line {n}") from None
            if not isinstance(rec, dict):
                raise ConfigError(f"expected a JSON object, got {type(rec).__name__}", file, f"line {n}")
            items.append(_item(rec, file, f"line {n}", len(items) + 1))
    elif suffix == ".csv":
        reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
        try:
            header = reader.fieldnames or []
            if "label" not in header or "output" not in header:
                missing = [c for c in ("output", "label") if c not in header]
                raise ConfigError(f"the header has no '{missing[0]}' column (columns: {', '.join(ITEM_FIELDS)})",
                                  file, "line 1")
            for n, row in enumerate(reader, 1):
                if None in row:
                    raise ConfigError(f"the row has more cells than the header ({len(header)})", file, f"row {n}")
                rec = {k: v for k, v in row.items() if v is not None}
                items.append(_item(rec, file, f"row {n}", n))
        except csv.Error as exc:
            raise ConfigError(f"invalid CSV: {exc}", file, f"line {reader.line_num}") from None
    else:
        raise ConfigError("a labels file is .jsonl or .csv", file)
    if not items:
        raise ConfigError("no labeled items", file)
    seen: dict[str, str] = {}
    for it in items:
        if it.id in seen:
            raise ConfigError(f"id '{it.id}' is used twice (also at {seen[it.id]})", file, it.where)
        seen[it.id] = it.where
    return items


# ---------------------------------------------------------------- grader configurations


@dataclass
class GraderConfig:
    label: str
    assertion: Assertion
    options: dict
    raw: dict  # as written (without env expansion), for the stored config
    file: str  # where it was declared, for errors: a file, or "the command line"
    where: str
    grader: str | None = None  # the model(s) it resolves to; None for a check that calls no model


@dataclass
class Plan:
    description: str | None
    labels: Path | None
    graders: list[GraderConfig]
    config_file: Path | None = None


def read_config(path: Path) -> tuple[dict, dict]:
    """-> (as written, with env expanded). Keys: description, labels, graders."""
    file = str(path)
    if not path.is_file():
        raise ConfigError("config file not found", file)
    data = sources.load_structured(path)
    if not isinstance(data, dict):
        raise ConfigError("expected a mapping with 'graders' (and optionally 'labels', 'description')", file)
    check_keys(data, FILE_KEYS, file, "")
    return data, sources.expand_env(data)


def _grader_entries(data: dict, file: str) -> list[tuple[dict, dict, str]]:
    raw_list, expanded = data[0].get("graders"), data[1].get("graders")
    if not isinstance(raw_list, list) or not raw_list:
        raise ConfigError("expected a non-empty list of grader configurations", file, "graders")
    out = []
    for i, (raw, entry) in enumerate(zip(raw_list, expanded)):
        where = f"graders[{i}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"expected an assertion mapping with a 'type', got {type(entry).__name__}", file, where)
        check_keys(entry, GRADER_KEYS, file, where)
        out.append((raw, entry, where))
    return out


def _build_config(raw: dict, entry: dict, file: str, where: str, base: Path, grader: str | None) -> GraderConfig:
    entry = dict(entry)
    label = entry.pop("label", None)
    if label is not None and (not isinstance(label, str) or not label.strip()):
        raise ConfigError("expected a non-empty string", file, f"{where}.label")
    options = entry.pop("options", None) or {}
    if not isinstance(options, dict):
        raise ConfigError("expected a mapping", file, f"{where}.options")
    check_keys(options, GRADER_OPTION_KEYS, file, f"{where}.options")
    typ = entry.get("type")
    base_type = typ[4:] if isinstance(typ, str) and typ.startswith("not-") else typ
    if base_type in REFUSED_TYPES:
        raise ConfigError(f"'{typ}' compares several outputs of one test; it cannot be calibrated against "
                          "per-item labels", file, f"{where}.type")
    if base_type in REFERENCE_VALUED and entry.get("value") is None:
        entry["value"] = "{{reference}}"
    if grader is not None:
        entry["provider"] = grader
    assertion = parse_assertion(entry, Ctx(file, base, {}), where)
    stored = {k: v for k, v in raw.items() if k not in ("label", "options")}
    stored.update({k: entry[k] for k in ("value", "provider") if k in entry and k not in stored})
    return GraderConfig(label=(label or "").strip(), assertion=assertion, options=dict(options), raw=stored,
                        file=file, where=where)


def plan(config: Path | None, labels: Path | None, asserts: list[str], graders: list[str],
         description: str | None) -> Plan:
    """The grader configurations: the file's `graders`, then one per `--assert TYPE` (only
    `factuality` when neither is given); each configuration without a `provider` of its own runs
    once per `--grader` (with none, the default grader)."""
    entries: list[tuple[dict, dict, str, str, Path]] = []
    file_description, file_labels = None, None
    if config is not None:
        data = read_config(config)
        file = str(config)
        entries += [(raw, e, file, w, config.parent) for raw, e, w in _grader_entries(data, file)]
        file_description = data[1].get("description")
        ref = data[1].get("labels")
        if ref is not None:
            if not isinstance(ref, str) or not ref.strip():
                raise ConfigError("expected the path of a labels file", file, "labels")
            p, _ = sources.ref_path(ref, config.parent) if sources.is_file_ref(ref) else (Path(ref), None)
            file_labels = p if p.is_absolute() else config.parent / p
    for typ in asserts or ([] if config is not None else ["factuality"]):
        e = {"type": typ}
        entries.append((e, e, "the command line", f"--assert {typ}", Path.cwd()))
    built: list[GraderConfig] = []
    for raw, entry, file, where, base in entries:
        own = isinstance(entry, dict) and entry.get("provider") is not None
        for g in ([None] if own or not graders else graders):
            w = where if g is None else f"{where} (--grader {g})"
            built.append(_build_config(raw, entry, file, w, base, g))
    labels_path = labels if labels is not None else file_labels
    if labels_path is None:
        raise FactcliError("no labels file: give one (factcli calibrate LABELS.jsonl) or name it in the config's "
                           "'labels:'")
    return Plan(description=description or file_description, labels=labels_path, graders=built,
                config_file=config)


def _grader_name(gc: GraderConfig, source) -> str | None:
    """The grader a configuration resolves to (a panel: its judges joined by '+'); None if not
    model-graded. A configuration with no grader at all is a config error naming where it was declared."""
    from factcli.scoring.registry import lookup
    from factcli.scoring.grading import NoGrader, pick

    def one(a: Assertion) -> str | None:
        kind = lookup(a.type)
        if kind is None or not kind.model_graded:
            return None
        panel = a.provider if isinstance(a.provider, list) else None
        if a.provider is None and isinstance(a.config.get("models"), list):
            panel = a.config["models"]
        if panel is not None:
            names = []
            for p in panel:
                try:
                    spec = pick(p)
                except ConfigError:
                    spec = None
                names.append(spec.display if spec is not None else "?")
            return "+".join(names)
        try:
            spec = source.resolve(a.provider, None, "embedding" if a.base_type.startswith("similar") else "text")
        except NoGrader as exc:
            raise ConfigError(exc.detail, gc.file, gc.where) from None
        except ConfigError as exc:
            raise ConfigError(exc.detail, gc.file, f"{gc.where}.provider") from None
        return spec.display

    names = [n for n in (one(a) for a in (gc.assertion.children or [gc.assertion])) if n]
    return ", ".join(dict.fromkeys(names)) or None


def name_configs(configs: list[GraderConfig], source) -> None:
    """Give every configuration a unique column label: its own, else 'type · grader' (#2, #3 … for repeats)."""
    used: dict[str, str] = {}
    for gc in configs:
        if gc.label:
            if gc.label in used:
                raise ConfigError(f"label '{gc.label}' is already used by {used[gc.label]}", gc.file,
                                  f"{gc.where}.label")
            used[gc.label] = gc.where
    for gc in configs:
        gc.grader = _grader_name(gc, source)
        if gc.label:
            continue
        base = gc.assertion.type + (f" · {gc.grader}" if gc.grader else "")
        label, n = base, 1
        while label in used:
            n += 1
            label = f"{base} #{n}"
        gc.label = label
        used[label] = gc.where


def check_items(items: list[LabeledItem], configs: list[GraderConfig], labels_file: str) -> None:
    """Inputs a grader needs and an item lacks are bad input, found before any call."""
    for gc in configs:
        for a in gc.assertion.children or [gc.assertion]:
            needs = []
            if a.base_type in NEEDS_QUESTION:
                needs.append(("question", lambda it: it.question.strip()))
            if a.value == "{{reference}}":
                needs.append(("reference", lambda it: it.reference))
            if a.base_type == "facts-grounding" and not a.context_transform and not (a.config or {}).get("context_var"):
                needs.append(("context", lambda it: it.context))
            for name, has in needs:
                for it in items:
                    if not has(it):
                        raise ConfigError(f"no '{name}', which {gc.label} ({gc.where}) needs", labels_file, it.where)


# ---------------------------------------------------------------- the run


def build_suite(items: list[LabeledItem], configs: list[GraderConfig], p: Plan) -> tuple[Suite, list[list[TestCase]]]:
    """-> (suite, variants): suite.tests hold every configuration's assertion (so the runner
    checks every grader before any call); variants[i][j] is item i's test for configuration j."""
    labels_file = str(p.labels)
    tests, variants = [], []
    for it in items:
        gold = "pass" if it.gold else "fail"
        desc = f"{it.id} (gold: {gold})"
        vars_ = it.vars()
        meta = {"calibration": {"id": it.id, "gold": gold}}
        common = dict(description=desc, vars=vars_, metadata=meta, provider_output=it.output,
                      source=(labels_file, it.where))
        opts = {"disableVarExpansion": True}  # a list-valued var (context) is one value, not a fan-out
        tests.append(TestCase(assertions=[gc.assertion for gc in configs], options=opts,
                              raw={"description": desc, "vars": vars_, "metadata": meta}, **common))
        row = []
        for gc in configs:
            o = {**opts, **gc.options}
            row.append(TestCase(assertions=[gc.assertion], options=o,
                                raw={"description": desc, "vars": vars_, "assert": [gc.assertion.raw],
                                     "options": o, "metadata": meta}, **common))
        variants.append(row)
    raw_config = {"description": p.description, "labels": str(p.labels),
                  "graders": [{"label": gc.label, **gc.raw, **({"options": gc.options} if gc.options else {})}
                              for gc in configs]}
    files = [str(p.labels)] + ([str(p.config_file)] if p.config_file else [])
    suite = Suite(
        description=p.description or f"calibrate {p.labels.name}: {len(items)} items, {len(configs)} "
                                     f"grader configuration{'s' if len(configs) != 1 else ''}",
        prompts=[make_prompt("{{question}}", "")],  # the question is what graders see as the prompt
        providers=[ProviderSpec(id="echo", label=gc.label) for gc in configs],
        tests=tests, raw=raw_config,
        base_dir=p.config_file.parent if p.config_file else Path.cwd(), config_files=files,
    )
    return suite, variants


def assign_variants(run, variants: list[list[TestCase]]) -> None:
    """Give each step its column's test; with one prompt, a column is a grader configuration."""
    import dataclasses

    run._steps = [dataclasses.replace(s, test=variants[s.test_idx][s.prompt_idx]) for s in run._steps]


# ---------------------------------------------------------------- metrics


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def binary_metrics(tp: int, fn: int, fp: int, tn: int) -> dict:
    """Agreement of a binary grader with gold labels (positive = pass). A metric whose denominator
    is zero is None (undefined), never 0: a set with no gold negatives has no false-positive rate.

    Written out rather than taken from scikit-learn (not a dependency): each is one ratio over the
    2x2 table, and tests check them against hand computations and the FACTS paper's Table 2."""
    n = tp + fn + fp + tn
    f1_pos = _ratio(2 * tp, 2 * tp + fp + fn)
    f1_neg = _ratio(2 * tn, 2 * tn + fn + fp)
    accuracy = _ratio(tp + tn, n)
    kappa = None
    if n:
        expected = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / (n * n)
        kappa = None if expected == 1 else (accuracy - expected) / (1 - expected)
    pred, gold = _ratio(tp + fp, n), _ratio(tp + fn, n)
    return {
        "n": n, "confusion": {"tp": tp, "fn": fn, "fp": fp, "tn": tn},
        "macroF1": None if f1_pos is None or f1_neg is None else (f1_pos + f1_neg) / 2,
        "accuracy": accuracy, "fpr": _ratio(fp, fp + tn), "fnr": _ratio(fn, fn + tp),
        "f1Positive": f1_pos, "f1Negative": f1_neg, "kappa": kappa,
        "predictedPositiveRate": pred, "goldPositiveRate": gold,
        # FActScore's ER = |FS − FS_est| with FS the share of positives: here the pass rate the
        # grader reports against the one people gave, over the items the grader judged.
        "errorRate": None if pred is None else abs(pred - gold),
        "bias": None if pred is None else pred - gold,
    }


def verdict(row: EvalResult) -> tuple[bool | None, str | None]:
    """-> (pass?, None) for a prediction, (None, reason) for a grading error."""
    if row.failure_reason == FAILURE_ERROR or row.grading is None:
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


# ---------------------------------------------------------------- showing it


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



# ---------------------------------------------------------------- the command


def _session_class():
    from factcli.run.session import EvalSession

    class CalibrationSession(EvalSession):
        """Stores the run like any eval's, marked as a calibration (mode `calibrate`) so that
        `eval --resume` does not mistake its labels file for a config."""

        calibration: dict = {}

        def _options_record(self, run) -> dict:
            record = super()._options_record(run)
            record.update(mode="calibrate", **self.calibration)
            return record

    return CalibrationSession


def run_command(args: dict) -> int:
    """`factcli calibrate`, from parsed arguments to exit code (contract §2)."""
    from factcli.report import summary as reporting
    from factcli import settings
    from factcli.run import runner
    from factcli.scoring.grading import GraderSource

    if args.get("env_file"):
        settings.load_env_file(str(args["env_file"]))
    outputs = [Path(o) for o in args.get("output") or []]
    for o in outputs:
        if o.suffix.lower() != ".json":
            raise FactcliError(f"-o {o}: calibrate writes its metrics as JSON (use a .json file)")
    p = plan(args.get("config"), args.get("labels"), list(args.get("assert_types") or []),
             list(args.get("graders") or []), args.get("description"))
    items = load_items(Path(p.labels))
    if args.get("filter_first_n") is not None:
        items = items[: args["filter_first_n"]]
        if not items:
            raise FactcliError("--filter-first-n 0 leaves no items to grade")
    name_configs(p.graders, GraderSource())
    check_items(items, p.graders, str(p.labels))
    suite, variants = build_suite(items, p.graders, p)
    options = runner.RunOptions(max_concurrency=args.get("max_concurrency"),
                                cache=False if args.get("no_cache") else None, description=p.description)
    session = _session_class().open({"db": args.get("db"), "no_write": args.get("no_write"),
                                     "no_cache": args.get("no_cache")}, options)
    session.calibration = {"labels": str(Path(p.labels).resolve()),
                           "calibrationConfig": str(p.config_file.resolve()) if p.config_file else None}
    session.filter_suite(suite)
    run = runner.prepare(suite, options)
    session.begin(run)
    assign_variants(run, variants)  # after begin: the stored options record the suite's tests
    from factcli.run.session import drive

    interrupted = drive(session, run, progress_bar=not args.get("no_progress_bar"))
    rep = report(run, items, p.graders)
    from factcli.report.view import console_for_stdout

    console, _ = console_for_stdout()
    render(console, rep, str(p.labels))
    if session.writing:
        console.print(f"Stored as run {run.run_id}: factcli view {run.run_id}")
    if run.abort_reason:
        from rich.markup import escape

        console.print(f"[bold red]Aborted:[/] {escape(run.abort_reason)}")
    for o in outputs:
        write_json(rep, o)
        console.print(f"Wrote {o}")
    if interrupted:
        reporting.stderr_console().print("[yellow]Interrupted:[/] the items graded so far are reported and kept.")
        return 130
    if run.status == runner.STATUS_ABORTED:
        return 3
    if any(e["gradingErrors"] or e.get("notRun") for e in rep["graders"]):
        return int(settings.env_float("FACTCLI_FAILED_TEST_EXIT_CODE", 100))
    return 0
