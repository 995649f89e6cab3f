"""`factcli diff A B`: two stored runs compared column by column (pass rates, scores, and whether a
difference is more than noise), and the tests whose verdict changed."""

from __future__ import annotations

from factcli.errors import FactcliError
from factcli.report.figures import plural
from factcli.report.labels import column_label, provider_name, short_prompt, test_label
from factcli.report.view import column_summaries, console_for_stdout, one_line, print_json
from factcli.store.database import Store, shown_status
from factcli.scoring.outcome import errored_metrics, has_grader_error
from factcli.store.encode import loads
from factcli.types import grading_from_json, judged, status_word


def pair_columns(cols_a: list[dict], cols_b: list[dict],
                 explicit: list[tuple[int, int]] | None = None) -> list[tuple[dict, dict, list[str]]]:
    """The columns of two runs that compare: (column of A, column of B, what changed). `explicit`
    (`diff --pair`): (column of A, column of B) by index, and only those. Otherwise a column pairs
    with the one of the same provider and prompt label (a label the config gave survives a change of
    the prompt's text); the rest pair by position when both runs have the same layout (as many
    columns, so one edited prompt or one swapped model still compares); what is left compares with
    nothing. `changed` names "prompt" and/or "provider" when they differ within a pair."""
    def key(c):
        return c["provider_id"], c["prompt_label"] or ""

    pairs: dict[int, tuple[dict, dict]] = {}
    used_b: set[int] = set()
    if explicit is not None:
        by_a, by_b = {c["prompt_idx"]: c for c in cols_a}, {c["prompt_idx"]: c for c in cols_b}
        for i, j in explicit:
            for side, idx, cols in (("A", i, by_a), ("B", j, by_b)):
                if idx not in cols:
                    raise FactcliError(f"--pair {i}={j}: run {side} has no column {idx} "
                                       f"(its columns are 0 to {len(cols) - 1})")
            if i in pairs or j in used_b:
                raise FactcliError(f"--pair {i}={j}: a column can be paired once")
            pairs[i] = (by_a[i], by_b[j])
            used_b.add(j)
        cols_a = [c for c in cols_a if c["prompt_idx"] in pairs]
        cols_b = []
    by_key = {}
    for c in cols_b:
        by_key.setdefault(key(c), c)
    for c in cols_a:
        match = by_key.get(key(c))
        if match is not None and match["prompt_idx"] not in used_b:
            pairs[c["prompt_idx"]] = (c, match)
            used_b.add(match["prompt_idx"])
    if len(cols_a) == len(cols_b):
        for ca, cb in zip(cols_a, cols_b):
            if ca["prompt_idx"] not in pairs and cb["prompt_idx"] not in used_b:
                pairs[ca["prompt_idx"]] = (ca, cb)
                used_b.add(cb["prompt_idx"])
    out = []
    for ca in cols_a:
        if ca["prompt_idx"] in pairs:
            ca, cb = pairs[ca["prompt_idx"]]
            changed = []
            if (ca.get("prompt_raw") or ca["prompt_label"]) != (cb.get("prompt_raw") or cb["prompt_label"]):
                changed.append("prompt")
            if ca["provider_id"] != cb["provider_id"] or (ca.get("provider_label") or "") != (cb.get("provider_label") or ""):
                changed.append("provider")
            out.append((ca, cb, changed))
    return out


