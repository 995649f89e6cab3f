"""Long waits say what they are doing (issue 17, item 5): knowledge loading, index builds, a user's
module import and litellm's first import announce themselves, and the progress bar shows them."""

import sys
import threading

from rich.console import Console

from factcli import activity
from factcli.providers.search.knowledge import open_source
from factcli.report import summary


class Recorder:
    def __init__(self):
        self.seen: list[str | None] = []
        self.lock = threading.Lock()

    def __call__(self, message):
        with self.lock:
            self.seen.append(message)


def test_a_listener_is_told_the_newest_activity_and_when_all_end():
    rec = Recorder()
    with activity.listening(rec):
        with activity.activity("outer"):
            with activity.activity("inner"):
                pass
    assert rec.seen == [None, "outer", "inner", "outer", None]
    with activity.activity("nobody listens"):  # no listener: nothing to tell, nothing fails
        pass
    assert rec.seen[-1] is None and len(rec.seen) == 5


def test_activities_on_other_threads_reach_the_listener():
    rec = Recorder()
    with activity.listening(rec):
        def work(i):
            with activity.activity(f"worker {i}"):
                pass
        workers = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    assert {f"worker {i}" for i in range(4)} <= set(rec.seen)
    assert rec.seen[-1] is None


def test_reading_a_knowledge_source_and_building_its_index_are_announced(tmp_path):
    folder = tmp_path / "wiki"
    folder.mkdir()
    (folder / "Ada Lovelace.txt").write_text("Ada Lovelace was an English mathematician. " * 40)
    (folder / "Alan Turing.md").write_text("Alan Turing was a computer scientist. " * 40)
    rec = Recorder()
    with activity.listening(rec):
        source = open_source(folder)
        source.retrieve("mathematician", k=2)  # the whole source: reads every passage, builds one index
    messages = [m for m in rec.seen if m]
    assert "Reading the knowledge source wiki" in messages
    assert "Reading every passage of wiki" in messages
    assert any(m.startswith("Building a search index over ") and m.endswith(" passages") for m in messages)


def test_importing_a_user_module_is_announced(tmp_path):
    from factcli.scripting.python import load_module

    module = tmp_path / "slow_provider.py"
    module.write_text("VALUE = 42\n")
    rec = Recorder()
    with activity.listening(rec):
        assert load_module(module).VALUE == 42
    assert "Importing slow_provider.py" in rec.seen


class _TTY:
    """stderr as a terminal, so the progress bar is drawn (into a buffer)."""

    def __init__(self, real):
        self._real = real

    def isatty(self):
        return True

    def __getattr__(self, name):
        return getattr(self._real, name)


def test_the_progress_bar_shows_the_current_activity_beside_the_counts(monkeypatch):
    console = Console(record=True, force_terminal=True, width=160)
    monkeypatch.setattr(summary, "stderr_console", lambda: console)
    monkeypatch.setattr(sys, "stderr", _TTY(sys.stderr))
    progress = summary.Progress(total=10)
    try:
        task = progress._progress.tasks[0]
        with activity.activity("Building a search index over 12,345 passages"):
            assert task.fields["doing"] == "Building a search index over 12,345 passages…"
            progress._progress.refresh()
            assert "Building a search index over 12,345 passages…" in console.export_text(clear=False)
        assert task.fields["doing"] == ""
    finally:
        progress.stop()
    with activity.activity("after the bar stopped"):  # the bar no longer listens
        pass
    assert task.fields["doing"] == ""


def test_a_spinner_names_what_is_being_done_and_is_silent_off_a_terminal(monkeypatch):
    console = Console(record=True, force_terminal=True, width=120)
    monkeypatch.setattr(summary, "stderr_console", lambda: console)
    spinners = []
    real_status = console.status
    monkeypatch.setattr(console, "status", lambda *a, **k: spinners.append(real_status(*a, **k)) or spinners[-1])
    with summary.working("Writing report.json…"):
        assert spinners[0].status == "Writing report.json…"
        with activity.activity("Reading the knowledge source wiki.jsonl"):
            assert spinners[0].status == "Reading the knowledge source wiki.jsonl…"
        assert spinners[0].status == "Writing report.json…"
    assert "Writing report.json…" in console.export_text()
    quiet = Console(record=True, force_terminal=False, width=120)
    monkeypatch.setattr(summary, "stderr_console", lambda: quiet)
    with summary.working("Writing report.json…"), activity.activity("Reading"):
        pass
    assert quiet.export_text() == ""
