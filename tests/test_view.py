"""view, list, show, diff and export over stored runs."""

import csv
import io
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.store.database import Store

runner = CliRunner()
PARITY = ROOT / "tests" / "parity"


def cli(*args, env=None):
    return runner.invoke(app, [*map(str, args)], env=env)


def evaluate(*args):
    return cli("eval", "--no-progress-bar", "--no-table", *args)


MIXED = """
description: mixed outcomes
prompts: ["Say {{word}}", "Shout {{word}}"]
providers: [echo, {id: "file://boom.py", label: boom}]
derivedMetrics: [{name: double_acc, value: "acc * 2 / __count"}]
tests:
  - description: greets
    vars: {word: hello}
    assert: [{type: contains, value: hello, metric: acc}]
  - description: says goodbye
    vars: {word: bye}
    assert: [{type: contains, value: hello, metric: acc}]
  - description: needle in a haystack
    vars: {word: "zebra crossing"}
    assert: [{type: contains, value: zebra, metric: acc}]
"""
BOOM = "def call_api(prompt, options, context):\n    if 'Shout' in prompt:\n        raise RuntimeError('kaboom')\n" \
       "    return {'output': prompt}\n"


def mixed_run(tmp_path) -> str:
    write(tmp_path / "boom.py", BOOM)
    result = evaluate("-c", write(tmp_path / "c.yaml", MIXED))
    assert result.exit_code == 100, result.output
    with Store.open() as store:
        return store.resolve("latest")["id"]


def test_view_prints_header_table_and_footer(tmp_path):
    run_id = mixed_run(tmp_path)
    out = cli("view", env={"COLUMNS": "160"}).output
    assert f"Run {run_id} · complete · mixed outcomes" in out
    assert f"Config: {tmp_path / 'c.yaml'}" in out and "UTC" in out
    assert "Rows: 12/12 · 6 pass · 3 fail · 3 error · pass rate 50.00%" in out
    assert "Tokens 0 · cost" in out
    # each column is headed by its provider, and its prompt on the line below
    assert re.search(r"\| \[echo\]\s+\| \[echo\]\s+\| \[boom\]\s+\| \[boom\]", out), out
    assert re.search(r"\| Say \{\{word\}\}\s+\| Shout \{\{word\}\}\s+\| Say \{\{word\}\}\s+\| Shout", out), out
    assert "PASS 1.00" in out and "FAIL 0.00" in out and "ERROR 0.00" in out
    assert "ERROR 0.00" in out and "kaboom" in cli("view", "--full").output  # an error cell shows its error
    assert "Expected output to contain" in out  # a failure shows its reason
    assert "Say hello" in out  # a pass shows the start of its output
    # footer: pass rate, counts, named metric means and derived metrics per column
    assert "acc (mean)" in out and "double_acc (derived)" in out
    assert re.search(r"\[echo\]\s*\|\s*66\.7% \[20\.8, 93\.9\]\s*\|\s*2/1/0\s*\|\s*0\.667\s*\|\s*0\.667\s*\|\s*1\.333", out), out
    assert re.search(r"\[boom\]\s*\|\s*0\.0% \[0\.0, 56\.2\]\s*\|\s*0/0/3.*\n Shout \{\{word\}\}", out), out
    assert "+---" in out  # not a terminal: plain ASCII, no colour codes
    assert "\x1b[" not in out


def test_view_fits_the_terminal_width(tmp_path):
    mixed_run(tmp_path)
    for width in (70, 100, 200):
        out = cli("view", env={"COLUMNS": str(width)}).output
        assert max(len(line) for line in out.splitlines()) <= width, width
    narrow = cli("view", env={"COLUMNS": "70"}).output
    assert "more columns not shown" in narrow
    assert "kaboom" in cli("view", "--full", env={"COLUMNS": "70"}).output  # --full: every column


