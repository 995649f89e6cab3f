"""A model-graded assertion's `config.calibration`: a report written by `factcli calibrate -o`, read
when the config loads, so that a missing file, an unreadable report or a label it does not hold is a
config error before any call. What the run needs from it (the judge's sensitivity and specificity and
the label counts they come from) rides on the Assertion; the scorer stamps it on every grading."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from factcli import sources
from factcli.config.context import Ctx
from factcli.errors import ConfigError, did_you_mean

_READ: dict[tuple[Path, float], Any] = {}  # a report named by many tests is read once


def _report(path: Path, file: str, where: str) -> dict:
    if not sources.is_file(path):
        raise ConfigError(f"calibration report not found: {path} (write one with `factcli calibrate -o FILE.json`)",
                          file, where)
    key = (path.resolve(), path.stat().st_mtime)
    if key not in _READ:
        try:
            _READ[key] = sources.load_structured(path, str(path))
        except ConfigError as exc:  # name the config and the key that points at the report, too
            raise ConfigError(f"calibration report {exc}", file, where) from None
    doc = _READ[key]
    if not (isinstance(doc, dict) and isinstance(doc.get("graders"), list) and doc["graders"]):
        raise ConfigError(f"{path} is not a calibration report (no 'graders' list; write one with "
                          "`factcli calibrate -o FILE.json`)", file, where)
    return doc


def _counts(entry: dict, path: Path, file: str, where: str) -> dict:
    confusion = entry.get("confusion")
    ok = isinstance(confusion, dict) and all(
        isinstance(confusion.get(k), int) and not isinstance(confusion.get(k), bool) and confusion[k] >= 0
        for k in ("tp", "fn", "fp", "tn"))
    if not ok:
        raise ConfigError(f"{path}: grader '{entry.get('label')}' has no confusion counts (tp, fn, fp, tn)",
                          file, where)
    return {k: confusion[k] for k in ("tp", "fn", "fp", "tn")}


def read_calibration(config: dict, ctx: Ctx, where: str) -> dict | None:
    """The calibration an assertion's `config` names, or None when it names none."""
    ref = config.get("calibration")
    label = config.get("calibrationLabel")
    if ref is None:
        if label is not None:
            raise ConfigError("calibrationLabel needs config.calibration", ctx.file, where + ".calibrationLabel")
        return None
    if not isinstance(ref, str) or not ref.strip():
        raise ConfigError("expected a file:// path to a `factcli calibrate -o` report", ctx.file,
                          where + ".calibration")
    path, _ = sources.ref_path(ref if sources.is_file_ref(ref) else f"file://{ref}", ctx.base)
    doc = _report(path, ctx.file, where + ".calibration")
    graders = [g for g in doc["graders"] if isinstance(g, dict)]
    labels = [str(g.get("label")) for g in graders]
    if label is None:
        if len(graders) != 1:
            raise ConfigError(f"{path} holds {len(graders)} grader configurations: name one with "
                              f"config.calibrationLabel ({', '.join(repr(x) for x in labels)})", ctx.file,
                              where + ".calibration")
        entry = graders[0]
    else:
        found = [g for g, name in zip(graders, labels) if name == str(label)]
        if not found:
            raise ConfigError(f"{path} holds no grader configuration labelled '{label}'"
                              f"{did_you_mean(str(label), labels)}", ctx.file, where + ".calibrationLabel")
        entry = found[0]
    counts = _counts(entry, path, ctx.file, where + ".calibration")
    assertion = entry.get("assertion") if isinstance(entry.get("assertion"), dict) else {}
    return {"label": str(entry.get("label")), "report": str(path), "grader": entry.get("grader"),
            "assertion": assertion, **counts}
