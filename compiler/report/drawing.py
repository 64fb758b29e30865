"""The design drawn from its record: an inline SVG with a box per layer (name, op, shape,
output type and code range), one per design input and output, and an arrow per value a
layer reads (:mod:`.layout` places them).  Boxes are coloured by kind (CSS classes of the
page's stylesheet) and carry their full description as a tooltip (``<title>``)."""

from __future__ import annotations

from .design import DesignRecord, LayerRecord, PortRecord
from .layout import BOX_HEIGHT, BOX_WIDTH, Layout, PlacedBox, Point, Route, layout
from .markup import element, empty, text

#: Characters of a name that fit a box's first line.
NAME_CHARS = 30
#: Kinds of box, as the legend names them.
KINDS = {"input": "design input / output", "linear": "weights (dense, convolution)", "requant": "requantization",
         "elementwise": "activation / elementwise", "window": "pooling / window", "merge": "merge (add, concat)",
         "reshape": "reshape / wiring", "recurrent": "recurrent cell"}


def shorten(words: str, limit: int) -> str:
    return words if len(words) <= limit else words[: limit - 1] + "…"


def shape_words(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"


def type_words(ftype, lo: int, hi: int) -> str:
    return f"{ftype.describe()}  [{lo}, {hi}]"


def box_lines(layer: LayerRecord) -> tuple[str, str, str]:
    return layer.node, f"{layer.op} · {shape_words(layer.shape)}", type_words(layer.ftype, layer.lo, layer.hi)


def port_lines(port: PortRecord, what: str) -> tuple[str, str, str]:
    return f"{what}: {port.name}", shape_words(port.shape), type_words(port.ftype, port.lo, port.hi)


def box(placed: PlacedBox, lines: tuple[str, str, str], kind: str, role: str, tooltip: str) -> str:
    """One box: a rounded rectangle, three lines of text, a tooltip."""
    x, y = placed.x, placed.y
    rect = empty("rect", x=f"{x:.1f}", y=f"{y:.1f}", width=BOX_WIDTH, height=BOX_HEIGHT, rx=7 if role == "layer" else 16)
    words = [element("text", text(shorten(line, NAME_CHARS + (4 if k else 0))), x=f"{x + 10:.1f}",
                     y=f"{y + 17 + 15 * k:.1f}", class_=("name" if k == 0 else "detail"))
             for k, line in enumerate(lines)]
    return element("g", element("title", text(tooltip)), rect, *words, class_=f"box {role} kind-{kind}",
                   data_key=lines[0] if role != "layer" else None, data_node=lines[0] if role == "layer" else None)


def path_of(points: tuple[Point, ...]) -> str:
    """A smooth path through ``points``: vertical tangents at every point."""
    first = points[0]
    parts = [f"M{first.x:.1f},{first.y:.1f}"]
    for a, b in zip(points, points[1:]):
        bend = max(8.0, (b.y - a.y) / 2)
        parts.append(f"C{a.x:.1f},{a.y + bend:.1f} {b.x:.1f},{b.y - bend:.1f} {b.x:.1f},{b.y:.1f}")
    return " ".join(parts)


def edge(r: Route, dashed: bool) -> str:
    return empty("path", d=path_of(r.points), class_="edge dashed" if dashed else "edge", marker_end="url(#arrow)",
                 data_from=r.source, data_to=r.target)


def layer_tooltip(layer: LayerRecord) -> str:
    parts = [f"{layer.node} ({layer.op})", f"output {shape_words(layer.shape)} {layer.ftype.describe()}, codes "
             f"[{layer.lo}, {layer.hi}]"]
    if layer.input_types:
        parts.append("inputs " + ", ".join(layer.input_types))
    if layer.form:
        parts.append(layer.form)
    if layer.macs:
        parts.append(f"{layer.macs:,} MACs")
    return "\n".join(parts)


def graph_of(record: DesignRecord) -> tuple[list[str], list[tuple[str, str]], dict[str, str]]:
    """The boxes' keys in dataflow order, the edges, and each box's markup maker's role."""
    keys = [f"in {p.value}" for p in record.inputs] + [layer.output for layer in record.layers] + \
           [f"out {p.value}" for p in record.outputs]
    producer = {p.value: f"in {p.value}" for p in record.inputs} | {layer.output: layer.output for layer in record.layers}
    if not record.edges:  # a record from a manifest: the order only
        return keys, list(zip(keys, keys[1:])), producer
    edges = [(producer[v], layer.output) for layer in record.layers for v in layer.inputs if v in producer]
    edges += [(producer[p.value], f"out {p.value}") for p in record.outputs if p.value in producer]
    return keys, edges, producer


def legend(kinds: set[str]) -> str:
    items = [element("span", element("i", class_=f"swatch kind-{k}"), text(words), class_="legend-item")
             for k, words in KINDS.items() if k in kinds]
    return element("p", *items, class_="legend")


def drawing(record: DesignRecord) -> str:
    """The SVG of the design, in a scrolling frame, with its legend."""
    keys, edges, _ = graph_of(record)
    placed: Layout = layout(keys, edges)
    at = {b.key: b for b in placed.boxes}
    boxes = [box(at[f"in {p.value}"], port_lines(p, "input"), "input", "port", f"design input {p.name}")
             for p in record.inputs]
    boxes += [box(at[layer.output], box_lines(layer), layer.kind, "layer", layer_tooltip(layer)) for layer in record.layers]
    boxes += [box(at[f"out {p.value}"], port_lines(p, "output"), "input", "port", f"design output {p.name}")
              for p in record.outputs]
    arrow = element("marker", empty("path", d="M0,0 L10,5 L0,10 z", class_="arrowhead"), id="arrow",
                    viewBox="0 0 10 10", refX=9, refY=5, markerWidth=7, markerHeight=7, orient="auto-start-reverse")
    svg = element("svg", element("defs", arrow), *(edge(r, not record.edges) for r in placed.routes), *boxes,
                  class_="design", width=f"{placed.width:.0f}",
                  height=f"{placed.height:.0f}", viewBox=f"0 0 {placed.width:.0f} {placed.height:.0f}", role="img",
                  aria_label=f"the design: {len(record.layers)} layers in dataflow order")
    kinds = {layer.kind for layer in record.layers} | {"input"}
    return legend(kinds) + element("div", svg, class_="drawing")


__all__ = ["KINDS", "drawing", "graph_of"]
