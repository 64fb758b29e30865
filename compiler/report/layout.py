"""A layered drawing of a dataflow graph: boxes in rows by depth, edges between them.

Each box sits one row below the deepest box it reads (the design's inputs on the first row);
an edge that skips rows runs through a narrow lane (a waypoint) on every row it crosses, so
it never passes through a box (Sugiyama's dummy nodes).  Within a row the boxes and lanes
are ordered by the mean position of what they read (a few sweeps down and up), then placed
as near that mean as the row's order allows.  Pure geometry: :mod:`.drawing` turns it into
SVG."""

from __future__ import annotations

from dataclasses import dataclass, field

#: Box size and the gaps between boxes and rows, in SVG pixels.
BOX_WIDTH, BOX_HEIGHT = 216, 54
LANE_WIDTH = 18
COLUMN_GAP, ROW_GAP = 26, 34
MARGIN = 16
#: Ordering sweeps (down and up) that reduce crossings.
SWEEPS = 4


@dataclass
class Slot:
    """A box (``box`` its key) or a lane of an edge crossing a row, and its place."""

    key: str
    is_box: bool
    row: int = 0
    x: float = 0.0
    order: float = 0.0
    above: list[str] = field(default_factory=list)

    @property
    def width(self) -> float:
        return BOX_WIDTH if self.is_box else LANE_WIDTH


@dataclass(frozen=True)
class Point:
    x: float
    y: float


@dataclass(frozen=True)
class PlacedBox:
    """A box's key and its top-left corner."""

    key: str
    x: float
    y: float


@dataclass(frozen=True)
class Route:
    """An edge: its two boxes and the points it runs through, source bottom to target top."""

    source: str
    target: str
    points: tuple[Point, ...]


@dataclass(frozen=True)
class Layout:
    """Boxes, routes and the drawing's size."""

    boxes: tuple[PlacedBox, ...]
    routes: tuple[Route, ...]
    width: float
    height: float


def depths(keys: list[str], edges: list[tuple[str, str]]) -> dict[str, int]:
    """Each box's row: 0 for boxes reading nothing, else one below the deepest it reads
    (``keys`` in dataflow order)."""
    reads: dict[str, list[str]] = {k: [] for k in keys}
    for a, b in edges:
        reads[b].append(a)
    row: dict[str, int] = {}
    for k in keys:
        row[k] = 1 + max((row[a] for a in reads[k]), default=-1)
    return row


def slots_by_row(keys: list[str], edges: list[tuple[str, str]], row: dict[str, int]
                 ) -> tuple[list[list[Slot]], dict[tuple[str, str], list[str]]]:
    """The rows of slots (boxes, and a lane per edge per row it crosses) and each edge's lanes."""
    slots = {k: Slot(k, True, row[k]) for k in keys}
    lanes: dict[tuple[str, str], list[str]] = {}
    for i, (a, b) in enumerate(edges):
        prev, chain = a, []
        for r in range(row[a] + 1, row[b]):
            key = f"lane {i} {r}"
            slots[key] = Slot(key, False, r, above=[prev])
            chain.append(key)
            prev = key
        slots[b].above.append(prev)
        lanes[(a, b)] = chain
    rows: list[list[Slot]] = [[] for _ in range(max(row.values(), default=-1) + 1)]
    for s in slots.values():  # boxes in dataflow order, lanes after them
        rows[s.row].append(s)
    for i, r in enumerate(rows):
        for j, s in enumerate(r):
            s.order = j
    return rows, lanes


def sweep(rows: list[list[Slot]]) -> None:
    """Order each row by the mean order of the slots each reads (down), then of those that
    read it (up), :data:`SWEEPS` times."""
    index = {s.key: s for r in rows for s in r}
    below: dict[str, list[str]] = {s.key: [] for r in rows for s in r}
    for r in rows:
        for s in r:
            for a in s.above:
                below[a].append(s.key)
    for _ in range(SWEEPS):
        for links, order in ((lambda s: s.above, rows[1:]), (lambda s: below[s.key], rows[-2::-1])):
            for r in order:
                for s in r:
                    linked = [index[k].order for k in links(s)]
                    s.x = sum(linked) / len(linked) if linked else s.order
                r.sort(key=lambda s: (s.x, s.order))
                for j, s in enumerate(r):
                    s.order = j


