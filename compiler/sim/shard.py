"""The top function's kernels compiled in several translation units, one g++ per core.

hls4ml writes a design's top function as one ``.cpp``: every layer's kernel template is
instantiated and compiled in that one unit, on one core, while the build's other units (the
bridge, the runtime) take a fraction of the time.  For the C-simulation only, the build
compiles a derived form of that file in ``shards`` units:

- each call of the top function (one line: a layer's ``nnet::<kernel><...>(args); // name``
  or hls4ml's ``nnet::load_weights_from_txt<...>(array, "file");``) is owned by one shard
  (:func:`assign`: the costliest first, each to the least loaded shard; the bridge is
  shard 1's);
- shard 0 is the top function as written, except that a call owned by another shard goes
  to ``tessera_csim_layer_<k>(args)``, a function template declared there and defined in
  its owner as ``nnet::<kernel><...>(args)``: the same function, with the same template
  arguments and the same argument objects (forwarded), so the same arithmetic;
- shard ``s > 0`` holds the definitions of its calls' functions (marked ``used``) and an
  unused ``static`` copy of the top function whose calls instantiate them with exactly the
  argument types of shard 0's calls.  It includes the
  project's headers as shard 0 does, so it also defines what they define (the weight arrays,
  out-of-class constants of the layers' configurations): the build makes its object's global
  definitions weak (binutils' ``objcopy --weaken``), so that shard 0's stand, one of each
  (the arrays hls4ml's loaders fill, for instance).  Shard 1 also includes the bridge.

A top function of any other form (a call whose arguments are not names or numbers, not
exactly one definition of the function) is compiled as written, in one unit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from ...hls_templates import Fields, render

#: A call in the top function (a layer's kernel, or hls4ml's loader of a weight array from
#: its text file): indentation, the function with its template arguments, the arguments,
#: the rest of the line (hls4ml's comment naming the layer).
_CALL = re.compile(r"^(\s*)(nnet::\w+\s*<[^()]*>)\s*\(([^()]*)\);(\s*(?://.*)?)$")
#: hls4ml's weight loaders: ``nnet::load_*_from_txt<...>(array, "file")``.
_LOADER = re.compile(r"^nnet::load_\w+_from_txt\b")
#: One argument of a call: a name, a number or a plain string literal.
_ARG = re.compile(r'^(?:[A-Za-z_]\w*|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[fFlLuU]*|"[^"\\]*")$')
#: Rough relative compile costs, for :func:`assign`: of a call that passes weight arrays (a
#: dense, convolution, pooling or recurrent layer), of any other layer (element-wise), of one
#: weight loader and of the bridge (what the split gains is measured by bench/emulation.py's
#: cold-build study, docs/results/emulation.md).
HEAVY, LIGHT, LOADER, BRIDGE = 40, 15, 1, 30


@dataclass(frozen=True)
class ShardUnit(Fields):
    """One shard's translation unit: the top function's text (``head``, ``top``) with the
    shard's layers' calls ``definitions`` (and the other shards' ``declarations``); shard 1
    includes the ``bridge``."""

    template: ClassVar[str] = "sim/tessera_csim_shard.cpp.tpl"
    shard: int
    shards: int
    codegen_opt: str
    bridge: str
    declarations: str
    head: str
    definitions: str
    top: str


@dataclass(frozen=True)
class Call:
    """One layer's call: its line in the file and its parts."""

    line: int
    indent: str
    kernel: str
    args: tuple[str, ...]
    rest: str
    cost: int

    def wrapped(self, k: int) -> str:
        return f"{self.indent}tessera_csim_layer_{k}({', '.join(self.args)});{self.rest}"


@dataclass(frozen=True)
class TopFunction:
    """hls4ml's top function file, split into the parts the shards are written from."""

    name: str
    lines: tuple[str, ...]
    head: int  # index of the line ``void <name>(``
    calls: tuple[Call, ...]


def parse_top(text: str, name: str) -> TopFunction | None:
    """The top function's parts, or ``None`` for a file of another form (compiled as written)."""
    lines = tuple(text.splitlines())
    heads = [i for i, ln in enumerate(lines) if re.match(rf"^void\s+{re.escape(name)}\s*\(", ln)]
    if len(heads) != 1:
        return None
    calls = []
    for i in range(heads[0] + 1, len(lines)):
        m = _CALL.match(lines[i])
        if m:
            args = tuple(a.strip() for a in m.group(3).split(",")) if m.group(3).strip() else ()
            if not all(_ARG.match(a) for a in args):
                return None
            calls.append((i, m.group(1), m.group(2), args, m.group(4)))
        elif "nnet::" in lines[i] and not lines[i].lstrip().startswith("//"):
            return None  # a kernel called in some other form
    weights = {a[0] for _, _, k, a, _ in calls if _LOADER.match(k) and a}

    def cost(kernel: str, args: tuple[str, ...]) -> int:
        return LOADER if _LOADER.match(kernel) else HEAVY if weights.intersection(args) else LIGHT

    return TopFunction(name, lines, heads[0], tuple(Call(i, ind, k, a, r, cost(k, a)) for i, ind, k, a, r in calls))


def shard_count(top: TopFunction | None, limit: int) -> int:
    """How many units: at most ``limit`` (the build's: one per core) and one per layer with
    weights (each unit parses the headers anew: a unit more is worth it only for a share of
    the kernels)."""
    if top is None:
        return 1
    return max(1, min(limit, sum(c.cost == HEAVY for c in top.calls)))


def assign(top: TopFunction, shards: int) -> tuple[int, ...]:
    """The owning shard of each call: the costliest first, each to the least loaded shard
    (shard 1 starts with the bridge; ties go to the lower shard)."""
    load = [0] * shards
    if shards > 1:
        load[1] = BRIDGE
    owner = [0] * len(top.calls)
    for k in sorted(range(len(top.calls)), key=lambda k: (-top.calls[k].cost, k)):
        s = min(range(shards), key=lambda s: (load[s], s))
        owner[k] = s
        load[s] += top.calls[k].cost
    return tuple(owner)


def _declaration(k: int) -> str:
    return f"template <class... A> void tessera_csim_layer_{k}(A &&...a);"


def _definition(k: int, call: Call) -> str:
    return (f"template <class... A> __attribute__((used)) void tessera_csim_layer_{k}(A &&...a) "
            f"{{ {call.kernel}(static_cast<A &&>(a)...); }}")


def render_shards(top: TopFunction, owner: tuple[int, ...], shards: int, bridge: str, codegen_opt: str) -> list[str]:
    """The text of each shard's unit (``bridge``: the bridge's file name, included by shard 1)."""
    by_line = {c.line: (k, c) for k, c in enumerate(top.calls)}
    texts = []
    for s in range(shards):
        decls = [_declaration(k) for k in range(len(top.calls)) if owner[k] != s]
        body = []
        for i, ln in enumerate(top.lines):
            if i < top.head:
                body.append(ln)
            elif i == top.head and s > 0:
                body.append(re.sub(rf"^void\s+{re.escape(top.name)}\s*\(", "[[maybe_unused]] static void tessera_csim_copy(", ln))
            elif i in by_line:
                k, c = by_line[i]
                body.append(ln if s == 0 and owner[k] == 0 else c.wrapped(k))
            else:
                body.append(ln)
        head = "\n".join(body[:top.head])
        rest = "\n".join(body[top.head:])
        defs = [_definition(k, c) for k, c in enumerate(top.calls) if owner[k] == s and s > 0]
        texts.append(render(ShardUnit(shard=s, shards=shards, codegen_opt=codegen_opt,
                                      bridge=f'#include "{bridge}"' if s == 1 else "", declarations="\n".join(decls),
                                      head=head, definitions="\n".join(defs), top=rest)))
    return texts


__all__ = ["Call", "ShardUnit", "TopFunction", "assign", "parse_top", "render_shards", "shard_count"]
