"""`factcli show`: one run (header, columns, summary), or one test in full (every component, claim and verdict)."""

from __future__ import annotations

import json

from factcli.report.figures import fmt_cost, money, plural, score_text
from factcli.report.html_page import WEIGHT_ZERO_NOTE, cache_note, cached_grading, reasoning_note
from factcli.report.rows import claim_side
from factcli.report.view import (
    column_label,
    column_summaries,
    console_for_stdout,
    one_line,
    print_json,
    render_footer,
    render_header,
    run_header,
)
from factcli.report.rows import claim_supported
from factcli.scoring.outcome import grader_error_mark, meta_errored
from factcli.store.database import Store
from factcli.store.encode import loads
from factcli.store.ratings import ratings_for_row
from factcli.types import FAILURE_GRADING, cache_write_of, is_row_description, json_components, status_word

# ---------------------------------------------------------------- show RUN


def show_run(store: Store, run: dict, as_json: bool) -> None:
    header = run_header(store, run)
    summaries = column_summaries(store, run)
    config = loads(run.get("config_json"), {})
    options = loads(run.get("options_json"), {})
    warnings = loads(run.get("warnings_json"), []) or []
    if as_json:
        print_json({"run": header, "columns": summaries, "config": config, "options": options,
                     "warnings": warnings})
        return
    import yaml
    from rich.text import Text

    console, terminal = console_for_stdout()
    render_header(console, header)
    render_footer(console, summaries, terminal)
    shown_opts = {k: v for k, v in (options or {}).items() if v not in (None, False, {}, [])}
    if shown_opts:
        console.print(Text("Options: " + ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}"
                                                   for k, v in shown_opts.items())))
    for w in warnings:
        console.print(Text("warning: " + w, style="yellow"))
    console.print(Text("Config (secrets are never stored):", style="bold"))
    console.print(Text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True).rstrip()))
    console.print(Text(f"One test in full: factcli show {run['id']} TEST_IDX", style="dim"))


# ---------------------------------------------------------------- show RUN TEST_IDX


def _reasoning(r: dict) -> dict:
    """The hidden reasoning tokens of a stored row's model call and of its grader calls (part of the
    completion and grading counts), and the input tokens read from and written to the providers'
    prompt caches (part of the prompt and grading counts), when there were any."""
    usage = ((loads(r.get("extra_json"), {}) or {}).get("response") or {}).get("tokenUsage") or {}
    graded = ((loads(r.get("grading_json"), {}) or {}).get("tokensUsed") or {}) if r.get("grading_json") else {}
    out = {}
    for prefix, tokens in (("", usage), ("grading", graded)):
        found = {"reasoning": (tokens.get("completionDetails") or {}).get("reasoning"),
                 "cacheRead": tokens.get("cached"), "cacheWrite": cache_write_of(tokens)}
        for name, n in found.items():
            if n:
                out[prefix + name[0].upper() + name[1:] if prefix else name] = n
    return out


def _cache_note(hidden: dict, prefix: str = "") -> str:
    return cache_note(hidden.get(f"{prefix}CacheRead" if prefix else "cacheRead"),
                      hidden.get(f"{prefix}CacheWrite" if prefix else "cacheWrite"))


def _test_rows(store: Store, run: dict, test_idx: int) -> list[dict]:
    from factcli.errors import FactcliError

    rows = list(store.results(run["id"], "test_idx = ?", [test_idx], order="prompt_idx"))
    if not rows:
        n = store.execute("SELECT MAX(test_idx) FROM results WHERE run_id = ?", (run["id"],)).fetchone()[0]
        raise FactcliError(f"run {run['id']} has no test {test_idx}"
                           + ("" if n is None else f" (tests are numbered 0 to {n})"))
    return rows


def history(store: Store, run: dict, rec: dict) -> tuple[dict, list[dict]] | None:
    """A conversation turn's place and the `_conversation` entries its model saw (rebuilt from the
    earlier turns of its thread, which the store holds), or None for a row that is no turn."""
    from factcli.store.records import conversation_of, output_of, turn_entry

    place = conversation_of(rec)
    if place is None:
        return None
    earlier = store.results(run["id"], "prompt_idx = ? AND repeat_idx = ? AND test_idx < ? "
                            "AND instr(extra_json, '\"conversation\"') > 0",
                            [rec["prompt_idx"], rec["repeat_idx"], rec["test_idx"]], order="test_idx")
    entries = []
    for r in earlier:
        theirs = conversation_of(r)
        if theirs is None or theirs.get("id") != place.get("id"):
            continue
        response = (loads(r.get("extra_json"), {}) or {}).get("response") or {}
        raw = theirs["rawOutput"] if "rawOutput" in theirs else output_of(r)
        entries.append(turn_entry(r["rendered_prompt"] or "", raw, response.get("metadata")))
    return place, entries


