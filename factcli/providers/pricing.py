"""Token prices: by hand in a provider's config (promptfoo's `cost`, `inputCost`, `outputCost`, USD
per token), else from the table litellm ships inside its package, read without importing litellm.

Nothing is downloaded: the file is litellm's bundled backup copy. Every provider spelling factcli
accepts resolves to that table's entry when one exists: `anthropic:messages:claude-sonnet-4-5`,
`bedrock:anthropic.claude-…-v1:0`, `vertex:claude-…@2025…`, `azure:chat:DEPLOYMENT` (its model from
`config.base_model`, else the deployment's own name), dated and undated names alike, and a model
the table lists only under another host (claude-3-5-haiku-20241022 is listed under Bedrock and
Vertex, not Anthropic). A local model (Ollama, a server on this machine or a private network)
costs nothing unless its config sets a price. A model with no price at all has an unknown cost
(None), never 0.
"""

from __future__ import annotations

import ipaddress
import json
import re
from functools import lru_cache
from typing import NamedTuple
from urllib.parse import urlparse

CONFIG_KEYS = ("cost", "inputCost", "outputCost", "batchInputCost", "batchOutputCost")
_DATE = re.compile(r"(?:-|@)(\d{8}|\d{4}-\d{2}-\d{2}|latest)$")
_VERSION = re.compile(r"-v\d+(?::\d+)?$")
_REGION = re.compile(r"^(?:us|eu|apac|au|jp|global|us-gov)\.")


class Price(NamedTuple):
    """A model's price per token. A named tuple rather than a frozen dataclass: its class is made ~5x
    faster, on the start of every eval (issue 30)."""

    input: float  # USD per token
    output: float
    max_output: int | None  # the model's own reply limit, when the table knows it
    source: str  # where the price came from, for messages: "config", "local", or the table's key
    batch_input: float | None = None  # USD per token through the vendor's batch API (litellm's `_batches`)
    batch_output: float | None = None

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return prompt_tokens * self.input + completion_tokens * self.output

    def cost_of(self, usage, batch: bool = False) -> float:
        """What a call's `usage` (types.TokenUsage) cost; `batch`: answered through a batch API, billed at
        the table's batch prices, else half the direct ones (OpenAI's and Anthropic's batch discount)."""
        inp, out = self.input, self.output
        if batch:
            inp = self.batch_input if self.batch_input is not None else inp / 2
            out = self.batch_output if self.batch_output is not None else out / 2
        return usage.prompt * inp + usage.completion * out


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


def _priced(entry) -> bool:
    return isinstance(entry, dict) and all(
        isinstance(entry.get(k), (int, float)) and not isinstance(entry.get(k), bool)
        for k in ("input_cost_per_token", "output_cost_per_token"))


def _core(name: str) -> str:
    """A model's name without its host's spelling: no vendor path, region, `anthropic.` family
    prefix, `-v1:0` version suffix, nor a date (`-20241022`, `@20241022`)."""
    name = name.rsplit("/", 1)[-1]
    name = _REGION.sub("", name)
    name = name.removeprefix("anthropic.")
    name = _VERSION.sub("", name)
    return _DATE.sub("", name)


@lru_cache(maxsize=1)
def _by_core() -> dict[str, list[str]]:
    index: dict[str, list[str]] = {}
    for key, entry in _table().items():
        if _priced(entry):
            index.setdefault(_core(key), []).append(key)
    return index


@lru_cache(maxsize=2048)
def table_key(model: str) -> str | None:
    """The key of `model`'s entry in litellm's table (a litellm model id or a bare name), or None."""
    if not model:
        return None
    table = _table()
    vendor, _, bare = model.partition("/") if "/" in model else ("", "", model)
    tries = [model, bare, f"openai/{model}", model.replace(":", "/", 1)]
    undated = _DATE.sub("", bare)
    if undated != bare:  # dated: the undated name, priced the same
        tries += [undated, f"{vendor}/{undated}" if vendor else undated]
    for key in tries:
        if _priced(table.get(key)):
            return key
    # the same model under another spelling or host: prefer the same vendor, then the dearest
    # (a budget then over-counts rather than under-counts)
    keys = _by_core().get(_core(bare))
    if not keys:
        return None
    family = {"anthropic": "anthropic", "vertex_ai": "vertex_ai", "bedrock": "bedrock", "azure": "azure",
              "gemini": "gemini"}.get(vendor)
    same = [k for k in keys if family and str(table[k].get("litellm_provider", "")).startswith(family)]
    plain = [k for k in keys if "/" not in k and not _REGION.match(k)]  # no region or host path
    pool = same or plain or keys
    return max(pool, key=lambda k: (table[k]["input_cost_per_token"] + table[k]["output_cost_per_token"], k))


