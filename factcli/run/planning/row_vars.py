"""One row's vars and prompt, from the test's vars to what the provider is sent.

promptfoo's per-row pipeline (promptfoo-features §1.3), and where factcli departs from it:

1. start from the step's vars (after the test's transformVars, run while planning: `plan_transforms`);
   the registers of `storeOutputAs` and `_conversation` (run/planning/conversations.py) come in here, over the
   test's vars of the same name, as in promptfoo;
2. add the runtime vars `__evalId`, `__evalStepId`, `__repeatIndex`;
3. call the script vars (`file://x.py`, `file://x.js`), in key order; each sees the vars so far;
4. strip ONE trailing newline from every string var (promptfoo's step 5);
5. render, once, the var values written in the config that hold a template and name only vars of the
   row (contract §3), in dependency order so `b: "{{a}}!"` sees `a` rendered; data (files, CSV cells,
   script outputs) is never rendered (promptfoo's step 6 is a crude 5-pass first-placeholder
   substitution: not copied);
6. call the prompt function, if the prompt is one, with these final vars (promptfoo calls it before 4-5
   and renders what it returns; factcli never renders it, so it gets the vars the prompt would have);
7. render the template; a result that is a JSON list of chat messages is sent as those messages. A
   `messages:` prompt renders each message, and a message whose content is a prompt function gets what
   that function returns for the row (called as in 6).

Assertions get the vars of step 5 without the runtime vars: the values the prompt saw.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from factcli import templating
from factcli.config.prompts import chat_messages
from factcli.providers.base import RenderedPrompt
from factcli.sources import SCRIPT_SUFFIXES, ScriptRef, is_file_ref, ref_path
from factcli.types import EvalStep, TestCase

RUNTIME_VARS = ("__evalId", "__evalStepId", "__repeatIndex")


class RowError(Exception):
    """The row cannot be sent (a script var, the prompt function or a template failed): an ERROR row."""


@dataclass
class Row:
    """A step made ready to send: the rendered prompt, the vars assertions see, and the names no var gave."""

    prompt: RenderedPrompt
    vars: dict  # what assertions see: the rendered vars without the runtime vars
    missing: list[str] = field(default_factory=list)  # undefined names met while rendering


# ------------------------------------------------------------------ transformVars, while planning


def plan_transforms(tests: list[TestCase]) -> dict[int, str]:
    """Run each test's `transformVars` (test option, else defaultTest's) once, before its var arrays are
    expanded into rows, and merge what it returns into the test's vars in place. Returns id(test) ->
    error for the tests whose transform failed: their rows are ERROR rows (promptfoo aborts the run)."""
    errors: dict[int, str] = {}
    for test in tests:
        spec = test.options.get("transformVars")
        if not spec:
            continue
        from factcli.scripting.row_code import transform_vars  # (the scripting code for a suite that has one)
        from factcli.scripting.transforms import TransformError

        try:
            new = transform_vars(spec, test.vars)
        except TransformError as exc:
            errors[id(test)] = str(exc)
            continue
        # a value the transform computed is data, never rendered as a template
        test.template_vars = frozenset(k for k in test.template_vars if k in new and new[k] is test.vars.get(k))
        test.vars = new
        test.raw = {**test.raw, "vars": new}
    return errors


# ------------------------------------------------------------------ the row


def runtime_vars(step: EvalStep, eval_id: str) -> dict:
    return {"__evalId": eval_id, "__evalStepId": f"test-{step.test_idx}-prompt-{step.prompt_idx}-repeat-{step.repeat_idx}",
            "__repeatIndex": step.repeat_idx}


def script_target(value: Any, base_dir: Path | None) -> str | None:
    """The absolute reference of a script var, or None for any other value. A reference read from the
    config knows its file (ScriptRef); one a transformVars returned is relative to the config's folder."""
    if isinstance(value, ScriptRef):
        return value.target
    if not is_file_ref(value):
        return None
    path, func = ref_path(value, base_dir or Path.cwd())
    if path.suffix.lower() not in SCRIPT_SUFFIXES:
        return None
    return f"file://{path.resolve()}" + (f":{func}" if func else "")


def strip_newline(variables: dict) -> dict:
    """promptfoo removes ONE trailing newline from every string var (a YAML `|` block ends with one)."""
    return {k: v[:-1] if isinstance(v, str) and v.endswith("\n") else v for k, v in variables.items()}


def render_var_values(variables: dict, names) -> dict:
    """Render, once each, the values of `names` that reference only vars of the row (and `env`); a value
    that names anything else, or does not parse, stays as written. A value referencing another template
    var is rendered after it, with its rendered text; a cycle stays literal."""
    pending: dict[str, frozenset] = {}
    for name in names:
        value = variables.get(name)
        if not isinstance(value, str):
            continue
        refs = templating.referenced_names(value)
        if refs is None or not refs <= (variables.keys() | {"env"}):
            continue
        pending[name] = refs
    out = dict(variables)
    while pending:
        ready = [n for n, refs in pending.items() if not (refs - {n}) & pending.keys()]
        if not ready:
            break  # a cycle: those values stay as written
        for name in ready:
            out[name] = templating.render(out[name], out, name=f"var '{name}'")
            del pending[name]
    return out


