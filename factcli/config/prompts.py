"""The prompts of a config: inline text, chat messages, files and globs of files (a CSV file a prompt per
row, as promptfoo reads it), and prompt functions
(`file://prompts.py:fn`, a `.py` script, `file://prompts.js[:fn]`), and `{messages: [{role, content}]}` whose
contents are templates, text files or prompt functions, each with its label, id and `config:`; every template is checked when it is read, every prompt function's file (and Python function) when the
config is loaded."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from factcli import sources, templating
from factcli.config import keys
from factcli.config.context import Ctx, as_list, check_keys, expect, load_warning, read_label, record, unknown_key
from factcli.config.user_code import check_js_export, code_file, python_function
from factcli.errors import ConfigError
from factcli.sources import JS_SUFFIXES, PY_SUFFIXES, SCRIPT_SUFFIXES, TS_SUFFIXES
from factcli.types import Prompt


def _prompt_id(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def chat_messages(raw: str) -> list[dict] | None:
    """The messages of a prompt whose text is a JSON list of chat messages (`[{"role": ...}, ...]`), else None."""
    if raw[:1] not in ("[", "") and not raw[0].isspace():  # (most texts: not stripped to learn that)
        return None
    text = raw.strip()
    if not text.startswith("["):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, list) and data and all(isinstance(m, dict) and "role" in m for m in data):
        return data
    return None


def make_prompt(raw: str, label: str | None) -> Prompt:
    msgs = chat_messages(raw)
    return Prompt(raw=raw, label=label if label is not None else raw, messages=msgs, id=_prompt_id(raw))


def parse_prompts(value: Any, ctx: Ctx) -> list[Prompt]:
    if value is None:
        raise ConfigError("no prompts: add a 'prompts:' list (e.g. - 'Answer: {{question}}')", ctx.file, "prompts")
    items: list[tuple[Any, str | None, str]] = []
    if isinstance(value, dict):  # {file://path: label}
        items = [(k, read_label(v, ctx.file, f"prompts.{k}"), f"prompts.{k}") for k, v in value.items()]
    else:
        items = [(p, None, f"prompts[{i}]") for i, p in enumerate(as_list(value))]
    out: list[Prompt] = []
    for item, label, where in items:
        try:
            _parse_prompt(item, label, where, ctx, out)
        except ConfigError as exc:  # (a missing prompt file): the other prompts are still checked
            if not record(exc):
                raise
            out.append(make_prompt("", f"{where} (not loaded)"))  # holds its place; the run stops before any call
    expect(bool(out), "no prompts found: list at least one (e.g. - 'Answer: {{question}}'), or leave 'prompts:' out "
           "to send each test's 'prompt' var", ctx.file, "prompts")
    return out


def _parse_prompt(item: Any, label: str | None, where: str, ctx: Ctx, out: list[Prompt]) -> None:
    """One entry of `prompts:`, appended to `out` (a file or a glob may give several)."""
    config: dict = {}
    if isinstance(item, dict):
        check_keys(item, keys.names("prompt"), ctx.file, where)
        label = read_label(item.get("label"), ctx.file, where + ".label")
        config = item.get("config") or {}
        expect(isinstance(config, dict), "expected a mapping of request parameters", ctx.file, where + ".config")
        if "messages" in item:
            expect("raw" not in item and "id" not in item,
                   "a prompt has either 'messages' or 'raw'/'id', not both", ctx.file, where)
            out.append(_with_config(_messages_prompt(item["messages"], label, ctx, where), config))
            return
        if "raw" in item:
            expect(isinstance(item["raw"], str), "expected a string", ctx.file, where + ".raw")
            if not (sources.is_file_ref(item["raw"]) or _names_a_file(item["raw"], ctx)):
                out.append(_with_config(make_prompt(item["raw"], label), config))
                return
        # promptfoo reads `raw` as it reads `id`: a file reference is the file's prompts (checked)
        item = item["raw"] if "raw" in item else item.get("id")
        expect(isinstance(item, str), "a prompt needs 'raw' text, an 'id' file reference or 'messages'",
               ctx.file, where)
    if isinstance(item, list):  # inline chat messages
        out.append(_with_config(make_prompt(json.dumps(item, ensure_ascii=False), label), config))
        return
    expect(isinstance(item, str), f"expected a prompt string, got {type(item).__name__}", ctx.file, where)
    if sources.is_file_ref(item):
        out.extend(_with_config(p, config) for p in _prompts_from_file(item, label, ctx, where))
    elif _names_a_file(item, ctx):  # promptfoo reads `prompts: [prompts/*.txt]` without file:// too
        out.extend(_with_config(p, config) for p in _prompts_from_file(f"file://{item}", label, ctx, where))
    else:
        _check_template(item, ctx.file, where)
        out.append(_with_config(make_prompt(item, label), config))


def _compact(data: Any) -> str:
    """JSON.stringify's text: how promptfoo keeps a .json or .yaml prompt file (its raw and its label)."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def _names_a_file(text: str, ctx: Ctx) -> bool:
    """A one-line prompt without template markers that names existing files (a path or a glob that
    matches). promptfoo takes any one-line prompt with a `/` or a `.xx` ending for a path and stops
    when no file is there (part A §2.1, a trap): here a prompt is a file only when the file exists."""
    text = text.strip()
    if not text or "\n" in text or templating.has_template(text) or "<<" in text or len(text) > 1000:
        return False
    path, _ = sources.ref_path(f"file://{text}", ctx.base)
    if not sources.is_glob(str(path)):
        return sources.is_file(path)
    try:
        return bool(sources.expand_glob(path, ctx.file, "prompts"))
    except (ConfigError, OSError, ValueError):  # a glob that matches nothing: the text is the prompt
        return False


