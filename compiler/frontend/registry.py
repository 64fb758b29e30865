"""The importer's table of handlers: one function of ``(state, node)`` per ONNX op type and
domain, registered with :func:`handles`.  ``handlers/__init__.py`` imports every handler
module by name; nothing else fills the table.

Adding an ONNX construct: one handler in the module of its concern (quantizers, qcdq,
linear, windows, elementwise, shape, recurrent), its rules in ``attributes.ATTRIBUTES``, the op
module if the IR op is new, and tests (``tests/frontend/test_handlers.py`` fails on a
handler no test reaches)."""

from __future__ import annotations

from typing import Callable

import onnx

from .load import QONNX_DOMAIN, TESSERA_DOMAIN
from .state import ImportState

ONNX_DOMAIN = ""
Handler = Callable[[ImportState, onnx.NodeProto], None]

#: (domain, op type) -> handler
HANDLERS: dict[tuple[str, str], Handler] = {}

DOMAINS = (ONNX_DOMAIN, QONNX_DOMAIN, TESSERA_DOMAIN)


def handles(*op_types: str, domain: str = ONNX_DOMAIN) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of ``op_types`` in ``domain``."""
    if domain not in DOMAINS:
        raise ValueError(f"unknown domain {domain!r}")

    def register(fn: Handler) -> Handler:
        for op_type in op_types:
            key = (domain, op_type)
            if key in HANDLERS:
                raise ValueError(f"two handlers for {op_type} ({domain or 'ai.onnx'})")
            HANDLERS[key] = fn
        return fn

    return register


def handler_for(node: onnx.NodeProto) -> Handler | None:
    domain = ONNX_DOMAIN if node.domain in ("", "ai.onnx") else node.domain
    return HANDLERS.get((domain, node.op_type))


def handled_op_types() -> set[str]:
    return {op_type for _, op_type in HANDLERS}


__all__ = ["DOMAINS", "HANDLERS", "Handler", "ONNX_DOMAIN", "handled_op_types", "handler_for", "handles"]
