"""`factcli view` and `factcli list`: read the store in SQL (one page at a time) and render it.

Nothing here loads a whole run: a page is the distinct test indices of one screen, then the cells
of those tests, with long texts cut in SQL unless --full.
"""

from __future__ import annotations

import json
import os
from typing import Any

from factcli.report.figures import fmt_cost, savings_text
from factcli.report.labels import column_label, one_line, provider_name, short_prompt
from factcli.report.rows import claim_irrelevant, claim_supported
from factcli.store.database import Store, shown_status
from factcli.store.encode import loads
from factcli.store.ratings import rated_rows
from factcli.types import FAILURE_GRADING, json_components, status_word, tokens_from_json

__all__ = ["column_label", "one_line"]  # show and diff name columns and texts as view does

CELL_CHARS = 400  # text fetched per cell unless --full


def when(iso: str | None) -> str:
    if not iso:
        return ""
    return iso.replace("T", " ")[:19] + " UTC"


def duration(ms: int | None) -> str:
    s = (ms or 0) / 1000
    if s < 60:
        return f"{s:.1f} s"
    m, s = divmod(int(s), 60)
    return f"{m} min {s} s" if m < 60 else f"{m // 60} h {m % 60} min"


# ---------------------------------------------------------------- run summary


def run_header(store: Store, run: dict) -> dict:
    """What the header shows; totals from the run row when it was finalised, else counted in SQL."""
    rid = run["id"]
    status = shown_status(run)
    if run.get("finished_at") and status == run["status"]:
        passed, failed, errors = run.get("successes") or 0, run.get("failures") or 0, run.get("errors") or 0
    else:  # still writing (or killed): count in SQL; tokens and cost are refreshed every second
        counts = store.counts(rid)
        passed = sum(c["pass"] for c in counts.values())
        failed = sum(c["fail"] for c in counts.values())
        errors = sum(c["error"] for c in counts.values())
    not_judged = store.not_judged(rid)
    tokens = loads(run.get("tokens_json"), {}) or {}
    total_tokens = tokens.get("total") or 0
    grader_tokens = (tokens.get("assertions") or {}).get("total") or 0
    cost, grader_cost = run.get("cost"), tokens.get("graderCost") or 0
    unpriced, grader_unpriced = tokens.get("costUnpriced") or 0, tokens.get("graderCostUnpriced") or 0
    model_tokens, grading_tokens = tokens_from_json(tokens), tokens_from_json(tokens.get("assertions"))
    savings = savings_text(model_tokens, grading_tokens, tokens.get("batched") or 0, tokens.get("batchSaved") or 0.0)
    # the figures of that line, for --json: the providers' prompt-cache reads and writes, and the batched calls
    cache = {"cacheRead": model_tokens.cached, "cacheWrite": model_tokens.cache_write,
             "gradingCacheRead": grading_tokens.cached, "gradingCacheWrite": grading_tokens.cache_write,
             "batchedCalls": tokens.get("batched") or 0, "batchSaved": tokens.get("batchSaved") or 0.0}
    done = passed + failed + errors
    judged = done - not_judged  # the pass rate is over the rows judged
    return {
        "id": rid, "description": run.get("description"), "status": status, "createdAt": run.get("created_at"),
        "finishedAt": run.get("finished_at"), "durationMs": run.get("duration_ms") or 0,
        "configFiles": loads(run.get("config_files_json"), []) or [],
        "graders": loads(run.get("graders_json"), []) or [], "totalRows": run.get("total_steps") or 0,
        "rows": done, "successes": passed, "failures": failed, "errors": errors, "notJudged": not_judged,
        "judged": judged, "passRate": (passed / judged) if judged else None, "tokens": total_tokens, "graderTokens": grader_tokens,
        "cost": cost, "graderCost": grader_cost, "costUnpricedRows": unpriced,
        "graderCostUnpricedRows": grader_unpriced, "abortReason": run.get("abort_reason"),
        **({"savings": savings, **{k: v for k, v in cache.items() if v}} if savings else {}),
        "factcliVersion": run.get("factcli_version"),
        # the gate verdicts, as the -o file's factcli.gates
        **({"gates": gates} if (gates := loads(run.get("gates_json"), []) or []) else {}),
    }


