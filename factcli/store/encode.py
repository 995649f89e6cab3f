"""JSON as the store and the results files write it: NaN and infinities become null (contract §6),
and stored JSON text is read back leniently."""

from __future__ import annotations

import json
import math
from typing import Any


def clean(value: Any) -> Any:
    """NaN and infinities become null (contract §6)."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


def finite(doc: Any) -> Any:
    """`doc` with NaN/±Infinity as None; a C-speed check first, the walk only when needed."""
    import json

    try:
        json.dumps(doc, allow_nan=False, default=str)
        return doc
    except ValueError:
        return clean(doc)


def dumps_finite(value: Any, indent: int | None = None) -> str:
    """json.dumps(finite(value)), encoding once when nothing is NaN or infinite."""
    import json

    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, default=str, indent=indent)
    except ValueError:
        return json.dumps(clean(value), ensure_ascii=False, default=str, indent=indent)


def loads(text: str | None, default: Any = None) -> Any:
    if text is None or text == "":
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default
