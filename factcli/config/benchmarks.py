"""What `factcli calibrate --benchmark NAME` reads: a labeled grounding benchmark (a document, a claim
about it, a gold label: supported or not), from where it lives, never shipped with factcli.

NAME is a known benchmark (BENCHMARKS: LLM-AggreFact, HaluBench, read from the Hugging Face Hub
through config/remote.py, so HF_TOKEN, the download cache and the paging are the Hub reader's), a
Hub dataset (`huggingface://datasets/OWNER/REPO`), a URL of a CSV/JSONL/JSON file, or a local one.
`--columns doc=…,claim=…,label=…[,dataset=…,question=…,id=…]` names the columns (a known benchmark
has its own map). Labels are read by config/labels.parse_label: supported/unsupported, pass/fail,
true/false, yes/no, 1/0 (any case); the positive class is "supported".

Rows become calibrate's LabeledItems: the claim is the output, the document the context, the question
(HaluBench's, else REQUEST) the question; `--per-dataset N` samples N rows of each sub-dataset,
stratified by label (N/2 supported, N/2 unsupported) with a seeded generator.
"""

from __future__ import annotations

import csv
import io
import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from factcli.config import remote
from factcli.config.labels import LABEL_HELP, LabeledItem, parse_label
from factcli.errors import ConfigError, did_you_mean

ROLES = ("doc", "claim", "label", "dataset", "question", "id")
REQUIRED = ("doc", "claim", "label")
# The user request a judge is shown with a claim that answers no question (LLM-AggreFact's): the
# claim was written about the document, which is all a grounding judge needs to know.
REQUEST = "State a claim about the document."


@dataclass(frozen=True)
class Benchmark:
    name: str
    hub: str  # OWNER/REPO on the Hugging Face Hub
    splits: tuple[str, ...]
    columns: dict
    gated: bool
    source: str  # the benchmark's own page

    @property
    def terms(self) -> str:
        return f"https://huggingface.co/datasets/{self.hub}"


BENCHMARKS = {
    "llm-aggrefact": Benchmark(
        "llm-aggrefact", "lytang/LLM-AggreFact", ("test", "dev"),
        {"doc": "doc", "claim": "claim", "label": "label", "dataset": "dataset"}, True,
        "https://llm-aggrefact.github.io/"),
    "halubench": Benchmark(
        "halubench", "PatronusAI/HaluBench", ("test",),
        {"doc": "passage", "claim": "answer", "label": "label", "dataset": "source_ds", "question": "question",
         "id": "id"}, False, "https://arxiv.org/abs/2407.08488"),
}


@dataclass
class Selection:
    """What to read and how to sample it: the command line's benchmark options, kept with the run so
    that `--resume` rebuilds the very same items."""

    name: str
    split: str | None = None
    columns: str | None = None
    per_dataset: int | None = None
    seed: int = 0
    datasets: str | None = None

    def record(self) -> dict:
        return {"name": self.name, "split": self.split, "columns": self.columns, "perDataset": self.per_dataset,
                "seed": self.seed, "datasets": self.datasets}

    @classmethod
    def from_record(cls, rec: dict) -> Selection:
        return cls(rec["name"], rec.get("split"), rec.get("columns"), rec.get("perDataset"), rec.get("seed") or 0,
                   rec.get("datasets"))


@dataclass
class Loaded:
    items: list[LabeledItem]
    counts: list[str] = field(default_factory=list)  # "name: 10 supported + 10 unsupported of 558"
    source: str = ""  # what the items were read from, as reports name it
    benchmark: str | None = None  # a known benchmark's name (its leaderboard rows)
    split: str | None = None


def parse_columns(text: str | None, where: str = "--columns") -> dict:
    """`doc=passage,claim=answer,label=label` -> {"doc": "passage", ...}."""
    out: dict[str, str] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        role, eq, column = part.partition("=")
        role, column = role.strip(), column.strip()
        if not eq or not column:
            raise ConfigError(f"expected ROLE=COLUMN, got {part.strip()!r} (roles: {', '.join(ROLES)})", None, where)
        if role not in ROLES:
            raise ConfigError(f"unknown role '{role}'{did_you_mean(role, ROLES)} (roles: {', '.join(ROLES)})",
                              None, where)
        out[role] = column
    return out


def _what(name: str) -> str:
    return f"--benchmark {name}"


def _split(sel: Selection, bench: Benchmark | None) -> str:
    if bench is None:
        return sel.split or "test"
    split = sel.split or bench.splits[0]
    if split not in bench.splits:
        raise ConfigError(f"{bench.name} has no split '{split}' (splits: {', '.join(bench.splits)})", None, "--split")
    return split