def test_view_filters_paging_and_json(tmp_path):
    run_id = mixed_run(tmp_path)

    def tests_of(*args):
        doc = json.loads(cli("view", "--json", *args).output)
        return [t["testIdx"] for t in doc["tests"]], doc

    assert tests_of()[0] == [0, 1, 2]
    assert tests_of("--failures")[0] == [1]
    assert tests_of("--errors")[0] == [0, 1, 2]  # the boom provider errors on every Shout
    assert tests_of("--filter", "ZEBRA")[0] == [2]  # case-insensitive, in outputs and vars
    assert tests_of("--filter", "kaboom")[0] == [0, 1, 2]
    assert tests_of("--filter", "nothing-like-this")[0] == []
    assert tests_of("--filter", "%")[0] == []  # LIKE wildcards are literal
    idxs, doc = tests_of("--limit", "2", "--page", "2")
    assert idxs == [2] and (doc["page"], doc["pages"], doc["total"]) == (2, 2, 3)
    assert doc["run"]["id"] == run_id and doc["run"]["errors"] == 3
    cells = doc["tests"][0]["cells"]
    assert [c["status"] for c in cells] == ["PASS", "PASS", "PASS", "ERROR"]  # echo Say/Shout, boom Say/Shout
    assert cells[0]["output"] == "Say zebra crossing"
    column = doc["columns"][0]
    assert column["namedMeans"]["acc"] == pytest.approx(2 / 3) and "double_acc" in column["derived"]
    out = cli("view", "--failures", env={"COLUMNS": "160"}).output
    assert "says goodbye" in out and "greets" not in out
    assert "No rows match." in cli("view", "--filter", "nothing-like-this").output
    assert "Next page: factcli view" in cli("view", "--limit", "1").output