def place(rows: list[list[Slot]]) -> None:
    """x of every slot: each as near the mean centre of the boxes it reads (of the lanes, when
    it reads only lanes) as its row's order allows."""
    index = {s.key: s for r in rows for s in r}
    for i, r in enumerate(rows):
        wanted = []
        for j, s in enumerate(r):
            near = [k for k in s.above if index[k].is_box] or s.above  # under its box inputs: skips bend, not the trunk
            linked = [index[k].x + index[k].width / 2 for k in near]
            wanted.append(sum(linked) / len(linked) - s.width / 2 if linked and i else j * (BOX_WIDTH + COLUMN_GAP))
        x = None
        for s, want in zip(r, wanted):
            x = want if x is None else max(want, x)
            s.x = x
            x += s.width + COLUMN_GAP
        pushed = [s.x - w for s, w in zip(r, wanted) if s.is_box]  # boxes pushed right on average: pull back
        for s in r:
            s.x -= sum(pushed) / max(1, len(pushed)) / 2
    left = min((s.x for r in rows for s in r), default=0.0)
    for r in rows:
        for s in r:
            s.x += MARGIN - left


def row_top(row: int) -> float:
    return MARGIN + row * (BOX_HEIGHT + ROW_GAP)


def route(edge: tuple[str, str], lanes: list[str], index: dict[str, Slot], entry: float) -> Route:
    a, b = edge
    src, dst = index[a], index[b]
    points = [Point(src.x + BOX_WIDTH / 2, row_top(src.row) + BOX_HEIGHT)]
    for key in lanes:
        lane = index[key]
        points += [Point(lane.x + LANE_WIDTH / 2, row_top(lane.row)),
                   Point(lane.x + LANE_WIDTH / 2, row_top(lane.row) + BOX_HEIGHT)]
    points.append(Point(dst.x + entry, row_top(dst.row)))
    return Route(a, b, tuple(points))


def entries(edges: list[tuple[str, str]], index: dict[str, Slot]) -> dict[tuple[str, str], float]:
    """Where each edge enters its target's top: spread over the top, in the order of the sources."""
    into: dict[str, list[tuple[str, str]]] = {}
    for e in edges:
        into.setdefault(e[1], []).append(e)
    found = {}
    for target, es in into.items():
        es = sorted(es, key=lambda e: index[e[0]].x)
        for k, e in enumerate(es):
            found[e] = BOX_WIDTH * (k + 1) / (len(es) + 1)
    return found


def layout(keys: list[str], edges: list[tuple[str, str]]) -> Layout:
    """The layered drawing of boxes ``keys`` (in dataflow order) and ``edges`` (source, target)."""
    edges = list(dict.fromkeys(edges))  # an op reading one value twice (x + x) is one edge
    row = depths(keys, edges)
    rows, lanes = slots_by_row(keys, edges, row)
    sweep(rows)
    place(rows)
    index = {s.key: s for r in rows for s in r}
    boxes = tuple(PlacedBox(k, index[k].x, row_top(index[k].row)) for k in keys)
    at = entries(edges, index)
    routes = tuple(route(e, lanes[e], index, at[e]) for e in edges)
    width = max((s.x + s.width for s in index.values()), default=0.0) + MARGIN
    height = row_top(len(rows)) - ROW_GAP + MARGIN if rows else 2 * MARGIN
    return Layout(boxes, routes, width, height)


__all__ = ["BOX_HEIGHT", "BOX_WIDTH", "Layout", "PlacedBox", "Point", "Route", "layout"]
