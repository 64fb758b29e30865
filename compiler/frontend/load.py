"""Read an ONNX file safely: every failure becomes a one-line :class:`ModelLoadError`."""

from __future__ import annotations

import math
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError

from ..errors import ModelLoadError, UnsupportedModelError
from ..ir.types import MAX_ELEMENTS

MIN_OPSET = 9
#: Older exports name the QONNX custom-op domain differently (and often import no opset for it).
LEGACY_DOMAINS = ("onnx.brevitas", "finn.custom_op.general")
QONNX_DOMAIN = "qonnx.custom_op.general"


def normalize_domains(model: onnx.ModelProto) -> onnx.ModelProto:
    """Legacy QONNX as it exists in the wild -> what qonnx's clean-up and onnx's checker read:
    the custom-op domains of older exports renamed to qonnx's, and its opset imported."""
    m = onnx.ModelProto.FromString(model.SerializeToString())
    custom = False
    for node in m.graph.node:
        if node.domain in LEGACY_DOMAINS:
            node.domain = QONNX_DOMAIN
        custom |= node.domain == QONNX_DOMAIN
    keep = [o for o in m.opset_import if o.domain not in LEGACY_DOMAINS]
    del m.opset_import[:]
    m.opset_import.extend(keep)
    if custom and not any(o.domain == QONNX_DOMAIN for o in m.opset_import):
        m.opset_import.append(onnx.helper.make_opsetid(QONNX_DOMAIN, 1))
    return m


def load_onnx(path: str | Path) -> onnx.ModelProto:
    p = Path(path)
    if not p.exists():
        raise ModelLoadError(f"model file not found: {p}")
    if not p.is_file():
        raise ModelLoadError(f"model path is not a file: {p}")
    data = p.read_bytes()
    if not data:
        raise ModelLoadError(f"model file is empty: {p}")
    try:
        model = onnx.load_model_from_string(data)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise ModelLoadError(f"{p} is not a readable ONNX model (truncated or not ONNX): {exc.__class__.__name__}") from None
    graph = model.graph
    if not graph.node or not graph.output or not graph.input:
        raise ModelLoadError(f"{p} is not a complete ONNX model (no nodes, inputs or outputs): truncated or not ONNX")
    model = normalize_domains(model)
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid model"
        raise ModelLoadError(f"{p} fails ONNX validation: {first}") from None
    opset = {o.domain: o.version for o in model.opset_import}
    version = opset.get("", opset.get("ai.onnx", MIN_OPSET))
    if version < MIN_OPSET:
        raise UnsupportedModelError(f"{p}: ONNX opset {version} is older than the supported minimum {MIN_OPSET}")
    newest = onnx.defs.onnx_opset_version()
    if version > newest:
        raise UnsupportedModelError(f"{p}: ONNX opset {version} is newer than the newest this onnx {onnx.__version__} "
                                    f"knows ({newest}): its ops' semantics cannot be checked")
    inits = {i.name for i in graph.initializer}
    for vi in graph.input:
        dims = [d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim[1:]]
        if vi.name not in inits and math.prod(dims) > MAX_ELEMENTS:
            raise UnsupportedModelError(f"input '{vi.name}' has {math.prod(dims):,} elements per sample (shape {dims}), "
                                        f"more than the {MAX_ELEMENTS:,} a design can index")
    return model
