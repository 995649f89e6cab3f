"""Results read in a terminal of 80 columns and wider (issue 17, item 3): the view's grid and the
figure tables keep their shape, numbers are never cut, and the run ids, pages, weights, claims and
next steps a reader meets on the way are each said plainly."""

import json
import re

import pytest
import test_view as tv
from conftest import ROOT, write

from factcli.report import fit
from factcli.report.labels import column_label, short_prompt
from factcli.report.summary import next_steps, next_steps_for
from factcli.report.view import claim_counts
from factcli.store.database import Store

QUICKSTART = ROOT / "examples" / "quickstart" / "promptfooconfig.yaml"
WIDTHS = (80, 120)


def cli(*args, width=None):
    return tv.cli(*args, env={"COLUMNS": str(width)} if width else None)


def quickstart_run() -> tuple[str, dict[int, str]]:
    """The quickstart's run, and the eval's output at each width (the same run, evaluated again)."""
    shown = {}
    for width in WIDTHS:
        result = cli("eval", "-c", QUICKSTART, "--no-progress-bar", "--no-table", width=width)
        assert result.exit_code == 100, result.output  # folk-wisdom fails every test: that is the example
        shown[width] = result.output
    with Store.open() as store:
        return store.resolve("latest")["id"], shown


def tables(out: str) -> list[list[str]]:
    """The tables of a rendering: runs of lines drawn with column bars or rules."""
    found, current = [], []
    for line in out.splitlines():
        if " | " in line or re.fullmatch(r"-+(\+-+)+", line):
            current.append(line)
        elif current:
            found.append(current)
            current = []
    if current:
        found.append(current)
    return found


@pytest.mark.parametrize("width", WIDTHS)
def test_the_quickstart_view_keeps_its_grid(width):
    run_id, _ = quickstart_run()
    result = cli("view", run_id, width=width)
    assert result.exit_code == 0, result.output
    out = result.output
    grids = tables(out)
    assert len(grids) == 2, out  # the page of tests, and the figures per column
    for grid in grids:
        widths = {len(line) for line in grid}
        assert len(widths) == 1 and widths.pop() <= width, (width, grid)
    page = grids[0]
    assert len(page[0]) == width  # the page of tests fills the terminal
    # the multi-line template is one short label under the provider, never a broken line
    assert re.search(r"\| \[careful\]\s+\| \[folk-wisdom\]\s*$", page[0]), page[0]
    assert re.search(r"\| Q: <<question>>…\s+\| Q: <<question>>…\s*$", page[1]), page[1]
    assert not any(line.strip() == "A:" for line in out.splitlines())
    # numbers whole: every figure of both columns is printed
    for figure in ("100.0% [61.0, 100.0]", "0.0% [0.0, 39.0]", "6/0/0", "0/6/0", "1.000", "0.000"):
        assert figure in out, (width, figure)
    assert f"Open a row in full: factcli show {run_id} 0" in out  # test 0 has a FAIL


@pytest.mark.parametrize("width", WIDTHS)
def test_the_eval_summary_never_cuts_a_number(width):
    _, shown = quickstart_run()
    out = shown[width]
    grids = tables(out)
    assert len(grids) == 1, out
    assert len({len(line) for line in grids[0]}) == 1 and len(grids[0][0]) <= width
    for figure in ("6/6", "0/6", "100.0% [61.0, 100.0]", "0.0% [0.0, 39.0]", "1.000", "0.000"):
        assert figure in out, (width, figure)
    for metric in ("avoids_myth (mean)", "mentions_truth (mean)", "truthfulness (derived)"):
        # a header may wrap at its spaces, never inside a word
        assert all(word in out for word in metric.split()), (width, metric)  # 80 columns turn the table: a row per figure
    assert "[careful]" in out and "Q: <<question>>…" in out
    assert max(len(line) for line in out.splitlines()) <= width


@pytest.mark.parametrize("width", WIDTHS)
def test_the_list_of_runs_keeps_whole_ids_and_statuses(width):
    run_id, _ = quickstart_run()
    result = cli("list", width=width)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert {len(line) for line in lines} == {width} or max(len(line) for line in lines) <= width, result.output
    row = next(line for line in lines if run_id in line)  # the whole id, never cut
    assert "| complete |" in row and "| 12/12 |" in row and "50.0%" in row
    assert ("UTC" in row) == (width >= 100)  # a narrow terminal drops the created column: the id holds it


