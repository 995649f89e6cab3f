"""The HTML report of a run (`eval -o report.html`, `factcli export RUN -o x.html`): one
self-contained page that opens offline and shows what the terminal shows (the run header, every
column's figures with their 95% intervals, the method lines, and every row in full: status, score,
reason, output, each assertion, the claims and facts with their verdicts, tokens, cost, latency).

The page is built from pieces that stand alone, so that a web view or a notebook's `_repr_html_`
can reuse them: `page_head`/`style_tag` (the CSS), `run_header`, `columns_table`, `methods_list`,
`result_cell` (one row of one column), `assertion_list`, `claims_list`, and `fragment` (all of
them, without <html>). The CSS applies only inside an element of class `fc` (the page's <body>),
so a host page that wraps the pieces in one keeps its own look elsewhere.

The figures come from the helpers the terminal uses (figures, labels, summary.summary_fields,
view.claim_counts, stats.judge.describe), so a number reads the same on screen and on the page.
The rendering of one row works on the row's JSON (`cell_of`), the form the store keeps, so a stored
row can be shown without building an EvalResult. Every text is escaped: outputs may hold HTML.
"""

from __future__ import annotations

import html
import json
import math
from typing import Any

from factcli.report import figures, labels
from factcli.report.rows import by_test, claim_irrelevant, claim_side, claim_supported, status_of
from factcli.scoring.outcome import grader_error_mark, meta_errored
from factcli.types import EvalResult, cache_write_of, grading_json, is_row_description, json_components, json_walk

# Scoped under .fc so a notebook or a host page keeps its own look. Long texts wrap inside their
# cell and tall ones scroll there; the results table scrolls inside its own box, so a run with many
# columns never makes the page itself wider than the window.
CSS = """
.fc{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1b1b1b}
body.fc{margin:1.2em 1.5em}
.fc h1{font-size:1.4em;margin:0 0 .3em;overflow-wrap:anywhere}.fc h2{font-size:1.15em;margin:1.4em 0 .4em}
.fc .meta{color:#555;margin:.2em 0}.fc .meta b{color:#1b1b1b}
.fc .scroll{overflow:auto;max-width:100%;width:max-content}
.fc .scroll.rows{max-height:88vh;border:1px solid #ccc}
.fc table{border-collapse:separate;border-spacing:0;margin:0}
.fc th,.fc td{border:0 solid #ccc;border-width:0 1px 1px 0;padding:4px 6px;vertical-align:top;text-align:left}
.fc table.cols{border-left:1px solid #ccc;border-top:1px solid #ccc}
.fc th{background:#f2f2f2;font-weight:600}
.fc table.results thead th{position:sticky;top:0;z-index:1}
.fc td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}.fc th.num{text-align:right}
.fc td.label{min-width:12em;max-width:22em;overflow-wrap:break-word}
.fc .prov{font-weight:600}.fc .prompt{font-weight:400;color:#444}
.fc th.col{min-width:20em;max-width:36em;overflow-wrap:break-word}
.fc td.cell{min-width:20em;max-width:36em;overflow-wrap:anywhere}
.fc td.var,.fc td.desc{min-width:8em;max-width:18em;overflow-wrap:break-word}
.fc .tag{font-weight:700;padding:0 .35em;border-radius:3px;color:#fff;font-size:.9em}
.fc .pass .tag{background:#2e7d32}.fc .fail .tag{background:#c62828}.fc .error .tag{background:#b26a00}
.fc .score{color:#555;margin-left:.4em}
.fc .turn{color:#067;margin-left:.4em;font-size:.9em}
.fc .ratings{color:#555;font-size:.9em;margin:.2em 0}
.fc pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:.3em 0;max-height:18em;overflow:auto;
 font:12px/1.4 ui-monospace,Menlo,Consolas,monospace;background:#fafafa;padding:2px 4px}
.fc .reason{color:#8a1c1c;white-space:pre-wrap;margin:.2em 0;max-height:14em;overflow:auto}
.fc .error .reason{color:#7a4a00}
.fc details{margin-top:.25em}.fc summary{cursor:pointer;color:#444}
.fc ul.asserts,.fc ol.claims{margin:.2em 0;padding-left:1.1em}.fc ul.asserts>li,.fc ol.claims>li{margin:.3em 0}
.fc .why{white-space:pre-wrap;color:#333}.fc .dim{color:#666;font-size:.92em}
.fc .evidence{white-space:pre-wrap;color:#555;font-size:.92em;border-left:3px solid #ddd;padding-left:.5em;
 margin:.15em 0;max-height:12em;overflow:auto}
.fc .ok{color:#2e7d32;font-weight:600}.fc .bad{color:#c62828;font-weight:600}.fc .warn{color:#b26a00}
.fc .spend{color:#555;font-size:.92em;margin:.3em 0 0}
.fc .legend{color:#666;font-size:.92em;margin:.3em 0}
.fc label.filter{display:inline-block;margin:.4em 0;user-select:none}
.fc:has(#only-failures:checked) tr.all-pass{display:none}
.fc .jump a{margin-right:.4em}
.fc tr:target td{background:#fff8d6}
@media print{.fc .scroll,.fc .scroll.rows,.fc pre,.fc .evidence,.fc .reason{max-height:none;overflow:visible}}
"""

