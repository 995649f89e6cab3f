"""`factcli show` (one run, or one test in full) and `factcli diff` (flips and metric deltas)."""

from __future__ import annotations

import json
from typing import Any

from factcli.report.view import (
    column_label,
    column_summaries,
    console_for_stdout,
    one_line,
    render_footer,
    render_header,
    run_header,
)
from factcli.store.database import Store, shown_status
from factcli.store.encode import loads


def _print_json(doc: Any) -> None:
    import typer

    typer.echo(json.dumps(doc, ensure_ascii=False, indent=2, default=str))


# ---------------------------------------------------------------- show RUN


def show_run(store: Store, run: dict, as_json: bool) -> None:
    header = run_header(store, run)
    summaries = column_summaries(store, run)
    config = loads(run.get("config_json"), {})
    options = loads(run.get("options_json"), {})
    warnings = loads(run.get("warnings_json"), []) or []
    if as_json:
        _print_json({"run": header, "columns": summaries, "config": config, "options": options,
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


def _test_rows(store: Store, run: dict, test_idx: int) -> list[dict]:
    from factcli.errors import FactcliError

    rows = list(store.results(run["id"], "test_idx = ?", [test_idx], order="prompt_idx"))
    if not rows:
        n = store.conn.execute("SELECT MAX(test_idx) FROM results WHERE run_id = ?", (run["id"],)).fetchone()[0]
        raise FactcliError(f"run {run['id']} has no test {test_idx}"
                           + ("" if n is None else f" (tests are numbered 0 to {n})"))
    return rows


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
                "success": bool(r["success"]), "failureReason": r["failure_reason"], "score": r["score"],
                "error": r["error"], "namedScores": loads(r["named_scores_json"], {}),
                "gradingResult": loads(r["grading_json"]), "latencyMs": r["latency_ms"], "cost": r["cost"],
                "cached": bool(r["cached"]), "tokens": {"prompt": r["tokens_prompt"], "completion": r["tokens_completion"],
                                                         "total": r["tokens_total"], "grading": r["grader_tokens"]},
            })
        _print_json(out)
        return
    from rich.rule import Rule
    from rich.text import Text

    console, _ = console_for_stdout()
    first = rows[0]
    console.print(Text(f"Run {run['id']} · test {test_idx}" + (f" · {first['description']}" if first["description"] else ""),
                       style="bold"))
    variables = loads(first["vars_json"], {}) or {}
    if variables:
        console.print(Text("Vars:", style="bold"))
        for k, v in variables.items():
            console.print(Text(f"  {k}: " + (v if isinstance(v, str) else json.dumps(v, ensure_ascii=False))))
    styles = {"PASS": "bold green", "FAIL": "bold red", "ERROR": "bold yellow"}
    for r in rows:
        status = "PASS" if r["success"] else ("ERROR" if r["failure_reason"] == 2 else "FAIL")
        console.print(Rule(Text(column_label(cols.get(r["prompt_idx"], {})))))
        head = Text(status, style=styles[status])
        head.append(f"  score {r['score']:.3f}" if r["score"] is not None else "  score —")
        details = [f"latency {r['latency_ms'] or 0:.0f} ms", f"tokens {r['tokens_total'] or 0}"]
        if r["grader_tokens"]:
            details.append(f"+{r['grader_tokens']} grading")
        if r["cost"] is not None:
            details.append(f"cost ${r['cost']:.5f}")
        if r["cached"]:
            details.append("cached")
        head.append("  · " + " · ".join(details), style="dim")
        console.print(head)
        if r["error"] and status != "PASS":
            console.print(Text(("Error: " if status == "ERROR" else "Reason: ") + r["error"],
                               style="yellow" if status == "ERROR" else "red"))
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


def _indent(text: str, n: int = 2) -> str:
    pad = " " * n
    return "\n".join(pad + line for line in str(text).splitlines()) or pad