def _rows_for_diff(store: Store, run: dict, pair_of: dict[int, int]) -> dict:
    """Rows keyed by (test, repeat, column pair, n-th of the same test): a column that pairs with none
    gets a key no row of the other run has."""
    out: dict[tuple, dict] = {}
    seen: dict[tuple, int] = {}
    for r in store.results(run["id"], order="test_idx, prompt_idx, repeat_idx",
                           fields="test_idx, prompt_idx, repeat_idx, test_key, description, success, failure_reason, "
                                  "score, named_scores_json, substr(vars_json, 1, 300) AS vars, "
                                  "substr(error, 1, 300) AS error, "
                                  # a grading is read only when it may hold an assertion not judged
                                  "CASE WHEN grading_json LIKE '%graderError%' THEN grading_json END AS errored, "
                                  f"substr(output, 1, {OUTPUT_CHARS}) AS output"):
        pair = pair_of.get(r["prompt_idx"], (run["id"], r["prompt_idx"]))
        base = (r["test_key"], r["repeat_idx"], pair)
        n = seen.get(base, 0)
        seen[base] = n + 1
        r["status"] = status_word(r["success"], r["failure_reason"])
        r["judged"] = judged(r["failure_reason"])
        _unjudged(r)
        out[base + (n,)] = r
    return out


def _unjudged(r: dict) -> None:
    """The row's figures not judged, as the eval counted them (scoring/outcome.py): `unjudged` the named
    metrics an errored assertion feeds, `scored` whether its score is known (no assertion errored)."""
    errored = r.pop("errored", None)
    grading = grading_from_json(loads(errored, None)) if errored else None
    r["unjudged"] = errored_metrics(grading, lambda metric: metric) if grading is not None else set()
    r["scored"] = r["judged"] and not has_grader_error(grading)


# what the Δ 95% CI column is, under diff's tables and the web view's Compare page
NOISE_LEGEND = ("Δ 95% CI: Newcombe's hybrid score interval for pass rates and 0/1 scores, percentile bootstrap over "
                "tests (2000 resamples) for other scores; paired by row when both runs hold the same rows; "
                "noise: beyond when the interval leaves out 0, else within")

OUTPUT_CHARS = 2000  # of each output a flipped row shows side by side


def parse_pairs(given: list[str]) -> list[tuple[int, int]] | None:
    """`--pair 0=1` values as (column of A, column of B); None when none was given."""
    if not given:
        return None
    out = []
    for text in given:
        a, sep, b = text.partition("=")
        if not sep or not a.strip().isdigit() or not b.strip().isdigit():
            raise FactcliError(f"--pair {text}: expected A=B, two column indices (e.g. --pair 0=1)")
        out.append((int(a), int(b)))
    return out


class Unrelated(FactcliError):
    """Two runs that share nothing compared without --force or --pair."""

    exit_code = 1


UNRELATED = ("share nothing: no config file, prompt, test or provider in common, so no row matches and columns "
             "could pair only by position")


def diff_runs(store: Store, a: dict, b: dict, as_json: bool, *, force: bool = False,
              pairs: list[tuple[int, int]] | None = None) -> tuple[list[str], list[str]]:
    """`factcli diff`: the figures of `diff_doc`, printed as JSON or as tables. Runs that share
    nothing are refused unless `force` or explicit `pairs` say the comparison is meant. Returns the
    regressions beyond noise (`--fail-on-regression` fails on any) and what was not judged on either
    side (`--fail-on-regression` exits 4 on any, unless --allow-partial)."""
    doc = with_not_judged(diff_doc(store, a, b, pairs))
    if doc["unrelated"] and not force and pairs is None:
        raise Unrelated(f"{a['id']} and {b['id']} {UNRELATED}. Compare them anyway with --force, or pair "
                        "columns yourself with --pair A=B (column indices from 0, in the order `factcli show RUN` lists the columns)")
    if as_json:
        print_json(doc)
    else:
        _render_diff(doc, a, b, pairs is not None)
    return regressions(doc), doc["notJudged"]