FAILURES_LINKED = 100  # links to failed tests above the results; past that the filter does the job
PROMPT_CHARS = 90  # a heading wraps on the page, so it can say more than the terminal's 40


def _e(value: Any) -> str:
    return html.escape(value if isinstance(value, str) else "" if value is None else str(value), quote=True)


def _text(value: Any, indent: int | None = None) -> str:
    """A value as text: a string as is, anything else as JSON, as the CSV and the terminal show it."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=indent)


def _num(value: Any, digits: int = 3) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "—"
    return f"{value:.{digits}f}"


def style_tag() -> str:
    return f"<style>{CSS}</style>"


def page_head(title: str) -> str:
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title>{style_tag()}</head>")


def column_heading(col) -> str:
    """A column as the terminal heads it, provider over short prompt; the whole prompt on hover."""
    prompt = labels.short_prompt(col.prompt.label, col.prompt.raw, PROMPT_CHARS)
    return (f'<span class="prov">[{_e(labels.one_line(col.provider.display, None))}]</span><br>'
            f'<span class="prompt" title="{_e(col.prompt.label)}">{_e(prompt)}</span>')


# ---------------------------------------------------------------- run header


def run_header(run) -> str:
    from factcli.report.view import duration, when

    total = run.successes + run.failures + run.errors
    rate = run.pass_rate
    out = [f"<h1>factcli run {_e(run.run_id)}</h1>"]
    if run.suite.description:
        out.append(f'<p class="meta"><b>{_e(run.suite.description)}</b></p>')
    files = ", ".join(getattr(run.suite, "config_files", []) or [])
    out.append(f'<p class="meta">Status <b>{_e(run.status)}</b> · created {_e(when(run.created_at))} · '
               f"duration {_e(duration(run.duration_ms))}" + (f" · config {_e(files)}" if files else "") + "</p>")
    rate_text = "n/a" if rate is None else figures.run_rate(run.successes, run.judged)
    if run.unjudged and rate is not None:
        rate_text += f" over the {run.judged} rows judged"
    cached = sum(m.cached for m in run.metrics)
    out.append(f'<p class="meta">Rows <b>{total}</b>/{run.total_steps} · <span class="ok">{run.successes} passed</span>'
               f' · <span class="bad">{run.failures} failed</span> · {run.errors} errors'
               + (f' <span class="warn">({run.unjudged} not judged)</span>' if run.unjudged else "")
               + f" · pass rate <b>{_e(rate_text)}</b>" + (f" · {cached} cached" if cached else "")
               + (f" · {figures.plural(run.retries, 'retry', 'retries')}" if run.retries else "") + "</p>")
    grading_errors = sum(m.grading_errors for m in run.metrics)
    out.append(f'<p class="meta">{_e(figures.spend_text(run.metrics))}'
               + (f" · grader {_e(', '.join(run.graders))}" if run.graders else "")
               + (f' · <span class="warn">{figures.plural(grading_errors, "grading error")}</span>' if grading_errors else "") + "</p>")
    saved = figures.metrics_savings(run.metrics)
    if saved:
        out.append(f'<p class="meta">{_e(saved)}</p>')
    for pid, t in run.throttling.items():
        text = (f"Throttled: {pid} asked to slow down {t.get('throttled')} times; calls in flight cut to "
                f"{t.get('lowestLimit')} (limit {t.get('limit')})")
        out.append(f'<p class="meta">{_e(text)}</p>')
    if run.abort_reason:
        out.append(f'<p class="meta bad">Aborted: {_e(run.abort_reason)}</p>')
    for g in getattr(run, "gate_results", None) or ():  # the verdicts, as the eval said them (also of a stored run)
        line = g.describe()
        cls = "ok" if g.passed else "bad" if g.passed is False else "warn"
        out.append(f'<p class="meta {cls} gate">{_e(line[0].upper() + line[1:])}</p>')
    out += [f'<p class="meta warn">warning: {_e(w)}</p>' for w in run.warnings or []]
    return "\n".join(out)


# ---------------------------------------------------------------- columns


def columns_table(run) -> str:
    """The figures the summary prints after an eval (summary.summary_fields: pass rate with its 95%
    interval, mean score with its interval when scores are not 0/1, repeat statistics, named and
    derived metrics with weight 0 marked), then what view's footer adds: grading errors,
    factuality categories, tokens and cost."""
    from factcli import stats
    from factcli.report.fit import Field
    from factcli.report.summary import WEIGHT_ZERO, WEIGHT_ZERO_LEGEND, summary_fields

    stats.fill(run)  # a run built by hand, or stored by an older factcli, may lack them
    nonbinary = any(m.stats.get("scoreBinary") is False for m in run.metrics)
    repeat = max((m.stats.get("repeat") or 1 for m in run.metrics), default=1)
    fields = []
    for f in summary_fields(run, nonbinary, repeat):
        if f.header == "pass":  # "3/4": the page has room for the three counts apart
            f = Field("pass/fail/error", [f"{m.test_pass}/{m.test_fail}/{m.test_error}"
                                          + (f" ({m.test_unjudged} not judged)" if m.test_unjudged else "")
                                          for m in run.metrics])
        fields.append(f)
    bounds = [figures.fmt_interval(m.stats.get("passRateCi95")) for m in run.metrics]
    fields += [Field("grading errors", [str(m.grading_errors) for m in run.metrics]),
               Field("factuality categories", [" ".join(f"{k}:{v}" for k, v in sorted(m.categories.items()))
                                               for m in run.metrics]),
               Field("tokens · cost", [figures.spend_text([m]).removeprefix("Tokens ") for m in run.metrics])]
    texts = ("factuality categories", "tokens · cost")  # words, not figures: left-aligned
    head = "".join(f'<th class="{"" if f.header in texts else "num"}">{_e(f.header)}</th>' for f in fields)
    out = ['<div class="scroll"><table class="cols"><thead><tr><th>column</th>' + head + "</tr></thead><tbody>"]
    for i, col in enumerate(run.columns):
        cells = [f'<td class="label">{column_heading(col)}</td>']
        for f in fields:
            value = f.cells[i] if i < len(f.cells) else ""
            title = f' title="95% interval {_e(bounds[i])}"' if f.header == "pass rate" and bounds[i] else ""
            cells.append(f'<td class="{"" if f.header in texts else "num"}"{title}>{_e(value)}</td>')
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    out.append(f'<p class="legend">{_e(figures.legend(nonbinary, repeat))}</p>')
    small = figures.small_sample([m.test_pass + m.test_fail + m.test_error for m in run.metrics])
    if small:
        out.append(f'<p class="legend">{_e(small)}</p>')
    if any(c.endswith(WEIGHT_ZERO) for f in fields for c in f.cells):
        out.append(f'<p class="legend">{_e(WEIGHT_ZERO_LEGEND)}</p>')
    return "\n".join(out)


def methods_list(run) -> str:
    """The one-line reports of the claim-level methods and SimpleQA, and the pass rates corrected
    for the judge, one per column, as the summary and `view` print them."""
    from factcli.stats.judge import describe

    lines = [(labels.column_label_of(col.provider.display, col.prompt.label, col.prompt.raw), line)
             for col, m in zip(run.columns, run.metrics)
             for line in [*(r["line"] for r in (m.methods or {}).values() if isinstance(r, dict) and r.get("line")),
                          *(describe(e) for e in m.judge_corrected)]]
    if not lines:
        return ""
    return "<h2>Methods</h2><ul>" + "".join(f"<li><b>{_e(label)}</b>: {_e(line)}</li>" for label, line in lines) + "</ul>"


# ---------------------------------------------------------------- one row


def cell_of(r: EvalResult) -> dict:
    """A row as result_cell reads it: its grading as the results JSON and the store keep it."""
    resp = r.response
    return {"testIdx": r.step.test_idx, "promptIdx": r.step.prompt_idx, "status": status_of(r), "score": r.score,
            "output": _text(resp.output, indent=2), "error": r.error, "latencyMs": r.latency_ms,
            "tokens": resp.token_usage.total, "graderTokens": r.grading.tokens_used.total if r.grading else 0,
            "cost": resp.cost, "answered": resp.error is None, "cached": resp.cached,
            "grading": grading_json(r.grading, top=True) if r.grading is not None else None,
            "conversation": r.conversation, "reasoning": resp.token_usage.reasoning,
            "cacheRead": resp.token_usage.cached, "cacheWrite": resp.token_usage.cache_write}


WEIGHT_ZERO_NOTE = "weight 0: does not affect the test"


def spend_line(cell: dict) -> str:
    """A row's latency, tokens, cost and grader calls, as `factcli show` prints them."""
    bits = [f"latency {cell.get('latencyMs') or 0:.0f} ms", f"tokens {cell.get('tokens') or 0:,}"
            + reasoning_note(cell.get("reasoning")) + cache_note(cell.get("cacheRead"), cell.get("cacheWrite"))]
    if cell.get("graderTokens"):
        used = (cell.get("grading") or {}).get("tokensUsed") or {}
        bits.append(f"+{cell['graderTokens']:,} grading" + reasoning_note((used.get("completionDetails") or {})
                                                                           .get("reasoning"))
                    + cache_note(used.get("cached"), cache_write_of(used)))
    if cell.get("answered") or cell.get("cost") is not None:  # an answered call: its price, or n/a
        bits.append(f"cost {figures.fmt_cost(cell.get('cost'))}")
    spent = (cell.get("grading") or {}).get("metadata") or {}
    if "graderCalls" in spent:
        bits.append(f"grading: {figures.plural(spent['graderCalls'], 'call')}, {figures.fmt_cost(spent.get('graderCost'))}"
                    + cached_grading(spent))
    if cell.get("cached"):
        bits.append("output from the response cache")
    return " · ".join(bits)


