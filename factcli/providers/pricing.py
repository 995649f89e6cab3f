"""Token prices: by hand in a provider's config (promptfoo's `cost`, `inputCost`, `outputCost`, and
factcli's `cacheReadCost`, `cacheWriteCost`, `batchInputCost`, `batchOutputCost`, USD per token), else
from the table litellm ships inside its package, read without importing litellm.

One rule prices every call, reply, estimate and budget: Price.cost_of(usage, batch). litellm's own
cost figure is not used (it cannot be reproduced before a call, by --dry-run or --max-cost, and
knows neither the config's prices nor the batch price), so a call costs the same wherever it is
counted. docs/costs.md says it for users.

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

CONFIG_KEYS = ("cost", "inputCost", "outputCost", "cacheReadCost", "cacheWriteCost", "batchInputCost",
               "batchOutputCost")
# the table's fields for the prices beyond input and output, in Price's order
_EXTRA_FIELDS = ("cache_read_input_token_cost", "cache_creation_input_token_cost", "input_cost_per_token_batches",
                 "output_cost_per_token_batches")
_EXTRA_KEYS = ("cacheReadCost", "cacheWriteCost", "batchInputCost", "batchOutputCost")
_DATE = re.compile(r"(?:-|@)(\d{8}|\d{4}-\d{2}-\d{2}|latest)$")
_VERSION = re.compile(r"-v\d+(?::\d+)?$")
_REGION = re.compile(r"^(?:us|eu|apac|au|jp|global|us-gov)\.")


class Price(NamedTuple):
    """A model's price per token. A named tuple rather than a frozen dataclass: its class is made ~5x
    faster, on the start of every eval (issue 30).

    A price beyond input and output that is unknown (None) takes its documented fallback: a cache
    read or write at the input price (no discount, no surcharge assumed), a batch call at the full
    price. A batch's discount applies to cache reads and writes too (the vendors stack them: a
    batched cache read is the cache price times the batch's input ratio)."""

    input: float  # USD per token
    output: float
    max_output: int | None  # the model's own reply limit, when the table knows it
    source: str  # where the price came from, for messages: "config", "local", or the table's key
    cache_read: float | None = None  # an input token read from the provider's prompt cache
    cache_write: float | None = None  # an input token written to it (Anthropic's 5-minute cache_control)
    batch_input: float | None = None  # an input token of a batch API's call
    batch_output: float | None = None

    def cost_of(self, usage, batch: bool = False) -> float:
        """What a call with these tokens (a TokenUsage: `prompt` all input tokens, cache reads
        `cached` and cache writes `cache_write` among them) costs; batch: at the batch price."""
        return self._cost(usage.prompt, usage.cached, usage.cache_write, usage.completion, batch)

    def cost(self, prompt_tokens: int, completion_tokens: int, batch: bool = False) -> float:
        """cost_of for a call with no cache read or write."""
        return self._cost(prompt_tokens, 0, 0, completion_tokens, batch)

    def _cost(self, prompt: int, cached: int, written: int, completion: int, batch: bool) -> float:
        inp, out, read, write = self.input, self.output, self.cache_read, self.cache_write
        read = inp if read is None else read
        write = inp if write is None else write
        if batch:
            ratio = (self.batch_input / inp if self.batch_input is not None and inp else 1.0)
            inp = inp if self.batch_input is None else self.batch_input
            out = out if self.batch_output is None else self.batch_output
            read, write = read * ratio, write * ratio
        # a reply that says more was read or written than sent (a server's own count): the rest is 0
        fresh = max(prompt - cached - written, 0)
        return fresh * inp + cached * read + written * write + completion * out

    def worst_input(self, batch: bool = False) -> float:
        """The most an input token can cost: a call may write all it sends to the cache."""
        return self._cost(1, 0, 0, 0, batch) if (self.cache_write or 0) <= self.input else \
            self._cost(1, 0, 1, 0, batch)


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
    return Price(float(entry["input_cost_per_token"]), float(entry["output_cost_per_token"]),
                 int(limit) if isinstance(limit, (int, float)) and limit > 0 else None, key,
                 *(_number(entry.get(f)) for f in _EXTRA_FIELDS))


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


def output_limit(model: str | None) -> int | None:
    price = table_price(model) if model else None
    return price.max_output if price else None


def config_price(config: dict) -> Price | None:
    """promptfoo's keys: `cost` for both directions, `inputCost`/`outputCost` each (USD per token);
    None when the config gives none of them (factcli's own keys then amend another price: price_of)."""
    both = _number(config.get("cost"))
    inp = _number(config.get("inputCost")) if _number(config.get("inputCost")) is not None else both
    out = _number(config.get("outputCost")) if _number(config.get("outputCost")) is not None else both
    if inp is None and out is None:
        return None
    return Price(inp or 0.0, out or 0.0, None, "config")


def _amended(price: Price, config: dict, table: Price | None) -> Price:
    """`price` with the config's cacheReadCost, cacheWriteCost, batchInputCost and batchOutputCost.
    A price by hand (source "config") keeps, for each of them the config does not give, the table's
    proportion to the input (or output) price: a cache read at 0.1x input stays 0.1x of the price by
    hand; else it is unknown (Price's fallback)."""
    extra = list(price[4:])
    if price.source == "config":
        extra = [None] * 4
        if table is not None:
            for i, (value, base, own) in enumerate(zip(table[4:], (table.input,) * 3 + (table.output,),
                                                       (price.input,) * 3 + (price.output,))):
                if value is not None:
                    extra[i] = value * own / base if base else value
    for i, key in enumerate(_EXTRA_KEYS):
        if _number(config.get(key)) is not None:
            extra[i] = _number(config.get(key))
    return price._replace(cache_read=extra[0], cache_write=extra[1], batch_input=extra[2], batch_output=extra[3])


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
    table's for its model; None when none is known. The config's cache and batch prices amend it."""
    config = getattr(provider, "config", None) or {}
    price = _base_price(provider, config)
    if price is None or not any(k in config for k in CONFIG_KEYS):
        return price
    model = getattr(provider, "price_model", None)
    return _amended(price, config, table_price(model) if model and price.source == "config" else None)


def _base_price(provider, config: dict) -> Price | None:
    by_hand = config_price(config)
    model = getattr(provider, "price_model", None)
    limit = output_limit(model)
    if by_hand is not None:
        return Price(by_hand.input, by_hand.output, limit, "config")
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


def bill(provider, resp, batch: bool = False, known: bool = True) -> None:
    """Price a reply by the one rule: resp.cost from its tokens at the provider's price (None when
    the price, or the tokens, are unknown). A reply of a batch API (batch=True) is billed at the
    batch price and marked: metadata `batch: True`, and `batchSaved`, what the same tokens cost at
    the full price less what they cost batched (the run's summary adds them up)."""
    price = price_of(provider)
    if price is None or (not known and (price.input or price.output)):  # a free model costs 0 all the same
        resp.cost = None
        if batch:
            resp.metadata = {**resp.metadata, "batch": True}
        return
    resp.cost = price.cost_of(resp.token_usage, batch)
    if batch:
        saved = price.cost_of(resp.token_usage) - resp.cost
        resp.metadata = {**resp.metadata, "batch": True, "batchSaved": saved}


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