def regressions(doc: dict) -> list[str]:
    """One line per figure of a column that dropped from A to B beyond noise (its 95% interval of the
    difference leaves out 0): the pass rate, the mean score, a named metric."""
    out = []
    for c in doc["columns"]:
        figures = [("pass rate", c["passRate"], True), ("mean score", c["meanScore"], False)]
        figures += [(name, d, False) for name, d in c["metrics"].items()]
        for name, d, pct in figures:
            if d.get("beyondNoise") and isinstance(d.get("delta"), (int, float)) and d["delta"] < 0:
                ci = d["ci95"]
                shown = (f"{d['delta'] * 100:+.1f} pts [{ci[0] * 100:+.1f}, {ci[1] * 100:+.1f}]" if pct
                         else f"{d['delta']:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]")
                out.append(f"{c['column']}: {name} dropped {shown}, beyond noise")
    return out


def _pair_label(ca: dict, cb: dict, changed: list[str]) -> str:
    """A pair of columns is named after A's column; `changes_line` says what B changed."""
    return column_label(ca)


def shared(a: dict, b: dict, cols_a: list[dict], cols_b: list[dict], rows_a: dict, rows_b: dict) -> dict:
    """What two runs have in common: a config file, a prompt (its text), a test (description and
    vars), a provider (id). None of the four: the runs are unrelated."""
    from factcli.store.encode import loads

    files_a, files_b = (set(loads(r.get("config_files_json"), []) or []) for r in (a, b))
    prompts_a, prompts_b = ({c.get("prompt_raw") or c["prompt_label"] for c in cols} for cols in (cols_a, cols_b))
    tests_a, tests_b = ({k[0] for k in rows} for rows in (rows_a, rows_b))
    return {"config": bool(files_a & files_b), "prompts": bool(prompts_a & prompts_b),
            "tests": bool(tests_a & tests_b),
            "providers": bool({c["provider_id"] for c in cols_a} & {c["provider_id"] for c in cols_b})}


