"""The HTML report (`eval -o x.html`, `export RUN -o x.html`) shows what the terminal shows: claims and
verdicts folded in <details>, whole reasons, per-column intervals, method lines; one self-contained,
escaped, well-formed page. Runs go through the real CLI, against the fake OpenAI server or the
shipped offline examples (file:// stand-in judges): nothing reaches the network or ~/."""

import json
import os
import re
from html.parser import HTMLParser

from conftest import ROOT, write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.report import html_page

runner = CliRunner()

REFERENCE = "Paris is the capital of France. The Eiffel Tower was completed in 1889."
BAD = "Paris is the capital of France. The Eiffel Tower was built in 1500. <script>alert('x')</script>"
GOOD = "The capital of France is Paris. The Eiffel Tower was completed in 1889."


def scripted_judge(body):
    """Decomposes a text into its sentences; a claim is SUPPORTED when the premise holds its year
    (or it names Paris), else CONTRADICTED."""
    text = body["messages"][-1]["content"]
    if text.startswith("<text>"):
        source = text.split("<text>\n", 1)[1].rsplit("\n</text>", 1)[0]
        return json.dumps({"claims": [s.strip(" .") for s in source.split(". ") if s.strip(" .")]})
    premise = text.split("<premise>\n", 1)[1].split("\n</premise>", 1)[0]
    block = text.split("<claims>\n", 1)[1].rsplit("\n</claims>", 1)[0]
    claims = [line.split(". ", 1)[1] for line in block.splitlines()]
    verdicts = []
    for c in claims:
        year = re.search(r"\d{4}", c)
        ok = (year.group() in premise) if year else ("Paris" in c and "Paris" in premise)
        verdicts.append({"claim": c, "verdict": "SUPPORTED" if ok else "CONTRADICTED",
                         "reason": f"scripted verdict on: {c}"})
    return json.dumps({"verdicts": verdicts})


LONG_REASON = "The long reason starts here. " + " ".join(f"clause{i}" for i in range(120)) + " and ENDS HERE."
CHECK = f"def get_assert(output, context):\n    return {{'pass': False, 'score': 0.25, 'reason': {LONG_REASON!r}}}\n"

CONFIG = """
description: html report
prompts: ["Tell me about Paris ({{which}})."]
providers: [{id: "openai:chat:m", label: model-m, config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
defaultTest:
  options:
    provider: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}
tests:
  - description: bad answer
    vars: {which: bad}
    assert:
      - {type: factual-correctness, value: "%(ref)s", metric: fc}
      - {type: python, value: file://check.py, metric: long, weight: 0}
  - description: good answer
    vars: {which: good}
    assert: [{type: factual-correctness, value: "%(ref)s", metric: fc}]
"""


VOID = frozenset({"meta", "br", "input", "img", "hr", "link", "wbr", "col", "area", "base", "source"})


class TagBalance(HTMLParser):
    """Every element the page opens is closed, in order (void elements aside)."""

    def __init__(self):
        super().__init__()
        self.stack: list[str] = []
        self.problems: list[str] = []
        self.details_text: list[str] = []  # text found inside any <details>

    def handle_starttag(self, tag, attrs):
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'} at {self.getpos()}")
            return
        self.stack.pop()

    def handle_data(self, data):
        if "details" in self.stack:
            self.details_text.append(data)


def parse(page: str) -> TagBalance:
    checker = TagBalance()
    checker.feed(page)
    checker.close()
    return checker


def fc_run(tmp_path, fake_openai):
    """A factual-correctness run against the fake server, written by eval -o and by export."""
    fake_openai.add_rule(r"\(bad\)", BAD, model="m")
    fake_openai.add_rule(r"\(good\)", GOOD, model="m")
    fake_openai.add_rule(".", scripted_judge, model="judge")
    write(tmp_path / "check.py", CHECK)
    cfg = write(tmp_path / "c.yaml", CONFIG % {"ref": REFERENCE})
    out = tmp_path / "eval.html"
    result = runner.invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-cache",
                                 "--no-table"])
    assert result.exit_code == 100, result.output  # the bad answer fails
    exported = tmp_path / "export.html"
    result = runner.invoke(app, ["export", "latest", "-o", str(exported)])
    assert result.exit_code == 0, result.output
    return out.read_text(encoding="utf-8"), exported.read_text(encoding="utf-8")


def example_page(tmp_path, name: str) -> str:
    out = tmp_path / f"{name}.html"
    result = runner.invoke(app, ["eval", "-c", str(ROOT / "examples" / name / "promptfooconfig.yaml"), "-o", str(out),
                                 "--no-progress-bar", "--no-table"])
    assert result.exit_code in (0, 100), result.output
    return out.read_text(encoding="utf-8")


def test_the_tests_stay_home(isolated_home):
    assert os.environ["FACTCLI_HOME"] == str(isolated_home)


