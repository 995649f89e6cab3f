"""What a command's start imports: the modules of a feature the run does not use are imported where the
feature is (issue 30: start-up is a quarter of a 10,000-row eval), with the same results."""

import io
import os
import shutil
import subprocess
import sys

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

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


def _eval_then(tmp_path, tests: str, after: str) -> str:
    """The stdout of a one-row `echo` eval run in a fresh interpreter, then `after` (code run in it)."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"prompts: ['Answer: {{{{q}}}}']\nproviders: [echo]\ntests: {tests}\n")
    code = ("import sys\nsys.argv = ['factcli', 'eval', '-c', sys.argv[1], '--no-progress-bar']\n"
            "from factcli.cli.main import main\n"
            "try:\n    main()\nexcept SystemExit as exc:\n    assert exc.code == 0, exc.code\n" + after)
    return subprocess.run([sys.executable, "-c", code, str(cfg)], capture_output=True, text=True, check=True,
                          cwd=tmp_path).stdout


_ONE_TEST = "[{vars: {q: one}, assert: [{type: contains, value: Answer}]}]"


def test_an_echo_eval_imports_no_module_of_a_feature_it_does_not_use(tmp_path):
    out = _eval_then(tmp_path, _ONE_TEST, "print(' '.join(sorted(m for m in sys.modules if m.startswith('factcli.'))))\n")
    loaded = set(out.splitlines()[-1].split())
    assert "factcli.providers.echo" in loaded and "factcli.store.sqlite_backend" in loaded
    for unused in ("factcli.providers.openai_provider", "factcli.providers.litellm_provider",
                   "factcli.providers.script", "factcli.report.exports", "factcli.report.html_page",
                   "factcli.config.extensions", "factcli.scripting.row_code"):
        assert unused not in loaded, unused


def _every_name():
    from factcli.cli import app

    return [c.name for c in app.registered_commands] + [g.name for g in app.registered_groups]


def test_a_command_line_naming_a_command_builds_that_command_alone():
    from factcli.cli import app
    from factcli.cli.main import app_for

    names = _every_name()
    # the order `factcli --help` lists them in (the whole app is made of the command modules in turn)
    assert names == ["calibrate", "eval", "init", "view", "list", "show", "cancel", "diff", "export", "delete",
                     "copy", "cache", "ratings"]
    for name in names:
        lean = app_for([name, "--help"])
        assert lean is not app
        assert [c.name for c in lean.registered_commands] + [g.name for g in lean.registered_groups] == [name]
    assert app_for(["eval"]).registered_commands[0] is next(c for c in app.registered_commands if c.name == "eval")
    for args in ([], ["--version"], ["--help"], ["evl"], ["-c", "eval"], ["EVAL"]):
        assert app_for(args) is app, args
    assert _every_name() == names  # the app itself is left whole


@pytest.mark.parametrize("tail", [["--help"], [], ["--no-such-option"], ["no-such-word"]])
def test_the_lean_app_answers_as_the_whole_app(tmp_path, monkeypatch, tail):
    """Help, usage errors, a group's listing and a command's own run print the same and exit alike
    whether the app holds every command or the one named."""
    from typer.testing import CliRunner

    from factcli.cli import app
    from factcli.cli.main import app_for

    work, home = tmp_path / "work", tmp_path / "home"
    monkeypatch.setenv("FACTCLI_HOME", str(home))

    def run(app_, args):  # each in the same empty folder and home: a command may write there (init)
        for path in (work, home):
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir()
        monkeypatch.chdir(work)
        return CliRunner().invoke(app_, args)

    for name in _every_name():
        args = [name, *tail]
        whole, lean = run(app, args), run(app_for(args), args)
        assert (lean.exit_code, lean.output) == (whole.exit_code, whole.output), args
        assert type(lean.exception) is type(whole.exception), args


def test_main_runs_the_command_named(tmp_path, monkeypatch, capsys):
    from factcli.cli.main import main

    cfg = tmp_path / "c.yaml"
    cfg.write_text("prompts: ['Answer: {{q}}']\nproviders: [echo]\ntests: [{vars: {q: one}}]\n")
    monkeypatch.setattr("sys.argv", ["factcli", "eval", "-c", str(cfg), "--no-write", "--no-progress-bar"])
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 0
    assert "Successes: 1" in capsys.readouterr().out


_PIECES = [":", "smile", "heart", "x", "-text", "-emoji", " ", "\n", "[bold]", "[/]", "[/bold]", "\\[", "\\", "a", "::",
           "[red]", "é"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=12).map("".join), st.booleans(),
       st.sampled_from([None, True, False]))
@example(":smile:", True, None)
@example("a :heart-emoji: b :x-text:", False, None)
@example("[bold]:smile:[/] \\[:heart:]", True, None)
@example(":smile: :", True, False)
def test_the_console_prints_what_richs_console_prints(text, markup, emoji):
    """factcli's Console skips rich's emoji lookup in a text that cannot hold a code: every text prints
    as rich's own Console prints it (codes replaced, markup errors raised alike)."""
    from rich.console import Console as RichConsole

    from factcli.report.summary import Console

    outs = []
    for cls in (RichConsole, Console):
        console = cls(file=io.StringIO(), width=24, highlight=False, force_terminal=True, color_system="truecolor")
        try:
            console.print(text, markup=markup, emoji=emoji)
            outs.append(console.file.getvalue())
        except Exception as exc:  # noqa: BLE001  (bad markup: the same error from both)
            outs.append(f"{type(exc).__name__}: {exc}")
    assert outs[0] == outs[1]