class HubRows(list):
    """A Hub split's rows as its pages gave them; `cut`: the indices of rows whose long cells the
    server cut short, read whole (`whole`) only if the sample keeps them."""

    def __init__(self, rows: list, ref: str, cut: list[int], what: str):
        super().__init__(rows)
        self.ref, self.cut, self.what = ref, set(cut), what

    def whole(self, index: int) -> dict:
        return remote.whole_row(self.ref, index, self.what, "")


def _hub_rows(repo: str, split: str, name: str, gated_terms: str | None, known: bool = True) -> list[dict]:
    ref = f"{remote.HF_PREFIX}{repo}?split={split}"
    try:
        rows, cut = remote.dataset_pages(ref, _what(name), "")
        return HubRows(rows, ref, cut, _what(name))
    except ConfigError as exc:
        if gated_terms and ("HTTP 401" in exc.detail or "HTTP 403" in exc.detail):
            token = "the token in HF_TOKEN has no access: accept" if remote.hf_token() else "set HF_TOKEN and accept"
            what = "gated" if known else "gated, private or not there"
            raise ConfigError(f"{repo} is {what} on the Hugging Face Hub: {token} its terms at {gated_terms} "
                              "(no model was called)", _what(name)) from None
        raise


def _file_rows(data: bytes | str, suffix: str, file: str) -> list[dict]:
    text = data.decode("utf-8-sig") if isinstance(data, bytes) else data
    if suffix == ".csv":
        from factcli.sources import allow_large_csv_cells

        allow_large_csv_cells()
        try:
            return list(csv.DictReader(io.StringIO(text, newline=""), strict=True))
        except csv.Error as exc:
            raise ConfigError(f"invalid CSV: {exc}", file) from None
    if suffix == ".jsonl":
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ConfigError(f"invalid JSON: {exc.msg} (column {exc.colno})", file, f"line {n}") from None
        return rows
    if suffix == ".json":
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"invalid JSON: {exc.msg} (line {exc.lineno})", file) from None
        if not isinstance(rows, list):
            raise ConfigError("expected a JSON list of rows", file)
        return rows
    raise ConfigError("a benchmark file is .csv, .jsonl or .json", file)


def read_rows(sel: Selection) -> tuple[list[dict], dict, str, Benchmark | None, str]:
    """-> (rows, column map, source as shown, known benchmark or None, split)."""
    bench = BENCHMARKS.get(sel.name)
    given = parse_columns(sel.columns)
    if bench is not None:
        split = _split(sel, bench)
        return (_hub_rows(bench.hub, split, bench.name, bench.terms if bench.gated else None),
                {**bench.columns, **given}, f"{bench.name} ({bench.hub}, {split})", bench, split)
    name = sel.name
    if name.startswith(remote.HF_PREFIX):
        repo, params, _ = remote.parse_dataset(name, _what(name), "")
        split = sel.split or params.get("split", "test")
        rows = _hub_rows(repo, split, name, f"https://huggingface.co/datasets/{repo}", known=False)
        source = f"{repo} ({split})"
    elif name.startswith(("http://", "https://")):
        rows = _file_rows(remote.download(name, _what(name), ""), remote.url_suffix(name), remote.shown(name))
        source, split = remote.shown(name), None
    else:
        path = Path(name)
        if not path.is_file():
            near = did_you_mean(name, BENCHMARKS)
            raise ConfigError(f"not a known benchmark ({', '.join(BENCHMARKS)}), a huggingface://datasets/… "
                              f"reference, a URL or a file{near}", None, f"--benchmark {name}")
        rows = _file_rows(path.read_bytes(), path.suffix.lower(), name)
        source, split = name, None
    if not rows:
        raise ConfigError("no rows", source)
    missing = [r for r in REQUIRED if r not in given]
    if missing:
        cols = ", ".join(str(c) for c in rows[0]) if isinstance(rows[0], dict) else "?"
        raise ConfigError(f"--columns must name {', '.join(f'{r}=COLUMN' for r in missing)} (its columns: {cols})",
                          source)
    return rows, given, source, None, split


def _text(row: dict, role: str, columns: dict, source: str, where: str, required: bool) -> str | None:
    col = columns.get(role)
    if col is None:
        return None
    if col not in row:
        if not required and role in ("dataset", "id"):
            return None
        near = did_you_mean(col, [str(k) for k in row])
        raise ConfigError(f"no column '{col}' (for {role}){near}; its columns: {', '.join(map(str, row))}",
                          source, where)
    value = row[col]
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise ConfigError(f"'{col}' ({role}) is empty", source, where)
        return None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n\n".join(value)
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def to_items(rows: list[dict], columns: dict, source: str, default_dataset: str,
             numbers: dict | None = None) -> dict[str, list[LabeledItem]]:
    """Rows -> items grouped by dataset (in the order datasets first appear); `numbers` gets
    id(item) -> the row's index."""
    groups: dict[str, list[LabeledItem]] = {}
    for n, row in enumerate(rows):
        item = _item(row, n, columns, source, default_dataset)
        groups.setdefault(item.extra["dataset"], []).append(item)
        if numbers is not None:
            numbers[id(item)] = n
    return groups