def _print_component(console, c: dict, depth: int) -> None:
    from rich.text import Text

    pad = "  " * depth
    a = c.get("assertion") or {}
    kind = a.get("type") or ("assert-set" if (c.get("metadata") or {}).get("assertionSet") else "assertion")
    line = Text(pad)
    line.append("PASS" if c.get("pass") else "FAIL", style="green" if c.get("pass") else "red")
    score = c.get("score")
    line.append(f" {kind}" + (f" {score:.3f}" if isinstance(score, (int, float)) else ""))
    if a.get("metric"):
        line.append(f" [{a['metric']}]", style="dim")
    if "value" in a and a.get("value") is not None:
        value = a["value"] if isinstance(a["value"], str) else json.dumps(a["value"], ensure_ascii=False)
        line.append(f" value: {one_line(value, 160)}", style="dim")
    console.print(line)
    if c.get("reason"):
        console.print(Text(_indent(c["reason"], len(pad) + 4)))
    meta = c.get("metadata") or {}
    if meta.get("graderError"):
        console.print(Text(f"{pad}    grader error: {meta['graderError']}", style="yellow"))
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
                    t.append(f"[{verdict}] ", style="green" if str(verdict).lower() in ("supported", "true", "yes", "1")
                             else "red")
                t.append(str(item.get("text") or item.get("claim") or item.get("fact") or ""))
                console.print(t)
                if item.get("reason"):
                    console.print(Text(f"{pad}        reason: {item['reason']}", style="dim"))
                if item.get("evidence"):
                    ev = item["evidence"] if isinstance(item["evidence"], str) else json.dumps(item["evidence"], ensure_ascii=False)
                    console.print(Text(f"{pad}        evidence: {ev}", style="dim"))
    judges = meta.get("judges")
    if isinstance(judges, list) and judges:
        console.print(Text(f"{pad}    judges:", style="bold"))
        for j in judges:
            if isinstance(j, dict):
                name = j.get("judge") or j.get("provider") or j.get("id")
                if j.get("error"):  # a failed judge was left out of the aggregate (factcli.scoring.panels)
                    console.print(Text(f"{pad}      - {name} · failed, left out: {j['error']}", style="yellow"))
                    continue
                bits = [str(name)] + [str(j.get(k)) for k in ("verdict", "score") if j.get(k) is not None]
                if isinstance(j.get("cost"), (int, float)):
                    bits.append(f"${j['cost']:.6f}")
                console.print(Text(f"{pad}      - {' · '.join(bits)}" + (f": {j['reason']}" if j.get("reason") else "")))
    for child in c.get("componentResults") or []:
        _print_component(console, child, depth + 1)


# ---------------------------------------------------------------- diff


def _rows_for_diff(store: Store, run: dict) -> tuple[dict, list[dict]]:
    cols = store.columns(run["id"])
    by_idx = {c["prompt_idx"]: (c["provider_id"], c["prompt_label"] or "") for c in cols}
    out: dict[tuple, dict] = {}
    seen: dict[tuple, int] = {}
    for r in store.results(run["id"], order="test_idx, prompt_idx, repeat_idx",
                           fields="test_idx, prompt_idx, repeat_idx, test_key, description, success, failure_reason, "
                                  "score, substr(vars_json, 1, 300) AS vars, substr(error, 1, 300) AS error"):
        base = (r["test_key"], r["repeat_idx"], by_idx.get(r["prompt_idx"]))
        n = seen.get(base, 0)
        seen[base] = n + 1
        r["status"] = "PASS" if r["success"] else ("ERROR" if r["failure_reason"] == 2 else "FAIL")
        out[base + (n,)] = r
    return out, cols


def diff_runs(store: Store, a: dict, b: dict, as_json: bool) -> None:
    rows_a, cols_a = _rows_for_diff(store, a)
    rows_b, cols_b = _rows_for_diff(store, b)
    flips, unchanged = [], 0
    for key, ra in rows_a.items():
        rb = rows_b.get(key)
        if rb is None:
            continue
        if ra["status"] == rb["status"]:
            unchanged += 1
            continue
        label = ra["description"] or one_line(ra["vars"], 80)
        flips.append({"testIdxA": ra["test_idx"], "testIdxB": rb["test_idx"], "test": label,
                      "column": f"[{key[2][0]}] {key[2][1]}" if key[2] else "?", "a": ra["status"], "b": rb["status"],
                      "scoreA": ra["score"], "scoreB": rb["score"],
                      "reasonB": rb["error"] if rb["status"] != "PASS" else None,
                      "kind": "regression" if ra["status"] == "PASS" else ("fix" if rb["status"] == "PASS" else "change")})
    only_a = sum(1 for k in rows_a if k not in rows_b)
    only_b = sum(1 for k in rows_b if k not in rows_a)
    sa = {(c["provider_id"], c["prompt_label"] or ""): s for c, s in zip(cols_a, column_summaries(store, a))}
    sb = {(c["provider_id"], c["prompt_label"] or ""): s for c, s in zip(cols_b, column_summaries(store, b))}
    deltas = []
    for key, s1 in sa.items():
        s2 = sb.get(key)
        if s2 is None:
            continue
        entry = {"column": s1["label"], "passRate": _delta(s1["passRate"], s2["passRate"]),
                 "meanScore": _delta(s1["meanScore"], s2["meanScore"]), "metrics": {}}
        _noise(entry, key, rows_a, rows_b)
        for kind in ("namedMeans", "derived"):
            for name in sorted(set(s1[kind]) | set(s2[kind])):
                entry["metrics"][name] = _delta(s1[kind].get(name), s2[kind].get(name))
        deltas.append(entry)
    doc = {"a": a["id"], "b": b["id"], "flips": flips, "unchanged": unchanged, "onlyInA": only_a,
           "onlyInB": only_b, "columns": deltas,
           "regressions": sum(1 for f in flips if f["kind"] == "regression"),
           "fixes": sum(1 for f in flips if f["kind"] == "fix")}
    if as_json:
        _print_json(doc)
        return
    _render_diff(doc, a, b)


