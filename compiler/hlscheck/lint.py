"""A lint of generated and template C++ for what Vitis HLS rejects or silently turns into
something else.

It reads the synthesis view (:func:`.synth.synthesis_view`: the firmware preprocessed with
``__SYNTHESIS__`` defined, line markers kept), so only code Vitis HLS compiles is looked at
and every finding names the original file and line.  The files linted are the project's
own: the generated top function, ``parameters.h``, ``defines.h``, hls4ml's generated
``nnet_code_gen.h`` and Tessera's kernels (``nnet_tessera_*.h``); hls4ml's library headers
are hls4ml's to keep.

Rules (:class:`Rule`):

- dynamic allocation (``new``, ``delete``, ``malloc`` and friends): no heap in hardware;
- standard containers and owning pointers (``std::vector``, ``std::map``, ``std::string``,
  ``std::function``, ...): not synthesizable;
- pointers to pointers, and null pointer arguments: Vitis HLS needs every pointer argument
  to resolve to one array;
- recursion (a cycle in the call graph of the linted functions);
- loops whose trip count is not a compile-time constant (``while``, ``do``, or a ``for``
  whose bound is not built from literals, ``CONFIG_T::`` members, template parameters and
  ``const`` values) without ``#pragma HLS LOOP_TRIPCOUNT``: the scheduler cannot bound
  their latency.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import PurePosixPath


class Rule(Enum):
    DYNAMIC_ALLOCATION = "dynamic allocation"
    STD_CONTAINER = "standard container"
    POINTER_TO_POINTER = "pointer to pointer"
    NULL_POINTER = "null pointer argument"
    RECURSION = "recursion"
    UNBOUNDED_LOOP = "loop without a constant trip count or LOOP_TRIPCOUNT"


@dataclass(frozen=True)
class Finding:
    rule: Rule
    file: str
    line: int
    code: str

    def line_text(self) -> str:
        return f"{self.file}:{self.line}: {self.rule.value}: {self.code}"


#: Files of a project the lint reads (by their path inside the project's firmware/).
OWN_FILES = re.compile(r"(^|/)(nnet_utils/nnet_tessera_\w+\.h|nnet_utils/nnet_code_gen\.h|parameters\.h|defines\.h|"
                       r"[A-Za-z_]\w*\.cpp)$")
KEYWORDS = frozenset("if for while switch catch return sizeof do else case new delete throw static_assert alignof "
                     "decltype typeid static_cast const_cast reinterpret_cast dynamic_cast operator".split())
TYPE_WORDS = frozenset("int unsigned signed long short char bool size_t const volatile auto".split())

ALLOC = re.compile(r"\bnew\s+[A-Za-z_(]|\bdelete\s*(\[\s*\])?\s*[A-Za-z_(]|\b(malloc|calloc|realloc|free)\s*\(")
CONTAINER = re.compile(r"\bstd\s*::\s*(vector|map|multimap|unordered_map|unordered_set|set|multiset|list|deque|"
                       r"basic_string|string|queue|priority_queue|stack|function|shared_ptr|unique_ptr)\b")
PTR_PTR = re.compile(r"\b[A-Za-z_][\w:]*\s*(<[^;{}()]*>)?\s*\*\s*(const\s*)?\*\s*[A-Za-z_]\w*\s*[,;)=\[]")
NULL_PTR = re.compile(r"\(\s*(const\s+)?(typename\s+)?[A-Za-z_][\w:<>]*\s*\*\s*\)\s*0\b|\bnullptr\b|\bNULL\b")
FUNC_DEF = re.compile(r"(?<![\w.>:~])([A-Za-z_]\w*)\s*\(")
CALL = re.compile(r"(?<![\w.~])([A-Za-z_]\w*)\s*(<[^;{}()]*>)?\s*\(")
LOOP = re.compile(r"\b(for|while)\s*\(|\bdo\s*\{")
TRIPCOUNT = re.compile(r"#\s*pragma\s+HLS\s+LOOP_TRIPCOUNT", re.I)
QUALIFIED = re.compile(r"[A-Za-z_][\w]*\s*(<[^;{}()]*>)?\s*::\s*[A-Za-z_]\w*")
IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
CONST_DECL = re.compile(r"\b(?:static\s+)?(?:constexpr|const)\s+(?!\w+\s*[*&])[\w:<>\s]*?\b([A-Za-z_]\w*)\s*=([^;{]*);")
TEMPLATE_PARAMS = re.compile(r"\btemplate\s*<([^;{}]*?)>\s*(?=(struct|class|void|inline|typename|static|[A-Za-z_]))")
ENUM = re.compile(r"\benum\b[^{;]*\{([^}]*)\}")


@dataclass
class Source:
    """The linted code: one text, with the (file, line) of every character offset."""

    text: str
    starts: list[int]  # offset of each line
    origin: list[tuple[str, int]]  # (file, line) of each line

    def where(self, offset: int) -> tuple[str, int]:
        return self.origin[bisect.bisect_right(self.starts, offset) - 1]

    def code_at(self, offset: int) -> str:
        i = bisect.bisect_right(self.starts, offset) - 1
        end = self.starts[i + 1] if i + 1 < len(self.starts) else len(self.text)
        return self.text[self.starts[i]:end].strip()[:160]


def own_source(view: str, own=OWN_FILES) -> Source:
    """The lines of ``view`` (``g++ -E`` output) that come from the linted files."""
    text, starts, origin = [], [], []
    cur, line, keep, off = "", 0, False, 0
    for raw in view.splitlines():
        m = re.match(r'#\s*(\d+)\s+"([^"]*)"', raw)
        if m:
            line, cur = int(m.group(1)), m.group(2)
            keep = bool(own.search(PurePosixPath(cur).as_posix())) and not cur.startswith("<")
            continue
        if keep:
            starts.append(off)
            origin.append((cur, line))
            text.append(raw)
            off += len(raw) + 1
        line += 1
    return Source("\n".join(text), starts, origin)


def plain_source(text: str, name: str) -> Source:
    """A file's own text (comments removed, line numbers kept) as a :class:`Source`."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    lines = [re.sub(r"//.*", "", ln) for ln in text.splitlines()]
    starts, off = [], 0
    for ln in lines:
        starts.append(off)
        off += len(ln) + 1
    return Source("\n".join(lines), starts, [(name, i + 1) for i in range(len(lines))])


