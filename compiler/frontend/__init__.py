"""Frontend: read QONNX/QCDQ files into the untyped IR (``pipeline.compile_ir`` then types it).

``load`` reads a file safely; ``clean`` runs qonnx's clean-up; ``importer`` walks the model,
each node through its handler (``registry``, ``handlers/``) over the typed state (``state``,
``values``)."""

from __future__ import annotations

from .importer import import_model
from .load import RECURRENT_OPS, load_onnx, normalize_domains

__all__ = ["RECURRENT_OPS", "import_model", "load_onnx", "normalize_domains"]
