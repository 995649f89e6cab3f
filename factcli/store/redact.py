"""The secrets rule (contract §9) in one place: what counts as a secret, and how to strip it."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterable

from factcli.store.encode import finite
from factcli.types import json_encoder

SECRET_KEY = re.compile(
    r"api[_-]?key|secret|password|passwd|authorization|access[_-]?token|auth[_-]?token|bearer",
    re.IGNORECASE,
)
SECRET_ENV = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|PRIVATE|(?:^|_)(?:PAT|DSN|AUTH)(?:$|_)", re.IGNORECASE)
# a key named like a token or credential (`token:`, `GH_TOKEN`, `refreshToken`, `DB_PASSWD`), besides
# SECRET_KEY's; `max_tokens`, `tokenUsage` and `tokenizer` are not
_TOKEN_KEY = re.compile(r"(?i:(?:^|[_-])(?:token|pat|dsn|credentials?|private[_-]?key|passwd|pwd))$"
                        r"|[a-z](?:Token|Credentials?|Pat)$")
HEADER_KEYS = {"headers", "extra_headers"}
REDACTED = "[redacted]"


def secret_env_values() -> dict[str, str]:
    """Values of environment variables whose names look secret, longest first (value -> name)."""
    found = {v: k for k, v in os.environ.items() if SECRET_ENV.search(k) and len(v) >= 6}
    found.update(_store_url_secrets())
    return dict(sorted(found.items(), key=lambda kv: -len(kv[0])))


_ENV_NAME_KEY = re.compile(r"env[_-]?var|envar", re.IGNORECASE)  # its value names a variable


# the password of a URL's userinfo runs to the authority's LAST `@` (a raw `@` in it is not its end)
_URL_PASSWORD = re.compile(r"(?i)[a-z][a-z0-9+.-]*://[^:/@\s]*:([^/?#\s]+)@")
# secrets the command line gave, value -> what replaces it: a --db URL and its password (note_store_url)
_NOTED: dict[str, str] = {}


def _store_url_secrets() -> dict[str, str]:
    """FACTCLI_DB holding a postgresql:// URL with a password: the URL and the password are secrets too."""
    url = os.environ.get("FACTCLI_DB", "")
    m = _URL_PASSWORD.match(url.strip())
    if not m or len(m.group(1)) < 6:
        return {}
    return {url: "FACTCLI_DB", m.group(1): "FACTCLI_DB"}


def note_store_url(url: str) -> None:
    """A store URL given as --db: its password is a secret like FACTCLI_DB's, never stored, exported or
    printed (shown as ***, the URL as `postgresql://user:***@host/db`). Store.open notes every URL."""
    url = url.strip()
    m = _URL_PASSWORD.match(url)
    if m and len(m.group(1)) >= 6 and url not in _NOTED:
        _NOTED[url] = url[:m.start(1)] + "***" + url[m.end(1):]
        _NOTED[m.group(1)] = "***"


def is_secret_key(key: str) -> bool:
    """A key whose value is a secret. `apiKeyEnvar` holds the name of a variable, not its value:
    a name is never a secret, and redacting it would keep a resumed run from finding its key."""
    return (bool(SECRET_KEY.search(key) or _TOKEN_KEY.search(key)) and key.lower() not in ("max_tokens", "maxtokens")
            and not _ENV_NAME_KEY.search(key))


# Secrets known by their shape, whatever key, variable or text holds them (issue 48): provider keys
# (OpenAI `sk-…`, `sk-proj-…`, Anthropic `sk-ant-…`), GitHub tokens (`ghp_…`, `gho_`, `ghu_`, `ghs_`,
# `ghr_`, `github_pat_…`), Slack tokens (`xox?-…`), AWS access key ids (`AKIA…`/`ASIA…`), JWTs
# (`eyJ….eyJ….…`), a URL's userinfo password (`scheme://user:PASSWORD@host`, the user kept) and the
# value of a secret-named query parameter (`?key=`, `&token=`, `api_key`, `access_token`, `secret`,
# `password`, `sig`). Each is replaced by `[redacted]` (a prefix and a URL's user kept for reading).
_USERINFO = r"(?P<userinfo>://[^:/@\s\"'<>]*:)(?!\*\*\*@|\[redacted\]@)[^/?#\s\"'<>]+@"
_QUERY = (r"(?P<query>[?&;](?i:api[_-]?key|key|access[_-]?token|auth[_-]?token|token|secret|password|passwd|sig"
          r"|signature)=)(?!\[redacted\])[^&#\s\"'<>\\]+")