def reasoning_note(n) -> str:
    """` (700 reasoning)`: the hidden reasoning tokens among a count (billed as output), else nothing."""
    return f" ({n:,} reasoning)" if isinstance(n, int) and n else ""


def cache_note(read, written) -> str:
    """` (600 from the prompt cache, 300 written to it)`: the input tokens among a count that the
    provider's prompt cache served and took, else nothing."""
    read = read if isinstance(read, int) else 0
    written = written if isinstance(written, int) else 0
    if not read and not written:
        return ""
    return f" ({read:,} from the prompt cache" + (f", {written:,} written to it" if written else "") + ")"


def cached_grading(spent: dict) -> str:
    """` (2 from the response cache)` when grader replies were read from the cache, else nothing."""
    n = spent.get("graderCached")
    return f" ({n} from the response cache)" if n else ""


def result_cell(cell: dict | None) -> str:
    """One row of one column: status, score, the whole reason, the output, then (folded) every
    assertion with its claims and the row's spend."""
    from factcli.report.view import claim_counts, turn_mark

    if cell is None:
        return '<td class="cell missing">—</td>'
    status = cell["status"]
    score = cell.get("score")
    parts = [f'<td class="cell {status.lower()}"><span class="tag">{status}</span>']
    if status != "PASS" or score not in (0, 1):  # as the terminal: a PASS of 1 needs no number
        parts.append(f'<span class="score">{_e(_num(score, 2))}</span>')
    turn = turn_mark(cell.get("conversation"))
    if turn:
        parts.append(f'<span class="turn">{_e(turn)}</span>')
    if status != "PASS" and cell.get("error"):
        parts.append(f'<div class="reason">{_e(cell["error"])}</div>')
    if cell.get("output"):
        parts.append(f'<pre class="output">{_e(cell["output"])}</pre>')
    if cell.get("ratings"):  # people's ratings beside the stored grading (report/ratings.py)
        from factcli.report.ratings import cell_text

        parts.append(f'<div class="ratings">rated: {_e(cell_text(cell["ratings"]))}</div>')
    grading = cell.get("grading") or {}
    components = json_components(grading)
    bits = []
    if components:
        failed = sum(1 for c in components if not c.get("pass"))
        bits.append(f"{len(components)} assertion{'s' if len(components) != 1 else ''}"
                    + (f" ({failed} failed)" if failed else ""))
    claims = claim_counts(grading)
    if claims:
        bits.append(f"{claims['total']} {_claim_word(components)} ({claims['unsupported']} not supported)")
    summary = " · ".join(bits) or "tokens, cost, latency"
    parts.append(f'<details class="more"><summary>{_e(summary)}</summary>'
                 + (assertion_list(components) if components else "")
                 + f'<p class="spend">{_e(spend_line(cell))}</p></details></td>')
    return "".join(parts)


