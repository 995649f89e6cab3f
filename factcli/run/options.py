"""The options of one eval, typed, from `factcli eval`'s flags or `evaluate()`'s keywords to where each
acts (docs/architecture.md, "How an option travels").

`EvalOptions` holds what the flow and the store's session read; its `run` (`RunOptions`) what the
run's plan and execution read (run/runner.prepare). Each field says, in its `Option` metadata, what
it is outside the code that acts on it: how a message spells its flag, whether `evaluate()` takes it
as a keyword, its key in a stored run's options record, and what --resume does with it. The API's
keywords (run/api.py), the record (run/recording/source.py) and the resume rules are derived from these, so
that adding an option is: the CLI signature, a field here, and the code that uses it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

# what --resume / --retry-errors do with an option (Option.resume)
REFUSE = "refuse"  # given with them: refused; the stored run's choice stands (its selected tests)
RESTORE = "restore"  # given with them: refused; the stored value is taken
KEEP = "keep"  # the stored value unless given now


@dataclass(frozen=True)
class Value:
    """An option's type and range: the one check of a value however it is given (evaluate()'s keyword,
    a config's commandLineOptions, and the CLI's flag, whose parser reads `minimum`)."""

    kind: str  # "whole" (an int), "number" (an int or float), "flag" (a bool), "text", "mapping"
    minimum: float | None = None
    unit: str = ""  # what a number counts, for the message ("milliseconds", "USD")

    def check(self, value: Any) -> Any:
        """The value, or ValueError("expected …, got …") naming what the option takes."""
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if self.kind == "whole":
            ok = number and isinstance(value, int) and (self.minimum is None or value >= self.minimum)
            what = "a whole number" + (f" of at least {self.minimum:g}" if self.minimum is not None else "")
        elif self.kind == "number":
            ok = number and value == value and value != float("inf") and (self.minimum is None or value >= self.minimum)
            what = "a number" + (f" of {self.unit}" if self.unit else "") + (
                f" ({self.minimum:g} or more)" if self.minimum is not None else "")
        elif self.kind == "flag":
            ok, what = isinstance(value, bool), "true or false"
        elif self.kind == "text":
            ok, what = isinstance(value, str) and bool(value.strip()), "text"
        elif self.kind == "mapping":
            ok, what = isinstance(value, dict), "a mapping of var names to values"
        else:
            raise ValueError(f"run/options.py: no such value kind {self.kind!r}")
        if not ok:
            raise ValueError(f"expected {what}, got {value!r}")
        return value


WHOLE_1, WHOLE_0, FLAG, TEXT = Value("whole", 1), Value("whole", 0), Value("flag"), Value("text")


@dataclass(frozen=True)
class Option:
    """What an options field is outside the code that acts on it."""

    flag: str | None  # how a message names it on the command line; None: no flag
    api: str | None = None  # evaluate()'s keyword: the kind of value it takes (run/api.check_keyword)
    camel: tuple[str, ...] = ()  # promptfoo's evaluate() spellings of that keyword
    record: str | None = None  # its key in a stored run's options record (runs.options_json)
    resume: str | None = None  # REFUSE, RESTORE or KEEP; None: --resume leaves it as given
    code: bool = False  # may name code, files or endpoints: taken from the store, refused without --trust-stored-config
    to_record: Callable[[Any], Any] | None = None  # how the record holds its value (default: as is)
    from_record: Callable[[Any], Any] | None = None  # and how it is read back
    value: Value | None = None  # its type and range, checked for evaluate() and commandLineOptions


def option(default: Any = None, *, factory: Callable[[], Any] | None = None, **meta: Any):
    """A field of EvalOptions or RunOptions with its Option (every field has one: tests/test_options.py)."""
    if factory is not None:
        return field(default_factory=factory, metadata={"option": Option(**meta)})
    return field(default=default, metadata={"option": Option(**meta)})


def _resolved(value: Any) -> Any:
    return None if value is None else str(Path(value).resolve())


def _texts(value: Any) -> list[str]:
    return [str(p) for p in value or []]


@dataclass(kw_only=True)
class RunOptions:
    """What the command line or the API sets for one run over the config's own settings (None: the
    config's, else the default): read by run/runner.prepare, load and downloads."""

    max_concurrency: int | None = option(flag="-j", api="count", camel=("maxConcurrency",),
                                         record="max_concurrency", resume=KEEP, value=WHOLE_1)
    repeat: int | None = option(flag="--repeat", api="count", record="repeat", resume=RESTORE, value=WHOLE_1)
    delay_ms: float | None = option(flag="--delay", api="amount", camel=("delay",), record="delay_ms", resume=KEEP,
                                    value=Value("number", 0, "milliseconds"))
    # False: neither read nor write the response cache (--no-cache); the record says `no_cache`
    cache: bool | None = option(flag="--no-cache", api="flag", record="no_cache", resume=KEEP, value=FLAG,
                                to_record=lambda v: v is False, from_record=lambda v: False if v else None)
    vars: dict = option(factory=dict, flag="--var", api="mapping", record="vars", resume=RESTORE, code=True,
                        value=Value("mapping"),
                        to_record=lambda v: dict(v or {}))
    grader: str | None = option(flag="--grader", api="grader", record="grader", resume=KEEP, code=True)
    max_cost: float | None = option(flag="--max-cost", api="amount", camel=("maxCost",), record="max_cost",
                                    resume=KEEP, value=Value("number", 0, "USD"))
    providers: list[str] | None = option(flag="--providers", record="providers", resume=KEEP, code=True)
    filter_pattern: str | None = option(flag="--filter-pattern", api="text", camel=("filterPattern",),
                                        record="filter_pattern", resume=REFUSE, value=TEXT)
    filter_first_n: int | None = option(flag="--filter-first-n", api="count", camel=("filterFirstN",),
                                        record="filter_first_n", resume=REFUSE, value=WHOLE_0)
    filter_sample: int | None = option(flag="--filter-sample", api="count", camel=("filterSample",),
                                       record="filter_sample", resume=REFUSE, value=WHOLE_0)
    # batch mode (run/calling/batches.py): calls of providers with a batch API go through it, at its price
    batch: bool | None = option(flag="--batch", api="flag", record="batch", resume=KEEP, value=FLAG)
    detach: bool = option(False, flag="--detach", value=FLAG)  # submit the batches, store the run, exit
    description: str | None = option(flag="--description", api="text", resume=REFUSE, value=TEXT)  # (the run row's)