def _noise(entry: dict, column: tuple, rows_a: dict, rows_b: dict) -> None:
    """Add to the pass-rate and mean-score deltas of `entry` their 95% bootstrap interval and
    whether the runs differ beyond noise: paired by test when both runs hold the same rows of
    this column (so each test is compared with itself), else the two runs resampled apart."""
    from factcli import stats

    keys_a = {k for k in rows_a if k[2] == column}
    keys_b = {k for k in rows_b if k[2] == column}
    paired = bool(keys_a) and keys_a == keys_b
    for name, value in (("passRate", lambda r: 1.0 if r["status"] == "PASS" else 0.0),
                        ("meanScore", lambda r: r["score"])):
        if paired:
            pairs: dict = {}
            for k in keys_a:
                x, y = value(rows_a[k]), value(rows_b[k])
                if x is not None and y is not None:
                    pairs.setdefault(k[0], []).append((x, y))
            result = stats.difference(None, None, paired=pairs)
        else:
            sides = []
            for rows, keys in ((rows_a, keys_a), (rows_b, keys_b)):
                side: dict = {}
                for k in keys:
                    if value(rows[k]) is not None:
                        side.setdefault(k[0], []).append(value(rows[k]))
                sides.append(side)
            result = stats.difference(sides[0], sides[1])
        if result is not None:
            entry[name].update({"ci95": result["ci95"], "method": result["method"],
                                "beyondNoise": result["beyondNoise"], "verdict": result["verdict"]})


def _delta(x, y) -> dict:
    return {"a": x, "b": y, "delta": (y - x) if isinstance(x, (int, float)) and isinstance(y, (int, float)) else None}


def _render_diff(doc: dict, a: dict, b: dict) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    console, terminal = console_for_stdout()
    console.print(Text(f"Diff {a['id']} ({shown_status(a)}) → {b['id']} ({shown_status(b)})", style="bold"))
    console.print(Text(f"{len(doc['flips'])} rows flipped ({doc['regressions']} regressions, {doc['fixes']} fixes), "
                       f"{doc['unchanged']} unchanged, {doc['onlyInA']} only in A, {doc['onlyInB']} only in B"))
    styles = {"PASS": "green", "FAIL": "red", "ERROR": "yellow"}
    if doc["flips"]:
        table = Table(box=box.SIMPLE_HEAD if terminal else box.ASCII, expand=False)
        for name in ("test", "column", "A", "B", "score A → B", "reason in B"):
            table.add_column(name, overflow="fold")
        for f in doc["flips"]:
            sc = lambda v: "—" if v is None else f"{v:.2f}"  # noqa: E731
            table.add_row(Text(one_line(f"#{f['testIdxA']} {f['test']}", 60)), Text(f["column"]),
                          Text(f["a"], style=styles[f["a"]]), Text(f["b"], style=styles[f["b"]]),
                          f"{sc(f['scoreA'])} → {sc(f['scoreB'])}", Text(one_line(f["reasonB"], 80)))
        console.print(table)
    if doc["columns"]:
        table = Table(box=box.SIMPLE_HEAD if terminal else box.ASCII, expand=False, title=None)
        for name in ("column", "metric", "A", "B", "Δ", "Δ 95% CI", "noise"):
            table.add_column(name, justify="left" if name in ("column", "metric", "noise") else "right")

        def num(v, pct=False):
            if v is None:
                return "—"
            return f"{v * 100:+.1f}%" if pct == "d" else (f"{v * 100:.1f}%" if pct else f"{v:.3f}")

        for c in doc["columns"]:
            rows = [("pass rate", c["passRate"], True), ("mean score", c["meanScore"], False)]
            rows += [(name, d, False) for name, d in c["metrics"].items()]
            for i, (name, d, pct) in enumerate(rows):
                delta = d["delta"]
                dtext = "—" if delta is None else (f"{delta * 100:+.1f} pts" if pct else f"{delta:+.3f}")
                style = "" if not delta else ("green" if delta > 0 else "red")
                ci = d.get("ci95")
                ci_text = "" if not ci else (f"[{ci[0] * 100:+.1f}, {ci[1] * 100:+.1f}]" if pct
                                             else f"[{ci[0]:+.3f}, {ci[1]:+.3f}]")
                verdict = Text(d["verdict"], style="bold" if d["beyondNoise"] else "dim") if ci else ""
                table.add_row(Text(c["column"]) if i == 0 else "", name, num(d["a"], pct), num(d["b"], pct),
                              Text(dtext, style=style), ci_text, verdict)
        console.print(table)
        console.print(Text("Δ 95% CI: percentile bootstrap over tests (2000 resamples), paired by test when both "
                           "runs hold the same tests; beyond noise when the interval leaves out 0", style="dim"))