# Without stored statistics (a run still writing, or stored by an older factcli), score intervals
# and repeat statistics need every row's score: a scan of the results table that costs about a
# second per 100,000 rows, so larger runs show them only once they finish (the pass-rate interval
# needs only the counts and is always shown).
LIVE_STATS_MAX_ROWS = 20_000


def _stats_from_rows(store: Store, run: dict) -> dict[int, dict]:
    """prompt_idx -> stats.column_stats, from the stored rows (grouped in SQL)."""
    from factcli import stats

    repeat = (loads(run.get("options_json"), {}) or {}).get("repeat") or 1
    if repeat > 1:  # a test's repeats stay together
        clusters: dict[int, list] = {}
        nonbinary = "MAX(CASE WHEN score IS NOT NULL AND score NOT IN (0, 1) THEN 1 ELSE 0 END)"
        sql = (f"SELECT prompt_idx, COUNT(*), SUM(success), SUM(score), COUNT(score), {nonbinary} FROM results "
               f"WHERE run_id = ? AND failure_reason != {FAILURE_GRADING} GROUP BY prompt_idx, test_key")
        for p, n, passes, total, scored, nb in store.execute(sql, (run["id"],)):
            clusters.setdefault(p, []).append(stats.Cluster(n, passes or 0, total or 0.0, scored, bool(nb)))
        return {p: stats.column_stats(cs, repeat) for p, cs in clusters.items()}
    # every row is its own test: identical rows are counted once by SQL
    counts: dict[int, list[int]] = {}
    scores: dict[int, list[float]] = {}
    sql = ("SELECT prompt_idx, success, score, COUNT(*) FROM results WHERE run_id = ? "
           f"AND failure_reason != {FAILURE_GRADING} GROUP BY prompt_idx, success, score")  # rows judged
    for p, success, score, n in store.execute(sql, (run["id"],)):
        c = counts.setdefault(p, [0, 0])
        c[0] += n
        c[1] += n if success else 0
        if score is not None:
            scores.setdefault(p, []).extend([score] * n)
    return {p: stats.row_stats(c[0], c[1], scores.get(p, [])) for p, c in counts.items()}