def _with_config(prompt: Prompt, config: dict) -> Prompt:
    if config:
        prompt.config = dict(config)
    return prompt


def _check_template(text: str, file: str, where: str) -> None:
    try:
        templating.check(text)
    except templating.TemplateError as exc:
        raise ConfigError(str(exc), file, where) from None


def _prompts_from_file(ref: str, label: str | None, ctx: Ctx, where: str) -> list[Prompt]:
    path, func = sources.ref_path(ref, ctx.base)
    if func or path.suffix.lower() in SCRIPT_SUFFIXES:
        return [_prompt_function(ref, path, func, label, ctx, where)]
    out: list[Prompt] = []
    if label is not None and sources.is_glob(str(path)):
        unknown_key(ctx.file, where + ".label", "a label on a glob is not used (promptfoo drops it too): each file's "
                    "prompts are labelled 'path: text'; list the files one by one to label them")
        label = None
    for p in sources.expand_glob(path, ctx.file, where):
        shown = os.path.relpath(p, ctx.base) if not Path(ref[7:]).is_absolute() else str(p)
        suffix = p.suffix.lower()
        if suffix == ".csv":  # read with its line ends as written: a lone \r is no line end to promptfoo
            text = sources.read_text(p, ctx.file, where, keep_newlines=True)
            out.extend(_csv_prompts(text, label, p, shown, where, ctx))
            continue
        text = sources.read_text(p, ctx.file, where)
        if suffix == ".json":
            try:
                raw = _compact(json.loads(text))
            except ValueError:
                raw = text
            out.append(make_prompt(raw, label or f"{shown}: {raw}"))
        elif suffix in (".md", ".j2"):  # one prompt, the whole file (trailing newline kept), as promptfoo
            _check_template(text, str(p), "")
            out.append(make_prompt(text, label or f"{shown}: {text[:50]}..."))
        elif suffix == ".jsonl":
            lines = [ln for ln in text.splitlines() if ln]
            for ln in lines:
                lab = (f"{label}: {ln}" if label else f"{shown}: {ln}") if len(lines) > 1 else (label or shown)
                out.append(make_prompt(ln, lab))
        elif suffix in (".yaml", ".yml"):
            data = sources.parse_yaml(text, str(p))
            raw = data if isinstance(data, str) else _compact(data)
            out.append(make_prompt(raw, label or f"{shown}: {raw[:80]}"))
        else:  # .txt, .md, .j2 and anything else: `---` lines separate prompts
            chunks, buf = [], []
            for line in text.splitlines():
                if line.strip() == "---":
                    chunks.append("\n".join(buf).strip())
                    buf = []
                else:
                    buf.append(line)
            chunks.append("\n".join(buf).strip())
            for raw in (c for c in chunks if c):
                _check_template(raw, str(p), "")
                out.append(make_prompt(raw, f"{label}: {shown}: {raw}" if label else f"{shown}: {raw}"))
    return out