def test_an_eval_that_prints_no_emoji_code_does_not_load_richs_table(tmp_path):
    out = _eval_then(tmp_path, "[{vars: {q: one}}]", "print('rich._emoji_codes' in sys.modules)\n")
    assert "Successes: 1" in out
    assert out.splitlines()[-1] == "False"


def test_each_command_is_registered_by_the_module_main_imports_for_it():
    from factcli.cli import app
    from factcli.cli.main import COMMAND_MODULES

    assert set(COMMAND_MODULES) == set(_every_name())
    for command in app.registered_commands:
        assert command.callback.__module__ == f"factcli.cli.{COMMAND_MODULES[command.name]}", command.name
    for group in app.registered_groups:
        modules = {c.callback.__module__ for c in group.typer_instance.registered_commands}
        assert modules == {f"factcli.cli.{COMMAND_MODULES[group.name]}"}, group.name


@pytest.mark.parametrize("args", [["eval", "--help"], ["ratings", "list", "--help"], ["cache"], ["view", "--nope"],
                                  ["list"], ["--help"], ["evl"], []])
def test_factcli_name_imports_that_commands_module_alone_and_prints_what_the_whole_app_prints(tmp_path, args):
    """In a fresh interpreter, as the `factcli` script runs: main() with NAME's module alone, then the
    whole app on the same command line; the same output and exit code, and no other command module
    loaded before the whole app was."""
    code = ("import sys\nsys.argv = ['factcli', *sys.argv[1:]]\n"
            "from factcli.cli.main import main\n"
            "try:\n    main()\nexcept SystemExit as exc:\n    print('EXIT', exc.code)\n"
            "print('LOADED', ' '.join(sorted(m for m in sys.modules if m.startswith('factcli.cli.'))))\n"
            "print('WHOLE')\n"
            "from factcli.cli import app\n"
            "try:\n    app()\nexcept SystemExit as exc:\n    print('EXIT', exc.code)\n")
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "FACTCLI_HOME": str(tmp_path / "home"), "COLUMNS": "100"}).stdout
    lean, whole = out.split("WHOLE\n")
    lean, loaded = lean.rsplit("LOADED", 1)
    assert lean == whole and "EXIT" in whole
    from factcli.cli.main import COMMAND_MODULES

    module = COMMAND_MODULES.get(args[0]) if args else None
    commands = {f"factcli.cli.{m}" for m in COMMAND_MODULES.values()}
    expected = {f"factcli.cli.{module}"} if module else commands
    if module == "ratings":
        expected.add("factcli.cli.runs")  # ratings reads runs' options
    assert set(loaded.split()) & commands == expected