def test_claims_with_their_verdicts_are_folded_in_details(tmp_path, fake_openai):
    page, exported = fc_run(tmp_path, fake_openai)
    for text in (page, exported):
        folded = "".join(parse(text).details_text)
        assert "[CONTRADICTED]" in folded and "The Eiffel Tower was built in 1500" in folded
        assert "[SUPPORTED]" in folded and "scripted verdict on: Paris is the capital of France" in folded
        assert re.search(r'<details class="claims"><summary>\d+ claims \(\d+ not supported\)</summary>', text)
        # the cell says how many claims before it is opened
        assert re.search(r"<summary>2 assertions \(1 failed\) · \d+ claims \(\d+ not supported\)</summary>", text)
    assert not any(r["json"]["model"] not in ("m", "judge") for r in fake_openai.requests)


def test_a_stored_run_exports_the_page_eval_wrote(tmp_path, fake_openai):
    page, exported = fc_run(tmp_path, fake_openai)

    def without_config(text):  # eval names the config as given, the store keeps its absolute path
        return re.sub(r" · config [^<]*", "", text)

    assert without_config(page) == without_config(exported)


def test_a_long_reason_is_shown_whole(tmp_path, fake_openai):
    page, exported = fc_run(tmp_path, fake_openai)
    assert len(LONG_REASON) > 500
    for text in (page, exported):
        assert text.count(LONG_REASON) >= 1  # in the assertion list, never cut with …
        assert "weight 0: does not affect the test · metric long" in text  # it failed: its own verdict, marked


def test_each_column_shows_its_pass_rate_interval(tmp_path, fake_openai):
    page, exported = fc_run(tmp_path, fake_openai)
    for text in (page, exported):
        assert "50.0% [9.5, 90.5]" in text  # 50.0% [9.5, 90.5], as view prints it
        assert 'title="95% interval [0.095, 0.905]"' in text
        assert "50.00% [9.5, 90.5] (95% CI)" in text and "Small sample (2 rows)" in text  # the run's, as the summary prints it
        assert "95% intervals: pass rate [Wilson score, points]" in text


def test_failed_rows_have_an_anchor_and_the_filter_is_css_only(tmp_path, fake_openai):
    page, _ = fc_run(tmp_path, fake_openai)
    assert '<tr id="test-0" class="has-failure">' in page and 'href="#test-0"' in page
    assert 'id="test-1"' not in page  # the good answer passed
    assert 'id="only-failures"' in page and ":has(#only-failures:checked) tr.all-pass{display:none}" in page


def test_the_page_is_self_contained_escaped_and_well_formed(tmp_path, fake_openai):
    page, exported = fc_run(tmp_path, fake_openai)
    for text in (page, exported):
        assert "<script" not in text.lower()  # the model's <script> is shown, not run
        assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in text
        assert not re.search(r"""\b(src|href)\s*=\s*["']?\s*(https?:|//)""", text, re.IGNORECASE)
        assert "<link" not in text and "@import" not in text and "url(" not in text
        checker = parse(text)
        assert checker.problems == [] and checker.stack == []


def test_factscore_facts_and_method_line(tmp_path):
    page = example_page(tmp_path, "factscore")
    folded = "".join(parse(page).details_text)
    assert "[NOT_SUPPORTED]" in folded and "Marie Curie discovered penicillin." in folded
    assert "evidence (Marie Curie#1)" in page
    assert re.search(r"<summary>\d+ facts \(\d+ not supported\)</summary>", page)
    assert "<h2>Methods</h2>" in page and re.search(r"FActScore 0\.\d{3} \(init", page)


def test_facts_grounding_judges_and_method_line(tmp_path):
    page = example_page(tmp_path, "facts-grounding")
    assert re.search(r"<summary>\d+ verdicts on claims from 3 judges \(\d+ not supported\)</summary>", page)
    assert "judge-strict" in "".join(parse(page).details_text)
    assert re.search(r"FACTS \d+\.\d% ±\d+\.\d \(N=3", page)


def test_weight_zero_metrics_are_marked(tmp_path):
    cfg = write(tmp_path / "w.yaml", "prompts: ['{{q}}']\nproviders: [echo]\ntests:\n  - vars: {q: a}\n    assert:\n"
                "      - {type: equals, value: a}\n      - {type: equals, value: a, metric: side, weight: 0}\n")
    out = tmp_path / "w.html"
    assert runner.invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar"]).exit_code == 0
    page = out.read_text(encoding="utf-8")
    assert "0.000 (weight 0)" in page and "(weight 0): every assertion of this metric has weight 0" in page


def test_the_pieces_render_alone():
    """What a web view or a notebook reuses, without a run."""
    items = [{"text": "<b>x</b>", "verdict": "SUPPORTED", "reason": "r"}, {"fact": "y", "supported": False}]
    block = html_page.claims_list(items, "facts")
    assert "<summary>2 facts (1 not supported)</summary>" in block and "&lt;b&gt;x&lt;/b&gt;" in block
    assert "[not supported]" in block
    cell = {"status": "FAIL", "score": 0.5, "output": "<i>o</i>", "error": "why " * 200, "grading": None}
    rendered = html_page.result_cell(cell)
    assert rendered.startswith('<td class="cell fail">') and ("why " * 200).strip() in rendered
    assert html_page.result_cell(None) == '<td class="cell missing">—</td>'
    assert html_page.style_tag().startswith("<style>") and parse(rendered).problems == []
