"""Acceptance 1: sharded training over real processes (gloo) equals single-process training.

Each configuration spawns ``data x spatial`` processes once and checks, against the
single-process run from the same initial state and mini-batch: the first step's outputs,
loss, every parameter gradient and the input gradient (relative 1e-5: ``max |a - b| /
max |b|`` per tensor), and every parameter after 20 Adam steps (1e-4).

* ``layers``: plain torch layers at an odd volume (12 x 10 x 9): stride-2 conv, average and
  max pooling, transposed conv, nearest upsampling, an anisotropic kernel, BatchNorm; fp32.
* CosmoFlow (brevitas QAT, BatchNorm, activation-scale statistics, dense tail after the
  gather, 11^3) and the U-Net (max pooling, transposed conv, skip concatenations, 16^3):
  the first training step in float64, where the comparison is not limited by float32
  rounding (fp32 figures and the 20-step trajectories: docs/results/training.md).
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


@pytest.mark.parametrize("data,grid", [(1, G(2, 1, 1)), (2, G(1, 2, 1)), (1, G(2, 2, 2))],
                         ids=["1x2x1x1", "2x1x2x1", "1x2x2x2"])
def test_cosmoflow_step_equals_single_process(data, grid):
    r = run_equivalence(EquivalenceSpec("cosmoflow", (11, 11, 11), data=data, grid=grid, width=0.125,
                                        steps=1, dtype="float64"))
    _check(r, 1)


def test_unet_step_equals_single_process():
    r = run_equivalence(EquivalenceSpec("unet3d", (16, 16, 16), data=2, grid=G(2, 2, 1), width=0.0625,
                                        steps=1, dtype="float64"))
    _check(r, 1)


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
