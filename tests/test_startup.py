"""What a command's start imports: the modules of a feature the run does not use are imported where the
feature is (issue 30: start-up is a quarter of a 10,000-row eval), with the same results."""

import subprocess
import sys

import pytest

# Ids each built-in provider module claims, and one no built-in claims (litellm's).
IDS = ["echo", "echo:x", "openai:gpt-5-mini", "openai:chat:m1", "python:p.py", "file://p.py", "python-function:f",
       "exec:echo hi", "anthropic:messages:claude-sonnet-4-5", "openai:embedding:e", "ollama:chat:llama3"]


def _fresh(code: str) -> list[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.splitlines()


def _class_for(pid: str, asked_before: list[str] = (), imported: str = "") -> list[str]:
    """The class a fresh interpreter finds for `pid`, after `imported` and after asking for `asked_before`."""
    return _fresh(imported + "from factcli.providers.registry import _provider_class\n"
                  + "".join(f"_provider_class({p!r})\n" for p in asked_before)
                  + f"c = _provider_class({pid!r})\nprint(c.__module__ + '.' + c.__name__)\n")


@pytest.mark.parametrize("pid", IDS)
def test_a_provider_id_finds_the_class_it_found_with_every_built_in_loaded(pid):
    """The registry imports the built-in provider modules one at a time until one claims the id: the
    class is the one found once all of them are registered, whichever ids were asked for first."""
    everything = _class_for(pid, IDS, "from factcli.providers import echo, openai_provider, script\n")
    assert _class_for(pid) == everything
    assert _class_for(pid, list(reversed(IDS))) == everything


def test_an_echo_eval_imports_no_module_of_a_feature_it_does_not_use(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("prompts: ['Answer: {{q}}']\nproviders: [echo]\n"
                   "tests: [{vars: {q: one}, assert: [{type: contains, value: Answer}]}]\n")
    code = ("import sys\nsys.argv = ['factcli', 'eval', '-c', sys.argv[1], '--no-progress-bar']\n"
            "from factcli.cli.main import main\n"
            "try:\n    main()\nexcept SystemExit as exc:\n    assert exc.code == 0, exc.code\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('factcli.'))))\n")
    out = subprocess.run([sys.executable, "-c", code, str(cfg)], capture_output=True, text=True, check=True,
                         cwd=tmp_path).stdout
    loaded = set(out.splitlines()[-1].split())
    assert "factcli.providers.echo" in loaded and "factcli.store.sqlite_backend" in loaded
    for unused in ("factcli.providers.openai_provider", "factcli.providers.litellm_provider",
                   "factcli.providers.script", "factcli.report.exports", "factcli.report.html_page",
                   "factcli.config.extensions", "factcli.scripting.row_code"):
        assert unused not in loaded, unused