def test_figure_tables_fall_back_to_stacked_lines_that_keep_every_number():
    entries = [fit.Entry(f"[model-{i}]", "Answer the question: {{q}}") for i in range(6)]
    fields = [fit.Field(f"metric number {j} (mean)", [f"{0.1 * i + j:.3f} [0.12, 0.98]" for i in range(6)])
              for j in range(8)]
    for width in (40, 80, 120):
        lines = [line.plain for line in fit.fit(entries, fields, width, terminal=False)]
        assert max(len(line) for line in lines) <= width
        text = "\n".join(lines)
        for f in fields:
            for cell in f.cells:
                assert cell in text, (width, cell)


def test_short_prompt_labels():
    assert short_prompt("Q: <<question>>\nA:", "Q: <<question>>\nA:") == "Q: <<question>>…"
    assert short_prompt("Summarise {{doc}}", "Summarise {{doc}}") == "Summarise {{doc}}"
    assert short_prompt("short one", "A very long template\nover lines") == "short one"  # the config's label
    long = "Answer the following question as briefly as you can, in one sentence: {{q}}"
    assert short_prompt(long, long) == long[:39] + "…"
    chat = json.dumps([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q: {{q}}\nA:"}])
    assert short_prompt(chat, chat) == "Q: {{q}}…"
    assert column_label({"provider_id": "openai:chat:gpt-4o-mini", "provider_label": None,
                         "prompt_label": "Q: {{q}}\nA:", "prompt_raw": "Q: {{q}}\nA:"}) == "[openai:chat:gpt-4o-mini] Q: {{q}}…"


# ---------------------------------------------------------------- run ids


def two_runs(tmp_path) -> tuple[str, str]:
    cfg = write(tmp_path / "c.yaml", "prompts: ['{{w}}']\nproviders: [echo]\ntests: [{vars: {w: hi}}]\n")
    for _ in range(2):
        assert tv.evaluate("-c", cfg).exit_code == 0
    with Store.open() as store:
        runs = [r["id"] for r in store.list_runs()]
    return runs[1], runs[0]


def one_line_error(result, *needles):
    assert result.exit_code == 1, result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output, result.output
    for needle in needles:
        assert needle in result.output, result.output


def test_a_unique_prefix_or_hex_tail_names_a_run_everywhere(tmp_path):
    write(tmp_path / "boom.py", tv.BOOM)
    assert tv.evaluate("-c", write(tmp_path / "m.yaml", tv.MIXED)).exit_code == 100
    with Store.open() as store:
        mixed = store.resolve("latest")["id"]
    first, second = two_runs(tmp_path)
    ids = [mixed, first, second]

    def tail(rid: str) -> str:
        """The hex tail, or (when its digits happen to occur in another id's time) the dash with it."""
        t = rid.rsplit("-", 1)[1]
        assert re.fullmatch(r"[0-9a-f]{6}", t)
        return t if sum(t in other for other in ids) == 1 else "-" + t

    for ref in (mixed, mixed[:-3], tail(mixed)):
        shown = json.loads(cli("view", ref, "--json").output)
        assert shown["run"]["id"] == mixed, ref
    assert f"Run {mixed}" in cli("show", tail(mixed)).output
    assert f"Run {mixed}" in cli("view", tail(mixed).upper()).output  # ids are matched without case
    diff = json.loads(cli("diff", tail(first), tail(second), "--json").output)
    assert (diff["a"], diff["b"]) == (first, second)
    assert cli("export", tail(mixed), "-o", tmp_path / "x.json").exit_code == 0
    assert json.loads((tmp_path / "x.json").read_text())["evalId"] == mixed
    retried = tv.evaluate("--retry-errors", tail(mixed))  # the boom column errors again: still 3 errors
    assert retried.exit_code == 100 and mixed in retried.output, retried.output
    result = cli("delete", tail(first))
    assert result.exit_code == 0 and f"Deleted run {first}" in result.output


def test_an_ambiguous_or_unknown_run_id_is_one_line(tmp_path):
    first, second = two_runs(tmp_path)
    common = "eval-"
    for args in (["view", common], ["show", common], ["export", common, "-o", tmp_path / "x.json"],
                 ["delete", common]):
        one_line_error(cli(*args), "ambiguous", first, second)
    one_line_error(tv.evaluate("--resume", common), "ambiguous", first, second)
    one_line_error(tv.evaluate("--retry-errors", common), "ambiguous")
    one_line_error(cli("diff", "latest", "zzz999"), "no run 'zzz999'")
    one_line_error(cli("view", "T99"), "no run 'T99'")
    with Store.open() as store:
        assert store.run_count() == 2  # nothing was deleted


def test_a_prefix_that_names_one_run_wins_over_pieces_elsewhere(tmp_path):
    db = tmp_path / "runs.db"
    with Store.open(db, create=True) as store:
        for rid in ("eval-20990101T000000-abc123", "eval-20990101T000001-123abc"):
            store.insert_run({"id": rid, "created_at": "2099-01-01T00:00:00", "status": "complete"})
        assert store.resolve("eval-20990101T000001")["id"] == "eval-20990101T000001-123abc"
        assert store.resolve("c123")["id"] == "eval-20990101T000000-abc123"
        with pytest.raises(Exception, match="ambiguous"):
            store.resolve("123")
        with pytest.raises(Exception, match="no run '%'"):
            store.resolve("%")  # LIKE's wildcards are literal


# ---------------------------------------------------------------- pages, --json, weights, claims


def test_a_page_past_the_end_is_one_line(tmp_path):
    run_id = tv.mixed_run(tmp_path)
    one_line_error(cli("view", "--page", "5"), "page 5 is past the end: this run has 1 page of 3 tests")
    one_line_error(cli("view", run_id, "--limit", "2", "--page", "3", "--json"),
                   "page 3 is past the end: this run has 2 pages of 3 tests (2 a page)")
    one_line_error(cli("view", "--failures", "--page", "2"), "1 page of 1 matching test")
    assert "No rows match." in cli("view", "--filter", "nothing-like-this", "--page", "3").output
    assert cli("view", "--limit", "2", "--page", "2").exit_code == 0


def test_view_json_puts_a_fails_reason_under_reason(tmp_path):
    tv.mixed_run(tmp_path)
    doc = json.loads(cli("view", "--json").output)
    cells = {(t["testIdx"], c["promptIdx"]): c for t in doc["tests"] for c in t["cells"]}
    failed, errored, passed = cells[(1, 0)], cells[(0, 3)], cells[(0, 0)]
    assert failed["status"] == "FAIL" and failed["reason"].startswith("Expected output to contain")
    assert failed["error"] is None
    assert errored["status"] == "ERROR" and "kaboom" in errored["error"] and errored["reason"] is None
    assert passed["reason"] is None and passed["error"] is None


WEIGHTLESS = """
prompts: ["{{w}}"]
providers: [echo]
tests:
  - vars: {w: hello}
    assert:
      - {type: contains, value: hello, metric: found}
      - {type: contains, value: nope, metric: watched, weight: 0}
"""


def test_a_metric_with_weight_0_says_so(tmp_path):
    cfg = write(tmp_path / "c.yaml", WEIGHTLESS)
    result = cli("eval", "-c", cfg, "--no-progress-bar", "--no-table", width=80)
    assert result.exit_code == 0, result.output
    for out in (result.output, cli("view", width=80).output, cli("view", width=120).output):
        assert re.search(r"watched \(mean\)\s+\|\s+0\.000 \(weight 0\)", out) or \
            re.search(r"\|\s+0\.000 \(weight 0\)", out), out
        assert "(weight 0): every assertion of this metric has weight 0" in out
        assert not re.search(r"1\.000 \(weight 0\)", out)  # found (weight 1) is not marked
    column = json.loads(cli("view", "--json").output)["columns"][0]
    assert column["weightZero"] == ["watched"]


def claims_run(db) -> str:
    """A stored run whose rows were graded claim by claim, as factual-correctness and factscore store them."""
    run_id = "eval-20990101T000000-c1a1m5"
    fc = {"pass": False, "score": 0.5, "reason": "Factual correctness 0.5", "componentResults": [
        {"pass": False, "score": 0.5, "reason": "r", "assertion": {"type": "factual-correctness"},
         "metadata": {"claims": [{"text": "Paris is in France", "verdict": "SUPPORTED", "judge": "j1"},
                                 {"text": "Paris has 9 million people", "verdict": "CONTRADICTED", "judge": "j1"},
                                 {"text": "Paris is in France", "verdict": "SUPPORTED", "judge": "j2"},
                                 {"text": "Paris has 9 million people", "verdict": "SUPPORTED", "judge": "j2"}]}}]}
    fs = {"pass": True, "score": 1, "reason": "ok", "componentResults": [
        {"pass": True, "score": 1, "reason": "ok", "assertion": {"type": "factscore"},
         "metadata": {"facts": [{"text": "Ada wrote notes", "supported": True}]}}]}
    with Store.open(db, create=True) as store:
        store.insert_run({"id": run_id, "created_at": "2099-01-01T00:00:00", "status": "complete",
                          "finished_at": "2099-01-01T00:00:01", "config_files_json": "[]", "total_steps": 3,
                          "successes": 2, "failures": 1, "errors": 0, "graders_json": "[]"})
        store.set_columns(run_id, [{"prompt_idx": 0, "provider_idx": 0, "provider_id": "echo", "provider_label": None,
                                    "prompt_label": "{{q}}", "prompt_raw": "{{q}}", "prompt_id": "x"}])
        for t, (success, grading) in enumerate([(0, fc), (1, fs), (1, {"pass": True, "score": 1, "reason": "ok"})]):
            store.upsert_result({"run_id": run_id, "test_idx": t, "prompt_idx": 0, "repeat_idx": 0, "provider_idx": 0,
                                 "seq": t, "test_key": f"k{t}", "description": f"test {t}", "success": success,
                                 "failure_reason": 0 if success else 1, "score": grading["score"],
                                 "error": None if success else "Factual correctness 0.5", "output": "Paris",
                                 "grading_json": json.dumps(grading), "vars_json": "{}"})
    return run_id


def test_rows_graded_claim_by_claim_are_marked(tmp_path):
    db = tmp_path / "claims.db"
    run_id = claims_run(db)
    doc = json.loads(cli("view", "--db", db, "--json").output)
    assert [c["claims"] for t in doc["tests"] for c in t["cells"]] == [
        {"total": 2, "unsupported": 1}, {"total": 1, "unsupported": 0}, None]
    out = cli("view", "--db", db, width=80).output
    assert "FAIL 0.50 ◇1/2" in out and "PASS 1.00 ◇0/1" in out
    assert "◇u/n: the row was graded claim by claim" in out
    assert f"Open a row in full: factcli show {run_id} 0 --db {db}" in out
    assert claim_counts({"componentResults": [{"metadata": {"claims": [{"text": "x", "grounded": False}]}}]}) == \
        {"total": 1, "unsupported": 1}
    assert claim_counts({"componentResults": [{"metadata": {"graderRaw": "y"}}]}) is None


# ---------------------------------------------------------------- what to do next


def test_next_steps():
    rid = "eval-20261124T195746-9a84d9"
    assert next_steps(rid, "complete") == [f"View it: factcli view {rid}"]
    assert next_steps(rid, "complete", failures=3, first_failed=4) == [
        f"View it: factcli view {rid}", f"Open a failed row: factcli show {rid} 4"]
    assert next_steps(rid, "complete", errors=2) == [
        f"View it: factcli view {rid}", f"Retry errors: factcli eval --retry-errors {rid}"]
    assert next_steps(rid, "interrupted", errors=2)[-1] == f"Resume: factcli eval --resume {rid}"
    assert next_steps(rid, "complete", interrupted=True)[-1] == f"Resume: factcli eval --resume {rid}"
    assert next_steps(rid, "complete", db="my runs.db") == [f"View it: factcli view {rid} --db 'my runs.db'"]
    assert next_steps(rid, "complete", stored=False) == []
    # a resume writes the -o files given to it (not those the store names): the hint gives them again
    assert next_steps(rid, "interrupted", outputs=["r.json", "my out.csv"])[-1] == \
        f"Resume: factcli eval --resume {rid} -o r.json -o 'my out.csv'"


def test_first_failed_test_is_read_from_the_store(tmp_path):
    run_id = tv.mixed_run(tmp_path)
    with Store.open() as store:
        assert store.first_failed_test(run_id) == 1  # "says goodbye" fails; tests 0-2 also error
        ok = store.resolve(two_runs(tmp_path)[1])["id"]
        assert store.first_failed_test(ok) is None


def test_next_steps_for_a_finished_run(tmp_path):
    from types import SimpleNamespace

    run_id = tv.mixed_run(tmp_path)
    run = SimpleNamespace(run_id=run_id, status="complete", failures=3, errors=3)
    assert next_steps_for(run, stored=True) == [
        f"View it: factcli view {run_id}", f"Open a failed row: factcli show {run_id} 1",
        f"Retry errors: factcli eval --retry-errors {run_id}"]
    assert next_steps_for(run, stored=False) == []
    missing = tmp_path / "missing.db"  # an unreadable store leaves the row out, nothing else
    assert next_steps_for(run, stored=True, db=str(missing))[1] == \
        f"Retry errors: factcli eval --retry-errors {run_id} --db {missing}"