def _print_history(console, place: dict, entries: list[dict]) -> None:
    from rich.text import Text

    from factcli.report.view import turn_mark

    console.print(Text(f"Conversation: {turn_mark(place)} · the model saw {len(entries)} earlier "
                       f"turn{'' if len(entries) == 1 else 's'}", style="bold cyan"))
    for n, e in enumerate(entries, 1):
        shown = {k: (v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)) for k, v in e.items()}
        console.print(Text(f"  turn {n} input:", style="dim"))
        console.print(Text(_indent(shown["input"], 4)))
        console.print(Text(f"  turn {n} output:", style="dim"))
        console.print(Text(_indent(shown["output"], 4)))


def show_test(store: Store, run: dict, test_idx: int, as_json: bool) -> None:
    from factcli.store.records import output_of

    cols = {c["prompt_idx"]: c for c in store.columns(run["id"])}
    rows = _test_rows(store, run, test_idx)
    if as_json:
        out = []
        for r in rows:
            out.append({
                "testIdx": r["test_idx"], "promptIdx": r["prompt_idx"], "repeatIdx": r["repeat_idx"],
                "column": column_label(cols.get(r["prompt_idx"], {})), "description": r["description"],
                "vars": loads(r["vars_json"], {}), "prompt": r["rendered_prompt"], "output": output_of(r),
                # promptfoo's failureReason, as the results JSON writes it; notJudged says what it hides
                "success": bool(r["success"]), "failureReason": 1 if r["failure_reason"] == FAILURE_GRADING
                else r["failure_reason"], "notJudged": r["failure_reason"] == FAILURE_GRADING, "score": r["score"],
                "error": r["error"], "namedScores": loads(r["named_scores_json"], {}),
                "gradingResult": loads(r["grading_json"]), "latencyMs": r["latency_ms"], "cost": r["cost"],
                "cached": bool(r["cached"]), "tokens": {"prompt": r["tokens_prompt"], "completion": r["tokens_completion"],
                                                         "total": r["tokens_total"], "grading": r["grader_tokens"],
                                                         **_reasoning(r)},
                "ratings": ratings_for_row(store, run["id"], r["test_idx"], r["prompt_idx"], r["repeat_idx"]),
            })
            turn = history(store, run, r)
            if turn is not None:
                out[-1]["conversation"] = {"id": turn[0].get("id"), "turn": turn[0].get("turn"), "history": turn[1]}
        print_json(out)
        return
    from rich.rule import Rule
    from rich.text import Text

    console, _ = console_for_stdout()
    first = rows[0]
    variables = loads(first["vars_json"], {}) or {}
    named = first["description"] if first["description"] and not is_row_description(first["description"]) else None
    console.print(Text(f"Run {run['id']} · test {test_idx}" + (f" · {named}" if named else ""), style="bold"))
    if variables:
        console.print(Text("Vars:", style="bold"))
        for k, v in variables.items():
            console.print(Text(f"  {k}: " + (v if isinstance(v, str) else json.dumps(v, ensure_ascii=False))))
    styles = {"PASS": "bold green", "FAIL": "bold red", "ERROR": "bold yellow"}
    for r in rows:
        status = status_word(r["success"], r["failure_reason"])
        console.print(Rule(Text(column_label(cols.get(r["prompt_idx"], {})))))
        head = Text(status, style=styles[status])
        head.append(f"  score {r['score']:.3f}" if r["score"] is not None else "  score —")
        grading = (loads(r["grading_json"], {}) or {}) if r["grading_json"] else {}
        hidden = _reasoning(r)
        details = [f"latency {r['latency_ms'] or 0:.0f} ms",
                   f"tokens {r['tokens_total'] or 0}" + reasoning_note(hidden.get("reasoning")) + _cache_note(hidden)]
        if r["grader_tokens"]:
            details.append(f"+{r['grader_tokens']} grading" + reasoning_note(hidden.get("gradingReasoning"))
                           + _cache_note(hidden, "grading"))
        # an answered call has a price or n/a (a FAIL's `error` column holds its reason, not a failed call)
        if status != "ERROR" or r["cost"] is not None:
            details.append(f"cost {fmt_cost(r['cost'])}")
        spent = grading.get("metadata") or {}
        if "graderCalls" in spent:
            details.append(f"grading: {plural(spent['graderCalls'], 'call')}, {fmt_cost(spent.get('graderCost'))}"
                           + cached_grading(spent))
        if r["cached"]:
            details.append("output from the response cache")
        head.append("  · " + " · ".join(details), style="dim")
        console.print(head)
        if r["error"] and status != "PASS":
            console.print(Text(("Error: " if status == "ERROR" else "Reason: ") + r["error"],
                               style="yellow" if status == "ERROR" else "red"))
        turn = history(store, run, r)
        if turn is not None:
            _print_history(console, *turn)
        console.print(Text("Prompt:", style="bold"))
        console.print(Text(_indent(r["rendered_prompt"] or "")))
        console.print(Text("Output:", style="bold"))
        out = output_of(r)
        console.print(Text(_indent(out if isinstance(out, str) else json.dumps(out, ensure_ascii=False, indent=2)
                                   if out is not None else "(none)")))
        named = loads(r["named_scores_json"], {}) or {}
        if named:
            console.print(Text("Metrics: " + ", ".join(f"{k}={v:.3f}" if isinstance(v, (int, float)) else f"{k}={v}"
                                                       for k, v in named.items())))
        grading = loads(r["grading_json"])
        if grading and grading.get("componentResults"):
            console.print(Text("Assertions:", style="bold"))
            for c in grading["componentResults"]:
                _print_component(console, c, 1)
        _print_ratings(console, ratings_for_row(store, run["id"], r["test_idx"], r["prompt_idx"], r["repeat_idx"]))