def _claim_word(components: list[dict]) -> str:
    """FActScore checks atomic facts, the other methods claims: the count says which."""
    keys = {k for c in json_walk({"componentResults": components}) for k in ("claims", "facts")
            if (c.get("metadata") or {}).get(k)}
    return "facts" if keys == {"facts"} else "claims"


def assertion_list(components: list[dict]) -> str:
    """Every assertion of a row (assert-sets with their members): pass or fail, type, score,
    weight, metric, the whole reason, the factuality category, a grader error, the expected value,
    the claims or facts, the judges of a panel and the raw reply of the grader."""
    items = []
    for c in components:
        a = c.get("assertion") or {}
        meta = c.get("metadata") or {}
        kind = a.get("type") or ("assert-set" if meta.get("assertionSet") else "assertion")
        own = c.get("pass") and not meta.get("weightZeroFailed")
        mark = '<span class="ok">PASS</span>' if own else '<span class="bad">FAIL</span>'
        facts = [f"score {_num(c.get('score'))}"]
        weight = a.get("weight", 1)
        facts.append(WEIGHT_ZERO_NOTE if meta.get("weightZeroFailed") else f"weight {_e(weight)}")
        if a.get("metric"):
            facts.append(f"metric {_e(a['metric'])}")
        if meta.get("category"):
            facts.append(f"category {_e(meta['category'])}")
        body = [f'{mark} <code>{_e(kind)}</code> <span class="dim">{" · ".join(facts)}</span>']
        if c.get("reason"):
            body.append(f'<div class="why">{_e(c["reason"])}</div>')
        if meta_errored(meta):
            body.append(f'<div class="warn">grader error: {_e(_text(grader_error_mark(meta)))}</div>')
        if a.get("value") is not None:  # the value the row was graded against, and its template if it had one
            shown = meta.get("renderedAssertionValue", a["value"])
            written = (f'<div class="dim">written as <code>{_e(_text(a["value"]))}</code></div>'
                       if shown != a["value"] else "")
            body.append(f'<details><summary>value</summary><pre>{_e(_text(shown))}</pre>{written}</details>')
        for key in ("claims", "facts"):
            if isinstance(meta.get(key), list) and meta[key]:
                body.append(claims_list(meta[key], key))
        if isinstance(meta.get("statements"), list) and meta["statements"]:
            body.append(statements_list(meta["statements"], meta.get("passages")))
        if isinstance(meta.get("passageVerdicts"), list) and meta["passageVerdicts"]:
            body.append(passage_verdicts_list(meta["passageVerdicts"]))
        if isinstance(meta.get("judges"), list) and meta["judges"]:
            body.append(_judges(meta["judges"]))
        if meta.get("graderRaw"):
            body.append(f'<details><summary>raw grader reply</summary><pre>{_e(_text(meta["graderRaw"]))}</pre>'
                        "</details>")
        children = json_components(c)
        if children:
            body.append(assertion_list(children))
        items.append(f'<li class="{"ok-item" if own else "bad-item"}">{"".join(body)}</li>')
    return f'<ul class="asserts">{"".join(items)}</ul>'