def column_summaries(store: Store, run: dict, derived_names: set[str] | None = None) -> list[dict]:
    """Per column: counts (exact, from SQL unless finalised), the pass rate's 95% interval (from the
    counts), named metric means, derived metrics, factuality categories and grading errors, and the
    score interval and repeat statistics (stored at the end of the run; see LIVE_STATS_MAX_ROWS)."""
    from factcli import stats
    from factcli.store.records import metrics_from_json

    cols = store.columns(run["id"])
    final = bool(run.get("finished_at")) and shown_status(run) == run["status"]
    counts = None if final else store.counts(run["id"])
    config = loads(run.get("config_json"), {}) or {}
    if derived_names is None:
        derived_names = {d.get("name") for d in (config.get("derivedMetrics") or []) if isinstance(d, dict)}
    stored = [metrics_from_json(c.get("metrics_json")) for c in cols]
    computed: dict[int, dict] | None = None
    if not (final and all(m is not None and m.stats for m in stored)):
        rows = (sum(c["pass"] + c["fail"] + c["error"] for c in counts.values()) if counts is not None
                else sum(m.rows for m in stored if m is not None))
        if rows <= LIVE_STATS_MAX_ROWS:
            computed = _stats_from_rows(store, run)
    out = []
    for c, m in zip(cols, stored):
        if counts is not None or m is None:
            cnt = (counts or {}).get(c["prompt_idx"], {"pass": 0, "fail": 0, "error": 0, "notJudged": 0})
        else:
            cnt = {"pass": m.test_pass, "fail": m.test_fail, "error": m.test_error, "notJudged": m.test_unjudged}
        n = cnt["pass"] + cnt["fail"] + cnt["error"] - cnt["notJudged"]  # the rows judged
        means, derived, categories, grading_errors, score_mean, methods, judged = {}, {}, {}, 0, None, {}, []
        score_judged = None  # (rows in the score's mean, rows) when some row's score was not judged
        named_unjudged: dict = {}
        weight_zero: list[str] = []
        if m is not None:
            # every assertion of the metric had weight 0: its mean is 0 by construction, not a failure
            weight_zero = sorted(k for k, w in (m.named_weights or {}).items() if k not in derived_names and not w)
            all_means = m.named_means()
            for k, v in m.named_scores.items():
                if k in derived_names:
                    derived[k] = v
                else:
                    means[k] = all_means.get(k)
            categories = dict(m.categories)
            grading_errors = m.grading_errors
            methods = {k: v.get("line", "") for k, v in (m.methods or {}).items() if isinstance(v, dict)}
            judged = [e for e in m.judge_corrected or [] if isinstance(e, dict)]
            score_mean = (m.judged_score / m.scored) if m.scored else None
            score_judged = [m.scored, m.rows] if m.scored < m.rows else None
            named_unjudged = {k: m.judged_of(k) for k in m.named_unjudged or {} if m.not_judged(k)}
        rate = stats.wilson_interval(cnt["pass"], n)
        if final and m is not None and m.stats:
            column_stats = m.stats
        elif computed is not None:
            column_stats = computed.get(c["prompt_idx"]) or stats.column_stats([])
        else:
            column_stats = None
        out.append({
            "promptIdx": c["prompt_idx"], "label": column_label(c), "provider": provider_name(c),
            "prompt": c.get("prompt_label"), "promptShort": short_prompt(c.get("prompt_label"), c.get("prompt_raw")),
            "weightZero": weight_zero, "pass": cnt["pass"], "fail": cnt["fail"], "error": cnt["error"],
            "notJudged": cnt["notJudged"], "namedNotJudged": named_unjudged,
            "passRate": (cnt["pass"] / n) if n else None,
            "passRateCi95": [rate["low"], rate["high"]] if rate else None,
            "meanScore": score_mean, "scoreJudged": score_judged, "namedMeans": means,
            "derived": derived, "categories": categories, "gradingErrors": grading_errors,
            "methods": methods, "judgeCorrected": judged, "stats": column_stats,
        })
    return out


# ---------------------------------------------------------------- one page of the table


def _filters(store: Store, failures: bool, errors: bool, text: str | None, column: int | None = None,
             metric: str | None = None) -> tuple[str, list]:
    """The WHERE of a page: the status filters, the text, and (web view) one column, and rows that
    lost points on one named metric (its score below 1)."""
    conds, params = [], []
    if column is not None:
        conds.append("prompt_idx = ?")
        params.append(column)
    if metric:
        number, key = store.json_number("named_scores_json", metric)
        conds.append(f"{number} < 1")
        params += key
    status = []
    if failures:
        status.append("failure_reason = 1")
    if errors:  # types.ERROR_REASONS, and a row with an assertion not judged: what --retry-errors runs again
        status.append("failure_reason IN (2, 3) OR grading_json LIKE ?")
    if status:
        conds.append("(" + " OR ".join(status) + ")")
        if errors:
            params.append(store.GRADER_ERROR_MARK)
    if text:
        pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        fields = ("output", "error", "description", "vars_json")
        conds.append("(" + " OR ".join(f"{f} LIKE ? ESCAPE '\\'" for f in fields) + ")")
        params += [pattern] * len(fields)
    return " AND ".join(conds), params


# Only the rows that are conversation turns read their extra JSON (for the turn's id and number).
_TURN_SQL = """CASE WHEN instr(extra_json, '"conversation"') > 0 THEN extra_json END"""
# Only the gradings that may hold claims are read whole: the rest of a page reads no grading at all.
_CLAIMS_SQL = ("""CASE WHEN instr(grading_json, '"claims"') > 0 OR instr(grading_json, '"facts"') > 0 """
               "THEN grading_json END")