def _print_ratings(console, ratings: list[dict]) -> None:
    """People's ratings of the row (newest first), beside the stored grading they never change."""
    from rich.text import Text

    from factcli.report.ratings import describe

    if not ratings:
        return
    console.print(Text("Ratings:", style="bold"))
    for x in ratings:
        style = "dim" if x["retractedAt"] else ("green" if x["passed"] else "red")
        console.print(Text(f"  #{x['id']} {describe(x)}", style=style))


def _indent(text: str, n: int = 2) -> str:
    pad = " " * n
    return "\n".join(pad + line for line in str(text).splitlines()) or pad


def _print_component(console, c: dict, depth: int) -> None:
    from rich.text import Text

    pad = "  " * depth
    a = c.get("assertion") or {}
    kind = a.get("type") or ("assert-set" if (c.get("metadata") or {}).get("assertionSet") else "assertion")
    line = Text(pad)
    passed = c.get("pass") and not (c.get("metadata") or {}).get("weightZeroFailed")
    line.append("PASS" if passed else "FAIL", style="green" if passed else "red")
    score = c.get("score")
    line.append(f" {kind}" + (f" {score:.3f}" if isinstance(score, (int, float)) else ""))
    if not passed and c.get("pass"):
        line.append(f" ({WEIGHT_ZERO_NOTE})", style="dim")
    if a.get("metric"):
        line.append(f" [{a['metric']}]", style="dim")
    written = None
    if "value" in a and a.get("value") is not None:  # the value the row was graded against
        shown = (c.get("metadata") or {}).get("renderedAssertionValue", a["value"])
        value = shown if isinstance(shown, str) else json.dumps(shown, ensure_ascii=False)
        line.append(f" value: {one_line(value, 160)}", style="dim")
        if shown != a["value"]:
            written = a["value"] if isinstance(a["value"], str) else json.dumps(a["value"], ensure_ascii=False)
    console.print(line)
    if written is not None:
        console.print(Text(f"{pad}    (value written as {one_line(written, 160)})", style="dim"))
    if c.get("reason"):
        console.print(Text(_indent(c["reason"], len(pad) + 4)))
    meta = c.get("metadata") or {}
    if meta_errored(meta):
        console.print(Text(f"{pad}    grader error: {grader_error_mark(meta)}", style="yellow"))
    if meta.get("category"):
        console.print(Text(f"{pad}    factuality category: {meta['category']}"))
    if meta.get("graderRaw"):
        console.print(Text(f"{pad}    raw grader reply:", style="dim"))
        raw = meta["graderRaw"] if isinstance(meta["graderRaw"], str) else json.dumps(meta["graderRaw"], ensure_ascii=False)
        console.print(Text(_indent(raw, len(pad) + 6), style="dim"))
    for key in ("claims", "facts"):
        items = meta.get(key)
        if isinstance(items, list) and items:
            console.print(Text(f"{pad}    {key}:", style="bold"))
            for item in items:
                if not isinstance(item, dict):
                    console.print(Text(f"{pad}      - {item}"))
                    continue
                verdict = item.get("verdict")
                t = Text(f"{pad}      - ")
                if verdict is not None:
                    ok = claim_supported(item) or str(verdict).lower() in ("supported", "true", "yes", "1")
                    t.append(f"[{verdict}] ", style="green" if ok else "yellow" if verdict == "irrelevant" else "red")
                t.append(str(item.get("text") or item.get("claim") or item.get("fact") or ""))
                console.print(t)
                if item.get("reason"):
                    console.print(Text(f"{pad}        reason: {item['reason']}", style="dim"))
                if _print_searched(console, item, pad):
                    continue
                if claim_side(item):
                    console.print(Text(f"{pad}        {claim_side(item)}", style="dim"))
                elif item.get("evidence"):
                    ev = item["evidence"] if isinstance(item["evidence"], str) else json.dumps(item["evidence"], ensure_ascii=False)
                    source = f" ({item['evidenceId']})" if item.get("evidenceId") else ""
                    console.print(Text(f"{pad}        evidence{source}: {ev}", style="dim"))
    _print_statements(console, meta, pad)
    _print_passage_verdicts(console, meta, pad)
    judges = meta.get("judges")
    if isinstance(judges, list) and judges:
        console.print(Text(f"{pad}    judges:", style="bold"))
        for j in judges:
            if isinstance(j, dict):
                name = j.get("judge") or j.get("provider") or j.get("id")
                if j.get("error"):  # a failed judge was left out of the aggregate (factcli.scoring.panels)
                    console.print(Text(f"{pad}      - {name} · failed, left out: {j['error']}", style="yellow"))
                    continue
                bits = [str(name)] + [score_text(j.get(k)) for k in ("verdict", "score") if j.get(k) is not None]
                if isinstance(j.get("cost"), (int, float)):
                    bits.append(money(j["cost"]))
                console.print(Text(f"{pad}      - {' · '.join(bits)}" + (f": {j['reason']}" if j.get("reason") else "")))
    for child in json_components(c):
        _print_component(console, child, depth + 1)


