"""What the report draws of a design, recorded when it is compiled: ``PRJ/design.json``.

The manifest (``tessera.json``) says what ``emulate`` and ``verify`` need; this file adds what
a reader wants to see and only the compile knows: every layer's input values (the edges of
the drawing), its input, weight and accumulator types, its requantization constants and why
they are exact, its reuse factor, the estimator's per-layer figures, and the design totals
(:mod:`.collect` fills it from the typed IR).  Nothing else reads it; a project without it
(compiled by the writer alone, a partitioned project's kernel) is reported from its manifest
(:func:`manifest_record`: the layers in order, without edges or estimates).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import ProjectError
from ..ir.types import FixedType
from ..ops.base.requantization import Requantization
from ..project import IoEntry, Manifest

#: The record's file in a project folder.
DESIGN_JSON = "design.json"
#: Its format number (another is read as no record: the next compile rewrites it).
DESIGN_FORMAT = 1


def fixed_json(t: FixedType) -> dict:
    return {"width": t.width, "frac": t.frac, "signed": t.signed}


def fixed_of(d: dict) -> FixedType:
    return FixedType(int(d["width"]), int(d["frac"]), bool(d["signed"]))


def optional_int(value) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True)
class PortRecord:
    """A design input or output: the model file's name, its IR value, shape, type and the
    code range type inference proved reachable."""

    name: str
    value: str
    shape: tuple[int, ...]
    ftype: FixedType
    lo: int
    hi: int

    def to_json(self) -> dict:
        return {"name": self.name, "value": self.value, "shape": list(self.shape), "type": fixed_json(self.ftype),
                "range": [self.lo, self.hi]}

    @classmethod
    def from_json(cls, d: dict) -> "PortRecord":
        lo, hi = d["range"]
        return cls(str(d["name"]), str(d["value"]), tuple(int(s) for s in d["shape"]), fixed_of(d["type"]), int(lo),
                   int(hi))


@dataclass(frozen=True)
class LayerCost:
    """A layer's (or the design's) estimated figures; None where the estimator gives none
    (an RTL design's LUTs are per layer, its registers and latency per design)."""

    latency: int | None = None
    ii: int | None = None
    lut: int | None = None
    ff: int | None = None
    dsp: int | None = None
    bram18: int | None = None

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "LayerCost":
        return cls(**{k: optional_int(d[k]) for k in ("latency", "ii", "lut", "ff", "dsp", "bram18")})


def requantization_json(r: Requantization) -> dict:
    return {"form": r.form, "formula": r.formula, "channels": r.channels, "constants": list(r.constants),
            "exactness": r.exactness}


def requantization_of(d: dict) -> Requantization:
    return Requantization(str(d["form"]), str(d["formula"]), int(d["channels"]), tuple(str(c) for c in d["constants"]),
                          str(d["exactness"]))


@dataclass(frozen=True)
class LayerRecord:
    """One IR node as the report shows it: name, op, the kind of box it is drawn as, the IR
    values it reads and writes, its output's shape, type and reachable code range, its input,
    weight and accumulator types (empty: none), its requantization, its hardware form in
    words, MACs per sample, reuse factor and estimated cost."""

    node: str
    op: str
    kind: str
    inputs: tuple[str, ...]
    output: str
    shape: tuple[int, ...]
    ftype: FixedType
    lo: int
    hi: int
    input_types: tuple[str, ...] = ()
    weight: str = ""
    accumulator: str = ""
    requantization: Requantization | None = None
    form: str = ""
    macs: int = 0
    reuse: int | None = None
    cost: LayerCost | None = None

    def to_json(self) -> dict:
        return {"node": self.node, "op": self.op, "kind": self.kind, "inputs": list(self.inputs), "output": self.output,
                "shape": list(self.shape), "type": fixed_json(self.ftype), "range": [self.lo, self.hi],
                "input_types": list(self.input_types), "weight": self.weight, "accumulator": self.accumulator,
                "requantization": None if self.requantization is None else requantization_json(self.requantization),
                "form": self.form, "macs": self.macs, "reuse": self.reuse,
                "cost": None if self.cost is None else self.cost.to_json()}

    @classmethod
    def from_json(cls, d: dict) -> "LayerRecord":
        lo, hi = d["range"]
        requant, cost = d["requantization"], d["cost"]
        return cls(str(d["node"]), str(d["op"]), str(d["kind"]), tuple(str(v) for v in d["inputs"]), str(d["output"]),
                   tuple(int(s) for s in d["shape"]), fixed_of(d["type"]), int(lo), int(hi),
                   tuple(str(t) for t in d["input_types"]), str(d["weight"]), str(d["accumulator"]),
                   None if requant is None else requantization_of(requant), str(d["form"]), int(d["macs"]),
                   optional_int(d["reuse"]), None if cost is None else LayerCost.from_json(cost))


@dataclass(frozen=True)
class EstimateSummary:
    """The design's estimate: where it comes from, the part and clock it is for, its totals
    (latency and II in clock cycles, resources), whether it fits the part, and a note."""

    source: str
    part: str
    clock_ns: float | None
    totals: LayerCost
    fits: bool | None = None
    note: str = ""

    def to_json(self) -> dict:
        return {"source": self.source, "part": self.part, "clock_ns": self.clock_ns, "totals": self.totals.to_json(),
                "fits": self.fits, "note": self.note}

    @classmethod
    def from_json(cls, d: dict) -> "EstimateSummary":
        clock = d["clock_ns"]
        return cls(str(d["source"]), str(d["part"]), None if clock is None else float(clock),
                   LayerCost.from_json(d["totals"]), None if d["fits"] is None else bool(d["fits"]), str(d["note"]))


@dataclass(frozen=True)
class DesignRecord:
    """``design.json``: the back end, the model file, the design's ports and layers (in
    dataflow order), and the estimate (or why there is none).  ``edges`` is False for a
    record rebuilt from a manifest, which lists the layers without their inputs."""

    backend: str
    model_file: str | None
    inputs: tuple[PortRecord, ...]
    outputs: tuple[PortRecord, ...]
    layers: tuple[LayerRecord, ...]
    estimate: EstimateSummary | None = None
    estimate_missing: str = ""
    edges: bool = True
    format: int = DESIGN_FORMAT

    @property
    def macs(self) -> int:
        return sum(layer.macs for layer in self.layers)

    def to_json(self) -> dict:
        return {"format": self.format, "backend": self.backend, "model_file": self.model_file,
                "inputs": [p.to_json() for p in self.inputs], "outputs": [p.to_json() for p in self.outputs],
                "layers": [layer.to_json() for layer in self.layers],
                "estimate": None if self.estimate is None else self.estimate.to_json(),
                "estimate_missing": self.estimate_missing, "edges": self.edges}

    @classmethod
    def from_json(cls, d: dict) -> "DesignRecord":
        est = d["estimate"]
        return cls(str(d["backend"]), d["model_file"], tuple(PortRecord.from_json(p) for p in d["inputs"]),
                   tuple(PortRecord.from_json(p) for p in d["outputs"]),
                   tuple(LayerRecord.from_json(r) for r in d["layers"]),
                   None if est is None else EstimateSummary.from_json(est), str(d["estimate_missing"]),
                   bool(d["edges"]), int(d["format"]))

    def write(self, prj: str | Path) -> Path:
        path = Path(prj) / DESIGN_JSON
        path.write_text(json.dumps(self.to_json(), indent=1))
        return path

    @classmethod
    def read(cls, prj: str | Path) -> "DesignRecord | None":
        """The project's record; None when it has none or one of another format; one line
        when it is corrupt."""
        path = Path(prj) / DESIGN_JSON
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text())
            if not isinstance(data, dict) or data.get("format") != DESIGN_FORMAT:
                return None
            return cls.from_json(data)
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
            raise ProjectError(f"{path} is corrupt ({type(exc).__name__}: {exc}): recompile the project") from None


def manifest_port(entry: IoEntry, value: str) -> PortRecord:
    return PortRecord(entry.name, value, entry.shape, entry.ftype, entry.lo, entry.hi)


def manifest_record(manifest: Manifest) -> DesignRecord:
    """A record from what the manifest lists (no edges, no estimate): for a project compiled
    without a design record."""
    layers = tuple(LayerRecord(r.node, r.op, "elementwise", (), r.node, r.shape, r.ftype, r.lo, r.hi, form=r.form,
                               macs=r.macs) for r in manifest.layers)
    inputs = tuple(manifest_port(e, f"input {e.name}") for e in manifest.inputs)
    outputs = tuple(manifest_port(e, f"output {e.name}") for e in manifest.outputs)
    return DesignRecord(manifest.backend, manifest.model_file, inputs, outputs, layers, None,
                        "no estimate recorded (the project has no design.json: recompile it with this tessera)",
                        edges=False)


__all__ = ["DESIGN_FORMAT", "DESIGN_JSON", "DesignRecord", "EstimateSummary", "LayerCost", "LayerRecord", "PortRecord",
           "fixed_json", "fixed_of", "manifest_record"]
