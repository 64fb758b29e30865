"""The C-simulation's view of the project's ap_types: the same arithmetic, without the
``volatile`` that makes every ap_fixed operation go through memory.

In the open-source ap_types that hls4ml ships (``firmware/ap_types``), every arithmetic
result is normalised by ``ap_private::clearUnusedBits()`` (sign- or zero-extension of the
value's top word), and that member function is declared ``volatile`` only, so g++ must
store and reload the value around every call: an ap_fixed multiply-accumulate becomes a
chain of stack loads and stores instead of a few register instructions.  That, not the
arithmetic, is most of a C-simulation's time (the study in docs/results/emulation.md).

:func:`derive_view` writes ``.csim/ap_types/etc/ap_private.h``: the project's own
``etc/ap_private.h`` with, before each ``volatile``-only ``clearUnusedBits``, the same
function without the qualifier, its body copied verbatim.  Non-volatile values (all of
hls4ml's) then take the non-volatile overload, volatile ones still the original; no other
line changes, so the values computed are the same by construction (and every build is still
checked bit for bit against the exact reference).  The C-simulation build puts the folder
ahead of ``firmware/ap_types`` (``#include <etc/ap_private.h>`` in ap_common.h finds it
first).  The project's files are never modified: synthesis, hls4ml's own ``build_lib.sh``
and the synthesis-view check read them as written.  A project whose ap_private.h does not
have the expected form is simulated with its ap_types as shipped (:class:`ViewStatus`).
"""

from __future__ import annotations

import enum
import os
import re
from pathlib import Path

#: Where the view lives inside the project (a C-simulation build folder).
VIEW_DIR = ".csim/ap_types"
#: The flag that puts the view ahead of firmware/ap_types.
VIEW_FLAG = f"-I{VIEW_DIR}"
#: The header the view derives from, relative to firmware/ap_types and to the view.
HEADER = "etc/ap_private.h"
#: The member functions given a non-volatile overload.
FUNCTIONS = ("clearUnusedBits",)
#: Part of every build key: a change of the rewrite is a change of every view.
REWRITE_ID = "ap_private.h: non-volatile overload of clearUnusedBits, v1"

_VOLATILE_DEF = re.compile(r"^(?P<head>\s*(?:INLINE\s+)?void\s+(?P<name>%s)\s*\(\s*(?:void)?\s*\)\s*)volatile\b(?P<tail>.*)$"
                           % "|".join(FUNCTIONS))
_PLAIN_DEF = re.compile(r"^\s*(?:INLINE\s+)?void\s+(?:%s)\s*\(\s*(?:void)?\s*\)\s*(?:\{.*)?$" % "|".join(FUNCTIONS))


class ViewStatus(enum.Enum):
    DERIVED = "non-volatile view"
    AS_SHIPPED = "as shipped"  # the header is not of the expected form: nothing is derived


def _function_end(lines: list[str], start: int) -> int | None:
    """Index of the line that closes the function starting at ``start`` (braces balanced),
    or None when the text ends first."""
    depth, opened = 0, False
    for j in range(start, len(lines)):
        code = lines[j].split("//", 1)[0]
        depth += code.count("{") - code.count("}")
        opened = opened or "{" in code
        if opened and depth == 0:
            return j
        if opened and depth < 0:
            return None
    return None


def rewrite(text: str) -> str | None:
    """``text`` (an ap_private.h) with a non-volatile copy before every ``volatile``-only
    definition of :data:`FUNCTIONS`; None when it has none, or already has a non-volatile
    one (nothing to do, or not the form this rewrite knows)."""
    lines = text.split("\n")
    if any(_PLAIN_DEF.match(ln) for ln in lines):
        return None
    out: list[str] = []
    i, copied = 0, 0
    while i < len(lines):
        m = _VOLATILE_DEF.match(lines[i])
        if m is None:
            out.append(lines[i])
            i += 1
            continue
        end = _function_end(lines, i)
        if end is None:
            return None
        body = lines[i : end + 1]
        out += [m.group("head").rstrip() + m.group("tail"), *body[1:], *body]
        copied += 1
        i = end + 1
    return "\n".join(out) if copied else None


def derive_view(prj: Path) -> ViewStatus:
    """Write (or remove) the project's view from its current ap_types; the include flag
    :data:`VIEW_FLAG` is harmless when there is none."""
    prj = Path(prj)
    target = prj / VIEW_DIR / HEADER
    source = prj / "firmware" / "ap_types" / HEADER
    derived = rewrite(source.read_text(errors="replace")) if source.is_file() else None
    if derived is None:
        target.unlink(missing_ok=True)
        return ViewStatus.AS_SHIPPED
    if not target.is_file() or target.read_text(errors="replace") != derived:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}")
        tmp.write_text(derived)
        os.replace(tmp, target)
    return ViewStatus.DERIVED


__all__ = ["FUNCTIONS", "HEADER", "REWRITE_ID", "VIEW_DIR", "VIEW_FLAG", "ViewStatus", "derive_view", "rewrite"]