# -------------------------------------------------------------------- prompt CSV files

def _csv_prompts(text: str, label: str | None, path: Path, shown: str, where: str, ctx: Ctx) -> list[Prompt]:
    """A prompt per row, as promptfoo 0.121.20 reads a prompt CSV (src/prompts/processors/csv.ts): a text
    with the delimiter is a CSV whose `prompt` column is the prompt and `label` column its label (cells
    trimmed, blank lines and rows without a prompt skipped); a text without it, or one that does not read
    as a CSV (a row of another width, a quote left open), is a prompt per non-blank line, a first line
    `prompt` skipped. A label given in the config labels each row (a `label` cell wins over it), else
    `Prompt N - <prompt>`."""
    from factcli.config import csv_text

    delimiter, _ = csv_text.settings()
    rows = _csv_rows(text, delimiter) if delimiter in text else None
    if isinstance(rows, str):  # promptfoo reads such a file a line at a time, silently: said here
        load_warning(f"{where}: {shown}: {rows}, so each line is a prompt, as promptfoo reads it "
                     "(quote a cell that holds the delimiter)")
    if isinstance(rows, list):
        header, body = rows[0] if rows else [], rows[1:]
        if "prompt" not in header:
            raise ConfigError(f"{shown} has no 'prompt' column (its columns: {', '.join(header) or 'none'}): a "
                              "prompt CSV has a 'prompt' column and optionally a 'label' column", ctx.file, where)
        cells = [dict(zip(header, row)) for row in body]
        found = [(c["prompt"], c.get("label") or label) for c in cells if c["prompt"]]
    else:
        lines = [ln for ln in re.split(r"\r?\n", text) if ln.strip()]
        found = [(ln, label) for ln in lines[1 if lines and lines[0].strip().lower() == "prompt" else 0:]]
    if not found:
        raise ConfigError(f"no prompts in {shown}: every 'prompt' cell is empty" if isinstance(rows, list)
                          else f"no prompts in {shown}", ctx.file, where)
    out = []
    for n, (raw, lab) in enumerate(found, 1):
        _check_template(raw, str(path), f"prompt {n}")
        out.append(make_prompt(raw, lab or f"Prompt {n} - {raw}"))
    return out


def _csv_rows(text: str, delimiter: str) -> list[list[str]] | str:
    """The rows of a CSV text, header first, each cell trimmed and blank lines left out, as csv-parse
    reads them for promptfoo (`trim`, `skip_empty_lines`, relaxed quotes); else what stops it."""
    import csv

    from factcli.config import csv_text

    rows: list[list[str]] = []
    reader = csv_text.reader(text, delimiter, strict=True, quote_after_spaces=True)
    try:
        for row in reader:
            if row and (len(row) > 1 or row[0].strip()):
                rows.append([cell.strip() for cell in row])
                if len(row) != len(rows[0]):
                    return f"line {reader.line_num} has {len(row)} cells but the header has {len(rows[0])}"
    except csv.Error as exc:
        return f"line {reader.line_num} does not read as CSV ({exc})"
    return rows


# -------------------------------------------------------------------- chat messages

CHAT_ROLES = ("system", "developer", "user", "assistant", "tool", "function")


def _messages_prompt(messages: Any, label: str | None, ctx: Ctx, where: str) -> Prompt:
    """`{messages: [{role, content}, ...], label?, config?}`: each content is a template, or a `file://`
    reference to a text file (its text is the template) or to a prompt function (called per row, its
    return is the content). raw is the messages as written, the label the given one, else raw."""
    where = where + ".messages"
    expect(isinstance(messages, list) and bool(messages), "expected a non-empty list of {role, content} messages",
           ctx.file, where)
    resolved: list[dict] = []
    functions: dict[int, str] = {}
    sources_seen: list[str] = []  # file texts and function sources, so the prompt's id changes with them
    for j, message in enumerate(messages):
        at = f"{where}[{j}]"
        _check_message(message, ctx, at)
        content = message["content"]
        if sources.is_file_ref(content):
            text, target = _message_file(content, ctx, at + ".content")
            sources_seen.append(text)
            if target:
                functions[j] = target
            else:
                content = text
        else:
            _check_template(content, ctx.file, at + ".content")
        resolved.append({**message, "content": content})
    raw = json.dumps(messages, ensure_ascii=False)
    digest = _prompt_id("\0".join([raw, *sources_seen]))
    return Prompt(raw=raw, label=label if label is not None else raw, messages=resolved, id=digest,
                  message_functions=functions or None)


