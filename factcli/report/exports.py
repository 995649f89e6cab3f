"""Result files of a run just finished (`eval -o`) or stored earlier (`factcli export`).

The format comes from the file name: .json (promptfoo's layout), .jsonl, .yaml/.yml (and .txt: YAML, as
promptfoo writes it), .csv
(promptfoo's CSV layout), .xml (the JSON document as XML), .junit.xml (one testsuite per column)
and .html (one self-contained page that opens offline). Rows are read through run.all_rows(), so
a stored run's rows stream from the store: JSON, JSONL and CSV are written row by row; YAML and XML
build the whole document, JUnit and HTML their element tree or page text, in memory.
Every file gets a last secrets pass (contract §9) after it is written.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from factcli.errors import FactcliError
from factcli.report.html_page import html_page
from factcli.report.rows import by_test, output_text, status_of, var_text
from factcli.types import EvalResult, is_row_description

FORMATS = (".json", ".jsonl", ".yaml", ".yml", ".txt", ".csv", ".xml", ".junit.xml", ".html")


def write_export(run, path: Path, scrub=None) -> None:
    from factcli.store.redact import Scrubber

    path = Path(path)
    name = path.name.lower()
    if not name.endswith(FORMATS):
        raise FactcliError(f"{path}: unsupported output format (use {', '.join(FORMATS)})")
    try:
        from factcli.settings import private_file

        private_file(path)  # owner-only (0600) when new; an existing file keeps its mode
        if name.endswith((".json", ".jsonl", ".yaml", ".yml", ".txt")):
            write_document(run, path)
        elif name.endswith("junit.xml"):
            path.write_text(junit_xml(run), encoding="utf-8")
        elif name.endswith(".xml"):
            path.write_text(document_xml(run), encoding="utf-8")
        elif name.endswith(".csv"):
            write_csv(run, path)
        else:
            path.write_text(html_page(run), encoding="utf-8")
        (scrub or Scrubber(run.suite.raw)).file(path)
    except OSError as exc:
        raise FactcliError(f"{path}: cannot write: {exc.strerror or exc}") from None


def write_document(run, path: Path) -> None:
    """The results document as .json, one row per line as .jsonl, or as .yaml/.yml (also .txt, as promptfoo
    writes it)."""
    from factcli.report.ratings import ratings_of
    from factcli.report.results_json import row_json, to_promptfoo_json, write_json
    from factcli.store.encode import dumps_finite

    name = path.name.lower()
    if name.endswith(".json"):
        write_json(run, path)
    elif name.endswith(".jsonl"):
        with open(path, "w", encoding="utf-8") as fh:
            for r in run.all_rows():
                fh.write(dumps_finite(row_json(r, run.columns, ratings_of(run, r))) + "\n")
    else:  # held in memory whole: PyYAML writes a document, not a stream
        import yaml

        with open(path, "w", encoding="utf-8") as fh:
            yaml.safe_dump(to_promptfoo_json(run), fh, sort_keys=False, allow_unicode=True)


# ---------------------------------------------------------------- shared helpers


def column_label(col) -> str:
    provider = col.provider.display
    return f"[{provider}] {col.prompt.label}" if provider else col.prompt.label


def _fixed2(value) -> str:
    if not isinstance(value, (int, float)) or value != value:
        return ""
    return f"{value:.2f}"


def failed_assertion_types(r: EvalResult) -> list[str]:
    if r.grading is None:
        return []
    return [c.assertion.type for c in r.grading.component_results if not c.passed and c.assertion is not None]


# ---------------------------------------------------------------- csv


def _csv_cell(value):
    """sources.neutral_cell (the CSV formula rule); FACTCLI_CSV_RAW=1 writes every cell as it is."""
    from factcli.sources import neutral_cell

    return neutral_cell(value)


def write_csv(run, path: Path) -> None:
    """promptfoo's layout: [Description], vars, then per column: "[provider] label", Status, Score,
    Named Scores, one "Metric: x" column per metric, Grader Reason, Comment. Cells that would be
    formulas are neutralised (_csv_cell) unless FACTCLI_CSV_RAW=1."""
    import csv
    import os

    from factcli.report.ratings import cell_text, ratings_of

    facts = run.row_facts()
    names = facts.var_names
    metrics = sorted(facts.named_scores)
    has_desc = facts.has_description
    rated = bool(run.ratings)  # people's ratings (report/ratings.py): a column when any
    header = (["Description"] if has_desc else []) + names
    for col in run.columns:
        header += [column_label(col), "Status", "Score", "Named Scores", *[f"Metric: {m}" for m in metrics],
                   "Grader Reason", "Comment"] + (["Ratings"] if rated else [])
    raw = os.environ.get("FACTCLI_CSV_RAW", "") not in ("", "0", "false")
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        write = writer.writerow if raw else (lambda row: writer.writerow([_csv_cell(c) for c in row]))
        write(header)
        for _, cells in by_test(run):
            first = next(iter(cells.values()))
            line = ([first.step.test.description or ""] if has_desc else [])
            line += [var_text(first.step.vars.get(n)) for n in names]
            for col in run.columns:
                r = cells.get(col.index)
                if r is None:
                    line += [""] * (6 + len(metrics) + rated)
                    continue
                named = {k: round(v, 2) for k, v in r.named_scores.items()
                         if isinstance(v, (int, float)) and v == v}
                reason = r.grading.reason if r.grading is not None else (r.error or "")
                line += [output_text(r) or (r.error or ""), status_of(r), _fixed2(r.score),
                         json.dumps(named) if named else "",
                         *[_fixed2(r.named_scores.get(m)) for m in metrics], reason or "",
                         (r.grading.metadata.get("comment", "") if r.grading is not None else "")]
                if rated:
                    line.append(cell_text(ratings_of(run, r)))
            write(line)


# ---------------------------------------------------------------- xml

_XML_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml_text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        text = "true" if value else "false"
    else:
        text = str(value)
    return _XML_BAD.sub("\ufffd", text)


def _xml_add(parent, key: str, value) -> None:
    import xml.etree.ElementTree as ET

    if isinstance(value, list):
        for item in value:
            _xml_add(parent, key, item)
        return
    if _XML_NAME.match(key) and not key.lower().startswith("xml"):
        el = ET.SubElement(parent, key)
    else:
        el = ET.SubElement(parent, "entry", {"key": _xml_text(key)})
    if isinstance(value, dict):
        for k, v in value.items():
            _xml_add(el, str(k), v)
    else:
        el.text = _xml_text(value)


def document_xml(run) -> str:
    """The results JSON document as XML under <promptfoo>, as promptfoo writes it: a list repeats
    its element; keys that are not XML names become <entry key="…">."""
    import xml.etree.ElementTree as ET

    from factcli.report.results_json import to_promptfoo_json

    doc = to_promptfoo_json(run)
    root = ET.Element("promptfoo")
    for k, v in doc.items():
        _xml_add(root, k, v)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def junit_xml(run) -> str:
    """One <testsuite> per column; a failed row lists its failed assertion types."""
    import xml.etree.ElementTree as ET

    total_time = (run.duration_ms or 0) / 1000
    root = ET.Element("testsuites", {
        "name": "factcli", "tests": "0", "failures": str(run.failures), "errors": str(run.errors),
        "time": f"{total_time:.3f}",
    })
    suites = [ET.SubElement(root, "testsuite", {"name": _xml_text(column_label(col))}) for col in run.columns]
    tally = [{"tests": 0, "FAIL": 0, "ERROR": 0, "PASS": 0, "ms": 0.0} for _ in run.columns]
    for r in run.all_rows():  # each row goes to its column's suite; the suites' counts are set after
        col, suite, t = run.columns[r.step.prompt_idx], suites[r.step.prompt_idx], tally[r.step.prompt_idx]
        status = status_of(r)
        t["tests"] += 1
        t[status] += 1
        t["ms"] += r.latency_ms or 0
        described = r.step.test.description  # promptfoo's `Row #n` is no name: [test N] numbers the row
        name = described if described and not is_row_description(described) else \
            ", ".join(f"{k}={var_text(v)}" for k, v in r.step.vars.items())
        name = f"{name[:200]} [test {r.step.test_idx}]" if name else f"test {r.step.test_idx}"
        case = ET.SubElement(suite, "testcase", {
            "name": _xml_text(name), "classname": _xml_text(column_label(col)),
            "time": f"{(r.latency_ms or 0) / 1000:.3f}",
        })
        if status == "FAIL":
            types = failed_assertion_types(r)
            el = ET.SubElement(case, "failure", {"message": _xml_text(r.error or ""),
                                                  "type": _xml_text(", ".join(types) or "assertion")})
            el.text = _xml_text(output_text(r))
        elif status == "ERROR":
            el = ET.SubElement(case, "error", {"message": _xml_text(r.error or ""), "type": "error"})
            el.text = _xml_text(r.error or "")
    for suite, t in zip(suites, tally):
        suite.attrib.update({"tests": str(t["tests"]), "failures": str(t["FAIL"]), "errors": str(t["ERROR"]),
                             "skipped": "0", "time": f"{t['ms'] / 1000:.3f}"})
    root.set("tests", str(sum(t["tests"] for t in tally)))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