def test_view_shows_categories_and_grading_errors(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    for pattern, reply, model in json.loads((PARITY / "graders" / "rules.json").read_text()):
        fake_openai.add_rule(pattern, reply, model=model)
    assert evaluate("-c", PARITY / "graders" / "promptfooconfig.yaml").exit_code == 100
    out = cli("view", env={"COLUMNS": "250"}).output
    assert "Grader: " in out and "grading)" in out  # grader tokens in the header
    assert "A:2 B:1 C:1 D:1 E:1" in out  # factuality categories per column
    assert re.search(r"grading errors", out)
    shown = cli("show", "latest", "0").output
    assert "factuality category: A" in shown and "raw grader reply:" in shown
    assert "Prompt:" in shown and "Output:" in shown and "Assertions:" in shown
    detail = json.loads(cli("show", "latest", "5", "--json").output)
    meta = detail[0]["gradingResult"]["componentResults"][0]["metadata"]
    assert meta["graderError"] is True and meta["graderRaw"] == "I cannot decide."
    assert "grader error" in cli("show", "latest", "5").output


def test_show_run_and_list(tmp_path):
    run_id = mixed_run(tmp_path)
    shown = cli("show", run_id[:22]).output
    assert f"Run {run_id}" in shown and "Config (secrets are never stored):" in shown
    assert "derivedMetrics" in shown
    listed = cli("list", env={"COLUMNS": "200"}).output
    assert run_id in listed and "complete" in listed and "6/12" not in listed and "12/12" in listed
    assert "50.0%" in listed and "mixed outcomes" in listed
    doc = json.loads(cli("list", "--json", "-n", "1").output)
    assert len(doc) == 1 and doc[0]["id"] == run_id and doc[0]["errors"] == 3


def test_diff_shows_flips_and_metric_deltas(tmp_path):
    cfg = write(tmp_path / "c.yaml", """
prompts: ["{{word}}"]
providers: [echo]
tests:
  - {description: one, vars: {word: alpha}, assert: [{type: contains, value: alpha, metric: acc}]}
  - {description: two, vars: {word: beta}, assert: [{type: contains, value: beta, metric: acc}]}
  - {description: three, vars: {word: gamma}, assert: [{type: contains, value: "{{expect}}", metric: acc}]}
""")
    assert evaluate("-c", cfg, "--var", "expect=gamma").exit_code == 0
    with Store.open() as store:
        a = store.resolve("latest")["id"]
    # B: the same tests (matched by description and vars), but "two" now fails and "three" passes
    cfg.write_text(cfg.read_text().replace("value: beta", "value: BETA").replace(
        "tests:\n", "tests:\n  - {description: zero, vars: {word: new}}\n"))
    evaluate("-c", cfg, "--var", "expect=gamma")
    with Store.open() as store:
        b = store.resolve("latest")["id"]
    out = cli("diff", a, b, env={"COLUMNS": "200"}).output
    assert "1 row flipped (1 regression, 0 fixes), 2 unchanged, 0 only in A, 1 only in B" in out
    assert re.search(r"#1 two.*PASS.*FAIL", out)
    assert "pass rate" in out and "-25.0 pts" in out
    doc = json.loads(cli("diff", a, b, "--json").output)
    assert [(f["test"], f["a"], f["b"], f["kind"]) for f in doc["flips"]] == [("two", "PASS", "FAIL", "regression")]
    assert doc["columns"][0]["metrics"]["acc"]["delta"] < 0
    back = json.loads(cli("diff", b, a, "--json").output)
    assert back["fixes"] == 1 and back["regressions"] == 0


def _counts_from(path: Path) -> tuple[int, int, int]:
    name = path.name
    text = path.read_text(encoding="utf-8")
    if name.endswith(".jsonl"):
        rows = [json.loads(line) for line in text.splitlines()]
    elif name.endswith((".json", ".yaml")):
        doc = json.loads(text) if name.endswith(".json") else yaml.safe_load(text)
        rows = doc["results"]["results"]
    elif name.endswith(".junit.xml"):
        root = ET.fromstring(text)
        cases = root.findall(".//testcase")
        fails = sum(1 for c in cases if c.find("failure") is not None)
        errors = sum(1 for c in cases if c.find("error") is not None)
        return len(cases) - fails - errors, fails, errors
    elif name.endswith(".xml"):
        root = ET.fromstring(text)
        rows = [{"success": r.findtext("success") == "true", "failureReason": int(r.findtext("failureReason"))}
                for r in root.findall("./results/results")]
    elif name.endswith(".csv"):
        table = list(csv.reader(io.StringIO(text)))
        statuses = [cell for line in table[1:] for i, cell in enumerate(line) if table[0][i] == "Status"]
        return statuses.count("PASS"), statuses.count("FAIL"), statuses.count("ERROR")
    else:  # html
        cells = re.findall(r'<td class="cell (pass|fail|error)">', text)
        return cells.count("pass"), cells.count("fail"), cells.count("error")
    return (sum(1 for r in rows if r["success"]), sum(1 for r in rows if not r["success"] and r["failureReason"] == 1),
            sum(1 for r in rows if r["failureReason"] == 2))


def test_every_export_format_round_trips_the_counts(tmp_path):
    formats = ("json", "jsonl", "yaml", "csv", "xml", "junit.xml", "html")
    outs = [tmp_path / f"eval.{f}" for f in formats]
    write(tmp_path / "boom.py", BOOM)
    evaluate("-c", write(tmp_path / "c.yaml", MIXED), *[a for p in outs for a in ("-o", p)])
    exports = [tmp_path / "exp" / f"run.{f}" for f in formats]
    result = cli("export", "latest", *[a for p in exports for a in ("-o", p)])
    assert result.exit_code == 0, result.output
    for path in outs + exports:
        assert _counts_from(path) == (6, 3, 3), path.name
    csv_head = next(csv.reader(io.StringIO((tmp_path / "eval.csv").read_text())))
    assert csv_head[:6] == ["Description", "word", "[echo] Say {{word}}", "Status", "Score", "Named Scores"]
    assert csv_head[6:9] == ["Metric: acc", "Grader Reason", "Comment"]
    html = (tmp_path / "exp" / "run.html").read_text()
    assert "<script" not in html and "http://" not in html and "https://" not in html  # opens offline
    assert "Columns" in html and "kaboom" in html and "double_acc" in html
    assert (tmp_path / "eval.csv").read_text() == (tmp_path / "exp" / "run.csv").read_text()
    assert (tmp_path / "eval.jsonl").read_text() == (tmp_path / "exp" / "run.jsonl").read_text()


def test_html_escapes_everything(tmp_path):
    cfg = write(tmp_path / "c.yaml", """
prompts: ["<script>alert('{{x}}')</script>"]
providers: [echo]
tests: [{description: "<b>bold</b>", vars: {x: "<img src=x onerror=alert(1)>"}, assert: [{type: contains, value: "<i>"}]}]
""")
    out = tmp_path / "r.html"
    evaluate("-c", cfg, "-o", out)
    html = out.read_text()
    assert "<script>" not in html and "<img" not in html and "<b>bold" not in html
    assert "&lt;script&gt;" in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_export_and_eval_reject_unknown_formats(tmp_path):
    mixed_run(tmp_path)
    result = cli("export", "latest", "-o", tmp_path / "x.pdf")
    assert result.exit_code == 1 and "unsupported output format" in result.output


def test_view_while_an_eval_is_writing(tmp_path, fake_openai, isolated_home):
    fake_openai.latency = 0.1
    cfg = write(tmp_path / "c.yaml", """
prompts: ["Q: {{n}}"]
providers: [{id: "openai:chat:m1", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
tests:
""" + "".join(f"  - vars: {{n: '{i}'}}\n" for i in range(30)))
    proc = subprocess.Popen([sys.executable, "-m", "factcli", "eval", "-c", str(cfg), "-j", "1", "--no-cache",
                             "--no-progress-bar", "--no-table"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=dict(os.environ))
    try:
        db = isolated_home / "factcli.db"
        deadline = time.time() + 30
        while time.time() < deadline:
            time.sleep(0.05)
            if db.exists():
                try:
                    with sqlite3.connect(db) as conn:
                        if conn.execute("SELECT COUNT(*) FROM results").fetchone()[0] >= 3:
                            break
                except sqlite3.Error:
                    pass
        result = cli("view", env={"COLUMNS": "120"})
        assert result.exit_code == 0, result.output
        assert "· running" in result.output and "PASS" in result.output
        rows = int(re.search(r"Rows: (\d+)/30", result.output).group(1))
        assert 3 <= rows < 30
        assert "running" in cli("list").output
    finally:
        proc.wait(timeout=60)
    assert "· complete" in cli("view").output


# ---------------------------------------------------------------- a big run


def make_big_run(db: Path, tests: int, columns: int) -> str:
    from factcli.scoring.metrics import ColumnMetrics
    from factcli.store.records import metrics_to_json

    run_id = "eval-20990101T000000-bigrun"
    with Store.open(db, create=True) as store:
        store.insert_run({"id": run_id, "created_at": "2099-01-01T00:00:00.000+00:00", "status": "complete",
                          "finished_at": "2099-01-01T01:00:00.000+00:00", "description": "big",
                          "config_files_json": "[]", "total_steps": tests * columns, "successes": tests * columns // 2,
                          "failures": tests * columns // 2, "errors": 0, "duration_ms": 3_600_000, "graders_json": "[]"})
        metrics = []
        for c in range(columns):
            m = ColumnMetrics(test_pass=tests // 2, test_fail=tests - tests // 2, rows=tests, score=tests / 2)
            m.named_scores, m.named_weights = {"acc": tests / 2}, {"acc": float(tests)}
            metrics.append(metrics_to_json(m))
        store.set_columns(run_id, [{"prompt_idx": c, "provider_idx": c, "provider_id": f"openai:chat:model-{c}",
                                    "provider_label": None, "prompt_label": "Answer: {{q}}", "prompt_raw": "Answer: {{q}}",
                                    "prompt_id": "x", "metrics_json": metrics[c]} for c in range(columns)])
        text = "The answer is " + "lorem ipsum dolor sit amet " * 20
        grading = json.dumps({"pass": True, "score": 1, "reason": "ok", "componentResults": [
            {"pass": True, "score": 1, "reason": "ok", "assertion": {"type": "contains", "value": "answer"}}]})
        rows = ((run_id, t, c, 0, c, t * columns + c, f"k{t}", f"test number {t}", t % 2, t % 2 ^ 1, float(t % 2),
                 None if t % 2 else "Expected output to contain 'answer'", f"{text} {t}", 0, '{"acc": 1}', grading,
                 12.5, 10, 20, 30, 0, 0.0001, 0, json.dumps({"q": f"question {t}"}), f"Answer: question {t}", "{}", "")
                for t in range(tests) for c in range(columns))
        from factcli.store.database import RESULT_FIELDS

        store.conn.executemany(f"INSERT INTO results ({', '.join(RESULT_FIELDS)}) VALUES "
                               f"({', '.join('?' * len(RESULT_FIELDS))})", rows)
        store.commit()
    return run_id


def test_first_screen_of_a_100k_row_run(tmp_path):
    """Correctness only; how fast this is lives in benchmarks/view.py."""
    db = tmp_path / "big.db"
    make_big_run(db, tests=25_000, columns=4)  # 100,000 rows
    for args, shown in (([], "test number 0"), (["--failures"], "test number 0"),
                        (["--filter", "question 24999"], "test number 24999"), (["--page", "400"], "test number 19950")):
        result = cli("view", "--db", db, *args, env={"COLUMNS": "160"})
        assert result.exit_code == 0, result.output
        assert "Rows: 100000/100000" in result.output, args
        assert shown in result.output, (args, result.output[-2000:])


def test_docs_document_every_new_command_and_option():
    readme = (ROOT / "docs" / "commands.md").read_text()
    for command in ("view", "list", "show", "diff", "export", "delete"):
        assert f"### `factcli {command}" in readme, command
        help_text = cli(command, "--help").output
        for flag in re.findall(r"(--[a-z][a-z-]+|-[a-z])\b", help_text):
            if flag not in ("--help",):
                assert f"`{flag}" in readme, (command, flag)
    for flag in ("--db", "--no-write", "--resume", "--retry-errors", "--filter-failing"):
        assert f"`{flag}" in readme, flag