def diff_doc(store: Store, a: dict, b: dict, explicit: list[tuple[int, int]] | None = None) -> dict:
    """Two runs compared, without printing (the web view's Compare page shows the same figures):
    what they share, flipped rows, per-column deltas of pass rate, mean score and metrics with their
    95% intervals."""
    cols_a, cols_b = store.columns(a["id"]), store.columns(b["id"])
    pairs = pair_columns(cols_a, cols_b, explicit)
    pair_a = {ca["prompt_idx"]: i for i, (ca, _, _) in enumerate(pairs)}
    pair_b = {cb["prompt_idx"]: i for i, (_, cb, _) in enumerate(pairs)}
    rows_a = _rows_for_diff(store, a, pair_a)
    rows_b = _rows_for_diff(store, b, pair_b)
    labels = [_pair_label(ca, cb, changed) for ca, cb, changed in pairs]
    flips, unchanged = [], 0
    for key, ra in rows_a.items():
        rb = rows_b.get(key)
        if rb is None:
            continue
        if ra["status"] == rb["status"]:
            unchanged += 1
            continue
        label = test_label(ra["description"], None, 80) or one_line(ra["vars"], 80)  # (vars: cut JSON text)
        flips.append({"testIdxA": ra["test_idx"], "testIdxB": rb["test_idx"], "test": label,
                      "promptIdxA": ra["prompt_idx"], "promptIdxB": rb["prompt_idx"], "repeatIdx": ra["repeat_idx"],
                      "column": labels[key[2]], "a": ra["status"], "b": rb["status"],
                      "scoreA": ra["score"], "scoreB": rb["score"],
                      "reasonA": ra["error"] if ra["status"] != "PASS" else None,
                      "reasonB": rb["error"] if rb["status"] != "PASS" else None,
                      "outputA": ra["output"], "outputB": rb["output"],
                      "kind": _flip_kind(ra, rb)})
    only_a = sum(1 for k in rows_a if k not in rows_b)
    only_b = sum(1 for k in rows_b if k not in rows_a)
    sa = {c["prompt_idx"]: s for c, s in zip(cols_a, column_summaries(store, a))}
    sb = {c["prompt_idx"]: s for c, s in zip(cols_b, column_summaries(store, b))}
    deltas = []
    for i, (ca, cb, changed) in enumerate(pairs):
        s1, s2 = sa[ca["prompt_idx"]], sb[cb["prompt_idx"]]
        entry = {"column": labels[i], "columnA": column_label(ca), "columnB": column_label(cb), "changed": changed,
                 "promptA": short_prompt(ca["prompt_label"], ca.get("prompt_raw"), 100),
                 "promptB": short_prompt(cb["prompt_label"], cb.get("prompt_raw"), 100),
                 "providerA": provider_name(ca), "providerB": provider_name(cb),
                 "passRate": _delta(s1["passRate"], s2["passRate"]),
                 "meanScore": _delta(s1["meanScore"], s2["meanScore"]), "metrics": {}}
        for kind in ("namedMeans", "derived"):
            for name in sorted(set(s1[kind]) | set(s2[kind])):
                entry["metrics"][name] = _delta(s1[kind].get(name), s2[kind].get(name))
        named = [n for n in entry["metrics"] if n in s1["namedMeans"] or n in s2["namedMeans"]]
        _noise(entry, i, rows_a, rows_b, [n for n in entry["metrics"] if n in s1["namedMeans"]])
        entry["notJudged"] = {"a": _side_gaps(rows_a, i, named), "b": _side_gaps(rows_b, i, named)}
        corrected_a = {e["assertion"]: e for e in s1.get("judgeCorrected") or []}
        corrected_b = {e["assertion"]: e for e in s2.get("judgeCorrected") or []}
        entry["judgeCorrected"] = {name: _delta(corrected_a[name].get("correctedPassRate"),
                                                corrected_b[name].get("correctedPassRate"))
                                   for name in sorted(set(corrected_a) & set(corrected_b))}
        deltas.append(entry)
    paired_a = {ca["prompt_idx"] for ca, _, _ in pairs}
    paired_b = {cb["prompt_idx"] for _, cb, _ in pairs}
    common = shared(a, b, cols_a, cols_b, rows_a, rows_b)
    doc = {"a": a["id"], "b": b["id"], "shared": common, "unrelated": not any(common.values()), "flips": flips, "unchanged": unchanged, "onlyInA": only_a,
           "onlyInB": only_b, "columns": deltas,
           "unpairedA": [column_label(c) for c in cols_a if c["prompt_idx"] not in paired_a],
           "unpairedB": [column_label(c) for c in cols_b if c["prompt_idx"] not in paired_b],
           "regressions": sum(1 for f in flips if f["kind"] == "regression"),
           "fixes": sum(1 for f in flips if f["kind"] == "fix")}
    from factcli.report.judge_diff import judge_doc

    judges = judge_doc(store, a, b, pairs)  # two calibrations: the judges' balanced accuracy, paired by row
    if judges is not None:
        doc["judges"] = judges
    return doc


def with_not_judged(doc: dict) -> dict:
    """`doc` with what neither side judged: the flips not judged counted, and one line per column and side
    whose compared figures have rows not judged (not_judged_lines)."""
    doc["notJudgedFlips"] = sum(1 for f in doc["flips"] if f["kind"] == "not-judged")
    doc["notJudged"] = not_judged_lines(doc)
    return doc


def _flip_kind(ra: dict, rb: dict) -> str:
    """A row the judge could not judge on either side has no verdict to compare: neither a regression nor
    a fix."""
    if not (ra["judged"] and rb["judged"]):
        return "not-judged"
    return "regression" if ra["status"] == "PASS" else ("fix" if rb["status"] == "PASS" else "change")


def _side_gaps(rows: dict, column: int, metrics: list[str]) -> dict:  # {"rows": n, "figures": {figure: n}}
    """figure -> rows of one side's column not judged on it: the pass rate's, the score's, each metric's."""
    mine = [r for k, r in rows.items() if k[2] == column]
    out = {"passRate": sum(1 for r in mine if not r["judged"]),
           "meanScore": sum(1 for r in mine if not r["scored"])}
    for name in metrics:
        out[name] = sum(1 for r in mine if name in r["unjudged"])
    return {"rows": len(mine), "figures": {k: v for k, v in out.items() if v}}


