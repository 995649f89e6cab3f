"""`eval --assertions asserts.yaml --model-outputs outputs.json`: score outputs a user already has.

As promptfoo does, each output becomes one test with the prompt `{{output}}` and the echo provider.
Unlike promptfoo, the output is used literally (never rendered as a template), and absolute
paths work (contract §8).

factcli's own (production traces, issue 44): an item may carry `vars` (the trace's input, its
retrieved passages as `context`, its expected answer: what the assertions read; a list stays one
value) and `system` (the name of the system the traces came from: the column's label instead of
`echo`); a `.jsonl` file holds one item a line.
"""

from __future__ import annotations

import json
from pathlib import Path

from factcli import sources
from factcli.config.context import Ctx
from factcli.config.loader import Suite
from factcli.config.prompts import make_prompt
from factcli.config.testcases import Merge, parse_assertion
from factcli.errors import ConfigError
from factcli.types import ProviderSpec, TestCase


def suite_from_outputs(assertions_path: Path, outputs_path: Path, cli_vars: dict | None = None) -> Suite:
    afile = str(assertions_path)
    if not assertions_path.is_file():
        raise ConfigError("assertions file not found", afile)
    asserts = sources.load_structured(assertions_path)
    if not isinstance(asserts, list) or not asserts or not isinstance(asserts[0], dict) or "type" not in asserts[0]:
        raise ConfigError("expected a list of assertions, each with a 'type'", afile)
    ctx = Ctx(afile, assertions_path.parent, {})
    parsed = [parse_assertion(a, ctx, f"[{i}]") for i, a in enumerate(asserts)]

    ofile = str(outputs_path)
    if not outputs_path.is_file():
        raise ConfigError("model outputs file not found", ofile)
    text = sources.read_text(outputs_path, ofile, "")
    try:
        if outputs_path.suffix.lower() == ".jsonl":
            outputs = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            outputs = json.loads(text)
        outputs = sources.check_depth(outputs, ofile)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"invalid JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}", ofile) from None
    except RecursionError:
        raise ConfigError("invalid JSON: nested too deeply", ofile) from None
    if not isinstance(outputs, list):
        raise ConfigError("expected a JSON list of outputs (strings or {output, tags})", ofile)
    tests, systems = [], set()
    merge = Merge(TestCase(), cli_vars)  # no defaultTest here: --var over every output's vars
    for i, item in enumerate(outputs):
        vars_ = {}
        if isinstance(item, dict):
            unknown = set(item) - {"output", "tags", "vars", "system"}
            if unknown:
                raise ConfigError(f"unknown key '{sorted(unknown)[0]}' (expected output, tags, vars, system)", ofile,
                                  f"[{i}]")
            if not isinstance(item.get("vars", {}), dict):
                raise ConfigError("vars must be a mapping of var names to values", ofile, f"[{i}].vars")
            vars_.update(item.get("vars") or {})
            if "system" in item:
                if not isinstance(item["system"], str) or not item["system"].strip():
                    raise ConfigError("system must be the traces' system's name", ofile, f"[{i}].system")
                systems.add(item["system"])
            if "output" not in item:
                raise ConfigError("missing 'output'", ofile, f"[{i}]")
            output = item["output"]
            tags = item.get("tags")
            if tags is not None and not isinstance(tags, list):
                raise ConfigError("tags must be a list", ofile, f"[{i}].tags")
            if tags is not None:
                # promptfoo sets the var whenever the key is there, so `tags: []` gives tags = ""
                vars_["tags"] = ", ".join(str(t) for t in tags)
        else:
            output = item
        if not isinstance(output, str):
            raise ConfigError(f"an output must be a string, got {type(output).__name__}", ofile,
                              f"[{i}].output" if isinstance(item, dict) else f"[{i}]")
        vars_["output"] = output
        # a trace's passages (a list) are one value, not one row each
        test = TestCase(vars=vars_, assertions=list(parsed), provider_output=output,
                        raw={"vars": vars_, "assert": asserts}, options={"disableVarExpansion": True},
                        source=(afile, ""))  # (its assertions are the file's: errors name it)
        tests.append(merge.test(test))
    if len(systems) > 1:
        raise ConfigError(f"the items name {len(systems)} systems ({', '.join(sorted(systems))}); score one "
                          "system's traces a run, or leave `system` out", ofile)
    return Suite(
        description=f"{assertions_path.name} on {outputs_path.name}",
        prompts=[make_prompt("{{output}}", "{{output}}")],
        providers=[ProviderSpec(id="echo", label=next(iter(systems), None))],
        tests=tests,
        raw={"assertions": asserts, "modelOutputs": str(outputs_path)},
        base_dir=assertions_path.parent,
        config_files=[afile, ofile],
    )
