"""A project's manifest, ``tessera.json``: what ``emulate``, ``verify`` and ``check`` know of a
compiled project, as typed values.

:class:`Manifest` is the whole file (``from_json`` / ``to_json``, :meth:`Manifest.read` /
:meth:`Manifest.write`), with a format number: a project written by another format is
refused in one line asking for a recompile.  The design's input and output are
:class:`IoEntry` values, and their encodings live here, once each: ONNX-order codes <->
hls4ml's channels-last layout and the bridge's real values (:meth:`IoEntry.to_hls`,
:meth:`IoEntry.from_hls`), codes -> the user's real values (:meth:`IoEntry.real`), and the
model's input quantizer on real data (:meth:`InputQuantEntry.quantize`).  No other module
reads the file's keys.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from .. import __version__
from .errors import InputDataError, ProjectError, SimulationError, TesseraError
from .ir.graph import Graph, Node
from .ir.meaning import CodeScale, InputMap
from .ir.types import FixedType
from .lower.hls4ml_lower import HlsOptions
from .ops import OPS
from .ops import quant

#: The manifest's file name in a project folder.
MANIFEST = "tessera.json"
#: The manifest format this Tessera writes and reads (1: before the format was recorded).
FORMAT = 2


def sha256(path: str | Path) -> str:
    """The hex sha256 of a file (the manifest's model hash)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _fixed_json(t: FixedType) -> dict:
    return {"width": t.width, "frac": t.frac, "signed": t.signed}


def _fixed(d: dict) -> FixedType:
    return FixedType(int(d["width"]), int(d["frac"]), bool(d["signed"]))


@dataclass(frozen=True)
class IoEntry:
    """A design input or output: its ONNX shape (batch excluded), fixed-point type, reachable
    code range, hls4ml layout (``hls_flat[k] == onnx_flat[perm[k]]``) and, for codes that are
    not fixed point, their :class:`CodeScale`."""

    shape: tuple[int, ...]
    ftype: FixedType
    lo: int
    hi: int
    perm: tuple[int, ...]
    scale: CodeScale | None = None

    @classmethod
    def of(cls, graph: Graph, value: str, perm: np.ndarray) -> "IoEntry":
        t = graph.values[value]
        return cls(tuple(t.shape), t.ftype, int(t.lo), int(t.hi), tuple(int(i) for i in perm), graph.scales.get(value))

    @property
    def size(self) -> int:
        """Values per sample."""
        return int(np.prod(self.shape))

    @cached_property
    def _index(self) -> np.ndarray:
        return np.asarray(self.perm, dtype=np.int64)

    def require_shape(self, codes: np.ndarray) -> None:
        """One line when ``codes`` is not ``(N, *shape)``."""
        if codes.shape[1:] != self.shape:
            raise InputDataError(f"input shape {codes.shape[1:]} does not match the model input {self.shape}")

    def check_codes(self, x: np.ndarray, what: str) -> np.ndarray:
        """Integer codes given by a user, within the type's reachable range."""
        if not np.issubdtype(x.dtype, np.integer):
            raise InputDataError(f"{what}: --codes needs an integer array, got {x.dtype}")
        if x.size and (x.min() < self.lo or x.max() > self.hi):
            raise InputDataError(f"{what}: codes outside the input type's range [{self.lo}, {self.hi}]")
        return x

    def hls_order(self, codes: np.ndarray) -> np.ndarray:
        """Codes ``(N, *shape)`` in ONNX order -> ``(N, size)`` in hls4ml's order."""
        codes = np.asarray(codes)
        return codes.reshape(len(codes), -1)[:, self._index]

    def to_hls(self, codes: np.ndarray) -> np.ndarray:
        """Codes in ONNX order -> the bridge's doubles ``(N, size)``: hls4ml's layout and real
        values, as its ``predict`` takes them."""
        return np.ldexp(self.hls_order(codes).astype(np.float64), -self.ftype.frac)

    def from_hls(self, values: np.ndarray) -> np.ndarray:
        """The bridge's doubles ``(N, size)`` -> int64 codes ``(N, *shape)`` in ONNX order."""
        scaled = np.ldexp(np.asarray(values, dtype=np.float64).reshape(len(values), -1), self.ftype.frac)
        if not np.all(scaled == np.round(scaled)):
            raise SimulationError("C-simulation produced values off the output type's grid")
        out = np.empty(scaled.shape, dtype=np.int64)
        out[:, self._index] = scaled.astype(np.int64)
        return out.reshape(len(values), *self.shape)

    def real(self, codes: np.ndarray) -> np.ndarray:
        """The user's real values of codes (``(code - zero) * scale``, or ``code * 2**-frac``)."""
        if self.scale is not None:
            return self.scale.real(codes, self.shape).reshape(np.shape(codes))
        return np.ldexp(np.asarray(codes, dtype=np.float64), -self.ftype.frac)

    def to_json(self) -> dict:
        return {"shape": list(self.shape), **_fixed_json(self.ftype), "range": [self.lo, self.hi],
                "perm": list(self.perm), "scale": None if self.scale is None else self.scale.to_json()}

    @classmethod
    def from_json(cls, d: dict) -> "IoEntry":
        lo, hi = d["range"]
        return cls(tuple(int(s) for s in d["shape"]), _fixed(d), int(lo), int(hi), tuple(int(i) for i in d["perm"]),
                   None if d["scale"] is None else CodeScale.from_json(d["scale"]))


@dataclass(frozen=True)
class InputQuantEntry:
    """The model's input quantizer on real data: its fixed-point Quant, or (float scales,
    zero points, a datatype annotation) its :class:`InputMap`; the declared type of a float
    input no Quant reads, and the model file's input shape when the design's is a reshape."""

    quantizer: quant.Attrs
    input_map: InputMap | None = None
    declared_type: str | None = None
    model_shape: tuple[int, ...] | None = None

    @classmethod
    def of(cls, graph: Graph) -> "InputQuantEntry":
        model_shape = None if graph.model_input_shape is None else tuple(graph.model_input_shape)
        return cls(graph.input_quant, graph.input_map, graph.input_type, model_shape)

    def quantize(self, x: np.ndarray, shape: tuple[int, ...], what: str = "input") -> np.ndarray:
        """Real inputs ``(N, *shape)`` (or one sample, or the model file's shape) -> codes."""
        if self.model_shape is not None and x.shape[1:] == self.model_shape:  # reshaped before the model's Quant
            x = x.reshape(len(x), *shape)
        if x.shape[1:] != shape:
            if x.shape != shape:
                raise InputDataError(f"{what}: array of shape {x.shape} does not match the model input "
                                     f"(N, {', '.join(map(str, shape))})")
            x = x[None]
        if not np.all(np.isfinite(x)):
            raise InputDataError(f"{what}: contains NaN or Inf")
        if self.input_map is None:
            return quant.quantize_float(self.quantizer, x)
        try:
            return self.input_map.codes(x)
        except ValueError as exc:
            raise InputDataError(f"{what}: {exc}") from None

    def to_json(self) -> dict:
        q = self.quantizer
        return {**_fixed_json(q.out), "narrow": q.narrow, "rounding": q.rounding.value,
                "input_map": None if self.input_map is None else self.input_map.to_json(),
                "declared_type": self.declared_type,
                "model_shape": None if self.model_shape is None else list(self.model_shape)}

    @classmethod
    def from_json(cls, d: dict) -> "InputQuantEntry":
        return cls(quant.Attrs(_fixed(d), bool(d["narrow"]), d["rounding"]),
                   None if d["input_map"] is None else InputMap.from_json(d["input_map"]), d["declared_type"],
                   None if d["model_shape"] is None else tuple(int(s) for s in d["model_shape"]))


@dataclass(frozen=True)
class LayerRow:
    """One IR node as the manifest (and ``tessera inspect``) lists it."""

    node: str
    op: str
    shape: tuple[int, ...]
    ftype: FixedType
    lo: int
    hi: int
    macs: int
    form: str

    @classmethod
    def of(cls, graph: Graph, node: Node) -> "LayerRow":
        t = graph.values[node.output]
        ins = [graph.values[v] for v in node.inputs]
        op = OPS[node.op]
        return cls(node.name, node.op, tuple(t.shape), t.ftype, int(t.lo), int(t.hi), int(op.macs(node.attrs, ins, t)),
                   op.form(node.attrs, ins, t))

    def to_json(self) -> dict:
        return {"node": self.node, "op": self.op, "shape": list(self.shape), "type": self.ftype.describe(),
                **_fixed_json(self.ftype), "range": [self.lo, self.hi], "macs": self.macs, "form": self.form}

    @classmethod
    def from_json(cls, d: dict) -> "LayerRow":
        lo, hi = d["range"]
        return cls(d["node"], d["op"], tuple(d["shape"]), _fixed(d), int(lo), int(hi), int(d["macs"]), d["form"])


@dataclass(frozen=True)
class HlsLayerEntry:
    """One layer of the hls4ml model as written: its name, class and precisions."""

    name: str
    class_name: str
    types: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"name": self.name, "class": self.class_name, "types": dict(self.types)}

    @classmethod
    def from_json(cls, d: dict) -> "HlsLayerEntry":
        return cls(d["name"], d["class"], {str(k): str(v) for k, v in d["types"].items()})


