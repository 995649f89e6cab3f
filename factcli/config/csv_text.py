"""How factcli reads a CSV text, for every CSV it reads as promptfoo does (test files: config/testsets;
prompt files: config/prompts): the delimiter and strictness promptfoo's variables set, and the text's
lines a chunk at a time."""

from __future__ import annotations

import csv
import os

from factcli import sources
from factcli.config import lines

def settings() -> tuple[str, bool]:
    """(the delimiter, whether only strict quoting is read): FACTCLI_CSV_DELIMITER and FACTCLI_CSV_STRICT,
    or promptfoo's PROMPTFOO_CSV_DELIMITER and PROMPTFOO_CSV_STRICT."""
    delimiter = os.environ.get("FACTCLI_CSV_DELIMITER") or os.environ.get("PROMPTFOO_CSV_DELIMITER") or ","
    strict_only = os.environ.get("FACTCLI_CSV_STRICT", os.environ.get("PROMPTFOO_CSV_STRICT", "")) == "true"
    return delimiter, strict_only


def reader(source, delimiter: str, strict: bool, *, quote_after_spaces: bool = False):
    """csv.reader over the lines of `source`: a text, or pieces of one cut after newlines (a file read
    as it is read, sources.read_chunks); a cell of any size loads. `quote_after_spaces`: a quote after
    spaces opens a quoted cell (csv-parse's `trim`, which promptfoo sets for prompt files, not test files)."""
    sources.allow_large_csv_cells()
    chunks = lines.text_chunks(source) if isinstance(source, str) else source
    return csv.reader(lines.csv_lines(chunks), delimiter=delimiter, strict=strict, skipinitialspace=quote_after_spaces)


def csv_lines(text: str):
    """The text's lines as io.StringIO(text, newline="") gives them (\r\n, \r or \n kept), a chunk at a time."""
    return lines.csv_lines(lines.text_chunks(text))
