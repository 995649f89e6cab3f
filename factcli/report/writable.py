"""Whether a file a command will write can be written, found by creating it before any work is done.

Asking the system (`os.access`) is not enough: root may write anywhere by the permission bits, yet not
under /proc or /sys, on a read-only mount, or under a file. So the probe makes what the write would make
(its missing folders, then the file) and removes what it made at once: a run that stops before it
writes (an error, Ctrl-C, a budget stop) leaves nothing behind, and a file that is already there is
opened for appending, never emptied, so the previous results stay until the new ones replace them.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path


def creation_problem(path: Path) -> str | None:
    """What stops `path` (and the folders above it that do not exist yet) from being created and
    written, as "cannot create FOLDER: REASON", or None. Nothing is left behind either way."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    missing: list[Path] = []
    existing = folder
    while not existing.exists() and existing != existing.parent:
        missing.append(existing)
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        return f"{existing} is a file, not a folder ({os.strerror(errno.ENOTDIR)}): name another path"
    made: list[Path] = []
    try:
        for new in reversed(missing):
            try:
                new.mkdir()
            except OSError as exc:
                return f"cannot create {new}: {exc.strerror or exc}"
            made.append(new)
        return _file_problem(path)
    finally:
        for new in reversed(made):
            try:
                new.rmdir()
            except OSError:  # something else put a file there meanwhile: it is not ours to remove
                pass


def _file_problem(path: Path) -> str | None:
    if path.is_dir():
        return f"{path} is a folder ({os.strerror(errno.EISDIR)}): name a file"
    existed = path.exists()
    # O_APPEND keeps an existing file whole; O_NONBLOCK keeps a FIFO with no reader from hanging the check
    flags = os.O_WRONLY | os.O_NONBLOCK | (os.O_APPEND if existed else os.O_CREAT | os.O_EXCL)
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        return f"cannot {'write' if existed else 'create'} {path}: {exc.strerror or exc}"
    os.close(fd)
    if not existed:
        try:
            path.unlink()
        except OSError:
            pass
    return None