def matching(text: str, i: int, open_: str = "{", close: str = "}") -> int:
    """Offset of the bracket closing the one at ``i`` (or len(text))."""
    depth = 0
    for j in range(i, len(text)):
        c = text[j]
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return j
    return len(text)


def constant_names(text: str) -> set[str]:
    """Names a loop bound may use: ``const`` values, template parameters, enumerators."""
    names: set[str] = set()
    for m in CONST_DECL.finditer(text):
        names.add(m.group(1))
        names.update(re.findall(r",\s*([A-Za-z_]\w*)\s*=", m.group(2)))
    for m in TEMPLATE_PARAMS.finditer(text):
        for param in m.group(1).split(","):
            words = IDENT.findall(param.split("=")[0])
            if words:
                names.add(words[-1])
    for m in ENUM.finditer(text):
        names.update(w.split("=")[0].strip() for w in m.group(1).split(",") if w.strip())
    return names


def functions(src: Source) -> dict[str, list[tuple[int, int]]]:
    """Function definitions: name -> [(body start, body end)]."""
    out: dict[str, list[tuple[int, int]]] = {}
    text = src.text
    for m in FUNC_DEF.finditer(text):
        name = m.group(1)
        if name in KEYWORDS or name in TYPE_WORDS:
            continue
        close = matching(text, m.end() - 1, "(", ")")
        rest = re.match(r"\s*(const\s*)?(noexcept\s*)?\{", text[close + 1:close + 40])
        if rest is None:
            continue
        body = close + 1 + rest.end() - 1
        out.setdefault(name, []).append((body, matching(text, body)))
    return out


