"""A small document model that renders to both Markdown and self-contained HTML, so a report is written once."""

from __future__ import annotations

import html
from dataclasses import dataclass, field

CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.25em .6em}
td.n{text-align:right}th{background:#f3f3f3}pre{background:#f6f8fa;padding:.6em;white-space:pre-wrap;
margin:.2em 0 .6em}.role{font-weight:600;color:#555;margin-top:.6em}img{max-width:100%;border:1px solid #ddd}
details{margin:.4em 0 1em}summary{cursor:pointer;font-weight:600}
ul.tree,ul.tree ul{list-style:none;margin:0;padding-left:1.4em}ul.tree{padding-left:0}
ul.tree li{position:relative;padding:.15em 0 .15em 1.1em;border-left:1px solid #bbb}ul.tree li:last-child{border-left-color:transparent}
ul.tree li::before{content:"";position:absolute;left:-1px;top:0;width:.9em;height:.95em;border:solid #bbb;
border-width:0 0 1px 1px}ul.tree>li{border-left:none}ul.tree>li::before{display:none}
ul.refills{list-style:none;padding-left:0}ul.refills li{padding:.15em 0}
.edge{color:#777;font-size:.85em;margin-right:.4em}.node{padding:.05em .4em;border:1px solid #ccc;border-radius:3px}
.node.solved{background:#e6f4e6;border-color:#8c8}.node.error{background:#fbeaea;border-color:#d99}"""


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Paragraph:
    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    numeric: set[int] = field(default_factory=set)
    """Columns aligned right."""


@dataclass
class Image:
    path: str
    alt: str


@dataclass
class Code:
    text: str


@dataclass
class Label:
    """A speaker's name above what they said (a transcript's role)."""

    text: str


@dataclass
class Fold:
    """Blocks shown under a summary line: folded in HTML, a sub-heading in Markdown."""

    title: str
    blocks: list[Block]


@dataclass
class Node:
    """One node of a :class:`Tree`: its text, the label of the edge from its parent, and its children."""

    text: str
    edge: str = ""
    children: list[Node] = field(default_factory=list)
    css: str = ""
    """Classes of the node's box in HTML (e.g. ``solved``, ``error``)."""
    data: dict[str, str] = field(default_factory=dict)
    """``data-*`` attributes of the node's list item in HTML, for whoever reads the page by machine."""


@dataclass
class Tree:
    """Nodes drawn as a tree: nested lists, with lines in HTML (CSS only)."""

    roots: list[Node]
    css: str = "tree"
    """The class of the outer list in HTML: ``tree`` draws the lines; another (``refills``) lists the nodes plainly."""


Block = Heading | Paragraph | Bullets | Table | Image | Code | Label | Fold | Tree


def to_markdown(blocks: list[Block]) -> str:
    """The blocks as GitHub-flavoured Markdown."""
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out += ["#" * b.level + " " + b.text, ""]
        elif isinstance(b, Paragraph):
            out += [b.text, ""]
        elif isinstance(b, Bullets):
            out += [f"- {item}" for item in b.items] + [""]
        elif isinstance(b, Table):
            align = ["---:" if i in b.numeric else "---" for i in range(len(b.header))]
            out += [_row(b.header), _row(align), *(_row([c.replace("|", "\\|") for c in r]) for r in b.rows), ""]
        elif isinstance(b, Image):
            out += [f"![{b.alt}]({b.path})", ""]
        elif isinstance(b, Code):
            fence = "````" if "```" in b.text else "```"
            out += [fence, b.text, fence, ""]
        elif isinstance(b, Label):
            out += [f"**{b.text}**", ""]
        elif isinstance(b, Tree):
            out += [*_markdown_nodes(b.roots, 0), ""]
        else:
            out += [f"#### {b.title}", "", to_markdown(b.blocks)]
    return "\n".join(out)


def to_html(title: str, blocks: list[Block]) -> str:
    """The blocks as one HTML page (images by relative path, styles inline)."""
    body = _html_blocks(blocks)
    return (f"<!doctype html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head><body>\n{body}\n</body></html>\n")


def _html_blocks(blocks: list[Block]) -> str:
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f"<h{b.level}>{html.escape(b.text)}</h{b.level}>")
        elif isinstance(b, Paragraph):
            out.append(f"<p>{_inline(b.text)}</p>")
        elif isinstance(b, Bullets):
            out.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, Table):
            head = "".join(f"<th>{html.escape(h)}</th>" for h in b.header)
            rows = "".join("<tr>" + "".join(f"<td{' class=n' if i in b.numeric else ''}>{_inline(c)}</td>"
                                            for i, c in enumerate(r)) + "</tr>" for r in b.rows)
            out.append(f"<table><tr>{head}</tr>{rows}</table>")
        elif isinstance(b, Image):
            out.append(f"<p><img src='{html.escape(b.path)}' alt='{html.escape(b.alt)}'></p>")
        elif isinstance(b, Code):
            out.append(f"<pre>{html.escape(b.text)}</pre>")
        elif isinstance(b, Label):
            out.append(f"<div class=role>{html.escape(b.text)}</div>")
        elif isinstance(b, Tree):
            out.append(_html_nodes(b.roots, b.css))
        else:
            out.append(f"<details><summary>{html.escape(b.title)}</summary>{_html_blocks(b.blocks)}</details>")
    return "\n".join(out)


def _markdown_nodes(nodes: list[Node], depth: int) -> list[str]:
    lines = []
    for node in nodes:
        lines.append("  " * depth + "- " + (f"{node.edge} → " if node.edge else "") + node.text)
        lines += _markdown_nodes(node.children, depth + 1)
    return lines


def _html_nodes(nodes: list[Node], css: str = "") -> str:
    items = []
    for node in nodes:
        data = "".join(f" data-{html.escape(k)}='{html.escape(v)}'" for k, v in node.data.items())
        edge = f"<span class=edge>{html.escape(node.edge)}</span>" if node.edge else ""
        children = _html_nodes(node.children) if node.children else ""
        box = html.escape(f"node {node.css}".strip())
        items.append(f"<li{data}>{edge}<span class='{box}'>{_inline(node.text)}</span>"
                     f"{children}</li>")
    return (f"<ul class='{html.escape(css)}'>" if css else "<ul>") + "".join(items) + "</ul>"


def _inline(text: str) -> str:
    """Escaped text with Markdown's `code` spans as <code>."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"
