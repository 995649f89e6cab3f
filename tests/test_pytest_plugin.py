"""factcli's pytest plugin (factcli/testing/), run the way a user's project runs it: pytest in a
subprocess over a copy of examples/pytest/, with FACTCLI_HOME in a temporary folder."""

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from conftest import ROOT
from typer.testing import CliRunner

from factcli.cli import app

EXAMPLE = ROOT / "examples" / "pytest"


@pytest.fixture
def project(tmp_path):
    folder = tmp_path / "project"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    return folder


def pytest_in(folder, *args, env=None):
    """pytest in a subprocess, in `folder`, with this test's FACTCLI_HOME and no key of the caller."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "OPENAI_"))}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:randomly", *args], cwd=folder,
                          env=full_env, capture_output=True, text=True, timeout=300, check=False)


def test_one_pass_and_one_fail_with_the_graders_reason(project):
    result = pytest_in(project)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed, 1 passed" in result.stdout
    assert "FAILED test_app.py::test_eiffel_tower_year" in result.stdout
    # the failure message: the score, and the stand-in judge's reason
    assert "AssertionError: factcli: the output failed: score 0.00" in result.stdout
    assert "llm-rubric failed (score 0.00): The output does not mention 1889." in result.stdout
    assert "output: The Eiffel Tower was completed in 1887." in result.stdout


def test_a_real_grader_over_http_and_its_cache(project, fake_openai):
    """--factcli-grader picks the judge (here the fake server); its reason is the failure message, and
    a second run is answered from the response cache under .pytest_cache."""
    verdicts = {"1889": ("The answer gives 1887; the tower was completed in 1889.", False),
                "Paris": ("Paris is named as the capital.", True)}

    def judge(body):
        text = body["messages"][-1]["content"]
        reason, ok = next(v for k, v in verdicts.items() if k in text.split("<Rubric>")[1])
        return json.dumps({"pass": ok, "score": 1.0 if ok else 0.0, "reason": reason})

    fake_openai.add_rule("Rubric", judge, model="judge")
    env = {"OPENAI_BASE_URL": fake_openai.url, "OPENAI_API_KEY": "sk-test"}
    result = pytest_in(project, "--factcli-grader", "openai:chat:judge", env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed, 1 passed" in result.stdout
    assert "The answer gives 1887; the tower was completed in 1889." in result.stdout
    sent = len(fake_openai.requests)
    assert sent == 2
    again = pytest_in(project, "--factcli-grader", "openai:chat:judge", env=env)
    assert "1 failed, 1 passed" in again.stdout and len(fake_openai.requests) == sent  # nothing paid twice
    assert list((project / ".pytest_cache" / "d" / "factcli").iterdir())


def test_factcli_config_collects_one_item_per_row(project, isolated_home):
    collected = pytest_in(project, "--factcli-config", "promptfooconfig.yaml", "--collect-only", "-q")
    lines = collected.stdout.splitlines()
    assert [line for line in lines if line.startswith("promptfooconfig.yaml::")] == [
        "promptfooconfig.yaml::capital [app]", "promptfooconfig.yaml::eiffel tower [app]",
        "promptfooconfig.yaml::louvre [app]"]
    junit = project / "junit.xml"
    result = pytest_in(project, "--factcli-config", "promptfooconfig.yaml", "-k", "tower or louvre",
                       f"--junitxml={junit}", "test_app.py::test_capital_is_right")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAILED promptfooconfig.yaml::eiffel tower [app] - FAIL: score 0.00" in result.stdout
    assert "llm-rubric failed (score 0.00): The output does not mention 1889." in result.stdout
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    assert set(cases) == {"eiffel tower [app]", "louvre [app]"}  # -k left two rows; the path arg no test
    assert cases["eiffel tower [app]"].find("failure") is not None and cases["louvre [app]"].find("failure") is None
    # the run is stored, with only the rows -k kept
    listed = json.loads(CliRunner().invoke(app, ["list", "--json"], env={"FACTCLI_HOME": str(isolated_home)}).output)
    assert len(listed) == 1 and "factcli view " + listed[0]["id"] in result.stdout
    shown = CliRunner().invoke(app, ["view", listed[0]["id"]], env={"FACTCLI_HOME": str(isolated_home)})
    assert "louvre" in shown.output and "capital" not in shown.output


def test_x_stops_at_the_first_failing_row(project):
    result = pytest_in(project, "--factcli-config", "promptfooconfig.yaml", "-x", "-k", "not test_")
    assert "1 failed, 1 passed" in result.stdout, result.stdout


def test_a_bad_config_is_a_usage_error(project):
    (project / "bad.yaml").write_text("prompts: [x]\nproviders: [echo]\ntests: [{assert: [{type: contans}]}]\n")
    result = pytest_in(project, "--factcli-config", "bad.yaml")
    assert result.returncode == 4
    assert "--factcli-config bad.yaml: bad.yaml: tests[0].assert[0].type: unknown assertion type 'contans'" \
        in result.stderr


def test_the_plugin_loads_nothing_heavy():
    """Registered for every pytest session: loading it imports neither the run machinery nor litellm."""
    code = ("import sys, factcli.testing.plugin; "
            "print(sorted(m for m in sys.modules if m.startswith(('factcli.run', 'litellm', 'factcli.config'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    # and a session that uses none of it imports none of it either
    probe = ROOT / "tests" / "parity"  # any folder: the session collects nothing there
    script = ("import sys, pytest; pytest.main(['-q', '--collect-only', '-p', 'no:cacheprovider', sys.argv[1]]); "
              "print('LOADED', sorted(m for m in sys.modules if m.startswith(('factcli.run', 'litellm'))))")
    out = subprocess.run([sys.executable, "-c", script, str(probe)], capture_output=True, text=True, check=False).stdout
    assert "LOADED []" in out and "factcli.testing.plugin" in subprocess.run(
        [sys.executable, "-m", "pytest", "--trace-config", "--collect-only", "-q", str(probe)],
        capture_output=True, text=True, check=False).stdout
