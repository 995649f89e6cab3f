"""What `factcli calibrate` reads: labeled items (JSONL, JSON, YAML or CSV; one human pass/fail label
each) and grader configurations (a calibration config's `graders:`, or `--assert`/`--grader`), and
the suite they become: one test per item, one column per grader configuration."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from factcli import sources
from factcli.config.context import Ctx, check_keys
from factcli.config.loader import Suite
from factcli.config.prompts import make_prompt
from factcli.config.testcases import parse_assertion
from factcli.errors import ConfigError, FactcliError, did_you_mean
from factcli.scoring.registry import COMPARING, TYPES
from factcli.types import Assertion, ProviderSpec, TestCase

# Field names of a labels file; any other field becomes a var that grader values and rubric
# prompts can use (e.g. `correct_answers` in the TruthfulQA set).
ITEM_FIELDS = ("id", "question", "output", "reference", "context", "label")


POSITIVE = {"pass", "true", "yes", "1", "supported"}


NEGATIVE = {"fail", "false", "no", "0", "unsupported"}


LABEL_HELP = "pass/fail, true/false, yes/no, supported/unsupported or 1/0"


# llm-rubric shows its grader only the output and the rubric, so the rubric it gets when a graders
# entry gives none carries the item's question and reference (never an empty rubric).
DEFAULT_RUBRIC = ("The output is a correct answer to this question: {{question}}\n"
                  "It agrees with the reference answer: {{reference}}")


# The same for a benchmark (`calibrate --benchmark`): the item's document is the context, and the
# rubric asks what grounding benchmarks label, whether the claim is supported by it.
GROUNDING_RUBRIC = ("Every statement in the output is supported by the document below: nothing in the output "
                    "contradicts the document or adds information the document does not give.\n\n"
                    "Document:\n{{context}}")


GRADER_KEYS = {"label", "options", "type", "value", "threshold", "weight", "provider", "rubricPrompt", "metric",
               "transform", "contextTransform", "config", "assert"}


GRADER_OPTION_KEYS = {"factuality"}  # test-level options a grader reads (factuality's category weights)


FILE_KEYS = {"description", "labels", "graders"}


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
        from factcli.sources import allow_large_csv_cells

        allow_large_csv_cells()
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
                rec = {k: sources.cell_read_back(v) for k, v in row.items() if v is not None}
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
    source: str | None = None  # a benchmark's items: what they were read from (calibrate --benchmark)
    benchmark: dict | None = None  # its selection (config/benchmarks.Selection.record), stored with the run


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


def _benchmark_defaults(entry: dict, base_type) -> None:
    """A benchmark's item is a document and a claim: what a type reads as the reference is the
    document; facts-grounding judges grounding alone (the claim answers no request, so its
    eligibility phase would judge nothing the labels say); context-faithfulness passes a claim only
    when every statement of it is supported (its own default threshold, 0, passes everything)."""
    if base_type in TYPES and TYPES[base_type].value_is_reference and entry.get("value") is None:
        entry["value"] = "{{context}}"
    if base_type == "llm-rubric" and entry.get("value") is None and "rubricPrompt" not in entry:
        entry["value"] = GROUNDING_RUBRIC
    if base_type == "facts-grounding":
        config = dict(entry.get("config") or {})
        config.setdefault("eligibility", False)
        entry["config"] = config
    if base_type == "context-faithfulness" and entry.get("threshold") is None:
        entry["threshold"] = 1


def _build_config(raw: dict, entry: dict, file: str, where: str, base: Path, grader: str | None,
                  benchmark: bool = False) -> GraderConfig:
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
    if base_type in COMPARING:  # they pick among a test's columns: here the columns are graders, not candidates
        raise ConfigError(f"'{typ}' compares several outputs of one test; it cannot be calibrated against "
                          "per-item labels", file, f"{where}.type")
    if benchmark:
        _benchmark_defaults(entry, base_type)
    # a type whose value is the reference answer: without one, it is the item's `reference`
    if base_type in TYPES and TYPES[base_type].value_is_reference and entry.get("value") is None:
        entry["value"] = "{{reference}}"
    if base_type == "llm-rubric" and entry.get("value") is None and "rubricPrompt" not in entry:
        entry["value"] = DEFAULT_RUBRIC
    if grader is not None:
        entry["provider"] = grader
    assertion = parse_assertion(entry, Ctx(file, base, {}), where)
    stored = {k: v for k, v in raw.items() if k not in ("label", "options")}
    stored.update({k: entry[k] for k in ("value", "provider", "threshold", "config")
                   if k in entry and k not in stored})
    return GraderConfig(label=(label or "").strip(), assertion=assertion, options=dict(options), raw=stored,
                        file=file, where=where)


def plan(config: Path | None, labels: Path | None, asserts: list[str], graders: list[str],
         description: str | None, benchmark: bool = False) -> Plan:
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
    for typ in asserts or ([] if config is not None else ["facts-grounding" if benchmark else "factuality"]):
        e = {"type": typ}
        entries.append((e, e, "the command line", f"--assert {typ}", Path.cwd()))
    built: list[GraderConfig] = []
    for raw, entry, file, where, base in entries:
        own = isinstance(entry, dict) and entry.get("provider") is not None
        for g in ([None] if own or not graders else graders):
            w = where if g is None else f"{where} (--grader {g})"
            built.append(_build_config(raw, entry, file, w, base, g, benchmark))
    labels_path = labels if labels is not None else file_labels
    if labels_path is None and not benchmark:
        raise FactcliError("no labels file: give one (factcli calibrate LABELS.jsonl) or name it in the config's "
                           "'labels:'")
    return Plan(description=description or file_description, labels=labels_path, graders=built,
                config_file=config)


def _grader_name(gc: GraderConfig, source) -> str | None:
    """The grader a configuration resolves to (a panel: its judges joined by '+'); None if not
    model-graded. A configuration with no grader at all is a config error naming where it was declared."""
    from factcli.scoring.judges import JUDGE, JudgeProblem, judges_of, panel_of, role_of

    def one(a: Assertion) -> str | None:
        try:
            judges = judges_of(a, None, source)
        except JudgeProblem as exc:
            raise ConfigError(exc.detail, gc.file, f"{gc.where}.{exc.key}" if exc.key else gc.where) from None
        if panel_of(a) is not None:
            return "+".join(spec.display for spec in role_of(judges, JUDGE))
        named = role_of(judges, JUDGE) or role_of(judges, JUDGE, "embedding")  # `similar` only embeds
        return named[0].display if named else None

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
            if a.base_type in TYPES and TYPES[a.base_type].needs_question:
                needs.append(("question", lambda it: it.question.strip()))
            if a.value in ("{{reference}}", DEFAULT_RUBRIC):
                needs.append(("reference", lambda it: it.reference))
            if a.base_type == "facts-grounding" and not a.context_transform and not (a.config or {}).get("context_var"):
                needs.append(("context", lambda it: it.context))
            for name, has in needs:
                for it in items:
                    if not has(it):
                        raise ConfigError(f"no '{name}', which {gc.label} ({gc.where}) needs", labels_file, it.where)


def build_suite(items: list[LabeledItem], configs: list[GraderConfig], p: Plan) -> tuple[Suite, list[list[TestCase]]]:
    """-> (suite, variants): suite.tests hold every configuration's assertion (so the runner
    checks every grader before any call); variants[i][j] is item i's test for configuration j."""
    labels_file = str(p.labels) if p.labels is not None else (p.source or "")
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
    raw_config = {"description": p.description,
                  **({"benchmark": p.benchmark} if p.benchmark else {"labels": str(p.labels)}),
                  "graders": [{"label": gc.label, **gc.raw, **({"options": gc.options} if gc.options else {})}
                              for gc in configs]}
    files = ([str(p.labels)] if p.labels is not None else []) + ([str(p.config_file)] if p.config_file else [])
    named = p.labels.name if p.labels is not None else p.source
    suite = Suite(
        description=p.description or f"calibrate {named}: {len(items)} items, {len(configs)} "
                                     f"grader configuration{'s' if len(configs) != 1 else ''}",
        prompts=[make_prompt("{{question}}", "")],  # the question is what graders see as the prompt
        providers=[ProviderSpec(id="echo", label=gc.label) for gc in configs],
        tests=tests, raw=raw_config,
        base_dir=p.config_file.parent if p.config_file else Path.cwd(), config_files=files,
    )
    return suite, variants