_SHAPES = re.compile(
    r"(?<![A-Za-z0-9_-])(?P<sk>sk-(?:ant-|proj-)?)[A-Za-z0-9_-]{20,}"
    r"|(?<![A-Za-z0-9_])(?P<gh>gh[pousr]_)[A-Za-z0-9]{30,}|(?<![A-Za-z0-9_])(?P<ghpat>github_pat_)[A-Za-z0-9_]{40,}"
    r"|(?<![A-Za-z0-9_-])(?P<xox>xox[abposre]-)[A-Za-z0-9-]{10,}"
    r"|(?<![A-Za-z0-9])(?P<aws>AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Za-z])"
    r"|(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    rf"|{_USERINFO}|{_QUERY}"
    r"|(?<![A-Za-z0-9_+/=.-])(?P<long>[A-Za-z0-9_-]{32,512})(?![A-Za-z0-9_+/=.-])"
)
_USERINFO_RE, _QUERY_RE = re.compile(_USERINFO), re.compile(_QUERY)  # has_shape's looks for these two alone
# `long` above: a token of 32 to 512 letters, digits, `_` and `-` standing alone (not inside a
# base64 blob, a path or a dotted name) is a secret only if it has an upper-case letter, a lower-case
# letter and a digit and its characters' Shannon entropy is at least LONG_ENTROPY bits: random keys
# (40 characters of 62 symbols: ~5 bits) are, while hex hashes and UUIDs (no upper case), run ids
# (`eval-20261124T193000-9a84d9`, 27 characters), words and camelCase names are left as they are.
LONG_ENTROPY = 4.3


def _entropy(text: str) -> float:
    import math

    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in (text.count(ch) for ch in set(text)))


def _shape_replacement(m: re.Match) -> str:
    long = m.group("long")
    if long is not None:
        if (long.lower() == long or long.upper() == long or not any(ch.isdigit() for ch in long)
                or _entropy(long) < LONG_ENTROPY):
            return long
        return REDACTED
    keep = m.group("sk") or m.group("gh") or m.group("ghpat") or m.group("xox") or m.group("aws") or ""
    if m.group("userinfo"):
        return m.group("userinfo") + REDACTED + "@"
    if m.group("query"):
        return m.group("query") + REDACTED
    return keep + REDACTED


# Where a shape can be, found in C (str.translate, bytes.translate, find) rather than by running the
# expression over every character: each token shape but a Slack token or a JWT holds a run of at least
# 20 letters, digits, `_` and `-`; those two start with `xox` and `eyJ`; a URL's userinfo and a query
# value have expressions of their own that start at a literal (`://`, `?`/`&`/`;`) and are fast.
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_TOKEN_STR = {i: (0x61 if chr(i) in _TOKEN_CHARS else 0x20) for i in range(128)}  # other characters kept
# UTF-32: a character is 4 bytes, its first one mapped (a character that is not ASCII may map to `a`
# too: a window to look at, never a miss)
_TOKEN_BYTES = bytes(0x61 if chr(i) in _TOKEN_CHARS else 0x20 for i in range(256))
_RUN = 20
_NOT_TOKEN = re.compile("[^a]")
_LITERAL_END = re.compile(r"[\s\"'<>]")