@dataclass(kw_only=True)
class EvalOptions:
    """Everything that decides an eval, from `factcli eval`'s flags or `evaluate()`'s keywords: what the
    flow (run/flow.py) and the store's session (run/recording/) read, and the run's own (`run`)."""

    # config file paths; the API also takes a dict, YAML text or one path (its first argument)
    config: Any = option(flag="-c", resume=REFUSE)
    run: RunOptions = field(default_factory=RunOptions)
    outputs: list[Path] = option(factory=list, flag="-o", api="paths", camel=("outputPath", "output"),
                                 record="outputs", to_record=_texts)
    store: bool = option(True, flag="--no-write", api="flag", value=FLAG)  # False: the run is not stored
    db: Path | str | None = option(flag="--db", api="store")
    resume: str | None = option(flag="--resume")
    retry_errors: str | None = option(flag="--retry-errors")
    filter_failing: str | None = option(flag="--filter-failing", record="filter_failing", resume=REFUSE, value=TEXT)
    # with model_outputs: score existing outputs (the record holds them as absolute paths)
    assertions: Path | None = option(flag="--assertions", record="assertions", resume=REFUSE, to_record=_resolved)
    model_outputs: Path | None = option(flag="--model-outputs", record="model_outputs", resume=REFUSE,
                                        to_record=_resolved)
    strict: bool = option(False, flag="--strict")
    dry_run: bool = option(False, flag="--dry-run")
    env_files: list[Path] = option(factory=list, flag="--env-file")  # a later file wins; variables already set win
    gates: list = option(factory=list, flag="--gate")  # 'METRIC>=X' (config/gates.parse_cli_gate), over the config's
    # take what a resumed run's store says (run/recording/trust.py); --trust-stored-code is its older name
    trust_stored_config: bool = option(False, flag="--trust-stored-config")
    table: bool = option(True, flag="--no-table", value=FLAG)  # the CLI prints the results table
    progress_bar: bool = option(True, flag="--no-progress-bar", value=FLAG)
    keep_rows: bool = option(False, flag=None)  # hold every row in memory after the run (the API's Run)

    def filled(self, values: dict[str, Any]) -> "EvalOptions":
        """These options with `values` (by field name: a config's commandLineOptions, config/cli_options.values)
        in the fields left at their default; a mapping (vars) merges under the one given. Each value is
        checked by its Option's `value`; a wrong one is a ConfigError at the file and key path it was
        written at (`values.where`)."""
        where = getattr(values, "where", {})
        own, run = {}, {}
        for f, owner in option_fields():
            if f.name not in values:
                continue
            holder = self if owner is EvalOptions else self.run
            given, value = getattr(holder, f.name), values[f.name]
            if meta(f).value is not None:
                try:
                    meta(f).value.check(value)
                except ValueError as exc:
                    from factcli.errors import ConfigError

                    raise ConfigError(str(exc), *where.get(f.name, (None, f.name))) from None
            if isinstance(given, dict):
                value = {**value, **given}
            elif given != _default(f):
                continue
            (own if owner is EvalOptions else run)[f.name] = value
        return dataclasses.replace(self, run=dataclasses.replace(self.run, **run), **own)