def claims_list(items: list, key: str = "claims") -> str:
    """The claims (factual-correctness, FACTS Grounding) or atomic facts (FActScore) of one
    assertion with their verdicts, reasons and evidence, folded under a count."""

    rows, unsupported = [], 0
    judges = {str(item.get("judge")) for item in items if isinstance(item, dict) and item.get("judge")}
    for item in items:
        if not isinstance(item, dict):
            rows.append(f"<li>{_e(_text(item))}</li>")
            continue
        ok = claim_supported(item)
        unsupported += not ok and not claim_irrelevant(item)
        verdict = item.get("verdict")
        if verdict is None and isinstance(item.get("supported", item.get("grounded")), bool):
            verdict = "supported" if ok else "not supported"
        text = item.get("text") or item.get("claim") or item.get("fact") or ""
        where = [claim_side(item)] if claim_side(item) else []
        if item.get("judge") and len(judges) > 1:
            where.append(str(item["judge"]))
        mark = _e(verdict if verdict is not None else "?")
        css = "ok" if ok else "dim" if claim_irrelevant(item) else "bad"
        line = [f'<span class="{css}">[{mark}]</span> {_e(_text(text))}']
        if where:
            line.append(f' <span class="dim">· {_e(" · ".join(where))}</span>')
        if item.get("reason"):
            line.append(f'<div class="why dim">{_e(_text(item["reason"]))}</div>')
        if "queries" in item and isinstance(item.get("evidence"), list):
            line.append(_searched(item))
        elif item.get("evidence") and not claim_side(item):
            source = f" ({item['evidenceId']})" if item.get("evidenceId") else ""
            line.append(f'<div class="evidence">evidence{_e(source)}: {_e(_text(item["evidence"]))}</div>')
        rows.append(f"<li>{''.join(line)}</li>")
    name = key if key in ("claims", "facts") else "claims"
    count = f"{len(items)} {name}"
    if len(judges) > 1:  # a panel: each judge gave its own verdict on each claim
        count = f"{len(items)} verdicts on {name} from {len(judges)} judges"
    return (f'<details class="claims"><summary>{count} ({unsupported} not supported)</summary>'
            f'<ol class="claims">{"".join(rows)}</ol></details>')