def _token_windows(text: str) -> list[tuple[int, int]]:
    """(start, end) of every stretch of `text` a token shape may be in (with a character either side
    for the expression's look-arounds), merged, in order."""
    spans = []
    if text.isascii():
        mapped = text.translate(_TOKEN_STR)
        i = mapped.find("a" * _RUN)
        while i >= 0:
            m = _NOT_TOKEN.search(mapped, i)
            end = m.start() if m else len(text)
            spans.append((max(0, i - 1), min(len(text), end + 1)))
            i = mapped.find("a" * _RUN, end)
    else:
        mapped = text.encode("utf-32-le", "surrogatepass").translate(_TOKEN_BYTES)
        run, step = b"a   " * _RUN, b"a   "
        i = mapped.find(run)
        while i >= 0:
            end = i
            while mapped.startswith(step, end):
                end += 4
            spans.append((max(0, i // 4 - 1), min(len(text), end // 4 + 1)))
            i = mapped.find(run, end)
    for literal in ("xox", "eyJ"):
        i = text.find(literal)
        while i >= 0:
            m = _LITERAL_END.search(text, i, i + 4096)
            end = m.start() if m else min(len(text), i + 4096)
            spans.append((max(0, i - 1), min(len(text), end + 1)))
            i = text.find(literal, end)
    spans.sort()
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def has_shape(text: str) -> bool:
    """Whether scrub_shapes changes `text`. Every stored row's texts are looked at: the expression run
    over each would cost more than the rest of the row's way to the store (measured: 30,000 echo rows
    3.5 s -> 17.8 s), so it runs only where _token_windows finds a place a shape may be."""
    if ("=" in text and _QUERY_RE.search(text)) or ("://" in text and _USERINFO_RE.search(text)):
        return True
    for start, end in _token_windows(text):
        if any(_shape_replacement(m) != m.group() for m in _SHAPES.finditer(text, start, end)):
            return True
    return False


def scrub_shapes(text: str) -> str:
    """`text` with every secret known by its shape replaced (_SHAPES), looked for where it may be."""
    if not text:
        return text
    windows = _token_windows(text)
    if windows:
        pieces, at = [], 0
        for start, end in windows:
            pieces.append(text[at:start])
            pieces.append(_SHAPES.sub(_shape_replacement, text[start:end]))
            at = end
        pieces.append(text[at:])
        text = "".join(pieces)
    if "=" in text:
        text = _QUERY_RE.sub(lambda m: m.group("query") + REDACTED, text)
    if "://" in text:
        text = _USERINFO_RE.sub(lambda m: m.group("userinfo") + REDACTED + "@", text)
    return text


def redact(value: Any, env_values: dict[str, str] | None = None, _key: str = "") -> Any:
    """A copy with secret values replaced: `${NAME}` when the value came from the environment."""
    if env_values is None:
        env_values = secret_env_values()
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            ks = str(k)
            if ks in HEADER_KEYS and isinstance(v, dict):
                out[k] = {hk: _secret_placeholder(hv, env_values) for hk, hv in v.items()}
            elif is_secret_key(ks) and not isinstance(v, (dict, list)) and v not in (None, ""):
                out[k] = _secret_placeholder(v, env_values)
            else:
                out[k] = redact(v, env_values, ks)
        return out
    if isinstance(value, list):
        return [redact(v, env_values, _key) for v in value]
    if isinstance(value, str):
        return scrub_text(value, env_values)
    return value


def _secret_placeholder(value: Any, env_values: dict[str, str]) -> str:
    if isinstance(value, str) and value.startswith("${") and value.endswith("}"):
        return value  # already a reference
    if isinstance(value, str) and value in env_values:
        return "${" + env_values[value] + "}"
    return REDACTED


def scrub_text(text: str, env_values: dict[str, str] | None = None) -> str:
    """Replace any secret environment value, and any secret known by its shape, that appears inside
    free text (errors, outputs)."""
    if env_values is None:
        env_values = secret_env_values()
    for value, name in env_values.items():
        if value in text:
            text = text.replace(value, "${" + name + "}")
    for value, replacement in _NOTED.items():
        if value in text:
            text = text.replace(value, replacement)
    return scrub_shapes(text)


_SECRET_KEY_LOWER = re.compile(SECRET_KEY.pattern)  # the pattern is lower case
# one of "key", "secret", "passw", "auth", "access", "bearer" is in each of its matches (keys_clean)
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\benv\.([A-Za-z_][A-Za-z0-9_]*)")
_SECRET_HEADER = re.compile(r"auth|key|token|secret|cookie|password", re.IGNORECASE)


class Scrubber:
    """Everything written to the store or an export goes through here (contract §9).

    Secret values are the values of secret-looking environment variables (replaced by `${NAME}`),
    plus literal secrets found in the config: values of api-key-like keys, secret-looking header
    values, and the values of variables such keys reference (replaced by `[redacted]`).
    """

    def __init__(self, config: Any = None):
        self.env = secret_env_values()
        pairs = {value: "${" + name + "}" for value, name in self.env.items()}
        for value, replacement in [*_config_secrets(config), *_NOTED.items()]:
            pairs.setdefault(value, replacement)
        self.pairs = sorted(pairs.items(), key=lambda kv: -len(kv[0]))
        variants = []
        for value, replacement in self.pairs:
            forms = {value, json.dumps(value, ensure_ascii=False)[1:-1], _xml_escape(value)}
            variants.extend((form, replacement) for form in forms if form)
        self.variants = sorted(set(variants), key=lambda kv: -len(kv[0]))
        # what, seen in a value's JSON text, means redaction may change it: each secret as it
        # appears inside a JSON string, and a secret-looking or header key (matched anywhere)
        self._json_forms = [f for f in {json.dumps(v, ensure_ascii=False)[1:-1] for v, _ in self.pairs} if f]

    def text(self, text: str | None) -> str | None:
        if not text:
            return text
        for value, replacement in self.pairs:
            if value in text:
                text = text.replace(value, replacement)
        return scrub_shapes(text)

    def holds_any(self, text: str) -> bool:
        """Whether text() could change any part of `text` (a few texts joined: a secret in one of them
        is in the whole)."""
        for value, _ in self.pairs:
            if value in text:
                return True
        return has_shape(text)

    def data(self, value: Any) -> Any:
        """A redacted copy (secret keys, headers, env values, shapes) with literal secrets scrubbed."""
        out = redact(value, self.env)
        if any(v not in self.env for v, _ in self.pairs):
            out = self._walk(out)
        return out

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self._walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._walk(v) for v in value]
        return value

    def dumps(self, value: Any) -> str | None:
        if value is None:
            return None
        # Fast path (every stored row goes through here several times): encode once in C and keep
        # the text when nothing in it could be redacted, which is then exactly what the walk
        # below would produce. Measured: 10,000 echo rows 6.8 s -> see benchmarks/README.md.
        try:
            text = _encode(value)
        except (ValueError, TypeError):
            text = None
        if text is not None and not self._may_redact(text):
            return text
        return json.dumps(finite(self.data(value)), ensure_ascii=False, default=str)

    def dumps_all(self, values) -> list[str | None]:
        """dumps() of each value, for the JSON fields of a stored row: each value encoded once, and
        one look over all the texts together for what could be redacted; only a row that has some
        takes the walk, field by field. (orjson encodes faster, but without json's spacing, which
        the stored text keeps: `factcli diff` labels a test by its stored vars, also across runs
        stored by earlier versions.)"""
        texts: list[str | None] = []
        for value in values:
            if value is None:
                texts.append(None)
                continue
            try:
                text = _encode(value)
            except (TypeError, ValueError):  # NaN or an infinity (stored as null), a key json cannot take
                text = self.dumps(value)
            texts.append(text)
        # (none of what _may_redact looks for spans a "\x00": looking at the texts joined is looking at each)
        if not self._may_redact("\x00".join([t for t in texts if t is not None])):
            return texts
        return [t if t is None or not self._may_redact(t)
                else json.dumps(finite(self.data(v)), ensure_ascii=False, default=str)
                for v, t in zip(values, texts)]

    def unchanged(self, texts: tuple, residue: str) -> bool:
        """Whether redaction leaves every text of a row as it is: `texts` the row's JSON texts (None
        for a field it has not), `residue` the pieces of them whose keys are not known clean
        (store/row_text.RowTexts), joined by "\x00"; secret values are looked for in the whole texts."""
        if not keys_clean(residue):
            return False
        # one look at the texts joined, as dumps() does: no shape spans a "\x00"
        joined = "\x00".join([t for t in texts if t is not None])
        return not (has_shape(joined) or any(form in joined for form in self._json_forms))

    def _may_redact(self, text: str) -> bool:
        return not keys_clean(text) or any(form in text for form in self._json_forms) or has_shape(text)

    FILE_CHUNK = 1 << 20  # characters read at a time by file()

    def file(self, path: Path) -> None:
        """A last pass over a written export: replace any secret in its text, however encoded. The
        file is read a chunk at a time (an export of a large run is hundreds of MB); each chunk
        keeps the last len(longest secret) - 1 characters for the next, so a secret split across
        two chunks is still found. The file is replaced only if something changed."""
        import tempfile

        # a shape is never longer than this, and never holds a space or a quote: the part of a chunk
        # written is cut before the run of token characters the carried tail starts in
        carry_len = max([len(v) for v, _ in self.variants] + [4096]) - 1
        changed = False
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        try:
            with open(path, encoding="utf-8", newline="") as src, \
                    open(fd, "w", encoding="utf-8", newline="") as out:
                buffer = ""
                while True:
                    chunk = src.read(self.FILE_CHUNK)
                    buffer += chunk
                    for value, replacement in self.variants:
                        if value in buffer:
                            buffer = buffer.replace(value, replacement)
                            changed = True
                    cut = len(buffer) - min(carry_len, len(buffer)) if chunk else len(buffer)
                    while 0 < cut < len(buffer) and len(buffer) - cut < 2 * carry_len and not buffer[cut - 1].isspace() \
                            and buffer[cut - 1] not in "\"'<>,":
                        cut -= 1
                    done = scrub_shapes(buffer[:cut])
                    changed = changed or done != buffer[:cut]
                    out.write(done)
                    buffer = buffer[cut:]
                    if not chunk:
                        break
            if changed:
                import shutil

                shutil.copymode(path, tmp)
                os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


def keys_clean(text: str) -> bool:
    """No secret-looking key and no headers in a JSON text: the redaction walk would change nothing
    in it but secret values. Each match is a run of letters, `_` and `-`: a text that is clean in
    pieces joined by other characters is clean whole."""
    if "headers" in text:
        return False
    if 'token"' in text or "Token\"" in text or "credential" in text or "passwd" in text or "_pat\"" in text:
        return False  # _TOKEN_KEY's keys, as a JSON text has them
    # The secret-key pattern is slow to scan a row with; every key it matches holds one of these
    # words, which `in` finds far sooner. re.IGNORECASE on lowered ASCII text is much cheaper
    # than on the text (non-ASCII keeps IGNORECASE: it also folds e.g. the Kelvin sign onto k).
    if text.isascii():
        lowered = text.lower()
        return not (("key" in lowered or "secret" in lowered or "passw" in lowered or "auth" in lowered
                     or "access" in lowered or "bearer" in lowered) and _SECRET_KEY_LOWER.search(lowered))
    return not SECRET_KEY.search(text)


_encode = json_encoder(allow_nan=False)  # built once, not per call


def _xml_escape(value: str) -> str:
    import html

    return html.escape(value, quote=True)


def _config_secrets(config: Any) -> Iterable[tuple[str, str]]:
    def env_refs(text: str):
        for m in _ENV_REF.finditer(text):
            name = m.group(1) or m.group(2)
            value = os.environ.get(name)
            if value and len(value) >= 6:
                yield value, "${" + name + "}"

    def secret(value: Any):
        if not isinstance(value, str) or not value:
            return
        refs = list(env_refs(value))
        yield from refs
        if not refs and len(value) >= 6:
            yield value, REDACTED
            if value.lower().startswith("bearer ") and len(value) > 13:
                yield value[7:].strip(), REDACTED

    def walk(node: Any):
        if isinstance(node, dict):
            for k, v in node.items():
                key = str(k)
                if key in ("headers", "extra_headers") and isinstance(v, dict):
                    for hk, hv in v.items():
                        if _SECRET_HEADER.search(str(hk)):
                            yield from secret(hv)
                elif _ENV_NAME_KEY.search(key) and isinstance(v, str):
                    value = os.environ.get(v)
                    if value and len(value) >= 6:
                        yield value, "${" + v + "}"
                elif is_secret_key(key) and isinstance(v, str):
                    yield from secret(v)
                else:
                    yield from walk(v)
        elif isinstance(node, list):
            for v in node:
                yield from walk(v)

    yield from walk(config)
