"""`factcli init [DIR]`: a first eval to run at once, offline (promptfoo users start with `promptfoo init`).

It writes a commented promptfooconfig.yaml, a small CSV of tests and the stand-in model and grader
they run with (Python functions, as in examples/quickstart), and prints the two lines that switch
to real ones. It never overwrites a file: if any of the three exists, it writes none.
"""

# No `from __future__ import annotations`: typer reads the commands' parameter types as each starts, and
# strings it would compile and evaluate first (as in eval_cmd.py).

from pathlib import Path

import typer

from factcli.cli.root import app, fail

CONFIG = '''\
# A factcli eval (promptfoo's config format). Run it with:  factcli eval
#
# As written it runs offline and costs nothing: the model under test and the grader are stand-ins,
# Python functions in stand_in.py, so you can see a run (one test fails on purpose) before you pay
# for a real model. Every key is described in factcli's docs/configs.md.
description: My first factcli eval

# What each test sends to the model; {{question}} is a column of tests.csv.
prompts:
  - "Answer in one short sentence. {{question}}"

# The model under test. For a real one, replace the line below with, for example,
#   providers: [openai:chat:gpt-4o-mini]
# and export OPENAI_API_KEY (or anthropic:messages:claude-sonnet-4-5 with ANTHROPIC_API_KEY,
# ollama:chat:llama3.2 for a local model; several models give one column each).
providers: [{id: "file://stand_in.py:model", label: stand-in}]

# What every test checks; {{expected}} is the other column of tests.csv.
defaultTest:
  # The grader: the model that judges answers for model-graded checks (llm-rubric, factuality, ...).
  # Prefer one from another family than the model under test. For a real one:
  #   options: {provider: openai:chat:gpt-4o}
  options: {provider: file://stand_in.py:grader}
  assert:
    - type: icontains            # a plain check: the answer contains the expected words
      value: "{{expected}}"
    - type: llm-rubric           # a model-graded check: the grader reads the answer
      value: "The answer agrees with: {{expected}}"

# One test per row of the CSV: each column is a var. Add rows, or columns such as __description.
tests: file://tests.csv
'''

TESTS = '''\
question,expected
What is the capital of France?,Paris
How many legs does a spider have?,eight
Who wrote Pride and Prejudice?,Jane Austen
'''

STAND_IN = '''\
"""Stand-ins so that the eval runs offline: `model` answers from a small table (one answer is wrong on
purpose), `grader` judges an llm-rubric check by looking for the expected words in the answer.
Replace them with real models in promptfooconfig.yaml (its comments show how)."""

import json
import re

ANSWERS = {
    "capital of France": "The capital of France is Paris.",
    "legs does a spider": "A spider has six legs.",
    "Pride and Prejudice": "Pride and Prejudice was written by Jane Austen.",
}


def model(prompt, options, context):
    answer = next((a for key, a in ANSWERS.items() if key in prompt), "I do not know.")
    return {"output": answer}


def grader(prompt, options, context):
    try:  # a grader receives the rubric prompt as JSON chat messages
        text = "\\n".join(m.get("content") or "" for m in json.loads(prompt))
    except ValueError:
        text = prompt
    # the last <Output> and <Rubric> are this answer's (the rubric prompt's examples come first)
    outputs = re.findall(r"<Output>\\s*(.*?)\\s*</Output>", text, re.S)
    rubrics = re.findall(r"agrees with:\\s*(.*?)\\s*</Rubric>", text, re.S)
    expected = rubrics[-1] if rubrics else ""
    passed = bool(outputs and expected and expected.lower() in outputs[-1].lower())
    reason = f"the answer {'says' if passed else 'does not say'} {expected!r}"
    return {"output": json.dumps({"reason": reason, "pass": passed, "score": 1.0 if passed else 0.0})}
'''

FILES = {"promptfooconfig.yaml": CONFIG, "tests.csv": TESTS, "stand_in.py": STAND_IN}
REAL_MODEL = "providers: [openai:chat:gpt-4o-mini]"
REAL_GRADER = "options: {provider: openai:chat:gpt-4o}"


@app.command("init")
def init(directory: Path = typer.Argument(Path("."), metavar="[DIR]", show_default=False,
                                          help="Where to write the files (made if missing; default: here).")) -> None:
    """Write a first eval to run at once, offline: promptfooconfig.yaml, tests.csv, stand_in.py."""
    if directory.exists() and not directory.is_dir():
        fail(f"{directory}: not a folder")
    existing = [name for name in FILES if (directory / name).exists()]
    if existing:
        fail(f"{directory / existing[0]} already exists: factcli init never overwrites a file "
             f"(pick another folder: factcli init DIR)")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name, text in FILES.items():
            with open(directory / name, "x", encoding="utf-8") as f:  # "x": never replace a file
                f.write(text)
    except OSError as exc:
        fail(f"{directory}: cannot write: {exc.strerror or exc}")
    here = str(directory) in (".", "")
    typer.echo(f"Wrote {', '.join(FILES)}{'' if here else f' in {directory}'}.")
    typer.echo(f"Run it (offline, stand-in model and grader): {'' if here else f'cd {directory} && '}factcli eval")
    typer.echo("Then switch to real models: in promptfooconfig.yaml, set these two lines (and export OPENAI_API_KEY):")
    typer.echo(f"  {REAL_MODEL}")
    typer.echo(f"  {REAL_GRADER}")
