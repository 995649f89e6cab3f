"""The table of `factcli view`: tests as rows, columns (provider and prompt) as columns, one page.

Drawn line by line at fixed widths, far cheaper than a rich Table for a page of cells, and every
line exactly as wide as the table: headers, descriptions, outputs and reasons are flattened to one
line each (a multi-line prompt or output never breaks the grid) and cut with …. `--full` draws a
rich Table that wraps whole texts instead.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from factcli.report.labels import one_line, test_label

STYLES = {"PASS": "bold green", "FAIL": "bold red", "ERROR": "bold yellow"}
BODY_LINES = 2  # lines of output / reason under a cell's status line (unless --full)
COLUMN_MIN = 14  # a column narrower than this is left out (and said so) rather than squeezed
CLAIMS_MARK = "◇"


def cell_head(cell: dict) -> Text:
    head = Text(cell["status"], style=STYLES[cell["status"]])
    if cell["score"] is not None:
        head.append(f" {cell['score']:.2f}", style="dim")
    claims = cell.get("claims")
    if claims:
        head.append(f" {CLAIMS_MARK}{claims['unsupported']}/{claims['total']}",
                    style="red" if claims["unsupported"] else "green")
    if cell.get("turn"):
        head.append(f" {cell['turn']}", style="cyan")
    if cell.get("rated") is not None:  # a person's verdict on the row (factcli ratings list)
        head.append(" ✓rated" if cell["rated"] else " ✗rated", style="green" if cell["rated"] else "red")
    if cell["cached"]:
        head.append(" cached", style="dim")
    return head


def cell_body(cell: dict) -> Any:
    """What a cell shows under its status: the reason of a FAIL, the error of an ERROR, else the output."""
    if cell["status"] == "FAIL" and cell.get("reason"):
        return cell["reason"]
    if cell["status"] == "ERROR" and cell.get("error"):
        return cell["error"]
    return cell["output"]


def chunks(text: str, width: int, lines: int) -> list[str]:
    """`text` (one line already) wrapped at spaces into at most `lines` pieces of `width`; the last
    ends in … when text was left over."""
    out: list[str] = []
    while text and len(out) < lines:
        if len(text) <= width:
            out.append(text)
            break
        if len(out) == lines - 1:
            out.append(text[: width - 1] + "…")
            break
        cut = text.rfind(" ", 0, width + 1)
        if cut < width // 2:
            cut = width
        out.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    return out


def widths_for(width: int, n_cols: int, idx_w: int) -> tuple[list[int], int]:
    """Column widths that fill `width` exactly, and how many of the run's columns fit.

    A line is " " + cells joined by " | ", so n cells of widths w take sum(w) + 3n - 2 characters."""
    test_w = 16 if width < 100 else 28
    shown = n_cols
    while shown > 1:
        if (width - idx_w - test_w - 3 * (2 + shown) + 2) // shown >= COLUMN_MIN:
            break
        shown -= 1
    room = width - idx_w - test_w - 3 * (2 + shown) + 2
    per = max(COLUMN_MIN, room // max(1, shown))
    if per * shown > room:  # even one column does not fit: narrow the test column first
        test_w = max(6, test_w - (per * shown - room))
    widths = [idx_w, test_w] + [per] * shown
    spare = width - (sum(widths) + 3 * len(widths) - 2)
    if spare > 0:  # what integer division left over goes to the last column, so the table fills the width
        widths[-1] += spare
    return widths, shown


def render_table(console, cols: list[dict], page_info: dict, *, full: bool, terminal: bool) -> None:
    if full:
        return render_full(console, cols, page_info, terminal)
    idx_w = max(1, max((len(str(t["testIdx"])) for t in page_info["tests"]), default=1))
    widths, n = widths_for(console.width, len(cols), idx_w)
    render_grid(console, cols[:n], page_info, widths, terminal)
    if n < len(cols):
        console.print(Text(f"{len(cols) - n} more columns not shown: widen the terminal, or use --full or --json",
                           style="dim"))


def _fit(piece: Text | str, w: int) -> Text:
    piece = piece.copy() if isinstance(piece, Text) else Text(piece or "")
    piece.truncate(w, overflow="ellipsis", pad=True)
    return piece


def render_grid(console, shown: list[dict], page_info: dict, widths: list[int], terminal: bool) -> None:
    bar, cross = ("│", "┼") if terminal else ("|", "+")
    dash = "─" if terminal else "-"
    rule = Text(cross.join(dash * (w + 2) for w in widths)[:-1], style="dim")  # as wide as a line

    def line_of(cells: list) -> Text:
        out = Text(" ")
        for i, (cell, w) in enumerate(zip(cells, widths)):
            if i:
                out.append(f" {bar} ", style="dim")
            out.append_text(_fit(cell, w))
        return out

    heads: list[list[str]] = [["#"], ["test"]]
    for c, w in zip(shown, widths[2:]):  # provider on one line, the short prompt label on the next
        prompt = c.get("promptShort") or ""
        heads.append([one_line(f"[{c['provider']}]", w)] + ([one_line(prompt, w)] if prompt else []))
    lines: list[Text] = []
    for i in range(max(len(h) for h in heads)):
        lines.append(line_of([Text(h[i], style="bold") if i < len(h) else "" for h in heads]))
    lines.append(rule)
    for t in page_info["tests"]:
        label = test_label(t["description"], t["vars"])
        rows: list[list] = [[str(t["testIdx"]).rjust(widths[0])], chunks(one_line(label, None), widths[1], 1 + BODY_LINES)]
        for c, w in zip(shown, widths[2:]):
            cell = t["cells"].get(c["promptIdx"])
            if cell is None:
                rows.append([Text("—", style="dim")])
                continue
            rows.append([cell_head(cell)] + chunks(one_line(cell_body(cell), w * BODY_LINES), w, BODY_LINES))
        for i in range(max(len(r) for r in rows)):
            lines.append(line_of([r[i] if i < len(r) else "" for r in rows]))
        lines.append(rule)
    console.print(Text("\n").join(lines), no_wrap=True, overflow="crop", crop=True, soft_wrap=False)


def render_full(console, cols: list[dict], page_info: dict, terminal: bool) -> None:
    """--full: every column, whole texts, wrapped by a rich Table."""
    from rich import box
    from rich.table import Table

    table = Table(box=box.ROUNDED if terminal else box.ASCII, show_lines=True, expand=False)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("test", overflow="fold")
    for c in cols:
        table.add_column(Text(c["label"]), overflow="fold", min_width=10)
    for t in page_info["tests"]:
        label = test_label(t["description"], t["vars"])
        line: list = [str(t["testIdx"]), Text(label)]
        for c in cols:
            cell = t["cells"].get(c["promptIdx"])
            if cell is None:
                line.append(Text("—", style="dim"))
                continue
            body = cell_body(cell)
            text = body if isinstance(body, str) else one_line(body, None)
            line.append(cell_head(cell) + Text("\n" + text if text else ""))
        table.add_row(*line)
    console.print(table)


def claims_legend(page_info: dict) -> str | None:
    """The line that says what the claims marker means, when a cell of the page has one."""
    if not any(c.get("claims") for t in page_info["tests"] for c in t["cells"].values()):
        return None
    return (f"{CLAIMS_MARK}u/n: the row was graded claim by claim (factual-correctness, factscore, facts-grounding); "
            "u of its n claims are not supported")
