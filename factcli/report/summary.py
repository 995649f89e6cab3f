"""What the terminal shows during and after `eval`: a progress bar, the results table, a summary."""

from __future__ import annotations

import re
import sys
from contextlib import contextmanager
from typing import Iterator

from rich import console as rich_console
from rich.markup import escape
from rich.segment import Segment
from rich.text import Text

from factcli.activity import listening
from factcli.report import labels
from factcli.report.escapes import may_hold_control as _MAY_HOLD_CONTROL
from factcli.report.escapes import visible
from factcli.report.figures import spend_text
from factcli.types import ERROR_REASONS, FAILURE_GRADING, EvalResult

TABLE_MAX_TESTS = 50


# Where rich's emoji codes (`:smile:`, `:x-text:`) could be: a colon, no space, a colon.
_MAY_HOLD_EMOJI_CODE = re.compile(r":\S*:").search


class Console(rich_console.Console):
    """rich's Console, that shows control characters in the texts it prints as escapes
    (report/escapes.py), and looks for emoji codes only in a text that could hold one: the first lookup
    imports rich's table of every code (a start-up cost at the first text any command prints: issue 30),
    and factcli's texts rarely hold one. A text without `:` + non-spaces + `:` has none to replace (markup
    and escapes only split it or drop backslashes), so it prints the same."""

    def render_str(self, text: str, *, emoji: bool | None = None, **kwargs):
        if emoji is None and _MAY_HOLD_EMOJI_CODE(text) is None:
            emoji = False
        return super().render_str(visible(text), emoji=emoji, **kwargs)

    def _render_buffer(self, buffer) -> str:
        """Every text segment written with its control characters escaped (report/escapes.py): also
        those of a rich Text made directly, which render_str does not see. rich's own control
        segments (the progress bar's cursor moves) and styles are its own, not text."""
        return super()._render_buffer(
            seg if seg.control or _MAY_HOLD_CONTROL(seg.text) is None else Segment(visible(seg.text), seg.style)
            for seg in buffer)


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False)


def print_note(message: str) -> None:
    """A line for the user on stderr, as the text says (no markup), through the secrets rule."""
    from factcli.store.redact import scrub_text

    stderr_console().print(escape(scrub_text(message)), soft_wrap=True)


def print_warning(message: str) -> None:
    from factcli.store.redact import scrub_text

    stderr_console().print(f"[yellow]warning:[/] {escape(scrub_text(message))}", soft_wrap=True)


class Progress:
    """A rich progress bar on stderr: done/total, pass/fail/error, ETA. Silent when disabled."""

    def __init__(self, total: int, enabled: bool = True, done=()):
        """`done`: the column metrics of rows already finished (kept by --resume), counted from the start."""
        self.passed = sum(m.test_pass for m in done)
        self.failed = sum(m.test_fail for m in done)
        self.errors = sum(m.test_error for m in done)
        self._progress = None
        if enabled and total and sys.stderr.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
            from rich.progress import Progress as RichProgress

            self._progress = RichProgress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[tally]}"),
                TimeRemainingColumn(), TextColumn("[dim]{task.fields[doing]}"), console=stderr_console(),
                transient=True,
            )
            self._task = self._progress.add_task("eval", total=total, completed=self.passed + self.failed + self.errors,
                                                 tally=self._tally(), doing="")
            self._rounds: dict = {}  # batch mode: a bar per round (batch_state)
            self._progress.start()
            # a long wait inside a row (an index build, a library's first import) shows beside the bar
            self._listening = listening(self._doing)
            self._listening.__enter__()

    def _doing(self, message: str | None) -> None:
        if self._progress is not None:
            self._progress.update(self._task, doing=f"{message}…" if message else "")

    def advance(self, result: EvalResult) -> None:
        if result.success:
            self.passed += 1
        elif result.failure_reason in ERROR_REASONS:
            self.errors += 1
        else:
            self.failed += 1
        if self._progress is not None:
            self._progress.update(self._task, advance=1, tally=self._tally())

    def _tally(self) -> str:
        return f"[green]{self.passed} pass[/] [red]{self.failed} fail[/] [yellow]{self.errors} error[/]"

    def batch_state(self, round_: int, batch_id: str, state) -> None:
        """Batch mode (run/calling/batches.py): a bar per round of batches, with the vendor's counts."""
        if self._progress is None:
            return
        batches = self._rounds.setdefault(round_, {"task": None, "states": {}})
        batches["states"][batch_id] = state
        states = batches["states"].values()
        total = sum(s.total for s in states)
        done, failed = sum(s.done for s in states), sum(s.failed for s in states)
        words = sorted({s.status for s in states})
        tally = f"[green]{done} answered[/]" + (f" [red]{failed} failed[/]" if failed else "")
        doing = f"{len(batches['states'])} batch(es) {', '.join(words)}"
        if batches["task"] is None:
            batches["task"] = self._progress.add_task(f"batch round {round_}", total=total or None,
                                                      completed=done + failed, tally=tally, doing=doing)
        else:
            self._progress.update(batches["task"], total=total or None, completed=done + failed, tally=tally,
                                  doing=doing)

    def warn(self, message: str) -> None:
        console = self._progress.console if self._progress is not None else stderr_console()
        console.print(f"[yellow]warning:[/] {escape(message)}")

    def stop(self) -> None:
        if self._progress is not None:
            self._listening.__exit__(None, None, None)
            self._progress.stop()
            self._progress = None