def statements_list(statements: list, passages: Any) -> str:
    """A `citations` grading: each statement with its verdict, its citations (unnecessary ones marked)
    and the passages it cites, folded under a count."""
    passages = passages if isinstance(passages, list) else []
    rows, unsupported = [], 0
    for st in statements:
        if not isinstance(st, dict):
            continue
        ok = bool(st.get("supported"))
        unsupported += not ok
        cites = [n for n in st.get("citations") or [] if isinstance(n, int)]
        unnecessary = set(st.get("unnecessary") or [])
        marks = "".join(f"[{n}]" + (" (unnecessary)" if n in unnecessary else "") for n in cites)
        line = [f'<span class="{"ok" if ok else "bad"}">[{"supported" if ok else "not supported"}]</span> '
                f'{_e(_text(st.get("text") or ""))}']
        if marks:
            line.append(f' <span class="dim">· cites {_e(marks)}</span>')
        if st.get("reason"):
            line.append(f'<div class="why dim">{_e(_text(st["reason"]))}</div>')
        for n in cites:
            if 1 <= n <= len(passages):
                line.append(f'<div class="evidence">[{n}] {_e(_text(passages[n - 1]))}</div>')
        rows.append(f"<li>{''.join(line)}</li>")
    return (f'<details class="claims"><summary>{len(rows)} statements ({unsupported} not supported by their '
            f'citations)</summary><ol class="claims">{"".join(rows)}</ol></details>')


def passage_verdicts_list(rows: list) -> str:
    """A metric that judged the passages one by one (context-precision, noise-sensitivity): each passage in
    the retriever's order, relevant or not, with the reason, folded under a count."""
    items, relevant = [], 0
    for r in rows:
        if not isinstance(r, dict):
            continue
        ok = bool(r.get("relevant"))
        relevant += ok
        line = [f'<span class="{"ok" if ok else "bad"}">[{"relevant" if ok else "not relevant"}]</span> '
                f'{_e(_text(r.get("text") or ""))}']
        if r.get("reason"):
            line.append(f'<div class="why dim">{_e(_text(r["reason"]))}</div>')
        items.append(f"<li>{''.join(line)}</li>")
    return (f'<details class="claims"><summary>{len(items)} passages ({relevant} relevant)</summary>'
            f'<ol class="claims">{"".join(items)}</ol></details>')


def _searched(item: dict) -> str:
    """A fact checked against search results (`safe`): its revision, the queries and the evidence,
    each result linked when its address is a web page (never another scheme)."""
    parts = []
    if item.get("revised") and item["revised"] != item.get("text"):
        parts.append(f'<div class="dim">revised: {_e(_text(item["revised"]))}</div>')
    if item.get("queries"):
        parts.append('<div class="dim">queries: ' + " · ".join(_e(_text(q)) for q in item["queries"]) + "</div>")
    links = []
    for r in item.get("evidence") or []:
        if not isinstance(r, dict):
            continue
        url, title = str(r.get("url") or ""), _e(_text(r.get("title") or r.get("url") or ""))
        head = (f'<a href="{_e(url)}" rel="noopener noreferrer nofollow">{title}</a>'
                if url.startswith(("https://", "http://")) else f"{title} <code>{_e(url)}</code>")
        links.append(f'<li>{head}<div class="dim">{_e(_text(r.get("snippet") or ""))}</div></li>')
    if links:
        parts.append(f'<details class="evidence"><summary>evidence ({len(links)} results)</summary>'
                     f'<ol>{"".join(links)}</ol></details>')
    return "".join(parts)