def _print_statements(console, meta: dict, pad: str) -> None:
    """A `citations` grading: each statement with its verdict, its citations (unnecessary ones marked)
    and the text of the passages it cites."""
    from rich.text import Text

    statements, passages = meta.get("statements"), meta.get("passages")
    statements = [st for st in statements if isinstance(st, dict)] if isinstance(statements, list) else []
    if not statements:  # (context-faithfulness's statements are plain texts: its `claims` show them)
        return
    passages = passages if isinstance(passages, list) else []
    console.print(Text(f"{pad}    statements:", style="bold"))
    for st in statements:
        if not isinstance(st, dict):
            continue
        ok = bool(st.get("supported"))
        t = Text(f"{pad}      - ")
        t.append("[supported] " if ok else "[not supported] ", style="green" if ok else "red")
        t.append(str(st.get("text") or ""))
        cites = [n for n in st.get("citations") or [] if isinstance(n, int)]
        unnecessary = set(st.get("unnecessary") or [])
        if cites:
            t.append("  cites " + "".join(f"[{n}]" + ("(unnecessary)" if n in unnecessary else "") for n in cites),
                     style="dim")
        console.print(t)
        if st.get("reason"):
            console.print(Text(f"{pad}        reason: {st['reason']}", style="dim"))
        for n in cites:
            if 1 <= n <= len(passages):
                console.print(Text(f"{pad}        [{n}] {one_line(str(passages[n - 1]), 200)}", style="dim"))


def _print_passage_verdicts(console, meta: dict, pad: str) -> None:
    """A metric that judged the passages one by one (context-precision, noise-sensitivity): each passage in
    the retriever's order, relevant or not, and why."""
    from rich.text import Text

    rows = [r for r in meta.get("passageVerdicts") or [] if isinstance(r, dict)]
    if not rows:
        return
    console.print(Text(f"{pad}    passages:", style="bold"))
    for r in rows:
        ok = bool(r.get("relevant"))
        t = Text(f"{pad}      {r.get('passage')}. ")
        t.append("[relevant] " if ok else "[not relevant] ", style="green" if ok else "red")
        t.append(one_line(str(r.get("text") or ""), 200))
        console.print(t)
        if r.get("reason"):
            console.print(Text(f"{pad}        reason: {r['reason']}", style="dim"))


def _print_searched(console, item: dict, pad: str) -> bool:
    """A fact checked against search results (`safe`): its revision, queries and evidence links, one
    line each. False for other methods' items, whose evidence is a passage."""
    from rich.text import Text

    evidence = item.get("evidence")
    if "queries" not in item or not isinstance(evidence, list):
        return False
    if item.get("revised") and item["revised"] != item.get("text"):
        console.print(Text(f"{pad}        revised: {item['revised']}", style="dim"))
    for i, query in enumerate(item.get("queries") or []):
        console.print(Text(f"{pad}        query {i + 1}: {query}", style="dim"))
    for i, r in enumerate(evidence):
        if isinstance(r, dict):
            console.print(Text(f"{pad}        [{i + 1}] {r.get('title') or ''} <{r.get('url') or ''}>", style="dim"))
            if r.get("snippet"):
                console.print(Text(f"{pad}            {one_line(str(r['snippet']), 200)}", style="dim"))
    return True


# ---------------------------------------------------------------- diff


