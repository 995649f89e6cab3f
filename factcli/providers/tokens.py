"""Token counts for replies that carry no `usage` (some local servers, some proxies), offline.

OpenAI's encodings are read from the copies litellm ships inside its package (its `tokenizers`
folder holds tiktoken's cache files, named by the SHA-1 of their download address), so nothing is
ever downloaded. A model of the GPT-4o generation or later counts with o200k_base, any other model
with cl100k_base: for a model that is not OpenAI's that is an estimate of its own tokenizer, and
the response says which encoding counted (`metadata.tokensCountedWith`).
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from pathlib import Path

MESSAGE_OVERHEAD_TOKENS = 3  # OpenAI's chat format: role and separators of each message
REPLY_PRIMER_TOKENS = 3  # every reply is primed with <|start|>assistant<|message|>

_O200K_MODELS = re.compile(r"(^|/)(gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|o1|o3|o4|chatgpt-4o|gpt-oss)", re.IGNORECASE)
_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"


def encoding_name(model: str) -> str:
    return "o200k_base" if _O200K_MODELS.search(model or "") else "cl100k_base"


def _bundled_dir() -> Path | None:
    import importlib.util

    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "litellm_core_utils" / "tokenizers"


@lru_cache(maxsize=4)
def _encoding(name: str):
    """The tiktoken Encoding `name` built from the bundled file, or None when it is not there."""
    folder = _bundled_dir()
    if folder is None:
        return None
    path = folder / hashlib.sha1(_URL.format(name=name).encode()).hexdigest()
    if not path.is_file():
        return None
    try:
        import tiktoken
    except ImportError:
        return None
    import os

    # tiktoken reads an encoding from TIKTOKEN_CACHE_DIR when the file is there (its documented
    # offline mode); the variable is set only for this load, so a user's own setting stands after.
    saved = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
    try:
        return tiktoken.get_encoding(name)
    except Exception:  # a damaged file: no count, never a download or a crash
        return None
    finally:
        if saved is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = saved


def count_text(text: str, model: str) -> int | None:
    """Tokens of `text` for `model`, or None when no encoding can be loaded."""
    enc = _encoding(encoding_name(model))
    if enc is None:
        return None
    text = text or ""
    if len(text) <= COUNT_PIECE:
        return len(enc.encode(text, disallowed_special=()))
    # A long text is counted a piece at a time: encoding 50 MB at once holds a list of ~10,000,000
    # ints (hundreds of MB, issue 48). Each cut is before a single space between two words, where
    # the encodings' pre-tokenizer splits anyway, so the sum is the whole text's count (or within
    # a token a cut where no such space is found).
    total, start = 0, 0
    while start < len(text):
        end = min(len(text), start + COUNT_PIECE)
        if end < len(text):
            cut = end
            while cut > start + COUNT_PIECE // 2 and not (text[cut] == " " and not text[cut - 1].isspace()
                                                           and not text[cut + 1:cut + 2].isspace()):
                cut -= 1
            end = cut if cut > start + COUNT_PIECE // 2 else end
        total += len(enc.encode(text[start:end], disallowed_special=()))
        start = end
    return total


COUNT_PIECE = 1 << 20  # characters count_text encodes at a time


def count_messages(messages: list[dict], model: str) -> int | None:
    """Prompt tokens of a chat request, counted as OpenAI's cookbook does for its chat format."""
    total = REPLY_PRIMER_TOKENS
    for message in messages:
        content = message.get("content")
        if not isinstance(content, str):
            content = "" if content is None else _text_parts(content)
        n = count_text(content, model)
        if n is None:
            return None
        total += n + MESSAGE_OVERHEAD_TOKENS
    return total


def _text_parts(content) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def counted_usage(prompt, output, model: str):
    """(TokenUsage, encoding name) counted from the request and the reply, or None when no
    encoding can be loaded. `prompt`: the chat messages, or the text of a completion request."""
    from factcli.types import TokenUsage

    if isinstance(prompt, list):
        prompt_tokens = count_messages(prompt, model)
    else:
        prompt_tokens = count_text(str(prompt or ""), model)
    if prompt_tokens is None:
        return None
    reply = output if isinstance(output, str) else "" if output is None else json.dumps(output, ensure_ascii=False)
    completion = count_text(reply, model) or 0
    usage = TokenUsage(prompt=prompt_tokens, completion=completion, total=prompt_tokens + completion, num_requests=1)
    return usage, encoding_name(model)