def _judges(judges: list) -> str:
    """A panel's judges, as `factcli show` lists them: name, verdict, score, cost, reason."""
    rows = []
    for j in judges:
        if not isinstance(j, dict):
            continue
        name = j.get("judge") or j.get("provider") or j.get("id")
        if j.get("error"):  # a failed judge was left out of the aggregate (factcli.scoring.panels)
            rows.append(f'<li class="warn">{_e(name)} · failed, left out: {_e(_text(j["error"]))}</li>')
            continue
        bits = [str(name)] + [figures.score_text(j.get(k)) for k in ("verdict", "score") if j.get(k) is not None]
        if isinstance(j.get("cost"), (int, float)):
            bits.append(figures.fmt_cost(j["cost"]))
        rows.append(f"<li>{_e(' · '.join(bits))}" + (f'<div class="why dim">{_e(_text(j["reason"]))}</div>'
                                                       if j.get("reason") else "") + "</li>")
    return f'<details><summary>judges: {len(rows)}</summary><ul class="asserts">{"".join(rows)}</ul></details>'


# ---------------------------------------------------------------- results


def results_table(run) -> str:
    """Every test, one line each, a cell per column; a test with a failure or an error has the
    anchor `#test-N`, linked above the table, and the checkbox hides the others (CSS only)."""
    from factcli.report.ratings import ratings_of

    facts = run.row_facts()
    names = facts.var_names
    head = ("<th>#</th>" + ("<th>test</th>" if facts.has_description else "")
            + "".join(f"<th>{_e(v)}</th>" for v in names)
            + "".join(f'<th class="col">{column_heading(c)}</th>' for c in run.columns))
    rows, failing = [], []
    for test_idx, cells in by_test(run):
        first = next(iter(cells.values()))
        all_pass = all(r.success for r in cells.values())
        if not all_pass:
            failing.append(test_idx)
        anchor = "" if all_pass else f' id="test-{test_idx}"'
        link = _e(test_idx) if all_pass else f'<a href="#test-{test_idx}">{test_idx}</a>'
        row = [f'<tr{anchor} class="{"all-pass" if all_pass else "has-failure"}"><td class="num">{link}</td>']
        if facts.has_description:
            described = first.step.test.description
            row.append(f'<td class="desc">{_e(described if not is_row_description(described) else "")}</td>')
        row += [f'<td class="var"><pre>{_e(_text(first.step.vars.get(v)))}</pre></td>' for v in names]
        row += [result_cell({**cell_of(cells[c.index]), "ratings": ratings_of(run, cells[c.index])}
                            if c.index in cells else None) for c in run.columns]
        rows.append("".join(row) + "</tr>")
    out = [('<h2>Results</h2><label class="filter"><input type="checkbox" id="only-failures"> '
            "only tests with a failure or error</label>")]
    if failing:
        links = " ".join(f'<a href="#test-{i}">#{i}</a>' for i in failing[:FAILURES_LINKED])
        more = f" … and {len(failing) - FAILURES_LINKED} more" if len(failing) > FAILURES_LINKED else ""
        out.append(f'<p class="meta jump">Tests with a failure or error: {links}{more}</p>')
    out.append(f'<div class="scroll rows"><table class="results"><thead><tr>{head}</tr></thead><tbody>')
    out += rows
    out.append("</tbody></table></div>")
    return "\n".join(out)


def fragment(run) -> str:
    """The whole report as one block (no <html>, no CSS): what a notebook shows after style_tag()."""
    from factcli.settings import VERSION

    return "\n".join([run_header(run), "<h2>Columns</h2>", columns_table(run), methods_list(run),
                      results_table(run), f'<p class="meta">Written by factcli {_e(VERSION)}.</p>'])


def html_page(run) -> str:
    """One self-contained page: inline CSS, no script, no external resource."""
    return (page_head(f"factcli {run.run_id}") + '\n<body class="fc">\n' + fragment(run) + "\n</body></html>\n")
