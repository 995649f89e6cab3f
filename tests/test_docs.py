"""The docs keep up with the code, and the commands they show run.

Reference checks: every assertion type and every unsupported type is named in docs/scoring.md;
every FACTCLI_* environment variable factcli's source reads is documented in README.md or docs/;
every command, option and argument of the command-line app (introspected from the typer app)
appears in its section of docs/commands.md; every relative link in README.md and docs/ resolves.

Doc commands: every ```bash, ```sh and ```console block of README.md, docs/getting-started.md and docs/rag.md is
run, so the docs cannot rot. Conventions of those two files (keep them when you edit):

- In a ```bash or ```sh block every line is a command (a line ending in `\\` continues on the next);
  lines starting with `#` are comments.
- In a ```console block, lines starting with `$ ` are commands; the lines after one, up to the next
  `$ ` or the end of the block, are output it must print: each must match a whole line of its
  stdout or stderr (trailing spaces ignored), where `...` inside a line matches anything, and a line
  that is only `...` stands for lines left out (it is not checked).
- A command must exit 0, unless it ends with the comment `# exit N`: then it must exit N.
- A ```yaml block whose first line is `# PATH` (a relative path ending in .yaml or .yml, nothing
  else on the line) is written to PATH, relative to the current folder, before the commands after
  it run. Other yaml blocks are only shown.
- Commands run in the order they appear, each document in its own fresh temporary folder holding a
  copy of examples/ and configs/, with bash, FACTCLI_HOME inside that folder, COLUMNS=80, and
  OPENAI_BASE_URL and a dummy OPENAI_API_KEY pointing `openai:` models at the fake server
  (tests/fake_openai.py), which answers the getting-started questions by the rules in FAKE_ANSWERS.
  A `cd` carries over to the commands after it.
- Commands not run are listed in SKIPPED below, each with its reason; a SKIPPED entry that matches
  no command fails the test, and each document must run at least MIN_RUN[doc] commands, so the skip
  list cannot silently swallow a document.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import typer.main

from factcli.cli import app
from factcli.scoring import registry

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SOURCE = ROOT / "factcli"
README = ROOT / "README.md"
GETTING_STARTED = DOCS / "getting-started.md"
COMMANDS = DOCS / "commands.md"
SCORING = DOCS / "scoring.md"
TEST_COMMAND = "python -m pip install -q -e '.[test]' && python -m pytest"  # .ci/run runs exactly this
QUICKSTART = "factcli eval -c examples/quickstart/promptfooconfig.yaml"
VENV = "python -m venv .venv && . .venv/bin/activate"


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _doc_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


# ------------------------------------------------------------------ what the docs must name

# An environment variable name as a string literal in factcli's source: os.environ.get("FACTCLI_X"),
# env_float("FACTCLI_X", …), ("FACTCLI_X", "OTHER") tuples, …
_ENV_LITERAL = re.compile(r"""["'](FACTCLI_[A-Z0-9_]+)["']""")


def _code_spans(text: str) -> set[str]:
    """Everything written as `code` (inline code spans), plus the words inside them."""
    spans = set(re.findall(r"`([^`\n]+)`", text))
    words = {w for s in spans for w in re.findall(r"[A-Za-z0-9_:.\-]+", s)}
    return spans | words


def _env_vars_read() -> set[str]:
    names: set[str] = set()
    for path in SOURCE.rglob("*.py"):
        names.update(_ENV_LITERAL.findall(path.read_text(encoding="utf-8")))
    return names


def test_the_source_scan_finds_env_vars():
    found = _env_vars_read()
    assert {"FACTCLI_HOME", "FACTCLI_GRADER", "FACTCLI_NODE"} <= found, found


@pytest.mark.parametrize("name", sorted(_env_vars_read()))
def test_every_factcli_env_var_is_documented(name):
    docs = "\n".join(_read(p) for p in _doc_files())
    assert f"`{name}`" in docs or f"`{name}=" in docs, f"neither README.md nor docs/ documents {name}"


@pytest.mark.parametrize("name", registry.known_types())
def test_every_assertion_type_is_documented(name):
    assert name in _code_spans(_read(SCORING)), f"docs/scoring.md does not document the assertion type {name!r}"


@pytest.mark.parametrize("name", sorted(registry.UNSUPPORTED))
def test_every_unsupported_type_is_named(name):
    assert name in _code_spans(_read(SCORING)), f"docs/scoring.md does not say that {name!r} is not supported"


def test_known_types_are_the_registry():
    # the test above must see aliases too (model-graded-factuality, is-valid-function-call, similar:cosine)
    types = set(registry.known_types())
    assert {"model-graded-factuality", "is-valid-function-call", "similar:cosine", "factscore",
            "facts-grounding"} <= types


# ------------------------------------------------------------------ every command and option

def _is_group(command) -> bool:
    return hasattr(command, "commands")


def _commands(command, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    """Every command of the app with its path (("eval",), ("cache", "clear"), …); groups too.

    Duck-typed: typer may vendor its own click (typer._click), so click's classes are not used."""
    found = [(path, command)]
    if _is_group(command):
        for name, sub in sorted(command.commands.items()):
            found += _commands(sub, (*path, name))
    return found


CLI_COMMANDS = _commands(typer.main.get_command(app))


def _section(text: str, heading: str) -> str:
    """The text under a heading line, up to the next heading of level 1 to 3."""
    lines = text.splitlines()
    try:
        start = lines.index(heading)
    except ValueError:
        return ""
    end = next((i for i in range(start + 1, len(lines)) if re.match(r"#{1,3} ", lines[i])), len(lines))
    return "\n".join(lines[start + 1:end])


def _without_code_blocks(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)


def test_the_introspection_sees_the_app():
    paths = {p for p, _ in CLI_COMMANDS}
    assert {("eval",), ("view",), ("list",), ("show",), ("diff",), ("export",), ("delete",), ("calibrate",),
            ("cache", "clear")} <= paths, paths
    eval_cmd = dict(CLI_COMMANDS)[("eval",)]
    assert {"--resume", "--max-cost", "-c"} <= {o for p in eval_cmd.params for o in p.opts}


@pytest.mark.parametrize("path, command", [(p, c) for p, c in CLI_COMMANDS if not _is_group(c)],
                         ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_every_option_is_in_commands_md(path, command):
    """Each command has a section `### \\`factcli CMD\\`` listing every option and argument in `code`."""
    heading = f"### `factcli {' '.join(path)}`"
    section = _section(_read(COMMANDS), heading)
    assert section, f"docs/commands.md has no section {heading!r}"
    spans = re.findall(r"`([^`\n]+)`", _without_code_blocks(section))
    for param in command.params:
        if param.param_type_name == "argument":
            names = [(param.metavar or param.name).upper()]
        else:
            names = [o for o in (*param.opts, *param.secondary_opts) if o != "--help"]
        for name in names:
            assert any(re.search(rf"(^|[\s,\[]){re.escape(name)}(?![\w-])", s) for s in spans), \
                f"docs/commands.md, {heading}: {name} is not documented"


def test_the_root_options_are_in_commands_md():
    root = typer.main.get_command(app)
    text = _read(COMMANDS)
    for param in root.params:
        for name in param.opts:
            if name != "--help":
                assert f"### `factcli {name}`" in text, name


# ------------------------------------------------------------------ links

def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[`*_]|\[|\]\([^)]*\)", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = _without_code_blocks(_read(path))
    return {_slug(m) for m in re.findall(r"^#{1,6} (.+)$", text, flags=re.MULTILINE)}


@pytest.mark.parametrize("doc", _doc_files() + [DOCS / "architecture.md"], ids=lambda p: p.name)
def test_relative_links_resolve(doc):
    text = _without_code_blocks(_read(doc))
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    for link in links:
        if re.match(r"[a-z]+:", link):
            continue  # http(s), mailto
        target, _, anchor = link.partition("#")
        path = (doc.parent / target).resolve() if target else doc
        assert path.exists(), f"{doc.name}: link to a missing file: {link}"
        if anchor and path.suffix == ".md":
            assert anchor in _anchors(path), f"{doc.name}: no heading for #{anchor} in {path.name}"


def test_readme_is_short_and_links_every_doc():
    text = _read(README)
    assert len(text.splitlines()) <= 160
    for page in sorted(DOCS.glob("*.md")):
        assert f"docs/{page.name}" in text, f"README.md does not link docs/{page.name}"


# ------------------------------------------------------------------ running the docs' commands

@dataclass
class Step:
    doc: str
    line: int
    kind: str  # "command" or "file"
    text: str  # the command as written, or the file's content
    path: str = ""  # for "file"
    expect_exit: int = 0
    expect_output: list[str] = field(default_factory=list)

    @property
    def bare(self) -> str:
        """The command without its trailing comment."""
        return re.split(r"\s+#\s", self.text, maxsplit=1)[0].strip()


_FENCE = re.compile(r"^```(\w*)\s*$")
_FILE_MARK = re.compile(r"^#\s+([\w./-]+\.ya?ml)\s*$")
_EXIT_MARK = re.compile(r"#\s*exit\s+(\d+)\s*$")


def _bash_commands(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    out, buf, start = [], "", 0
    for n, line in lines:
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if not buf:
            start = n
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        out.append((start, buf + line.strip()))
        buf = ""
    assert not buf, f"line {start}: a command continues past its block"
    return out


def parse_steps(path: Path, doc: str | None = None) -> list[Step]:
    doc = doc or path.relative_to(ROOT).as_posix()
    steps: list[Step] = []
    lines = _read(path).splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        lang, start = m.group(1), i + 1
        end = next(j for j in range(start, len(lines)) if lines[j].startswith("```"))
        body = [(n + 1, lines[n]) for n in range(start, end)]
        i = end + 1
        if lang in ("bash", "sh"):
            for n, cmd in _bash_commands(body):
                steps.append(_command(doc, n, cmd))
        elif lang == "console":
            for n, line in body:
                if line.startswith("$ "):
                    steps.append(_command(doc, n, line[2:]))
                elif line.strip():
                    assert steps and steps[-1].kind == "command" and steps[-1].line >= start, \
                        f"{doc}:{n}: output before any `$ ` command in a console block"
                    steps[-1].expect_output.append(line.rstrip())
        elif lang in ("yaml", "yml") and body and _FILE_MARK.match(body[0][1]):
            name = _FILE_MARK.match(body[0][1]).group(1)
            steps.append(Step(doc, body[0][0], "file", "\n".join(line for _, line in body) + "\n", path=name))
    return steps


def _command(doc: str, line: int, text: str) -> Step:
    m = _EXIT_MARK.search(text)
    return Step(doc, line, "command", text, expect_exit=int(m.group(1)) if m else 0)


# (document, the command as written without its comment, why it is not run)
SKIPPED = [
    ("README.md", VENV, ("creates and activates a virtual environment: the test already runs inside the one "
                         "factcli is installed in, and an activation would not outlive its command")),
    ("README.md", "python -m pip install -e .", ("installs factcli: it is installed (editable) in the environment "
                                                 "running this test, and a test must not reach the network")),
    ("README.md", TEST_COMMAND, "the test command itself: running pytest from inside pytest would recurse"),
    ("README.md", "factcli eval --resume latest", ("the README's latest run (the quickstart) is complete, so there "
                                                   "is nothing to resume; docs/getting-started.md resumes a run "
                                                   "that --max-cost stopped, and that one runs")),
    ("README.md", "factcli diff latest~1 latest", ("the README stores one run (the quickstart), so there is no run "
                                                   "before it; docs/getting-started.md changes its prompt and runs "
                                                   "the same diff")),
    ("docs/getting-started.md", VENV, "as in README.md"),
    ("docs/getting-started.md", "python -m pip install -e .", "as in README.md"),
    ("docs/getting-started.md", "export OPENAI_API_KEY=sk-...", ("sets your own key; the test sets a dummy "
                                                                 "OPENAI_API_KEY and points OPENAI_BASE_URL at the "
                                                                 "fake server instead")),
]

# Each document runs at least this many commands (a floor against a skip list that grows by accident).
MIN_RUN = {"README.md": 6, "docs/getting-started.md": 9, "docs/rag.md": 6}

# How the fake server answers the questions of docs/getting-started.md (re.search on the prompt).
FAKE_ANSWERS = [
    ("capital of California", "Sacramento is the capital of California."),
    ("capital of Texas", "Austin is the capital of Texas."),
    ("capital of New York", "Albany is the capital of New York."),
]


def _matches(expected: str, actual_lines: list[str]) -> bool:
    pattern = "".join(".*" if part == "..." else re.escape(part) for part in re.split(r"(\.\.\.)", expected))
    return any(re.fullmatch(pattern, line) for line in actual_lines)


def _run_doc(doc_path: Path, fake_openai, tmp_path: Path) -> list[Step]:
    doc = doc_path.relative_to(ROOT).as_posix()
    work = tmp_path / "work"
    work.mkdir()
    for folder in ("examples", "configs"):
        shutil.copytree(ROOT / folder, work / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for pattern, answer in FAKE_ANSWERS:
        fake_openai.add_rule(pattern, answer)
    env = dict(os.environ)
    env.update({
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
        "FACTCLI_HOME": str(tmp_path / "factcli-home"),
        "HOME": str(tmp_path / "home"),
        "COLUMNS": "80",
        "OPENAI_API_KEY": "sk-test-dummy",
        "OPENAI_BASE_URL": fake_openai.url,
        "NO_COLOR": "1",
    })
    skipped = {(d, c): why for d, c, why in SKIPPED if d == doc}
    used: set[tuple[str, str]] = set()
    ran: list[Step] = []
    cwd, cwd_file = work, tmp_path / "cwd"
    for step in parse_steps(doc_path):
        where = f"{doc}:{step.line}"
        if step.kind == "file":
            target = cwd / step.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(step.text, encoding="utf-8")
            continue
        if (doc, step.bare) in skipped:
            used.add((doc, step.bare))
            continue
        # Run it in bash, then note the folder it ended in, so that `cd` carries over.
        script = f"{step.text}\n__rc=$?; pwd > {cwd_file}; exit $__rc\n"
        proc = subprocess.run(["bash", "-c", script], check=False, cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=300)
        output = proc.stdout + proc.stderr
        assert proc.returncode == step.expect_exit, \
            f"{where}: `{step.text}` exited {proc.returncode}, the doc says {step.expect_exit}\n{output[-3000:]}"
        if cwd_file.exists():
            cwd = Path(cwd_file.read_text().strip())
        actual = [line.rstrip() for line in output.splitlines()]
        for expected in step.expect_output:
            if expected.strip() != "...":
                assert _matches(expected, actual), \
                    f"{where}: `{step.text}` did not print a line matching {expected!r}; it printed:\n{output[-4000:]}"
        ran.append(step)
    unused = set(skipped) - used
    assert not unused, f"SKIPPED entries that match no command of {doc} (fix the list): {sorted(unused)}"
    assert len(ran) >= MIN_RUN[doc], f"{doc}: only {len(ran)} commands ran"
    return ran


def test_the_readme_keeps_its_setup_test_and_quickstart_commands():
    steps = parse_steps(README)
    commands = [s.bare for s in steps if s.kind == "command"]
    assert VENV in commands and "python -m pip install -e ." in commands
    assert TEST_COMMAND in commands, "README.md must show the exact test command that .ci/run runs"
    assert TEST_COMMAND in _read(ROOT / ".ci" / "run").splitlines()
    quickstart = [s for s in steps if s.bare == QUICKSTART]
    assert quickstart and quickstart[0].expect_exit == 100 and quickstart[0].expect_output


def test_the_parser_reads_the_conventions(tmp_path):
    doc = tmp_path / "d.md"
    doc.write_text("```bash\n# a comment\nfactcli list \\\n  --json   # exit 3\n```\n"
                   "```yaml\n# sub/c.yaml\nprompts: [hi]\n```\n"
                   "```yaml\nnot: written\n```\n"
                   "```console\n$ factcli view   # exit 0\nRun ... · 1/1 rows\n...\n```\n")
    steps = parse_steps(doc, "d.md")
    assert [(s.kind, s.bare if s.kind == "command" else s.path, s.expect_exit) for s in steps] == [
        ("command", "factcli list  --json", 3), ("file", "sub/c.yaml", 0), ("command", "factcli view", 0)]
    assert steps[1].text == "# sub/c.yaml\nprompts: [hi]\n" and steps[2].expect_output == ["Run ... · 1/1 rows", "..."]
    assert _matches("Run ... · 1/1 rows", ["Run eval-x · 1/1 rows"])
    assert not _matches("Run ... · 1/1 rows", ["Run eval-x · 2/2 rows"])


def test_the_readme_commands_run(fake_openai, tmp_path):
    ran = _run_doc(README, fake_openai, tmp_path)
    assert QUICKSTART in [s.bare for s in ran]


def test_the_rag_guide_commands_run(fake_openai, tmp_path):
    ran = _run_doc(DOCS / "rag.md", fake_openai, tmp_path)
    assert any(s.bare.startswith("factcli diff release.json") for s in ran)


def test_the_getting_started_commands_run(fake_openai, tmp_path):
    ran = _run_doc(GETTING_STARTED, fake_openai, tmp_path)
    assert QUICKSTART in [s.bare for s in ran]
    assert any(s.bare.startswith("factcli eval --resume") for s in ran)
    assert any(s.bare.startswith("factcli show") for s in ran)
