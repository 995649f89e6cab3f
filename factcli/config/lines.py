"""A tests file's lines, made a piece at a time from its text or from the file as it is read
(sources.read_chunks): a CSV or JSONL file of a gigabyte is never held whole (issue 48)."""

from __future__ import annotations

import re
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterable, Iterator

from factcli.errors import ConfigError
from factcli.sources import VALUE_LIMIT, VALUE_LIMIT_TEXT

CSV_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
# what str.splitlines breaks lines at besides \r and \n (a CSV line does not end there)
_OTHER_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
# a chunk's lines are held at once, each several times its text: a chunk small enough to add little memory
CSV_CHUNK = 1 << 16


def text_chunks(text: str, size: int | None = None) -> Iterator[str]:
    """The text in pieces of about `size` characters (CSV_CHUNK), each cut after a newline."""
    size = CSV_CHUNK if size is None else size
    start = 0
    while start < len(text):
        end = text.find("\n", start + size)
        end = len(text) if end < 0 else end + 1
        yield text[start:end]
        start = end


def csv_lines(chunks: Iterable[str]) -> Iterator[str]:
    """The lines of text given as pieces cut after newlines, as io.StringIO(text, newline="") gives
    them (\r\n, \r or \n kept): a StringIO holds its text as 4 bytes a character, 68 MB for 1,000,000
    short rows. A piece without the other line breaks str.splitlines knows is split by it, which is
    faster than CSV_LINE."""
    for chunk in chunks:
        if _OTHER_BREAKS.search(chunk) is None:
            yield from chunk.splitlines(keepends=True)
        else:
            yield from (m.group() for m in CSV_LINE.finditer(chunk))


def jsonl_lines(chunks: Iterable[str], file: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of the non-blank lines, as str.splitlines() numbers them; a line longer than
    VALUE_LIMIT is an error (a file read from disk is checked as it is read)."""
    n = 0
    for chunk in chunks:
        for line in chunk.splitlines():
            n += 1
            if line.strip():
                if len(line) > VALUE_LIMIT:
                    raise ConfigError(f"a line longer than the {VALUE_LIMIT_TEXT} a line may hold", file, f"line {n}")
                yield n, line


# --filter-first-n N: how many tests from the suite's start the run can keep (config/plan.first_tests_kept),
# set by the run around its load (run/flow.Flow._load); None: every test may be kept
_FIRST: ContextVar[int | None] = ContextVar("factcli_first_tests_kept", default=None)


@contextmanager
def reading_first(n: int | None) -> Iterator[None]:
    """Configs loaded inside read their tests files no further than the suite's first `n` tests."""
    token = _FIRST.set(n)
    try:
        yield
    finally:
        _FIRST.reset(token)


class ReadLimit:
    """How many more rows the streamed tests files of one `tests:` load may give, in the order the
    loader reads them: the first file at most N, the next N less the rows the first gave, and so on. The
    tests written in the config, a YAML file or a generator count for nothing here, so a file always
    reads at least the rows the run keeps of it (the run's plan takes the first N, config/plan.expand:
    this only stops the reading). `cut`: some file was read no further than its limit (its rows past
    it, if any, never read nor checked)."""

    def __init__(self, n: int):
        self.n, self.left, self.cut = n, n, False

    @classmethod
    def now(cls) -> "ReadLimit | None":
        """A fresh limit for one load, when the run set one (reading_first)."""
        n = _FIRST.get()
        return None if n is None else cls(n)

    def took(self, count: int) -> None:
        """A file gave `count` rows, read with `left` as its limit."""
        self.cut = self.cut or count >= self.left
        self.left = max(0, self.left - count)
