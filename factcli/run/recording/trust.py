"""Trust by origin (issue 48): a run resumed from the store (`--resume`, `--retry-errors`) runs what
the user has, not what the store says. Its config is the user's own only when the config files it
names are here and give, byte for byte, the config stored with the run; anything else the store
decides (its stored config, a config-file list that does not match, output paths, the stored `--var`,
`--providers` and `--grader`, the files a model-outputs run re-reads) is listed with what it would do
(config/stored_trust.py, walking the config-key table) and refused unless `--trust-stored-config`.
Whoever can write the database could have put any of it there (docs/team.md)."""

from __future__ import annotations

from pathlib import Path

from factcli.config.stored_trust import option_would_do, what_it_would_do
from factcli.errors import FactcliError

# the stored options a resume takes back that name code, files or endpoints (run/options.Option.code),
# by flag -> (config-key table level, key) whose kind their values have
_OPTION_KEYS = {"--var": ("test", "vars"), "--providers": ("top", "providers"),
                "--grader": ("commandLineOptions", "grader")}


class StoredTrust:
    """What a resumed run takes from the store, gathered before anything is loaded, then `settle`d:
    refused (exit 1, the list) unless trusted; printed when trusted."""

    def __init__(self, run_id: str, trusted: bool, ui):
        self.run_id, self.trusted, self.ui = run_id, trusted, ui
        self.reasons: list[str] = []
        self.lines: list[str] = []
        self.configs: list = []  # the configs walked: their literal secrets are redacted from the list

    def options(self, taken: dict, stored_vars) -> None:
        """Stored --var / --providers / --grader a resume takes back (not given again now). `stored_vars`:
        the vars as stored, before their ${NAME} were expanded (what is listed is never a secret)."""
        given = {flag: (stored_vars if flag == "--var" else value) for flag, value in taken.items() if value}
        for flag, value in given.items():
            level, key = _OPTION_KEYS[flag]
            shown = " ".join(f"{k}={v}" for k, v in value.items()) if isinstance(value, dict) else (
                " ".join(map(str, value)) if isinstance(value, list) else str(value))
            self.lines.append(f"option: {flag}: {shown}")
            self.lines += option_would_do(level, key, value, flag)
        if given:
            self.reasons.append(f"its stored options {', '.join(given)}")

    def outputs(self, stored: list, given: list) -> list[Path]:
        """The stored -o paths a resume writes again: those the user gives now, or, with
        --trust-stored-config, all of them (listed). The others are never written (the store may name any
        file), which does not stop the resume: one note says how to have them written."""
        mine = {Path(p).resolve() for p in given}
        theirs = [str(p) for p in stored if Path(p).resolve() not in mine]
        if theirs and self.trusted:
            self.lines += [f"writes: -o: {p}" for p in theirs]
            self.reasons.append("its stored output paths")
            return [Path(p) for p in stored]
        if theirs:
            self.ui.note(f"run {self.run_id}: not writing the -o files the store names ({', '.join(theirs)}): give "
                         "-o again to write them, or --trust-stored-config")
        return [Path(p) for p in stored if Path(p).resolve() in mine]

    def files(self, what: str, paths: list, why: str) -> None:
        """Files the store names that a resume would read (a config-file list that does not give the
        stored config, a model-outputs run's files)."""
        self.lines += [f"reads: {what}: {p} (named by the store: it may hold code)" for p in paths]
        self.reasons.append(why)

    def config(self, cfg, why: str = "") -> None:
        """What the config the resume would load does; `why`: why it is not the user's own (if not said)."""
        self.configs.append(cfg)
        self.lines += what_it_would_do(cfg)
        if why:
            self.reasons.append(why)

    def settle(self) -> None:
        if not self.lines:
            return
        from factcli.store.redact import Scrubber

        scrub = Scrubber(self.configs)  # secrets are never printed (a local file's, the environment's)
        lines = list(dict.fromkeys(scrub.text(line) for line in self.lines))
        why = "; ".join(self.reasons)
        if self.trusted:
            self.ui.note(f"--trust-stored-config: run {self.run_id} takes from the store ({why}):")
            for line in lines:
                self.ui.note(f"  - {line}")
            return
        err = FactcliError(f"run {self.run_id} would be rebuilt from what the store says, not from your files "
                           f"({why}): {len(lines)} thing{'s' if len(lines) != 1 else ''} it would do, listed "
                           "below. Resume it where its config files are, unchanged, or, if you trust everyone who "
                           "can write this database, read the list and add --trust-stored-config")
        err.problems = lines
        raise err