@dataclass(frozen=True)
class RegisterArrays:
    """The design-size guard's numbers: the array-partition limit and the part's register bits."""

    maximum_size: int
    bits: int | None


@dataclass(frozen=True)
class PartitionEntry:
    """A partitioned project's schedule: mode, grid and cut (the schedule is recomputed from
    the model with them), the kernel folder of every block / layer graph signature, the
    tail's folder, and the planner's numbers."""

    mode: str
    grid: tuple[int, ...]
    cut: str
    kernels: dict[str, str]
    tail: str | None
    blocks: int
    redundant_compute: float
    halo_bytes: int
    max_block_bytes: int

    def folders(self) -> list[str]:
        """The HLS projects inside: the kernels' folders, then the tail's."""
        return [*dict.fromkeys(self.kernels.values()), *([self.tail] if self.tail else [])]

    def to_json(self) -> dict:
        return {**asdict(self), "grid": list(self.grid), "kernels": dict(self.kernels)}

    @classmethod
    def from_json(cls, d: dict) -> "PartitionEntry":
        return cls(d["mode"], tuple(int(g) for g in d["grid"]), d["cut"], {str(k): str(v) for k, v in d["kernels"].items()},
                   d["tail"], int(d["blocks"]), float(d["redundant_compute"]), int(d["halo_bytes"]),
                   int(d["max_block_bytes"]))