def _claim_items(component: dict, out: list[dict]) -> None:
    meta = component.get("metadata") or {}
    for key in ("claims", "facts"):
        items = meta.get(key)
        if isinstance(items, list):
            out.extend(i for i in items if isinstance(i, dict))
    for child in json_components(component):
        _claim_items(child, out)


def claim_counts(grading: Any) -> dict | None:
    """{total, unsupported} of a row graded claim by claim, else None. A claim several judges
    checked counts once, and as unsupported when any judge did not support it."""
    if not isinstance(grading, dict):
        return None
    items: list[dict] = []
    _claim_items(grading, items)
    if not items:
        return None
    verdicts: dict[str, bool] = {}
    for i, item in enumerate(items):
        if claim_irrelevant(item):
            continue  # safe's irrelevant facts are left out of its score: not claims it judged
        text = item.get("text") or item.get("claim") or item.get("fact")
        key = " ".join(str(text).split()) if text else f"#{i}"
        verdicts[key] = verdicts.get(key, True) and claim_supported(item)
    return {"total": len(verdicts), "unsupported": sum(1 for ok in verdicts.values() if not ok)}


def turn_mark(place: Any) -> str | None:
    """A conversation turn, compactly: `conv #2` in a column's default thread, `conv:fb #2` in the
    thread of `metadata.conversationId: fb`."""
    if not isinstance(place, dict) or not place.get("turn"):
        return None
    cid = place.get("id")
    return f"conv{'' if cid is None else ':' + one_line(str(cid), 20)} #{place['turn']}"