def recursion(src: Source) -> list[Finding]:
    """Cycles in the call graph of the functions defined in ``src`` (by name)."""
    defs = functions(src)
    calls = {name: {c.group(1) for a, b in spans for c in CALL.finditer(src.text, a, b) if c.group(1) in defs}
             for name, spans in defs.items()}
    found, done = [], set()
    for start in sorted(calls):
        stack, seen = [(start, [start])], {start}
        while stack:
            cur, path = stack.pop()
            for nxt in sorted(calls[cur]):
                if nxt == start and start not in done:
                    done.update(path)
                    f, ln = src.where(defs[start][0][0])
                    found.append(Finding(Rule.RECURSION, f, ln, " -> ".join([*path, start])))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    return found


def loop_findings(src: Source, consts: set[str]) -> list[Finding]:
    text, found = src.text, []
    for m in LOOP.finditer(text):
        kind = m.group(1) or "do"
        if kind == "do":
            body = (m.end() - 1, matching(text, m.end() - 1))
            bounded = False
        else:
            close = matching(text, m.end() - 1, "(", ")")
            header = text[m.end():close]
            nxt = re.match(r"\s*\{", text[close + 1:])
            if kind == "while" and re.match(r"\s*;", text[close + 1:]):
                continue  # the condition of a do-loop, judged at its ``do``
            body = (close + 1 + nxt.end() - 1, matching(text, close + 1 + nxt.end() - 1)) if nxt else (close, close)
            bounded = kind == "for" and for_is_bounded(header, consts)
        if bounded or TRIPCOUNT.search(text, body[0], body[1] + 1):
            continue
        f, ln = src.where(m.start())
        found.append(Finding(Rule.UNBOUNDED_LOOP, f, ln, src.code_at(m.start())))
    return found


def for_is_bounded(header: str, consts: set[str]) -> bool:
    """A ``for`` header whose condition compares the loop variable with a constant."""
    parts = header.split(";")
    if len(parts) != 3:
        return False
    init, cond = parts[0], parts[1]
    loop_vars = set(re.findall(r"([A-Za-z_]\w*)\s*=(?!=)", init))
    if not cond.strip():
        return False
    bound = QUALIFIED.sub(" ", cond)
    names = set(IDENT.findall(bound)) - TYPE_WORDS - {"sizeof", "static_cast"}
    return bool(loop_vars) and names <= loop_vars | consts


def lint_source(src: Source) -> list[Finding]:
    """Every rule over ``src``; findings in file order."""
    found: list[Finding] = []
    text = src.text
    for rule, pattern in ((Rule.DYNAMIC_ALLOCATION, ALLOC), (Rule.STD_CONTAINER, CONTAINER),
                          (Rule.POINTER_TO_POINTER, PTR_PTR), (Rule.NULL_POINTER, NULL_PTR)):
        for m in pattern.finditer(text):
            if text[src.starts[bisect.bisect_right(src.starts, m.start()) - 1]:].lstrip().startswith("#"):
                continue  # a preprocessor line (a pragma's text)
            f, ln = src.where(m.start())
            found.append(Finding(rule, f, ln, src.code_at(m.start())))
    found += recursion(src)
    found += loop_findings(src, constant_names(text))
    return sorted(found, key=lambda x: (x.file, x.line, x.rule.value))


def lint_view(view: str) -> list[Finding]:
    """Lint the project files of a synthesis view (:func:`.synth.synthesis_view`)."""
    return lint_source(own_source(view))


__all__ = ["Finding", "OWN_FILES", "Rule", "Source", "lint_source", "lint_view", "own_source", "plain_source"]