async def build_row(step: EvalStep, *, eval_id: str = "", provider_label: str | None = None,
                    base_dir: Path | None = None, extra_vars: dict | None = None) -> Row:
    """The row's vars and its rendered prompt, in the order the module docstring gives. `extra_vars`:
    the registers and `_conversation` the row sees (run/planning/conversations.py)."""
    row = data_row(step, eval_id, extra_vars)
    if row is not None:
        return row
    variables = {**step.vars, **(extra_vars or {}), **runtime_vars(step, eval_id)}
    for v in variables.values():  # a script var is a `file://` string; most rows have none
        if isinstance(v, str) and v.startswith("file://"):
            variables = await call_script_vars(step, variables, provider_label, base_dir)
            break
    variables = final_vars(step, variables, frozenset(extra_vars or ()))
    config = {**step.prompt.config}
    if step.prompt.function:
        text, messages, fn_config = await _call_prompt_function(step, variables, provider_label)
        config.update(fn_config)
        missing: list[str] = []
    else:
        text, messages, missing = render_template(step, variables)
        if step.prompt.message_functions:
            text, messages, fn_config = await _call_message_functions(step, messages, variables, provider_label)
            config.update(fn_config)
    config.update(step.test.request_params)
    rendered = RenderedPrompt(text=text, messages=messages, vars=variables, label=step.prompt.label, config=config,
                              template=step.prompt.raw)
    return Row(rendered, {k: v for k, v in variables.items() if k not in RUNTIME_VARS}, missing)


def data_row(step: EvalStep, eval_id: str = "", extra_vars: dict | None = None) -> Row | None:
    """build_row's Row when making it runs no code and so needs no await (`_data_row`); None for any
    other row. The executor calls it first: most rows then cost no coroutine."""
    if extra_vars or step.test.template_vars or step.prompt.function or step.prompt.message_functions:
        return None
    return _data_row(step, eval_id)


def _data_row(step: EvalStep, eval_id: str) -> Row | None:
    """build_row's Row for a row whose vars are all data (no script var, no template to render among
    them, no register or `_conversation`, no runtime var's name) and whose prompt is a template: its
    steps 2, 4 and 7 in one pass over the vars. None for any other row (the general path takes it;
    tests/test_load_fast_paths.py holds them equal)."""
    data = {}
    for k, v in step.vars.items():
        if isinstance(v, str):
            if v.startswith("file://"):
                return None  # maybe a script var (step 3)
            if v.endswith("\n"):
                v = v[:-1]  # step 4
        data[k] = v
    if eval_id.startswith("file://") or "__evalId" in data or "__evalStepId" in data or "__repeatIndex" in data:
        return None  # (RUNTIME_VARS)
    variables = data.copy()  # and runtime_vars(step, eval_id), in its order
    variables["__evalId"] = eval_id[:-1] if eval_id.endswith("\n") else eval_id  # step 4, as for every string var
    variables["__evalStepId"] = f"test-{step.test_idx}-prompt-{step.prompt_idx}-repeat-{step.repeat_idx}"
    variables["__repeatIndex"] = step.repeat_idx
    text, messages, missing = render_template(step, variables)
    prompt = step.prompt
    # (RenderedPrompt's fields in order: made once per row)
    return Row(RenderedPrompt(text, messages, variables, prompt.label, {**prompt.config, **step.test.request_params},
                              prompt.raw),
               data, missing)


def final_vars(step: EvalStep, variables: dict, data: frozenset = frozenset()) -> dict:
    """Steps 4 and 5: one trailing newline off every string var, then the config's var templates.
    `data`: names whose value is not the config's (a stored model output), never rendered."""
    variables = strip_newline(variables)
    names = step.test.template_vars - data if data else step.test.template_vars
    if names:
        try:
            variables = render_var_values(variables, names)
        except templating.TemplateError as exc:
            raise RowError(str(exc)) from None
    return variables


def provider_info(step: EvalStep) -> dict:
    """The provider as promptfoo shows it to a prompt function or a script var: its id, and its label or
    an empty string for a provider without one (checked against promptfoo 0.121.20)."""
    return {"id": step.provider.id, "label": step.provider.label or ""}


async def call_script_vars(step: EvalStep, variables: dict, provider_label: str | None,
                           base_dir: Path | None = None) -> dict:
    """Each `file://x.py` / `file://x.js` var is called once for this row, in key order; its output
    replaces the reference, and later scripts see it."""
    # (a script var is a `file://` string; most rows have none, so that is looked at first)
    scripts = {k: target for k, v in variables.items()
               if isinstance(v, str) and v.startswith("file://") and (target := script_target(v, base_dir))}
    if not scripts:
        return variables
    from factcli.scripting.row_code import RowCodeError, call_var_script

    variables = dict(variables)
    provider = provider_info(step)
    for name, target in scripts.items():
        try:
            variables[name] = await call_var_script(target, name, step.prompt.raw, variables, provider)
        except RowCodeError as exc:
            raise RowError(f"var '{name}': {exc}") from None
    return variables


