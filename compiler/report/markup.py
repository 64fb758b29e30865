"""Small HTML and SVG builders: every text escaped (``html.escape``), every element closed.

Fragments are plain strings of markup; :func:`text` is the only way text enters them, so a
layer named ``<script>`` is shown, never run."""

from __future__ import annotations

import html
from dataclasses import dataclass


def text(value: object) -> str:
    """``value`` as escaped text (quotes included: safe in attributes too)."""
    return html.escape(str(value), quote=True)


def attributes(attrs: dict[str, object]) -> str:
    """``key="value"`` pairs (None left out; ``class_`` -> ``class``, ``_`` -> ``-``)."""
    return "".join(f' {k.rstrip("_").replace("_", "-")}="{text(v)}"' for k, v in attrs.items() if v is not None)


def element(tag: str, *children: str, **attrs: object) -> str:
    """``<tag attrs>children</tag>``; children are markup (escape text with :func:`text`)."""
    return f"<{tag}{attributes(attrs)}>{''.join(children)}</{tag}>"


def empty(tag: str, **attrs: object) -> str:
    """A self-closing element (SVG shapes)."""
    return f"<{tag}{attributes(attrs)}/>"


def number(value: int | float | None, missing: str = "—") -> str:
    """A count with thousands separators (``missing`` for none)."""
    if value is None:
        return missing
    return f"{value:,}" if isinstance(value, int) else f"{value:,.3g}"


@dataclass(frozen=True)
class Column:
    """A table column: its heading, whether it holds numbers (right-aligned), a tooltip, and
    markup shown instead of the heading's text (an axis)."""

    heading: str
    numeric: bool = False
    title: str | None = None
    markup: str | None = None


def table(columns: list[Column], rows: list[list[str]], caption: str = "", class_: str = "data",
          footer: list[str] | None = None) -> str:
    """A table of markup cells (escape text cells with :func:`text`)."""
    head = element("tr", *(element("th", c.markup or text(c.heading), class_="num" if c.numeric else None,
                                   title=c.title or (c.heading if c.markup else None), scope="col") for c in columns))

    def row(cells: list[str], tag: str = "td") -> str:
        return element("tr", *(element(tag, cell, class_="num" if c.numeric else None) for c, cell in zip(columns, cells)))

    parts = [element("caption", text(caption))] if caption else []
    parts += [element("thead", head), element("tbody", *(row(r) for r in rows))]
    if footer is not None:
        parts.append(element("tfoot", row(footer)))
    return element("div", element("table", *parts, class_=class_), class_="scroll-x")


def definitions(pairs: list[tuple[str, str]]) -> str:
    """A definition list of (term, markup) pairs."""
    return element("dl", *(element("dt", text(term)) + element("dd", value) for term, value in pairs), class_="facts")


def paragraph(words: str, class_: str | None = None) -> str:
    return element("p", text(words), class_=class_)


def code(words: str) -> str:
    return element("code", text(words))


__all__ = ["Column", "attributes", "code", "definitions", "element", "empty", "number", "paragraph", "table", "text"]
