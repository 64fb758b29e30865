"""Acceptance 1: sharded training over real processes (gloo) equals single-process training.

Each configuration spawns ``data x spatial`` processes once and checks, against the
single-process run from the same initial state and mini-batch: the first step's outputs,
loss, every parameter gradient and the input gradient (relative 1e-5: ``max |a - b| /
max |b|`` per tensor), and, where a trajectory is checked, every parameter after 20 Adam
steps (1e-4).  Only checks that hold on any CPU:

* ``layers``: plain torch layers at an odd volume (12 x 10 x 9): stride-2 conv, average and
  max pooling, transposed conv, nearest upsampling, an anisotropic kernel, BatchNorm; fp32,
  one step and 20 Adam steps.  Nothing in it rounds to a grid, so the summation order moves
  the result continuously (measured 5e-7 after 20 steps, 200x below the bound).
* CosmoFlow (brevitas QAT, BatchNorm, activation-scale statistics, dense tail after the
  gather, 11^3) and the U-Net (max pooling, transposed conv, skip concatenations, 16^3):
  the first step in float64, on every mesh kind (spatial only, data x spatial, 3 split
  dims).  No multi-step trajectory of a quantized model: a quantizer rounds a sum whose last
  bit depends on the summation order, a tie that flips in one step sends the two runs apart,
  and which step that happens in depends on the CPU's kernels (docs/training.md).
"""

from __future__ import annotations

import pytest

from tessera.training.check import EquivalenceSpec, run_equivalence
from tessera.training.mesh import SpatialGrid as G

pytestmark = pytest.mark.dist

LAYERS = [  # (data replicas, grid): 2, 4, 8 ranks; 1, 2, 3 split dims; mixed
    (1, G(2, 1, 1)),
    (2, G(1, 1, 1)),
    (1, G(1, 2, 2)),
    (1, G(1, 1, 4)),
    (2, G(1, 2, 1)),
    (1, G(2, 2, 2)),
    (1, G(4, 2, 1)),
    (2, G(2, 1, 2)),
]


def _check(r: dict, steps: int) -> None:
    for key in ("output", "loss", "input_grad", "grads"):
        assert r[key]["max_rel"] <= 1e-5, (key, r[key])
    if steps > 1:
        assert r["params_after"]["max_rel"] <= 1e-4, r["params_after"]


@pytest.mark.parametrize("data,grid", LAYERS, ids=[f"{d}x{g}" for d, g in LAYERS])
def test_layers_equal_single_process(data, grid):
    r = run_equivalence(EquivalenceSpec("layers", (12, 10, 9), data=data, grid=grid, steps=20))
    _check(r, 20)


MESHES = [(1, G(2, 1, 1)), (2, G(1, 2, 1)), (1, G(2, 2, 2)), (1, G(1, 1, 2))]


@pytest.mark.parametrize("data,grid", MESHES, ids=[f"{d}x{g}" for d, g in MESHES])
def test_cosmoflow_step_equals_single_process(data, grid):
    r = run_equivalence(EquivalenceSpec("cosmoflow", (11, 11, 11), data=data, grid=grid, width=0.125,
                                        steps=1, dtype="float64"))
    _check(r, 1)


@pytest.mark.parametrize("data,grid", [(2, G(2, 2, 1)), (1, G(1, 1, 2))], ids=["2x2x2x1", "1x1x1x2"])
def test_unet_step_equals_single_process(data, grid):
    r = run_equivalence(EquivalenceSpec("unet3d", (16, 16, 16), data=data, grid=grid, width=0.0625,
                                        steps=1, dtype="float64"))
    _check(r, 1)


def test_reference_runs_the_shared_percentile(monkeypatch):
    """The single-process reference trains with the shared-tie percentile, as the sharded run
    does: brevitas' own statistic is never called (loading the initial state after swapping
    it in brought brevitas' back, and the two runs parted where tied elements got the scale
    gradient differently)."""
    import torch
    from brevitas.core.stats.stats_op import AbsPercentile

    from tessera.training.check import _problem, _single

    spec = EquivalenceSpec("unet3d", (16, 16, 16), width=0.0625, steps=1)
    x, _, state = _problem(spec)

    def refuse(*a, **k):
        raise AssertionError("brevitas' AbsPercentile ran in the reference")

    monkeypatch.setattr(AbsPercentile, "forward", refuse)
    net = _single(spec, state).train()
    with torch.no_grad():
        net(x)


@pytest.mark.parametrize("pads,stride", [(((1, 0), (0, 1), (1, 1)), (1, 1, 1)), (((1, 0), (0, 1), (0, 0)), (2, 2, 1)),
                                         (((2, 1), (0, 2), (2, 2)), (2, 1, 3)), (((0, 0), (1, 0), (0, 1)), (1, 2, 2))])
def test_conv_padding_split_equals_explicit_padding(pads, stride):
    """The conv's own symmetric padding + cropping (or ``F.pad`` of the rest) is the padded
    convolution exactly (float64, integer-valued data; the backward runs the same call's
    ``convolution_backward``, checked by the equivalence tests)."""
    import torch
    import torch.nn.functional as F

    from tessera.training.halo import _conv_pads

    g = torch.Generator().manual_seed(0)
    x = torch.randint(-4, 5, (2, 3, 9, 8, 7), generator=g).double()
    w = torch.randint(-3, 4, (4, 3, 3, 3, 3), generator=g).double()
    flat_all = [v for lo_hi in reversed(pads) for v in lo_hi]
    ref = F.conv3d(F.pad(x, flat_all), w, None, stride)
    sym, flat, crop = _conv_pads(pads, (3, 3, 3), stride, x.shape[2:])
    out = F.conv3d(F.pad(x, flat), w, None, stride, sym)
    out = out[crop] if crop is not None else out
    assert out.shape == ref.shape and torch.equal(out, ref)


def test_replica_batchnorm_over_the_spatial_group():
    """bn_stats='replica' reduces over the sample's spatial group: with one replica that is
    single-process BatchNorm again."""
    r = run_equivalence(EquivalenceSpec("layers", (12, 10, 9), grid=G(1, 2, 2), steps=1, bn_stats="replica"))
    _check(r, 1)


def test_check_detects_a_wrong_halo(monkeypatch):
    """The comparison can fail: a halo exchange that drops the neighbours' rows."""
    import tessera.training.halo as halo

    real = halo.plan_exchange

    def broken_sends(*args, **kw):
        ex = real(*args, **kw)
        return halo.Exchange(ex.own, ex.need, ex.local, (), ())

    monkeypatch.setattr("tessera.training.spatial.plan_exchange", broken_sends)
    r = run_equivalence(EquivalenceSpec("layers", (12, 10, 9), grid=G(2, 1, 1), steps=1))
    assert r["output"]["max_rel"] > 1e-2