def _options_json(opts: HlsOptions) -> dict:
    return {**asdict(opts), "io_type": opts.io_type.value}


@dataclass(frozen=True)
class Manifest:
    """``tessera.json``: the model (file name and sha256; none for a partitioned project's
    kernels), the options, the design's input, input quantizer and output, and either the
    unpartitioned design's layers, hls4ml layers, notices and size-guard numbers or the
    partition."""

    model_file: str | None
    model_sha256: str | None
    options: HlsOptions
    input: IoEntry
    input_quant: InputQuantEntry
    output: IoEntry
    layers: tuple[LayerRow, ...] = ()
    hls_layers: tuple[HlsLayerEntry, ...] = ()
    notices: tuple[str, ...] = ()
    register_arrays: RegisterArrays | None = None
    testbench_samples: int | None = None
    lowering_seconds: float | None = None
    partition: PartitionEntry | None = None
    tessera_version: str = __version__
    format: int = FORMAT

    @classmethod
    def of(cls, graph: Graph, model_path: str | Path | None, opts: HlsOptions, input_perm: np.ndarray,
           output_perm: np.ndarray, **rest) -> "Manifest":
        """The manifest of ``graph`` compiled from ``model_path`` with ``opts``; ``rest``: the other fields."""
        return cls(Path(model_path).name if model_path else None, sha256(model_path) if model_path else None, opts,
                   IoEntry.of(graph, graph.input, input_perm), InputQuantEntry.of(graph),
                   IoEntry.of(graph, graph.output, output_perm), **rest)

    def compiled_from(self, model_path: str | Path) -> bool:
        """Whether the project was compiled from this model file (its sha256)."""
        return self.model_sha256 == sha256(model_path)

    def to_json(self) -> dict:
        return {
            "format": self.format, "tessera_version": self.tessera_version, "model_file": self.model_file,
            "model_sha256": self.model_sha256, "options": _options_json(self.options), "input": self.input.to_json(),
            "input_quant": self.input_quant.to_json(), "output": self.output.to_json(),
            "layers": [r.to_json() for r in self.layers], "hls_layers": [h.to_json() for h in self.hls_layers],
            "notices": list(self.notices),
            "register_arrays": None if self.register_arrays is None else asdict(self.register_arrays),
            "testbench_samples": self.testbench_samples, "lowering_seconds": self.lowering_seconds,
            "partition": None if self.partition is None else self.partition.to_json(),
        }

    @classmethod
    def from_json(cls, d: dict, project: str | Path = "the project") -> "Manifest":
        """The manifest of ``d`` (a project of this format), or one line naming ``project``."""
        found = d.get("format", 1) if isinstance(d, dict) else None
        if found is not None and found != FORMAT:
            raise ProjectError(f"project {project} was written by tessera format {found}; this tessera reads "
                               f"format {FORMAT}: recompile it")
        try:
            return cls._from_json(d)
        except (KeyError, TypeError, ValueError, AttributeError, TesseraError) as exc:
            raise ProjectError(f"project {project} has a corrupt {MANIFEST} ({type(exc).__name__}: {exc})") from None

    @classmethod
    def _from_json(cls, d: dict) -> "Manifest":
        regs, part = d["register_arrays"], d["partition"]
        return cls(
            d["model_file"], d["model_sha256"], HlsOptions(**d["options"]), IoEntry.from_json(d["input"]),
            InputQuantEntry.from_json(d["input_quant"]), IoEntry.from_json(d["output"]),
            tuple(LayerRow.from_json(r) for r in d["layers"]), tuple(HlsLayerEntry.from_json(h) for h in d["hls_layers"]),
            tuple(str(n) for n in d["notices"]), None if regs is None else RegisterArrays(**regs),
            d["testbench_samples"], d["lowering_seconds"], None if part is None else PartitionEntry.from_json(part),
            str(d["tessera_version"]), int(d["format"]))

    @classmethod
    def read(cls, prj: str | Path) -> "Manifest":
        """The manifest of project folder ``prj``, or one line: not a project, corrupt, or
        written by another format."""
        path = Path(prj) / MANIFEST
        if not path.is_file():
            raise ProjectError(f"{prj} is not a Tessera project (no {MANIFEST}; was the compile interrupted?)")
        try:
            data = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ProjectError(f"{path} is corrupt (not JSON)") from None
        return cls.from_json(data, prj)

    def write(self, prj: str | Path) -> Path:
        """Write ``tessera.json`` into project folder ``prj``; its path."""
        path = Path(prj) / MANIFEST
        path.write_text(json.dumps(self.to_json(), indent=1))
        return path


__all__ = ["FORMAT", "HlsLayerEntry", "InputQuantEntry", "IoEntry", "LayerRow", "MANIFEST", "Manifest",
           "PartitionEntry", "RegisterArrays", "sha256"]
