"""The layers of a 3D CNN as the training performance model sees them (:mod:`.perfmodel`):
each layer's kind, shapes, parameters and whether it is spatial (split over the ranks'
blocks) or part of the replicated tail, read from the trainer's own modules."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn

from ..compiler.errors import TesseraError
from .mesh import SpatialGrid

__all__ = ["OP_KINDS", "CalibrationError", "LayerSpec", "ModelSpec", "OpKind", "PlanError", "model_spec", "tail_start"]


class CalibrationError(TesseraError):
    """No usable calibration (missing file, wrong version, a layer kind never measured)."""

    exit_code = 2


class PlanError(TesseraError):
    """No data x spatial decomposition fits the constraints."""

    exit_code = 2


@dataclass(frozen=True)
class OpKind:
    """A layer kind: how its work is counted and whether it is sharded through a halo."""

    name: str
    work_unit: str  # "flop" or "element"
    halo: bool      # a fused halo exchange (conv, pooling)


#: Layer kinds of the model; :func:`_kind_of` maps module types to them (explicit, in order).
OP_KINDS: dict[str, OpKind] = {k.name: k for k in (
    OpKind("conv3d", "flop", True),
    OpKind("batchnorm", "element", False),         # DistBatchNorm3d (the sharded part)
    OpKind("batchnorm_native", "element", False),  # torch's BatchNorm3d (the replicated tail)
    OpKind("leaky_relu", "element", False),
    OpKind("act_quant", "element", False),
    OpKind("avgpool", "element", True),
    OpKind("maxpool", "element", True),
    OpKind("dense", "flop", False),
)}


@dataclass(frozen=True)
class LayerSpec:
    """One module of the model as the trainer runs it.  ``in_extent`` / ``out_extent``: the
    global spatial extents (``()`` after flatten); ``signature``: the calibration key."""

    index: int
    name: str
    kind: str
    signature: str
    c_in: int
    c_out: int
    in_extent: tuple[int, ...]
    out_extent: tuple[int, ...]
    kernel: tuple[int, ...] = ()
    stride: tuple[int, ...] = ()
    padding: tuple[int, ...] = ()
    groups: int = 1
    n_params: int = 0
    in_tail_candidate: bool = True  # in net.features (may be cut to the tail)

    def macs_per_voxel(self) -> int:
        """Multiply-accumulates per output voxel (conv) or per row (dense)."""
        if self.kind == "conv3d":
            return self.c_out * self.c_in * math.prod(self.kernel) // self.groups
        if self.kind == "dense":
            return self.c_in * self.c_out
        return 0


@dataclass
class ModelSpec:
    """The layers of a CosmoFlow model (``name``, ``width``, input ``size``) in run order."""

    name: str
    width: float
    size: int
    layers: list[LayerSpec]
    n_params: int
    features: int  # number of modules in net.features (the cut runs over these)
    modules: dict[int, nn.Module] = field(default_factory=dict, repr=False)

    @property
    def extent(self) -> tuple[int, int, int]:
        return (self.size,) * 3


SPATIAL_KINDS = ("conv3d", "avgpool", "maxpool")


def _t3(v) -> tuple[int, int, int]:
    return tuple(int(x) for x in v) if isinstance(v, (tuple, list)) else (int(v),) * 3


def _kind_of(m: nn.Module, tail: bool) -> str | None:
    if isinstance(m, nn.Conv3d):
        return "conv3d"
    if isinstance(m, nn.BatchNorm3d):
        return "batchnorm_native" if tail else "batchnorm"
    if isinstance(m, nn.LeakyReLU):
        return "leaky_relu"
    if type(m).__name__ == "QuantIdentity":
        return "act_quant"
    if isinstance(m, nn.AvgPool3d):
        return "avgpool"
    if isinstance(m, nn.MaxPool3d):
        return "maxpool"
    if isinstance(m, nn.Linear):
        return "dense"
    if isinstance(m, (nn.Flatten, nn.Dropout)):
        return None
    raise CalibrationError(f"the performance model has no layer kind for {type(m).__name__}")


def _signature(kind: str, m: nn.Module, c: int) -> str:
    if kind == "conv3d":
        return f"conv3d/{m.in_channels}/{m.out_channels}/{'x'.join(map(str, _t3(m.kernel_size)))}/" \
               f"{'x'.join(map(str, _t3(m.stride)))}"
    if kind in ("batchnorm", "batchnorm_native"):
        return f"{kind}/{c}"
    if kind == "dense":
        return f"dense/{m.in_features}/{m.out_features}"
    return kind


def model_spec(name: str, width: float | None = None, size: int | None = None) -> ModelSpec:
    """Build ``name`` (as :func:`tessera.training.trainer.train_distributed` does: the
    :data:`~tessera.models.train3d.DEFAULTS` options) and list its layers."""
    from ..models.cnn3d import build_cnn3d
    from ..models.train3d import DEFAULTS
    from .spatial import SpatialModel

    if name not in ("cosmoflow", "cosmoflow-mlperf"):
        raise PlanError(f"the performance model covers cosmoflow and cosmoflow-mlperf, not {name!r}")
    d = DEFAULTS[name]
    width = float(width or d["width"])
    size = int(size or d["size"])
    with torch.random.fork_rng():
        torch.manual_seed(0)
        net = build_cnn3d(name, width=width, input_size=size, in_channels=4, n_out=4, **d.get("options", {}))
    layers: list[LayerSpec] = []
    modules: dict[int, nn.Module] = {}
    e: tuple[int, ...] = (size,) * 3
    c = 4
    seq = [("input_quant", net.input_quant, False)] + \
        [(f"features.{i}", m, False) for i, m in enumerate(net.features)] + \
        [("flatten", net.flatten, True)] + [(f"head.{i}", m, True) for i, m in enumerate(net.head)]
    for name_i, m, head in seq:
        kind = _kind_of(m, tail=False)
        if isinstance(m, nn.Flatten):
            c, e = c * math.prod(e), ()
            continue
        if kind is None:
            continue
        out = SpatialModel._out_extent(m, e) if e else e
        c_out = m.out_channels if kind == "conv3d" else (m.out_features if kind == "dense" else c)
        k = s = p = ()
        if kind in SPATIAL_KINDS:
            k, p = _t3(m.kernel_size), _t3(m.padding)
            s = _t3(m.stride or m.kernel_size) if kind != "conv3d" else _t3(m.stride)
        n_params = sum(q.numel() for q in m.parameters())
        idx = len(layers)
        layers.append(LayerSpec(idx, name_i, kind, _signature(kind, m, c), c if kind != "dense" else m.in_features,
                                c_out, e, out, k, s, p, getattr(m, "groups", 1) if kind == "conv3d" else 1,
                                n_params, in_tail_candidate=name_i.startswith("features.")))
        modules[idx] = m
        c, e = c_out, out
    return ModelSpec(name, width, size, layers, sum(q.numel() for q in net.parameters()), len(net.features),
                     modules)


def tail_start(spec: ModelSpec, grid: SpatialGrid) -> int:
    """Index (into ``spec.layers``) of the first layer of the replicated tail: the rule of
    :class:`~tessera.training.spatial.SpatialModel` (gather before the first spatial layer
    whose output would leave a rank without voxels, else before flatten)."""
    g = grid.dims
    if any(a > n for a, n in zip(g, spec.extent)):
        raise PlanError(f"spatial grid {grid} is finer than the input {'x'.join(map(str, spec.extent))}")
    for lay in spec.layers:
        if not lay.in_tail_candidate:
            if lay.name.startswith("head."):
                return lay.index
            continue
        if lay.kind in SPATIAL_KINDS and any(a > n for a, n in zip(g, lay.out_extent)):
            return lay.index
    return len(spec.layers)
