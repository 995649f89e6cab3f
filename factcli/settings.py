"""Where factcli keeps its files, and run defaults read from the environment."""

from __future__ import annotations

import os
from pathlib import Path

VERSION = "0.1.0"  # the one place the version is written (pyproject.toml reads it)
DEFAULT_CONCURRENCY = 4
CACHE_TTL_SECONDS = 14 * 24 * 3600


def home() -> Path:
    return Path(os.environ.get("FACTCLI_HOME") or Path.home() / ".factcli")


def cache_dir() -> Path:
    return home() / "cache"


def private_dirs(path: Path) -> None:
    """Make the folders of `path` that do not exist yet, readable by this user alone (0700; a umask
    that is stricter still wins: mkdir's mode passes through it). Folders that exist are left as they
    are: they are the user's."""
    missing = []
    parent = Path(path)
    while not parent.exists() and parent != parent.parent:
        missing.append(parent)
        parent = parent.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            pass


def private_file(path: Path) -> None:
    """Create `path` empty and readable by this user alone (0600, or stricter with a stricter umask)
    when it does not exist, so that what is written into it next is never readable by others, even
    for a moment: the run store, exports, -o files. A file that exists keeps its mode."""
    private_dirs(Path(path).parent)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass


def debug() -> bool:
    return os.environ.get("FACTCLI_DEBUG", "") not in ("", "0", "false")


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw in (None, ""):
        return default
    try:
        return float(raw)
    except ValueError:
        from factcli.errors import FactcliError

        raise FactcliError(f"environment variable {name}={raw!r} is not a number")


def load_env_file(path: str) -> None:
    """Load a dotenv file into os.environ (existing variables win, as in promptfoo)."""
    from dotenv import dotenv_values

    from factcli.errors import FactcliError

    p = Path(path)
    if not p.is_file():
        raise FactcliError(f"{path}: --env-file not found")
    for key, value in dotenv_values(p).items():
        if value is not None and key not in os.environ:
            os.environ[key] = value


# ---------------------------------------------------------------- a run's environment
# A config's `env:` (and --env-file) are written into os.environ while the config loads: providers,
# `{{ env.X }}` templates, user scripts and the Node worker all read the environment, so the run's
# variables must be there while it runs. The Python API scopes them to the run: os.environ is put back
# exactly as it was when evaluate() returns (run/api.Evaluation), so the next run in the process never
# sees this one's. (The CLI's process ends with its run.)


def environ_snapshot() -> dict[str, str]:
    return dict(os.environ)


def environ_changes(before: dict[str, str]) -> dict[str, str | None]:
    """What changed in os.environ since `before`: name -> its value now (None: removed)."""
    now = os.environ
    return {k: now.get(k) for k in set(before) | set(now) if before.get(k) != now.get(k)}


def apply_environ(changes: dict[str, str | None]) -> None:
    for k, v in changes.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def restore_environ(before: dict[str, str]) -> None:
    """os.environ exactly as `before` again (what was added removed, what was changed or removed put back)."""
    apply_environ({k: before.get(k) for k in environ_changes(before)})
