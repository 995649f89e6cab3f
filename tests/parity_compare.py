"""Compare two promptfoo-layout results documents on what must agree (promptfoo-semantics §12.5)."""

from __future__ import annotations


def _round(value, places: int = 10):
    if isinstance(value, float):
        return round(value, places)
    if isinstance(value, dict):
        return {k: _round(v, places) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_round(v, places) for v in value]
    return value


def _component(c: dict) -> dict:
    out = {"pass": c["pass"], "score": c["score"], "reason": c["reason"]}
    assertion = c.get("assertion")
    out["type"] = assertion.get("type") if assertion else "assert-set"
    return out


def row_key(row: dict) -> tuple:
    return row["testIdx"], row["promptIdx"]


def row_view(row: dict, with_reasons: bool = True, with_components: bool = True) -> dict:
    out = {
        "success": row["success"],
        "score": row["score"],
        "namedScores": row.get("namedScores") or {},
        "failureReason": row["failureReason"],
        "output": (row.get("response") or {}).get("output"),
    }
    grading = row.get("gradingResult") or {}
    if with_reasons:
        out["reason"] = grading.get("reason")
    if with_components:
        out["components"] = [_component(c) for c in grading.get("componentResults") or []]
    return _round(out)


METRIC_KEYS = ("score", "testPassCount", "testFailCount", "testErrorCount", "assertPassCount",
               "assertFailCount", "namedScores", "namedScoresCount", "namedScoreWeights")


def column_view(prompt: dict) -> dict:
    m = prompt["metrics"]
    return _round({k: m.get(k) for k in METRIC_KEYS})


def differences(ours: dict, golden: dict, **row_options) -> list[str]:
    """Human-readable list of every difference; empty when the runs agree."""
    diffs = []
    a = {row_key(r): r for r in ours["results"]["results"]}
    b = {row_key(r): r for r in golden["results"]["results"]}
    if set(a) != set(b):
        diffs.append(f"row keys differ: only ours {sorted(set(a) - set(b))}, only golden {sorted(set(b) - set(a))}")
    for key in sorted(set(a) & set(b)):
        va, vb = row_view(a[key], **row_options), row_view(b[key], **row_options)
        if va != vb:
            diffs.append(f"row {key}: ours {va} != golden {vb}")
    pa, pb = ours["results"]["prompts"], golden["results"]["prompts"]
    if len(pa) != len(pb):
        diffs.append(f"{len(pa)} columns vs {len(pb)}")
    for j, (ca, cb) in enumerate(zip(pa, pb)):
        if ca["provider"] != cb["provider"]:
            diffs.append(f"column {j} provider: {ca['provider']} != {cb['provider']}")
        va, vb = column_view(ca), column_view(cb)
        if va != vb:
            diffs.append(f"column {j} metrics: ours {va} != golden {vb}")
    return diffs
