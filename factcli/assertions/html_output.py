"""HTML output assertions, scored as promptfoo 0.121.20 scores them: contains-html (promptfoo's
points-of-evidence heuristic over the raw text) and is-html (the text parses as an HTML document
with a recognised element and no bare text outside one). promptfoo parses with parse5; html5lib is
used here (both implement the WHATWG tree construction, so implied html/head/body, foster parenting
and the like agree). Whether a html/head/body element came from a tag in the text (parse5's source
location) is read off html5lib's tokens.
"""

from __future__ import annotations

import functools
import re

from factcli.assertions.js_semantics import js_trim, output_string
from factcli.scoring.registry import AssertionContext, assertion
from factcli.types import GradingResult



_MAX_INPUT_SIZE = 10 * 1024 * 1024
_WRAPPER_LITERAL = {tag: re.compile(rf"<{tag}(?=[\s>/])") for tag in ("html", "head", "body")}
_VALID_HTML_ELEMENTS = frozenset("""
html head title base link meta style body article section nav aside h1 h2 h3 h4 h5 h6 header footer
address p hr pre blockquote ol ul li dl dt dd figure figcaption main div a em strong small s cite q
dfn abbr ruby rt rp data time code var samp kbd sub sup i b u mark bdi bdo span br wbr img iframe
embed object param picture source video audio track map area svg math script noscript canvas ins
del table caption colgroup col tbody thead tfoot tr td th form label input button select datalist
optgroup option textarea output progress meter fieldset legend details summary dialog menu slot
template""".split())

_HTML_INDICATORS = {
    "opening": re.compile(r"<[a-zA-Z][a-zA-Z0-9-]*(?:\s[^>]*)?>"),
    "closing": re.compile(r"</[a-zA-Z][a-zA-Z0-9-]*\s*>"),
    "self_closing": re.compile(r"<[a-zA-Z][a-zA-Z0-9-]*(?:\s[^>]*)?/>"),
    "entity": re.compile(r"&(?:[a-zA-Z]+|#[0-9]+|#x[0-9a-fA-F]+);"),
    "doctype": re.compile(r"<!DOCTYPE\s+html", re.I),
    "comment": re.compile(r"<!--[^-]*(?:-[^-]+)*-->"),
    "attribute": re.compile(r"\s[a-zA-Z-]+=\s*[\"'][^\"']*[\"']"),
    "common_tag": re.compile(r"<(html|head|body|div|span|p|a|img|h[1-6]|ul|ol|li|table|tr|td|th|form|input|"
                             r"button|script|style|link|meta|br|hr)\b", re.I | re.ASCII),
}


def contains_html_text(text: str) -> bool:
    """promptfoo's containsHtml: at least two points of HTML evidence."""
    if len(text) > _MAX_INPUT_SIZE:
        return False
    p = _HTML_INDICATORS
    points = 0
    opening, closing = bool(p["opening"].search(text)), bool(p["closing"].search(text))
    if opening and closing:
        points += 2
    elif opening or closing:
        points += 1
    for name, worth in (("self_closing", 1), ("entity", 1), ("doctype", 2), ("comment", 1), ("attribute", 1),
                        ("common_tag", 2)):
        if p[name].search(text):
            points += worth
    return points >= 2


@functools.lru_cache(maxsize=1)
def _html_builder():
    from html5lib import treebuilders

    base = treebuilders.getTreeBuilder("etree")

    class Builder(base):
        """Remembers which elements came from a start tag in the text (parse5's source location):
        html5lib's tokenizer tokens carry `selfClosingAcknowledged`, the tokens it implies do not."""

        def reset(self):
            super().reset()
            self.from_text: set[int] = set()

        def _mark(self, element, token):
            if "selfClosingAcknowledged" in token:
                self.from_text.add(id(element._element))

        def insertRoot(self, token):
            super().insertRoot(token)
            self._mark(self.openElements[-1], token)

        def insertElementNormal(self, token):
            element = super().insertElementNormal(token)
            self._mark(element, token)
            return element

        def insertElementTable(self, token):
            element = super().insertElementTable(token)
            self._mark(element, token)
            return element

    return Builder


def _tag_name(element) -> str | None:
    tag = element.tag
    if not isinstance(tag, str) or tag in ("DOCUMENT_ROOT", "DOCUMENT_FRAGMENT", "<!DOCTYPE>"):
        return None
    return tag.rsplit("}", 1)[-1].lower()


_HTML_FIRST = re.compile(r"(?:\s+|<!--.*?-->|<![^>]*>|<\?[^>]*>)*<html(?=[\s/>])", re.I | re.S)


def validate_html(text: str) -> tuple[bool, str]:
    """promptfoo's validateHtml: a parsed document with a recognised element and no bare text."""
    import html5lib

    trimmed = js_trim(text)
    if not trimmed:
        return False, "Output is empty"
    if len(trimmed) > _MAX_INPUT_SIZE:
        return False, "Output exceeds maximum size limit"
    if re.match(r"\s*<\?xml", trimmed, re.I):
        return False, "Output appears to be XML, not HTML"
    parser = html5lib.HTMLParser(tree=_html_builder(), namespaceHTMLElements=False)
    document = parser.parse(trimmed, scripting=True)  # parse5's default: scripting enabled
    from_text = parser.tree.from_text
    if _HTML_FIRST.match(trimmed):  # html5lib implies the root and merges a leading <html> into it
        from_text.update(id(el) for el in document.iter() if _tag_name(el) == "html")
    lowered = trimmed.lower()
    elements = [(el, name) for el in document.iter() if (name := _tag_name(el))]

    def user_provided(element, name: str) -> bool:
        if name in _WRAPPER_LITERAL:
            return bool(_WRAPPER_LITERAL[name].search(lowered)) and id(element) in from_text
        return name in _VALID_HTML_ELEMENTS or "-" in name

    body = next((el for el, name in elements if name == "body"), None)
    if body is not None and not user_provided(body, "body"):
        texts = [body.text or ""] + [child.tail or "" for child in body]
        if any(js_trim(t) for t in texts):
            return False, "Output must be wrapped in HTML tags"
    if not any(user_provided(el, name) for el, name in elements):
        return False, "Output does not contain recognized HTML elements"
    return True, "Output is valid HTML"


@assertion("contains-html")
def contains_html(ctx: AssertionContext) -> GradingResult:
    found = contains_html_text(output_string(ctx.output))
    return ctx.verdict(found != ctx.inverse,
                    f"Expected output to {'not ' if ctx.inverse else ''}contain HTML content")


@assertion("is-html")
def is_html(ctx: AssertionContext) -> GradingResult:
    valid, reason = validate_html(output_string(ctx.output))
    return ctx.verdict(valid != ctx.inverse, reason)