def page(store: Store, run: dict, *, failures: bool = False, errors: bool = False, text: str | None = None,
         limit: int = 50, page_no: int = 1, full: bool = False, column: int | None = None,
         metric: str | None = None) -> dict:
    rid = run["id"]
    where, params = _filters(store, failures, errors, text, column, metric)
    offset = (page_no - 1) * limit
    if where:  # one scan gives both the page and the count
        matching = [r[0] for r in store.execute(
            f"SELECT DISTINCT test_idx FROM results WHERE run_id = ? AND {where} ORDER BY test_idx", [rid, *params])]
        total, idxs = len(matching), matching[offset: offset + limit]
    else:  # both from the (run_id, test_idx, ...) index
        total = store.execute("SELECT COUNT(*) FROM (SELECT DISTINCT test_idx FROM results WHERE run_id = ?) AS t",
                                   (rid,)).fetchone()[0]
        idxs = [r[0] for r in store.execute(
            "SELECT DISTINCT test_idx FROM results WHERE run_id = ? ORDER BY test_idx LIMIT ? OFFSET ?",
            (rid, limit, offset))]
    pages = max(1, -(-total // limit))
    tests: dict[int, dict] = {i: {"testIdx": i, "description": None, "vars": None, "cells": {}} for i in idxs}
    if idxs:
        n = None if full else CELL_CHARS
        text_of = (lambda f: f) if n is None else (lambda f: f"substr({f}, 1, {n}) AS {f}")
        sql = ("SELECT test_idx, prompt_idx, repeat_idx, success, failure_reason, score, cached, latency_ms, "
               f"output_json, {text_of('description')}, {text_of('vars_json')}, {text_of('output')}, "
               f"{text_of('error')}, {_CLAIMS_SQL} AS claims_json, {_TURN_SQL} AS turn_json "
               f"FROM results WHERE run_id = ? AND test_idx IN ({','.join('?' * len(idxs))})")
        for r in store.execute(sql, [rid, *idxs]):
            t = tests[r["test_idx"]]
            if t["description"] is None:
                t["description"] = r["description"]
                t["vars"] = r["vars_json"]
            status = status_word(r["success"], r["failure_reason"])
            # the stored `error` is a FAIL's reason or an ERROR's message: each goes under its own name
            t["cells"][r["prompt_idx"]] = {
                "promptIdx": r["prompt_idx"], "repeatIdx": r["repeat_idx"], "status": status,
                "score": r["score"], "output": r["output"], "reason": r["error"] if status == "FAIL" else None,
                "error": r["error"] if status == "ERROR" else None, "cached": bool(r["cached"]),
                "latencyMs": r["latency_ms"], "claims": claim_counts(loads(r["claims_json"])),
                "turn": turn_mark((loads(r["turn_json"], {}) or {}).get("conversation")),
                "rated": None,
            }
        for (t_idx, p_idx, rep), passed in rated_rows(store, rid).items():  # people's latest row verdicts
            cell = tests[t_idx]["cells"].get(p_idx) if t_idx in tests else None
            if cell is not None and cell["repeatIdx"] == rep:
                cell["rated"] = passed
    for t in tests.values():  # vars: parse when whole, else show the stored text
        parsed = loads(t["vars"]) if t["vars"] else None
        t["vars"] = parsed if isinstance(parsed, dict) else (t["vars"] or "")
    return {"total": total, "page": page_no, "pages": pages, "limit": limit, "tests": [tests[i] for i in idxs]}


# ---------------------------------------------------------------- rendering


def console_for_stdout():
    from factcli.report.summary import Console

    if os.isatty(1):
        return Console(highlight=False), True
    width = int(os.environ.get("COLUMNS") or 0) or 120
    return Console(highlight=False, width=width, no_color=True, force_terminal=False, soft_wrap=False), False


def render_header(console, h: dict, *, page_info: dict | None = None) -> None:
    from rich.markup import escape

    status = h["status"]
    color = {"complete": "green", "running": "cyan", "interrupted": "yellow", "aborted": "red", "error": "red"}
    console.print(f"[bold]Run[/] {escape(h['id'])} · [{color.get(status, 'white')}]{escape(status)}[/]"
                  + (f" · {escape(h['description'])}" if h.get("description") else ""))
    files = ", ".join(h["configFiles"]) or "—"
    console.print(f"Config: {escape(files)} · {when(h['createdAt'])} · {duration(h['durationMs'])}")
    from factcli.report.figures import run_rate

    rate = "n/a" if h["passRate"] is None else run_rate(h["successes"], h["judged"])
    not_judged = h.get("notJudged") or 0
    console.print(f"Rows: {h['rows']}/{h['totalRows']} · [green]{h['successes']} pass[/] · "
                  f"[red]{h['failures']} fail[/] · [yellow]{h['errors']} error[/]"
                  + (f" [yellow]({not_judged} not judged)[/]" if not_judged else "") + f" · pass rate {rate}"
                  + (f" [dim]over the {h['judged']} rows judged[/]" if not_judged and h["judged"] else ""))
    tokens = f"Tokens {h['tokens']:,}" + (f" (+{h['graderTokens']:,} grading)" if h["graderTokens"] else "")
    unpriced = h.get("costUnpricedRows") or 0
    cost = None if unpriced and unpriced >= h["rows"] else h.get("cost")
    money = f" · cost {fmt_cost(cost, unpriced)}"
    if h["graderTokens"] or h.get("graderCost") or h.get("graderCostUnpricedRows"):
        money += f" (+{fmt_cost(h.get('graderCost') or 0, h.get('graderCostUnpricedRows') or 0)} grading)"
    grader = f"Grader: {escape(', '.join(h['graders']))} · " if h["graders"] else ""
    console.print(grader + tokens + money)
    if h.get("savings"):
        console.print(escape(h["savings"]))
    if h.get("abortReason"):
        console.print(f"[red]Aborted:[/] {escape(h['abortReason'])}")
    for line, passed in gate_lines(h):
        style = "green" if passed else "bold red" if passed is False else "yellow"
        console.print(f"[{style}]{escape(line)}[/]", soft_wrap=True)
    if page_info is not None:
        shown = len(page_info["tests"])
        if page_info["total"] and shown:  # by test number, as the # column and `factcli show RUN N` count
            first, last = page_info["tests"][0]["testIdx"], page_info["tests"][-1]["testIdx"]
            span = f"Test {first}" if first == last else f"Tests {first}–{last}"
            console.print(f"[dim]{span} ({shown} of {page_info['total']}, page {page_info['page']}/"
                          f"{page_info['pages']})[/]")


def gate_lines(h: dict) -> list[tuple[str, bool | None]]:
    """The gate verdicts a run stored (run_header's "gates"), a line each as the eval said them, with
    passed (None: not judged)."""
    if not h.get("gates"):
        return []
    from factcli.config.gates import GateResult

    out = []
    for g in h["gates"]:
        try:
            line = GateResult.from_json(g).describe()
        except (KeyError, TypeError, ValueError):
            continue
        out.append((line[0].upper() + line[1:], g.get("passed")))
    return out


def metric_cell(value: float | None, weight_zero: bool = False, judged: tuple | list | None = None) -> str:
    """A named metric's mean; one whose assertions all have weight 0 says so, since its mean is 0
    by construction and would read as a failure; its coverage beside it when some rows were not
    judged on it (`judged`: rows judged, rows that have it)."""
    text = "—" if value is None else f"{value:.3f}"
    if judged:
        text += f" ({judged[0]} of {judged[1]} judged)"
    return f"{text} (weight 0)" if weight_zero else text


def footer_fields(summaries: list[dict]) -> list:
    """The figures of `view`'s footer, one fit.Field each, most important first."""
    from factcli.report import figures
    from factcli.report.fit import Field

    names = sorted({k for s in summaries for k in s["namedMeans"]})
    derived = sorted({k for s in summaries for k in s["derived"]})
    col_stats = [s.get("stats") or {} for s in summaries]
    nonbinary = any(st.get("scoreBinary") is False for st in col_stats)
    repeat = max((st.get("repeat") or 1 for st in col_stats), default=1)

    def num(v):
        return "—" if v is None else f"{v:.3f}"

    scores = []
    for s, st in zip(summaries, col_stats):
        score = num(s["meanScore"])
        if s.get("scoreJudged"):
            score += f" ({s['scoreJudged'][0]} of {s['scoreJudged'][1]} judged)"
        if st.get("scoreBinary") is False:
            score += (" " + figures.fmt_interval(st.get("scoreCi95"), 2)).rstrip()
        scores.append(score)
    fields = [Field("pass rate", [figures.fmt_rate(s["passRate"], s.get("passRateCi95")) for s in summaries]),
              Field("pass/fail/error", [f"{s['pass']}/{s['fail']}/{s['error']}"
                                        + (f" ({s['notJudged']} not judged)" if s.get("notJudged") else "")
                                        for s in summaries]),
              Field("mean score" + (" [95% CI]" if nonbinary else ""), scores)]
    if repeat > 1:
        cells = [figures.repeat_cells(st, repeat) for st in col_stats]
        for i, name in enumerate((f"pass@{repeat}", f"pass^{repeat}", "flip rate")):
            fields.append(Field(name, [c[i] for c in cells]))
    for n in names:
        fields.append(Field(f"{n} (mean)", [metric_cell(s["namedMeans"].get(n), n in s.get("weightZero", ()),
                                                        (s.get("namedNotJudged") or {}).get(n))
                                            for s in summaries]))
    for n in derived:
        fields.append(Field(f"{n} (derived)", [num(s["derived"].get(n)) for s in summaries]))
    if any(s["gradingErrors"] for s in summaries):
        fields.append(Field("grading errors", [str(s["gradingErrors"]) for s in summaries]))
    if any(s["categories"] for s in summaries):
        fields.append(Field("factuality categories",
                            [" ".join(f"{k}:{v}" for k, v in sorted(s["categories"].items())) or "—"
                             for s in summaries]))
    return fields


def render_footer(console, summaries: list[dict], terminal: bool) -> None:
    from rich.text import Text

    from factcli.report import figures, fit
    from factcli.stats import judge

    if not summaries:
        return
    col_stats = [s.get("stats") or {} for s in summaries]
    nonbinary = any(st.get("scoreBinary") is False for st in col_stats)
    repeat = max((st.get("repeat") or 1 for st in col_stats), default=1)
    entries = [fit.Entry(f"[{s['provider']}]", s.get("promptShort") or "") for s in summaries]
    console.print()
    fit.print_lines(console, fit.fit(entries, footer_fields(summaries), console.width, terminal))
    console.print(Text(figures.legend(nonbinary, repeat), style="dim"))
    small = figures.small_sample([s["pass"] + s["fail"] + s["error"] for s in summaries])
    if small:
        console.print(Text(small, style="dim"))
    if any(s.get("weightZero") for s in summaries):
        console.print(Text("(weight 0): every assertion of this metric has weight 0, so it does not count "
                           "toward the score and its mean is 0 whatever the outputs", style="dim"))
    if any(s.get("stats") is None for s in summaries):
        console.print(Text(f"Score intervals and repeat statistics of a run over {LIVE_STATS_MAX_ROWS:,} rows "
                           "are shown once it has finished.", style="dim"))
    for s in summaries:
        for line in [*s["methods"].values(), *(judge.describe(e) for e in s.get("judgeCorrected", []))]:
            console.print(Text(f"{one_line(s['label'], 40)}: {line}"))


def render_runs(console, runs: list[dict], terminal: bool, counts: dict[str, int], not_judged=None) -> None:
    """`not_judged`: run id -> its rows not judged (Store.not_judged), left out of its pass rate."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.SIMPLE_HEAD if terminal else box.ASCII, expand=False)
    # the id starts with its creation time (eval-20261124T203948-…), so a narrow terminal drops the
    # created and duration columns rather than cut an id; the description is cut, on one line
    narrow = console.width < 100
    columns = [("id", "left"), ("created", "left"), ("status", "left"), ("rows", "right"), ("pass rate", "right"),
               ("duration", "right"), ("description", "left")]
    skip = {"created", "duration"} if narrow else set()
    shown = [(name, justify) for name, justify in columns if name not in skip]
    rows = []
    for r in runs:
        status = shown_status(r)
        done = counts.get(r["id"], (r.get("successes") or 0) + (r.get("failures") or 0) + (r.get("errors") or 0))
        rate = ""
        judged = done - (not_judged(r["id"]) if not_judged is not None else 0)
        if r.get("finished_at") and judged:
            rate = f"{(r.get('successes') or 0) / judged * 100:.1f}%"
        files = loads(r.get("config_files_json"), []) or []
        rows.append({"id": r["id"], "created": when(r.get("created_at")), "status": status,
                     "rows": f"{done}/{r.get('total_steps') or 0}", "pass rate": rate,
                     "duration": duration(r.get("duration_ms")),
                     "description": r.get("description") or ", ".join(os.path.basename(f) for f in files)})
    fixed = {name: max([len(name)] + [len(row[name]) for row in rows]) for name, _ in shown[:-1]}
    # what is left of the width after the other columns and the borders (3 per column, 1 at the end)
    room = max(12, console.width - sum(fixed.values()) - 3 * len(shown) - 1)
    for name, justify in shown:
        table.add_column(name, justify=justify, no_wrap=True, min_width=fixed.get(name))
    for row in rows:
        row["description"] = Text(one_line(row["description"], min(60, room)))
        table.add_row(*(row[name] for name, _ in shown))
    console.print(table)


def print_json(doc: Any) -> None:
    """A `--json` document on stdout, its control characters escaped as the terminal views' (report/escapes)."""
    import typer

    from factcli.report.escapes import json_visible

    typer.echo(json_visible(json.dumps(doc, ensure_ascii=False, indent=2, default=str)))
