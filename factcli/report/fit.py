"""Figure tables that fit the terminal and never cut a number.

A figure table has one entry per column of a run (a provider and a short prompt label) and one
field per figure (pass rate, score, each named metric, ...). Labels and headers may be shortened;
cells (numbers, intervals, counts) are always printed whole. Three layouts are tried in turn:

1. wide: a row per column, a table column per figure, headers wrapped at spaces;
2. turned: a row per figure, a table column per run column; this fits the common case of a few
   columns with many named metrics in 80 characters;
3. wide again, with headers cut to the width of their cells;
4. stacked: per column, its label and then `figure value` pairs wrapped between pairs; this always
   fits, whatever the width.

Every line of a table layout has the same width, at most the terminal's.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

LABEL_MIN = 12  # narrowest label column of the wide layout
LABEL_MAX = 32
NAME_MAX = 28  # widest figure name of the turned layout
HEADER_WHOLE = (16, 10)  # widest header word kept whole, tried in turn
HEADER_CUT = (0,)  # the last resort of the wide layout: headers cut to the width of their cells


@dataclass
class Entry:
    """One column of a run: its label on two lines (a prompt can be long, the provider is short)."""

    provider: str
    prompt: str


@dataclass
class Field:
    """One figure: its header and a cell per entry (printed whole, right-aligned)."""

    header: str
    cells: list[str]


def _cut(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    return text[: max(0, width - 1)] + "…" if width > 0 else ""


def wrap_words(text: str, width: int, max_lines: int = 3) -> list[str]:
    """`text` wrapped at spaces into at most `max_lines` lines of `width`; a word longer than the
    width, or text past the last line, is cut with …."""
    words = text.split()
    lines: list[str] = []
    current = ""
    for i, word in enumerate(words):
        candidate = f"{current} {word}" if current else word
        if len(candidate) <= width:
            current = candidate
            continue
        if current:
            lines.append(current)
        current = word
        if len(lines) == max_lines - 1:
            rest = " ".join(words[i:])
            lines.append(_cut(rest, width))
            return lines
    if current:
        lines.append(_cut(current, width))
    return lines[:max_lines]


class _Grid:
    """Lines of fixed-width cells joined by a bar, as the view's grid draws them."""

    def __init__(self, widths: list[int], terminal: bool):
        self.widths = widths
        self.bar = " │ " if terminal else " | "
        dash, cross = ("─", "┼") if terminal else ("-", "+")
        # the last cell has no padding after it, so neither has the rule: every line is as wide
        self.rule = Text(cross.join(dash * (w + 2) for w in widths)[:-1], style="dim")

    @property
    def width(self) -> int:
        return sum(self.widths) + 3 * len(self.widths) - 2

    def line(self, cells: list[str], right: set[int] = frozenset(), style: str | None = None) -> Text:
        out = Text(" ")
        for i, (cell, w) in enumerate(zip(cells, self.widths)):
            if i:
                out.append(self.bar, style="dim")
            text = _cut(cell, w)
            out.append(text.rjust(w) if i in right else text.ljust(w), style=style)
        return out

    def header(self, blocks: list[list[str]]) -> list[Text]:
        depth = max(len(b) for b in blocks)
        return [self.line([b[i] if i < len(b) else "" for b in blocks], style="bold") for i in range(depth)]


def _label_lines(e: Entry, width: int) -> list[str]:
    return [_cut(e.provider, width), _cut(e.prompt, width)] if e.prompt else [_cut(e.provider, width)]


def _wide(entries: list[Entry], fields: list[Field], width: int, terminal: bool,
          header_tries: tuple[int, ...] = HEADER_WHOLE) -> list[Text] | None:
    need_label = max(max(max(len(e.provider), len(e.prompt)) for e in entries), len("column"))
    cells_w = [max(len(c) for c in f.cells) for f in fields]
    for header_max in header_tries:
        widths = [max(cw, min(max((len(w) for w in f.header.split()), default=0), header_max), 3)
                  for f, cw in zip(fields, cells_w)]
        fixed = 1 + sum(w + 3 for w in widths)
        label_w = min(need_label, LABEL_MAX, width - fixed)
        if label_w >= min(LABEL_MIN, need_label):
            break
    else:
        return None
    spare = width - (1 + label_w + sum(w + 3 for w in widths))
    for i, f in enumerate(fields):  # room left: headers on one line, first figures first
        grow = len(f.header) - widths[i]
        if 0 < grow <= spare:
            widths[i] += grow
            spare -= grow
    grid = _Grid([label_w] + widths, terminal)
    lines = grid.header([["column"]] + [wrap_words(f.header, w) for f, w in zip(fields, widths)])
    lines.append(grid.rule)
    right = set(range(1, len(widths) + 1))
    for e_idx, e in enumerate(entries):
        label = _label_lines(e, label_w)
        lines.append(grid.line([label[0]] + [f.cells[e_idx] for f in fields], right))
        for extra in label[1:]:
            lines.append(grid.line([extra] + [""] * len(fields)))
    return lines


def _turned(entries: list[Entry], fields: list[Field], width: int, terminal: bool) -> list[Text] | None:
    name_w = min(max(len(f.header) for f in fields), NAME_MAX)
    for label_cap in (24, 16, 0):
        widths = [max(max(len(f.cells[i]) for f in fields), min(max(len(e.provider), len(e.prompt)), label_cap), 6)
                  for i, e in enumerate(entries)]
        grid = _Grid([name_w] + widths, terminal)
        if grid.width <= width:
            break
    else:
        return None
    heads = [[""]] + [_label_lines(e, w) for e, w in zip(entries, widths)]
    lines = grid.header(heads)
    lines.append(grid.rule)
    right = set(range(1, len(entries) + 1))
    for f in fields:
        lines.append(grid.line([f.header] + f.cells, right))
    return lines


def _stacked(entries: list[Entry], fields: list[Field], width: int) -> list[Text]:
    lines: list[Text] = []
    for i, e in enumerate(entries):
        lines.append(Text(_cut(f"{e.provider} {e.prompt}".strip(), width), style="bold"))
        current = " "
        for f in fields:
            cell = f.cells[i]
            room = width - 4 - len(cell)  # a pair alone on a line: "  " + header + " " + cell
            header = f.header if len(f.header) <= room else _cut(f.header, max(room, 0))
            piece = f"{header} {cell}" if header else cell
            if current.strip() and len(current) + 3 + len(piece) > width:
                lines.append(Text(current))
                current = " "
            current += (" · " if current.strip() else " ") + piece
        if current.strip():
            lines.append(Text(current))
    return lines


def fit(entries: list[Entry], fields: list[Field], width: int, terminal: bool) -> list[Text]:
    """The lines of the first layout that fits in `width` (see the module's docstring)."""
    if not entries:
        return []
    if not fields:
        return [Text(_cut(f"{e.provider} {e.prompt}".strip(), width)) for e in entries]
    for lines in (_wide(entries, fields, width, terminal), _turned(entries, fields, width, terminal),
                  _wide(entries, fields, width, terminal, HEADER_CUT)):
        if lines is not None:
            return lines
    return _stacked(entries, fields, width)


def print_lines(console, lines: list[Text]) -> None:
    """Print pre-fitted lines as they are: rich must neither wrap nor re-justify them."""
    if lines:
        console.print(Text("\n").join(lines), no_wrap=True, overflow="crop", crop=True, soft_wrap=False)