def not_judged_lines(doc: dict) -> list[str]:
    """One line per column and side whose compared figures have rows not judged: what is missing (diff
    --fail-on-regression exits 4 on any, unless --allow-partial)."""
    names = {"passRate": "pass rate", "meanScore": "mean score"}
    out = []
    for c in doc["columns"]:
        for side in ("a", "b"):
            gaps, rows = c["notJudged"][side]["figures"], c["notJudged"][side]["rows"]
            if gaps:
                what = ", ".join(f"{names.get(k, k)} on {v} of {rows} rows" for k, v in gaps.items())
                out.append(f"{c['column']}: run {side.upper()} ({doc[side]}) was not judged for {what}")
    return out


def changes_line(c: dict) -> str | None:
    """What differs between a pair of columns, e.g. `prompt changed: "Q: {{q}}" → "Q: {{q}} Be brief."`."""
    parts = []
    if "prompt" in c.get("changed", ()):
        parts.append(f'prompt changed: "{c["promptA"]}" → "{c["promptB"]}"')
    if "provider" in c.get("changed", ()):
        parts.append(f"provider changed: {c['providerA']} → {c['providerB']}")
    return "; ".join(parts) or None


def _named(r: dict, name: str):
    if "named" not in r:
        r["named"] = loads(r.get("named_scores_json"), {}) or {}
    value = r["named"].get(name) if name not in r["unjudged"] else None
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _noise(entry: dict, column: tuple, rows_a: dict, rows_b: dict, metrics: list[str] = ()) -> None:
    """Add to the pass-rate, mean-score and named metrics' deltas of `entry` their 95% interval and
    whether the runs differ beyond noise. A difference of proportions (the pass rate; a mean when every
    value of both runs is 0 or 1) takes Newcombe's hybrid score interval, paired by row when both runs
    hold the same rows of this column, else for two independent samples; other means a bootstrap
    over tests, paired likewise. A row not judged has no verdict and no score: it is left out. Rows
    pair only when every row with a value in one run has one in the other: a row judged in A alone
    counts in A's figure, so an interval over the rows judged in both would sit around another Δ
    (−0.004 outside [+0.000, +0.000] when the shared rows agree)."""
    from factcli import stats

    keys_a = {k for k in rows_a if k[2] == column}
    keys_b = {k for k in rows_b if k[2] == column}
    paired = bool(keys_a) and keys_a == keys_b
    figures = [("passRate", lambda r: (1.0 if r["status"] == "PASS" else 0.0) if r["judged"] else None),
               ("meanScore", lambda r: r["score"] if r["scored"] else None)]
    figures += [(name, lambda r, name=name: _named(r, name)) for name in metrics]
    for name, value in figures:
        target = entry[name] if name in ("passRate", "meanScore") else entry["metrics"][name]
        values_a = [(k, value(rows_a[k])) for k in keys_a if value(rows_a[k]) is not None]
        values_b = [(k, value(rows_b[k])) for k in keys_b if value(rows_b[k]) is not None]
        binary = all(v in (0, 1) for _, v in values_a + values_b)
        both = dict(values_b)
        same_rows = paired and both.keys() == {k for k, _ in values_a}
        if binary and same_rows:
            result = stats.newcombe_paired([(x, both[k]) for k, x in values_a])
        elif binary:
            result = stats.newcombe_difference(sum(v for _, v in values_a), len(values_a),
                                               sum(v for _, v in values_b), len(values_b))
        elif same_rows:
            pairs: dict = {}
            for k, x in values_a:
                pairs.setdefault(k[0], []).append((x, both[k]))
            result = stats.difference(None, None, paired=pairs)
        else:
            sides = []
            for values in (values_a, values_b):
                side: dict = {}
                for k, v in values:
                    side.setdefault(k[0], []).append(v)
                sides.append(side)
            result = stats.difference(sides[0], sides[1])
        if result is not None:
            target.update({"ci95": result["ci95"], "method": result["method"],
                           "beyondNoise": result["beyondNoise"], "verdict": result["verdict"]})