async def _call_message_functions(step: EvalStep, messages: list[dict], variables: dict,
                                  provider_label: str | None) -> tuple[str, list[dict], dict]:
    """The `messages:` form: each message whose content is a prompt function gets, as its content, the
    text the function returns for this row (an object's JSON), through the one prompt-function call."""
    config: dict = {}
    messages = [dict(m) for m in messages]
    for j, ref in sorted((step.prompt.message_functions or {}).items()):
        text, _, fn_config = await _call_prompt_function(step, variables, provider_label, ref)
        messages[j]["content"] = text
        config.update(fn_config)
    return json.dumps(messages, ensure_ascii=False), messages, config


async def _call_prompt_function(step: EvalStep, variables: dict, provider_label: str | None,
                                ref: str | None = None) -> tuple[str, list[dict], dict]:
    """promptfoo-features §2.5: a string, a list (chat messages), {prompt, config}, or another object
    (sent as its JSON). What it returns is sent as it is, never rendered as a template. `ref`: the
    function of one message (the `messages:` form), else the prompt's own."""
    from factcli.scripting.row_code import RowCodeError, call_prompt_function, split_ref

    prompt = step.prompt
    ref = ref or prompt.function
    context = {"vars": variables,
               "provider": provider_info(step),
               "config": dict(prompt.config)}
    path, func = split_ref(ref)
    where = f"{Path(path).name}:{func}" if func else Path(path).name
    try:
        value = await call_prompt_function(ref, context)
    except RowCodeError as exc:
        raise RowError(str(exc)) from None
    config: dict = {}
    if isinstance(value, dict) and "prompt" in value:
        config = value.get("config") or {}
        if not isinstance(config, dict):
            raise RowError(f"prompt function {where}: 'config' must be an object of request parameters, "
                           f"got {type(config).__name__}")
        value = value["prompt"]
    if value is None:
        raise RowError(f"prompt function {where} returned nothing; return a string, a list of chat messages "
                       "or {\"prompt\": ..., \"config\": {...}}")
    if isinstance(value, str):
        text = value
    elif isinstance(value, (list, dict)):
        text = json.dumps(value, ensure_ascii=False) if isinstance(value, list) else \
            json.dumps(value, ensure_ascii=False, indent=2)
    else:
        raise RowError(f"prompt function {where} must return a string or object, got {type(value).__name__}")
    return text, _messages_of(text), config


def _messages_of(text: str) -> list[dict]:
    return chat_messages(text) or [{"role": "user", "content": text}]


def render_template(step: EvalStep, variables: dict) -> tuple[str, list[dict], list[str]]:
    """Step 7: the prompt's template rendered with the row's vars -> (text, messages, undefined names).
    Pre-parsed chat prompts render each message; any other text is checked for chat JSON AFTER
    rendering, so a chat template built with `{% for %}` is sent as messages."""
    prompt = step.prompt
    missing: list[str] = []
    try:
        if prompt.messages is not None:
            messages = []
            functions = prompt.message_functions or {}
            for j, m in enumerate(prompt.messages):
                m = dict(m)
                if isinstance(m.get("content"), str) and j not in functions:  # a function's: called per row
                    m["content"] = templating.render(m["content"], variables, missing,
                                                     name=_prompt_name(prompt.label))
                messages.append(m)
            return json.dumps(messages, ensure_ascii=False), messages, missing
        options = step.test.options
        template = prompt.raw
        if options:  # (without a prefix or suffix, the prompt's own string: its hash is kept)
            prefix, suffix = options.get("prefix") or "", options.get("suffix") or ""
            if prefix or suffix:
                template = f"{prefix}{template}{suffix}"
        text = templating.render(template, variables, missing, name=_prompt_name(prompt.label))
    except templating.TemplateError as exc:
        raise RowError(str(exc)) from None
    return text, _messages_of(text), missing


@lru_cache(maxsize=256)  # made for every row, read only in an error
def _prompt_name(label: str) -> str:
    short = " ".join(label.split())
    return f"prompt '{short if len(short) <= 40 else short[:39] + '…'}'"


def static_row(step: EvalStep, eval_id: str = "") -> Row:
    """The row without running user code (script vars stay references, a prompt function's file is the
    prompt): for the dry-run estimate, which must not call anything."""
    variables = final_vars(step, {**step.vars, **runtime_vars(step, eval_id)})
    text, messages, missing = render_template(step, variables)
    config = {**step.prompt.config, **step.test.request_params}
    rendered = RenderedPrompt(text=text, messages=messages, vars=variables, label=step.prompt.label, config=config)
    return Row(rendered, {k: v for k, v in variables.items() if k not in RUNTIME_VARS}, missing)