def table_price(model: str) -> Price | None:
    key = table_key(model)
    if key is None:
        return None
    entry = _table()[key]
    limit = entry.get("max_output_tokens") or entry.get("max_tokens")
    def batched(name: str) -> float | None:
        value = entry.get(name)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    return Price(float(entry["input_cost_per_token"]), float(entry["output_cost_per_token"]),
                 int(limit) if isinstance(limit, (int, float)) and limit > 0 else None, key,
                 batched("input_cost_per_token_batches"), batched("output_cost_per_token_batches"))


def output_limit(model: str | None) -> int | None:
    price = table_price(model) if model else None
    return price.max_output if price else None


def config_price(config: dict) -> Price | None:
    """promptfoo's keys: `cost` for both directions, `inputCost`/`outputCost` each (USD per token)."""
    def number(key):
        value = config.get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None

    both = number("cost")
    inp = number("inputCost") if number("inputCost") is not None else both
    out = number("outputCost") if number("outputCost") is not None else both
    if inp is None and out is None:
        return None
    return Price(inp or 0.0, out or 0.0, None, "config", number("batchInputCost"), number("batchOutputCost"))


def is_local_url(url: str | None) -> bool:
    """A server on this machine or a private network (Ollama, vLLM, llama.cpp): no bill."""
    if not url:
        return False
    host = urlparse(url if "//" in url else f"http://{url}").hostname or ""
    if host in ("localhost", "host.docker.internal") or host.endswith((".local", ".localhost", ".internal")):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private or ip.is_link_local


def price_of(provider) -> Price | None:
    """A provider's price per token: its config's, else nothing for a free or local one, else the
    table's for its model; None when none is known."""
    config = getattr(provider, "config", None) or {}
    by_hand = config_price(config)
    model = getattr(provider, "price_model", None)
    limit = output_limit(model)
    if by_hand is not None:
        return by_hand._replace(max_output=limit)
    if getattr(provider, "free", False):
        return Price(0.0, 0.0, limit, "local")
    if getattr(provider, "local", False):
        # a model only OpenAI serves, sent to a local address, goes through a gateway that bills
        key = table_key(model) if model else None
        if key is not None and _table()[key].get("litellm_provider") == "openai" and key in (model, f"openai/{model}"):
            return table_price(model)
        return Price(0.0, 0.0, limit, "local")
    return table_price(model) if model else None


def cost(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """What a call to `model` (litellm's id or a bare name) cost by the table, or None."""
    price = table_price(model)
    return None if price is None else price.cost(prompt_tokens, completion_tokens)


def model_name_problem(provider) -> str | None:
    """`litellm's model list has no 'gpt-4o-mni' (did you mean 'gpt-4o-mini'?)` for a vendor's model
    the table does not list but lists one close to; None otherwise (a local or custom model too)."""
    import difflib

    model = getattr(provider, "price_model", None)
    if not model or getattr(provider, "free", False) or getattr(provider, "local", False) or table_key(model):
        return None
    vendor, _, bare = model.partition("/") if "/" in model else ("openai", "", model)
    table = _table()
    names = [k.split("/", 1)[1] if k.startswith(f"{vendor}/") else k for k, v in table.items()
             if isinstance(v, dict) and str(v.get("litellm_provider", "")) == vendor
             and v.get("mode") in ("chat", "completion", "responses")]
    close = difflib.get_close_matches(bare, names, n=1, cutoff=0.85)
    if not close:
        return None
    return (f"litellm's model list has no '{bare}' (did you mean '{close[0]}'?); a model newer than the list "
            "is fine, a typo fails at its first call")
