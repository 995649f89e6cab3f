"""Values crossing into and out of user code (Python and JavaScript alike): what a function
receives (a JSON copy, as promptfoo's subprocesses get), and promptfoo's GradingResult shape in
what it returns."""

from __future__ import annotations

import json
from typing import Any

from factcli.types import TokenUsage, cache_write_of


def plain(value: Any) -> Any:
    """A JSON copy: what promptfoo's subprocesses receive, and safe from user mutation."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=_json_default))


def _json_default(value: Any) -> Any:
    if isinstance(value, TokenUsage):
        return value.to_json()
    if isinstance(value, (set, tuple)):
        return list(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def is_grading_result(r: Any) -> bool:
    """promptfoo's isGradingResult on a JSON value (JS null is an object; a missing key is undefined)."""
    if not isinstance(r, dict):
        return False
    if not (isinstance(r.get("pass"), bool) and is_number(r.get("score")) and isinstance(r.get("reason"), str)):
        return False
    for key in ("namedScores", "namedScoreWeights", "tokensUsed", "assertion"):
        if key in r and not (r[key] is None or isinstance(r[key], (dict, list))):
            return False
    if "componentResults" in r and not isinstance(r["componentResults"], list):
        return False
    if "comment" in r and not isinstance(r["comment"], str):
        return False
    return True


def numbers_of(d: Any) -> dict:
    if not isinstance(d, dict):
        return {}
    return {str(k): float(v) for k, v in d.items() if is_number(v)}


def tokens_of(d: Any) -> TokenUsage:
    if not isinstance(d, dict):
        return TokenUsage()
    def n(key: str) -> int:
        v = d.get(key)
        return int(v) if is_number(v) and v == v else 0
    return TokenUsage(prompt=n("prompt"), completion=n("completion"), total=n("total"), cached=n("cached"),
                      num_requests=n("numRequests"), cache_write=cache_write_of(d))
