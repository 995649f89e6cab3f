"""How factcli reads a CSV text, for every CSV it reads as promptfoo does (test files: config/testsets;
prompt files: config/prompts): the delimiter and strictness promptfoo's variables set, and the text's
lines a chunk at a time."""

from __future__ import annotations

import csv
import os
import re

from factcli import sources

CSV_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
# what str.splitlines breaks lines at besides \r and \n (a CSV line does not end there)
_OTHER_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
# a chunk's lines are held at once, each several times its text: a chunk small enough to add little memory
CSV_CHUNK = 1 << 16


def settings() -> tuple[str, bool]:
    """(the delimiter, whether only strict quoting is read): FACTCLI_CSV_DELIMITER and FACTCLI_CSV_STRICT,
    or promptfoo's PROMPTFOO_CSV_DELIMITER and PROMPTFOO_CSV_STRICT."""
    delimiter = os.environ.get("FACTCLI_CSV_DELIMITER") or os.environ.get("PROMPTFOO_CSV_DELIMITER") or ","
    strict_only = os.environ.get("FACTCLI_CSV_STRICT", os.environ.get("PROMPTFOO_CSV_STRICT", "")) == "true"
    return delimiter, strict_only


def reader(text: str, delimiter: str, strict: bool, *, quote_after_spaces: bool = False):
    """csv.reader over the text's lines; a cell of any size loads. `quote_after_spaces`: a quote after
    spaces opens a quoted cell (csv-parse's `trim`, which promptfoo sets for prompt files, not test files)."""
    sources.allow_large_csv_cells()
    return csv.reader(csv_lines(text), delimiter=delimiter, strict=strict, skipinitialspace=quote_after_spaces)


def csv_lines(text: str):
    """The text's lines as io.StringIO(text, newline="") gives them (\r\n, \r or \n kept), made a
    chunk of about CSV_CHUNK characters at a time (a cut after a newline splits no line): a
    StringIO holds its text as 4 bytes a character, 68 MB for 1,000,000 short rows. A chunk without
    the other line breaks str.splitlines knows is split by it, which is faster than CSV_LINE."""
    start = 0
    while start < len(text):
        end = text.find("\n", start + CSV_CHUNK)
        end = len(text) if end < 0 else end + 1
        chunk = text[start:end]
        if _OTHER_BREAKS.search(chunk) is None:
            yield from chunk.splitlines(keepends=True)
        else:
            yield from (m.group() for m in CSV_LINE.finditer(chunk))
        start = end
