"""The prompts of a config: inline text, chat messages, files and globs of files, each with its label and
id; every template is checked when it is read."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from factcli import sources, templating
from factcli.config.context import Ctx, as_list, check_keys, expect
from factcli.errors import ConfigError
from factcli.types import Prompt


def _prompt_id(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def _chat_messages(raw: str) -> list[dict] | None:
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
    msgs = _chat_messages(raw)
    return Prompt(raw=raw, label=label if label is not None else raw, messages=msgs, id=_prompt_id(raw))


def parse_prompts(value: Any, ctx: Ctx) -> list[Prompt]:
    if value is None:
        raise ConfigError("no prompts: add a 'prompts:' list (e.g. - 'Answer: {{question}}')", ctx.file, "prompts")
    items: list[tuple[Any, str | None, str]] = []
    if isinstance(value, dict):  # {file://path: label}
        items = [(k, v, f"prompts.{k}") for k, v in value.items()]
    else:
        items = [(p, None, f"prompts[{i}]") for i, p in enumerate(as_list(value))]
    out: list[Prompt] = []
    for item, label, where in items:
        if isinstance(item, dict):
            check_keys(item, {"id", "raw", "label", "config"}, ctx.file, where)
            label = item.get("label")
            if "raw" in item:
                expect(isinstance(item["raw"], str), "expected a string", ctx.file, where + ".raw")
                out.append(make_prompt(item["raw"], label))
                continue
            item = item.get("id")
            expect(isinstance(item, str), "a prompt needs 'raw' text or an 'id' file reference", ctx.file, where)
        if isinstance(item, list):  # inline chat messages
            out.append(make_prompt(json.dumps(item, ensure_ascii=False), label))
            continue
        expect(isinstance(item, str), f"expected a prompt string, got {type(item).__name__}", ctx.file, where)
        if sources.is_file_ref(item):
            out.extend(_prompts_from_file(item, label, ctx, where))
        else:
            _check_template(item, ctx.file, where)
            out.append(make_prompt(item, label))
    expect(bool(out), "no prompts found", ctx.file, "prompts")
    return out


def _check_template(text: str, file: str, where: str) -> None:
    try:
        templating.check(text)
    except templating.TemplateError as exc:
        raise ConfigError(str(exc), file, where) from None


def _prompts_from_file(ref: str, label: str | None, ctx: Ctx, where: str) -> list[Prompt]:
    path, func = sources.ref_path(ref, ctx.base)
    if func or path.suffix.lower() in (".py", ".js", ".cjs", ".mjs", ".ts"):
        raise ConfigError(f"prompt functions ('{ref}') are not supported yet; use a text, JSON or YAML prompt file",
                          ctx.file, where)
    out: list[Prompt] = []
    for p in sources.expand_glob(path, ctx.file, where):
        shown = os.path.relpath(p, ctx.base) if not Path(ref[7:]).is_absolute() else str(p)
        suffix = p.suffix.lower()
        text = sources.read_text(p, ctx.file, where)
        if suffix == ".json":
            try:
                raw = json.dumps(json.loads(text), ensure_ascii=False)
            except ValueError:
                raw = text
            out.append(make_prompt(raw, label or f"{shown}: {raw}"))
        elif suffix == ".jsonl":
            lines = [ln for ln in text.splitlines() if ln]
            for ln in lines:
                lab = (f"{label}: {ln}" if label else f"{shown}: {ln}") if len(lines) > 1 else (label or shown)
                out.append(make_prompt(ln, lab))
        elif suffix in (".yaml", ".yml"):
            data = sources.parse_yaml(text, str(p))
            raw = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
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