def _check_message(message: Any, ctx: Ctx, at: str) -> None:
    from factcli.errors import did_you_mean

    expect(isinstance(message, dict), f"expected a message {{role, content}}, got {type(message).__name__}",
           ctx.file, at)
    role = message.get("role")
    expect(isinstance(role, str) and bool(role), "a message needs a 'role' (system, user, assistant, ...)",
           ctx.file, at)
    if role not in CHAT_ROLES:
        raise ConfigError(f"unknown role '{role}'{did_you_mean(role, CHAT_ROLES)}; "
                          f"expected one of {', '.join(CHAT_ROLES)}", ctx.file, at + ".role")
    expect("content" in message, "a message needs a 'content': text or a file:// reference", ctx.file, at)
    content = message["content"]
    expect(isinstance(content, str), f"a message's content must be text or a file:// reference, got "
           f"{type(content).__name__}", ctx.file, at + ".content")


def _message_file(ref: str, ctx: Ctx, at: str) -> tuple[str, str | None]:
    """A message's `file://` content -> (text, None) for a text file, whose text (without its final
    newline) is the template, or (function source, target) for a prompt function."""
    path, func = sources.ref_path(ref, ctx.base)
    if func or path.suffix.lower() in SCRIPT_SUFFIXES:
        fn = _prompt_function(ref, path, func, None, ctx, at)
        return fn.raw, fn.function
    expect(not sources.is_glob(ref[7:]), "a message's content names one file, not a glob", ctx.file, at)
    if not sources.is_file(path):
        raise ConfigError(f"file not found: {path}", ctx.file, at)
    text = sources.read_text(path, ctx.file, at).rstrip("\r\n")
    _check_template(text, str(path), "")
    return text, None


# -------------------------------------------------------------------- prompt functions

# what a name in `file://prompts.py:NAME` must be, said when it names something else (a string constant)
PROMPT_FUNCTION = ("a prompt function takes a context ({vars, provider, config}) and returns the prompt "
                   "(a string, chat messages, or {prompt, config}); text itself goes inline, or in a .txt file")

def _prompt_function(ref: str, path: Path, func: str | None, label: str | None, ctx: Ctx, where: str) -> Prompt:
    """A prompt function, promptfoo's labels and raw (promptfoo-features §2.7): `x.py:fn` / `x.js[:fn]` with
    the file as raw; a `.py` without `:fn` runs as a script and is labelled `x.py: <file>`."""
    suffix = code_file(path, "a prompt function must be in a .py or .js file", "prompt function file not found",
                       ctx.file, where)
    source = sources.read_text(path, ctx.file, where)
    if suffix in PY_SUFFIXES and func:
        python_function(path, func, ctx.file, where, expected=PROMPT_FUNCTION)
    elif suffix in JS_SUFFIXES + TS_SUFFIXES and func:  # a named export: there, and a function
        check_js_export(path, func, ctx.file, where, what="JavaScript prompt functions",
                        instead="a Python prompt function (file://prompts.py:fn)", expected=PROMPT_FUNCTION)
    elif suffix in JS_SUFFIXES + TS_SUFFIXES:
        from factcli.scripting.node import NodeNotFound, require_node

        try:
            require_node("JavaScript prompt functions", "a Python prompt function (file://prompts.py:fn)")
        except NodeNotFound as exc:
            raise ConfigError(str(exc), ctx.file, where) from None
    shown = os.path.relpath(path, ctx.base) if not Path(ref[7:]).is_absolute() else str(path)
    if func:
        default_label = f"{shown}:{func}"
    elif suffix in PY_SUFFIXES:
        default_label = f"{shown}: {source}"
    else:
        default_label = shown
    target = f"file://{path.resolve()}" + (f":{func}" if func else "")
    return Prompt(raw=source, label=label if label is not None else default_label,
                  id=_prompt_id(f"{source}\0{func or ''}"), function=target)