def _default(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def option_fields() -> Iterator[tuple[dataclasses.Field, type]]:
    """(field, EvalOptions or RunOptions) for every option, in declaration order, `run`'s in its place."""
    for f in dataclasses.fields(EvalOptions):
        if f.name == "run":
            yield from ((g, RunOptions) for g in dataclasses.fields(RunOptions))
        else:
            yield f, EvalOptions


def minimum(name: str) -> float | None:
    """The least value of the option `name` (the CLI's parser bounds its flag by it)."""
    for f, _ in option_fields():
        if f.name == name:
            return meta(f).value.minimum
    raise KeyError(name)


def meta(f: dataclasses.Field) -> Option:
    return f.metadata["option"]


def value_of(options: EvalOptions, f: dataclasses.Field, owner: type) -> Any:
    return getattr(options if owner is EvalOptions else options.run, f.name)


def api_keywords() -> dict[str, tuple[dataclasses.Field, type]]:
    """evaluate()'s keywords: each option's name, and promptfoo's spellings, -> (field, owner)."""
    out = {}
    for f, owner in option_fields():
        if meta(f).api is not None:
            out[f.name] = (f, owner)
            out.update((c, (f, owner)) for c in meta(f).camel)
    return out


def to_record(options: EvalOptions) -> dict:
    """The options a stored run keeps (its options record): every field with a record key."""
    out = {}
    for f, owner in option_fields():
        m = meta(f)
        if m.record is not None:
            value = value_of(options, f, owner)
            out[m.record] = m.to_record(value) if m.to_record else value
    return out


def from_record(record: dict) -> RunOptions:
    """The run's options a stored run's record gives back (those --resume restores or keeps)."""
    values = {}
    for f in dataclasses.fields(RunOptions):
        m = meta(f)
        if m.resume in (RESTORE, KEEP) and m.record is not None:
            value = record.get(m.record)
            if value is not None:  # (not there, or None: the option was not set)
                values[f.name] = m.from_record(value) if m.from_record else value
    return RunOptions(**values)


def resumed(record: dict, given: RunOptions) -> tuple[RunOptions, dict]:
    """A resumed run's options: the stored ones, changed by those given now that --resume keeps (-j,
    --delay, --no-cache, --grader, --max-cost, -r); and those taken from the store that may name
    code, by flag."""
    stored = from_record(record)
    now = {f.name: getattr(given, f.name) for f in dataclasses.fields(RunOptions)
           if meta(f).resume == KEEP and getattr(given, f.name) != _default(f)}
    options = dataclasses.replace(stored, **now)
    taken = {meta(f).flag: getattr(options, f.name) for f in dataclasses.fields(RunOptions)
             if meta(f).code and f.name not in now and getattr(options, f.name) is not None}
    return options, taken


def refused_on_resume(options: EvalOptions) -> list[str]:
    """The flags given that --resume and --retry-errors refuse (they use the stored run's)."""
    return [meta(f).flag for f, owner in option_fields()
            if meta(f).resume in (REFUSE, RESTORE) and value_of(options, f, owner)]