def _delta(x, y) -> dict:
    return {"a": x, "b": y, "delta": (y - x) if isinstance(x, (int, float)) and isinstance(y, (int, float)) else None}



def _render_diff(doc: dict, a: dict, b: dict, paired_by_hand: bool = False) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    console, terminal = console_for_stdout()
    console.print(Text(f"Diff {a['id']} ({shown_status(a)}) → {b['id']} ({shown_status(b)})", style="bold"),
                  soft_wrap=True)  # two run ids that a line break would cut
    if doc["unrelated"]:
        how = "columns paired with --pair" if paired_by_hand else "compared anyway (--force)"
        console.print(Text(f"These runs {UNRELATED.split(', so ')[0]}: "
                           f"{how}; no row matches, so nothing can flip and every difference is between different "
                           "tests", style="yellow"), soft_wrap=True)
    unjudged = f", {doc['notJudgedFlips']} not judged" if doc.get("notJudgedFlips") else ""
    console.print(Text(f"{plural(len(doc['flips']), 'row')} flipped ({plural(doc['regressions'], 'regression')}, "
                       f"{plural(doc['fixes'], 'fix', 'fixes')}{unjudged}), "
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
        def num(v, pct=False):
            if v is None:
                return "—"
            return f"{v * 100:.1f}%" if pct else f"{v:.3f}"

        # one table per column of the runs, under its label: the numbers never wrap, only metric names
        for c in doc["columns"]:
            console.print(Text(c["column"], style="bold"))
            if c.get("changed"):
                console.print(Text(changes_line(c), style="yellow"), soft_wrap=True)  # whole, to be read or copied
            table = Table(box=box.SIMPLE_HEAD if terminal else box.ASCII, expand=False)
            table.add_column("metric", overflow="fold", ratio=1)
            for name in ("A", "B", "Δ", "Δ 95% CI", "noise"):
                table.add_column(name, justify="left" if name == "noise" else "right", no_wrap=True)
            rows = [("pass rate", c["passRate"], True), ("mean score", c["meanScore"], False)]
            rows += [(name, d, False) for name, d in c["metrics"].items()]
            rows += [(f"{name} (corrected for the judge)", d, True) for name, d in c.get("judgeCorrected", {}).items()]
            for name, d, pct in rows:
                delta = d["delta"]
                dtext = "—" if delta is None else (f"{delta * 100:+.1f} pts" if pct else f"{delta:+.3f}")
                style = "" if not delta else ("green" if delta > 0 else "red")
                ci = d.get("ci95")
                ci_text = "" if not ci else (f"[{ci[0] * 100:+.1f}, {ci[1] * 100:+.1f}]" if pct
                                             else f"[{ci[0]:+.3f}, {ci[1]:+.3f}]")
                verdict = Text(d["verdict"].removesuffix(" noise"), style="bold" if d["beyondNoise"] else "dim") \
                    if ci else ""
                table.add_row(name, num(d["a"], pct), num(d["b"], pct), Text(dtext, style=style), ci_text, verdict)
            console.print(table)
        console.print(Text(NOISE_LEGEND, style="dim"))
    for line in doc.get("notJudged") or ():
        console.print(Text(f"Not judged: {line}", style="yellow"), soft_wrap=True)
    for side, names in (("A", doc.get("unpairedA")), ("B", doc.get("unpairedB"))):
        if names:
            console.print(Text(f"Only in {side} (no column of the other run to compare with): "
                           + "; ".join(names), style="dim"))
    if doc.get("judges"):
        from factcli.report.judge_diff import render

        render(console, doc["judges"], a["id"], b["id"])