@contextmanager
def working(message: str, enabled: bool = True) -> Iterator[None]:
    """A spinner on stderr while the block runs, naming the newest activity inside it (a knowledge
    source loading, a file being written), else `message`. Silent when disabled or not a terminal."""
    console = stderr_console()
    if not enabled or not console.is_terminal:
        yield
        return
    with console.status(message) as status, listening(lambda doing: status.update(f"{doing}…" if doing else message)):
        yield


def screen_scrubber(run):
    """The secrets rule (store/redact.py) for what the terminal shows of a run from memory (a --no-write
    run's rows, every run's column labels): a secret rendered into a prompt (`{{ env.OPENAI_API_KEY }}`)
    or quoted by an error shows as `${OPENAI_API_KEY}` or `[redacted]`, as the stored run shows it."""
    from factcli.store.redact import Scrubber

    return Scrubber(run.suite.raw)


def _cell_text(value, limit: int = 200, scrub=None) -> str:
    from factcli.scoring.registry import coerce_string

    text = coerce_string(value)
    text = visible(scrub.text(text) if scrub is not None else text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _label(col, scrub=None) -> str:
    """A column of the run on one line: `[provider] short prompt label`."""
    label = labels.column_label_of(col.provider.display, col.prompt.label, col.prompt.raw)
    return scrub.text(label) if scrub is not None else label


def results_table(run, console: Console) -> None:
    from rich.table import Table  # here: rich.table (and the decimal it pulls in) would slow every start-up

    rows, tests = run.first_tests(TABLE_MAX_TESTS)
    if not rows:
        return
    var_names = []
    for r in rows:
        for k in r.step.vars:
            if k not in var_names:
                var_names.append(k)
    scrub = screen_scrubber(run)
    table = Table(show_lines=True, expand=False)
    for name in var_names:
        table.add_column(escape(name), overflow="fold", max_width=30)
    for col in run.columns:
        # provider over the short prompt label: two short lines that wrap less than one long one
        prompt = labels.short_prompt(scrub.text(col.prompt.label), scrub.text(col.prompt.raw))
        table.add_column(Text(f"[{labels.one_line(scrub.text(col.provider.display), None)}]"
                              + (f"\n{prompt}" if prompt else "")), overflow="fold")
    by_test: dict[int, dict[int, EvalResult]] = {}
    for r in rows:
        by_test.setdefault(r.step.test_idx, {})[r.step.prompt_idx] = r
    shown = 0
    for test_idx in sorted(by_test):
        cells = by_test[test_idx]
        first = next(iter(cells.values()))
        line = [escape(_cell_text(first.step.vars.get(v, ""), 120, scrub)) for v in var_names]
        for col in run.columns:
            r = cells.get(col.index)
            line.append(_result_cell(r, scrub) if r is not None else Text("—", style="dim"))
        table.add_row(*line)
        shown += 1
    console.print(table)
    if tests > shown:
        console.print(f"[dim]… {tests - shown} more tests not shown (write them all with -o results.json)[/]")


def _result_cell(r: EvalResult, scrub=None) -> Text:
    if r.success:
        head = Text("[PASS] ", style="bold green")
    elif r.failure_reason == FAILURE_GRADING:  # no score: the judge could not judge it
        head = Text("[ERROR] not judged ", style="bold yellow")
    elif r.failure_reason in ERROR_REASONS:
        head = Text("[ERROR] ", style="bold yellow")
    else:
        head = Text("[FAIL] ", style="bold red")
    if (r.score not in (0, 1) or not r.success) and r.failure_reason != FAILURE_GRADING:
        head.append(f"{r.score:.2f} ", style="dim")
    body = Text()
    if not r.success and r.error:
        body.append(_cell_text(r.error, 160, scrub) + "\n", style="red" if r.failure_reason not in ERROR_REASONS else "yellow")
    if r.response.output is not None:
        body.append(_cell_text(r.response.output, 200, scrub))
    return head + body


WEIGHT_ZERO = "(weight 0)"
WEIGHT_ZERO_LEGEND = ("(weight 0): every assertion of this metric has weight 0, so it does not count toward the "
                      "score and its mean is 0 whatever the outputs")


def summary_fields(run, nonbinary: bool, repeat: int) -> list:
    """The figures of the table after an eval, one fit.Field each (numbers are never cut)."""
    from factcli.report import figures
    from factcli.report.fit import Field

    names = sorted({k for m in run.metrics for k in m.named_scores})
    derived = {d["name"] for d in run.suite.derived_metrics}
    passes, rates, scores, repeats = [], [], [], []
    for m in run.metrics:
        n = m.judged  # the rows not judged are out of the pass rate (said beside it)
        st = m.stats
        # the score: over the rows whose every assertion was judged (ColumnMetrics.scored)
        score = f"{m.judged_score / m.scored:.3f}" if m.scored else "n/a"
        if m.scored < m.rows:
            score += f" ({m.scored} of {m.rows} judged)"
        if st.get("scoreBinary") is False:
            score += (" " + figures.fmt_interval(st.get("scoreCi95"), 2)).rstrip()
        passes.append(f"{m.test_pass}/{n}")
        rates.append(figures.fmt_rate(st.get("passRate"), st.get("passRateCi95")))
        scores.append(score)
        repeats.append(figures.repeat_cells(st, repeat) if repeat > 1 else [])
    fields = [Field("pass", passes), Field("pass rate", rates), Field("score" + (" [95% CI]" if nonbinary else ""), scores)]
    if repeat > 1:
        for i, name in enumerate((f"pass@{repeat}", f"pass^{repeat}", "flip rate")):
            fields.append(Field(name, [r[i] for r in repeats]))
    for name in names:
        cells = []
        for m in run.metrics:
            value = m.named_scores.get(name) if name in derived else m.named_means().get(name)
            text = "—" if value is None else f"{value:.3f}"
            if name not in derived:
                text += m.judged_note(name)
            # all of the metric's weights were 0: its mean is 0 by construction, not a failure
            if name not in derived and name in m.named_weights and not m.named_weights[name]:
                text += " " + WEIGHT_ZERO
            cells.append(text)
        fields.append(Field(name + (" (derived)" if name in derived else " (mean)"), cells))
    return fields


def summary(run, console: Console) -> None:
    from factcli.report import figures

    total = run.successes + run.failures + run.errors
    rate = run.pass_rate
    cached = sum(m.cached for m in run.metrics)
    console.print()
    status = {"complete": "", "aborted": " [bold red](aborted)[/]", "interrupted": " [bold yellow](interrupted)[/]"}
    console.print(f"[bold]Run[/] {run.run_id}{status.get(run.status, '')} · {total}/{run.total_steps} rows · "
                  f"{run.duration_ms / 1000:.1f} s" + (f" · {cached} cached" if cached else "")
                  + (f" · {figures.plural(run.retries, 'retry', 'retries')}" if run.retries else ""))
    for pid, t in run.throttling.items():
        console.print(escape(f"Throttled: {pid} asked to slow down {t['throttled']} times; calls in flight cut to "
                             f"{t['lowestLimit']} (limit {t['limit']})"))
    from factcli import stats
    from factcli.stats import judge

    stats.fill(run)  # normally done at the end of the run; a run built by hand may lack them
    unjudged, bugs = run.unjudged, sum(getattr(m, "bugs", 0) for m in run.metrics)
    console.print(f"[green]Successes: {run.successes}[/]  [red]Failures: {run.failures}[/]  "
                  f"[yellow]Errors: {run.errors}[/]" + (f" [yellow]({unjudged} not judged)[/]" if unjudged else "")
                  + (f" [bold red]({figures.plural(bugs, 'factcli bug')})[/]" if bugs else "")
                  + "  Pass rate: "
                  + ("n/a" if rate is None else figures.run_rate(run.successes, run.judged))
                  + (f" [dim]over the {run.judged} rows judged[/]" if unjudged and rate is not None else "")
                  + (" [dim](no row was judged)[/]" if rate is None and unjudged else ""))
    small = figures.small_sample([m.judged for m in run.metrics])
    if small:
        console.print(f"[dim]{escape(small)}[/]")
    console.print(spend_text(run.metrics))
    saved = figures.metrics_savings(run.metrics)
    if saved:
        console.print(escape(saved))
    if run.graders:
        errors = sum(m.grading_errors for m in run.metrics)
        console.print(f"Grader: {', '.join(run.graders)}" + (f" · [yellow]{figures.plural(errors, 'grading error')}[/]" if errors else ""))
    scrub = screen_scrubber(run)
    for col, m in zip(run.columns, run.metrics):
        if m.categories:  # the figures first: a long column label wraps after them, never before
            dist = "  ".join(f"{k}:{m.categories[k]}" for k in sorted(m.categories))
            console.print(escape(f"Factuality categories: {dist}" + (f" · {_label(col, scrub)}" if len(run.columns) > 1 else "")))
        for report in m.methods.values():
            console.print(escape(f"{_label(col, scrub)}: {report['line']}"))
        for entry in m.judge_corrected:
            console.print(escape(f"{_label(col, scrub)}: {judge.describe(entry)}"))
    nonbinary = any(m.stats.get("scoreBinary") is False for m in run.metrics)
    repeat = max((m.stats.get("repeat") or 1 for m in run.metrics), default=1)
    if len(run.columns) > 1 or any(m.named_scores for m in run.metrics) or nonbinary or repeat > 1:
        from factcli.report import fit

        entries = [fit.Entry(f"[{labels.one_line(scrub.text(col.provider.display), None)}]",
                             labels.short_prompt(scrub.text(col.prompt.label), scrub.text(col.prompt.raw)))
                   for col in run.columns]
        fields = summary_fields(run, nonbinary, repeat)
        fit.print_lines(console, fit.fit(entries, fields, console.width, console.is_terminal))
        console.print("[dim]" + escape(figures.legend(nonbinary, repeat)) + "[/]")
        if any(f.cells and any(c.endswith(WEIGHT_ZERO) for c in f.cells) for f in fields):
            console.print("[dim]" + escape(WEIGHT_ZERO_LEGEND) + "[/]")
    for result in getattr(run, "gate_results", ()):
        style = "green" if result.passed else "bold red" if result.passed is False else "yellow"
        console.print(f"[{style}]{escape(result.describe()[0].upper() + result.describe()[1:])}[/]", soft_wrap=True)
    if run.abort_reason and run.status != "interrupted":  # a budget stop is said once, on stderr, by the CLI
        console.print(f"[bold red]Aborted:[/] {escape(run.abort_reason)}")


def next_steps(run_id: str, status: str, *, failures: int = 0, errors: int = 0, first_failed: int | None = None,
               interrupted: bool = False, db: str | None = None, stored: bool = True, outputs=()) -> list[str]:
    """The commands worth typing after an eval, one a line: look at the run, open its first failed
    row, and after an interruption or ERROR rows, resume or retry. Nothing for a run not stored
    (--no-write): there is nothing to view. `db`: the --db the run was stored with, repeated in
    every command so that each works when pasted (a URL's password shows as ***: give it again, or
    set FACTCLI_DB). `outputs`: the -o files, given again by a resume or retry (a resume writes only the
    -o files given to it, not those the store names: run/recording/trust.py)."""
    if not stored or not run_id:
        return []
    on = _on(db)
    lines = [f"View it: factcli view {run_id}{on}"]
    if failures and first_failed is not None:
        lines.append(f"Open a failed row: factcli show {run_id} {first_failed}{on}")
    if interrupted or status in ("interrupted", "aborted"):
        lines.append(f"Resume: {resume_command(run_id, db=db, outputs=outputs)}")
    elif errors:
        lines.append(f"Retry errors: {resume_command(run_id, db=db, outputs=outputs, retry=True)}")
    return lines


def _on(db: str | None) -> str:
    import shlex

    if not db:
        return ""
    from factcli.store.database import shown

    return f" --db {shlex.quote(shown(db))}"


def resume_command(run_id: str, *, db: str | None = None, outputs=(), retry: bool = False) -> str:
    """The command that goes on with a stored run, as pasted: its --db, and its -o files given again (a
    resume writes only the -o files given to it, never those the store names: run/recording/trust.py)."""
    import shlex

    again = "".join(f" -o {shlex.quote(str(p))}" for p in outputs)
    return f"factcli eval {'--retry-errors' if retry else '--resume'} {run_id}{_on(db)}{again}"


def next_steps_for(run, *, stored: bool, interrupted: bool = False, db: str | None = None, outputs=()) -> list[str]:
    """next_steps for a finished EvalRun: the first failed test is read back from the store (the
    session has closed it by then; rows are not all held in memory), and is left out if the store
    cannot be read, since a hint is not worth an error."""
    first = None
    if stored and run.failures:
        from factcli.errors import FactcliError
        from factcli.store.database import Store, store_errors

        try:
            with Store.open(db) as store:
                first = store.first_failed_test(run.run_id)
        except (FactcliError, *store_errors()):
            first = None
    # an assertion not judged on a row its others decided is retried too (scoring/outcome.needs_retry)
    errors = run.errors or sum(m.grading_errors for m in run.metrics)
    return next_steps(run.run_id, run.status, failures=run.failures, errors=errors, first_failed=first,
                      interrupted=interrupted, db=db, stored=stored, outputs=outputs)
