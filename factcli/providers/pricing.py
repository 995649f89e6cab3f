"""Token prices from the table litellm ships inside its package, read without importing litellm.

Nothing is downloaded: the file is litellm's bundled backup copy. A model it does not list has
an unknown cost (None), never 0.
"""

from __future__ import annotations

import json
from functools import lru_cache


@lru_cache(maxsize=1)
def _table() -> dict:
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(list(spec.submodule_search_locations)[0]) / "model_prices_and_context_window_backup.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def cost(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    table = _table()
    # litellm routes "openai/gpt-5-mini" but prices OpenAI's models under their bare names
    entry = table.get(model) or table.get(f"openai/{model}") or table.get(model.removeprefix("openai/"))
    if not isinstance(entry, dict):
        return None
    inp, out = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
    if not isinstance(inp, (int, float)) or not isinstance(out, (int, float)):
        return None
    return prompt_tokens * inp + completion_tokens * out
