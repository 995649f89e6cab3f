"""Long waits say what they are doing.

Code that can take more than a second without a model call (importing litellm on first use, reading
a knowledge source, building a search index, importing a user's Python module) wraps itself in
`activity("…")`. Whoever shows progress (the CLI's spinner before the first call, its progress bar
during the run) listens with `listening(callback)` and is told the newest activity still going, or
None when nothing is. Without a listener an activity costs a lock and a list append, so library and
test code pay nothing for it. Activities may run on any thread (rows are scored in worker threads).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, Iterator

Listener = Callable[[str | None], None]

_lock = threading.Lock()
_active: list[str] = []
_listeners: list[Listener] = []


def _notify() -> None:
    with _lock:
        current = _active[-1] if _active else None
        listeners = list(_listeners)
    for listener in listeners:
        listener(current)


@contextmanager
def activity(message: str) -> Iterator[None]:
    with _lock:
        _active.append(message)
    _notify()
    try:
        yield
    finally:
        with _lock:
            _active.remove(message)
        _notify()


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Tell `listener` about activities until the block ends (it is told the current one at once)."""
    with _lock:
        _listeners.append(listener)
    _notify()
    try:
        yield
    finally:
        with _lock:
            _listeners.remove(listener)