def _item(row: dict, n: int, columns: dict, source: str, default_dataset: str) -> LabeledItem:
    where = f"row {n + 1}"
    if not isinstance(row, dict):
        raise ConfigError(f"expected a mapping of columns, got {type(row).__name__}", source, where)
    doc = _text(row, "doc", columns, source, where, True)
    claim = _text(row, "claim", columns, source, where, True)
    if columns["label"] not in row:
        _text(row, "label", columns, source, where, True)  # says which column is missing
    raw_label = row[columns["label"]]
    gold = parse_label(raw_label)
    if gold is None:
        raise ConfigError(f"label {raw_label!r} in '{columns['label']}' is not one of {LABEL_HELP}", source, where)
    dataset = _text(row, "dataset", columns, source, where, False) or default_dataset
    question = _text(row, "question", columns, source, where, False)
    row_id = _text(row, "id", columns, source, where, False)
    extra = {"dataset": dataset, "query": question or REQUEST, "label": "supported" if gold else "unsupported"}
    return LabeledItem(id=f"{dataset}/{row_id or n}", output=claim, gold=gold, where=where,
                       question=question or REQUEST, context=doc, extra=extra)


def pick_datasets(groups: dict, names: str | None) -> dict:
    if not names:
        return groups
    lower = {k.lower(): k for k in groups}
    out = {}
    for name in (x.strip() for x in names.split(",")):
        if not name:
            continue
        key = lower.get(name.lower())
        if key is None:
            raise ConfigError(f"no dataset '{name}'{did_you_mean(name, list(groups))} (datasets: "
                              f"{', '.join(groups)})", None, "--datasets")
        out[key] = groups[key]
    return out


def sample(groups: dict, per_dataset: int | None, seed: int) -> tuple[list[LabeledItem], list[str]]:
    """N per dataset, half supported and half unsupported (the odd one supported), drawn with a
    generator seeded by (seed, dataset) so that adding a dataset does not change another's rows; the
    rows kept stay in their order in the source. A class with too few rows gives all it has."""
    items, counts = [], []
    for name, group in groups.items():
        pos = [i for i, it in enumerate(group) if it.gold]
        neg = [i for i, it in enumerate(group) if not it.gold]
        if per_dataset is None:
            chosen = list(range(len(group)))
            note = ""
        else:
            rng = random.Random(f"{seed}:{name}")
            want_neg = per_dataset // 2
            want_pos = per_dataset - want_neg
            chosen = sorted(rng.sample(pos, min(want_pos, len(pos))) + rng.sample(neg, min(want_neg, len(neg))))
            short = [f"only {len(c)} {w}" for c, w, want in
                     ((pos, "supported", want_pos), (neg, "unsupported", want_neg)) if len(c) < want]
            note = f" ({', '.join(short)})" if short else ""
        kept = [group[i] for i in chosen]
        p = sum(it.gold for it in kept)
        counts.append(f"{name}: {p} supported + {len(kept) - p} unsupported of {len(group):,}{note}")
        items += kept
    return items, counts


def load(sel: Selection, splits: list[str] | None = None) -> Loaded:
    """The items of a selection; `splits` (for --tune-threshold dev) reads each split in turn, the
    items of a split other than the selection's carrying `split` in their vars and id."""
    if sel.per_dataset is not None and sel.per_dataset < 1:
        raise ConfigError("expected a whole number of at least 1", None, "--per-dataset")
    out = Loaded([])
    for split in splits or [None]:
        this = Selection(sel.name, split or sel.split, sel.columns, sel.per_dataset, sel.seed, sel.datasets)
        rows, columns, source, bench, used = read_rows(this)
        default = Path(sel.name).stem if bench is None else bench.name
        numbers: dict = {}
        groups = pick_datasets(to_items(rows, columns, source, default, numbers), sel.datasets)
        items, counts = sample(groups, sel.per_dataset, sel.seed)
        if isinstance(rows, HubRows) and rows.cut:  # the sample's rows whose documents a page cut short
            items = [_item(rows.whole(numbers[id(it)]), numbers[id(it)], columns, source, default)
                     if numbers[id(it)] in rows.cut else it for it in items]
        if splits:
            for it in items:
                it.id = f"{used}:{it.id}"
                it.extra["split"] = used
            counts = [f"{used} {c}" for c in counts]
        out.items += items
        out.counts += counts
        out.source = out.source or source
        out.benchmark = bench.name if bench else None
        out.split = used if not splits else splits[-1]
    if not out.items:
        raise ConfigError("no rows to judge", out.source)
    return out
