"""Read an ONNX file safely (every failure becomes a one-line :class:`ModelLoadError`), and what
the file and the user declare about its input: legacy domains, ``finn_datatype``, ``--input-type``."""

from __future__ import annotations

import math
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError

from ..errors import ModelLoadError, UnsupportedModelError
from ..ir.types import MAX_ELEMENTS, FixedType

MIN_OPSET = 9
#: Older exports name the QONNX custom-op domain differently (and often import no opset for it).
LEGACY_DOMAINS = ("onnx.brevitas", "finn.custom_op.general")
QONNX_DOMAIN = "qonnx.custom_op.general"
#: Tessera's own custom ops (the GRU and ConvLSTM cells, docs/rnn_export.md).
TESSERA_DOMAIN = "tessera.custom_op"
#: The recurrent cell ops (docs/rnn_export.md): qonnx cannot infer their shapes, and no ONNX
#: executor runs them.
RECURRENT_OPS = frozenset({"QuantLSTMCell", "QuantGRUCell", "QuantConvLSTMCell"})
#: The quantizers of a value (qonnx 1.0 names Quant also IntQuant; ONNX's QuantizeLinear): an
#: op that needs one after it to be exact (an average, a table) fuses with it, a clip folds into it.
QUANTIZERS = frozenset({"Quant", "IntQuant", "Trunc", "QuantizeLinear"})


#: finn_datatype annotations of an input no Quant reads: the integer values it holds.
DATATYPES = {"BIPOLAR": (-1, 1), "BINARY": (0, 1)}


def datatype_range(name: str) -> tuple[int, int] | None:
    """The values of a finn datatype (BIPOLAR, BINARY, INTn, UINTn), None for others."""
    if name in DATATYPES:
        return DATATYPES[name]
    for prefix, signed in (("UINT", False), ("INT", True)):
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            n = int(name[len(prefix):])
            return (-(1 << (n - 1)), (1 << (n - 1)) - 1) if signed else (0, (1 << n) - 1)
    return None


def input_datatypes(model: onnx.ModelProto) -> dict[str, str]:
    """The graph inputs' ``finn_datatype`` annotations, by input name."""
    inits = {i.name for i in model.graph.initializer}
    inputs = {i.name for i in model.graph.input if i.name not in inits}
    found = {}
    for a in model.graph.quantization_annotation:
        dt = next((p.value for p in a.quant_parameter_tensor_names if p.key == "finn_datatype"), None)
        if a.tensor_name in inputs and dt is not None:
            found[a.tensor_name] = dt
    return found


def parse_input_type(text: str) -> FixedType:
    """``fixed<W,I>`` / ``ufixed<W,I>`` / ``int<W>`` / ``uint<W>`` -> a fixed-point type (one-line error otherwise)."""
    import re

    m = re.fullmatch(r"\s*(u?)(fixed|int)<\s*(\d+)\s*(?:,\s*(-?\d+)\s*)?>\s*", text)
    if not m or (m.group(2) == "fixed") != (m.group(4) is not None) or not 1 <= int(m.group(3)) <= 52:
        raise UnsupportedModelError(f"input type '{text}' is not fixed<W,I>, ufixed<W,I>, int<W> or uint<W> (W <= 52)")
    width = int(m.group(3))
    ints = int(m.group(4)) if m.group(4) is not None else width
    return FixedType(width, width - ints, m.group(1) != "u")


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
