"""Partitioned execution of the real 3D CNNs (quantized CosmoFlow and 3D U-Net, Brevitas
exports at reduced width) at 64^3: both modes, the issue's grids and a size the grid does
not divide == the unpartitioned integer reference and its exact onnxruntime reference, bit
for bit; the planner's counts == the executed schedule's."""

from __future__ import annotations

import numpy as np
import pytest

from tessera.compiler.partition.runtime import Partition
from tessera.compiler.reference.model import OrtReference, reference_model
from tessera.compiler.reference.interpret import run_ir
from tessera.compiler.samples import sample_codes

CASES = [(name, 64, grid, mode) for name in ("cosmoflow", "unet3d")
         for grid in ((1, 1, 1), (2, 1, 1), (2, 2, 2), (4, 2, 1)) for mode in ("overlap", "exchange")]
# sizes the grid does not divide: CosmoFlow 50^3 in 3x2x1 blocks (25, 13, 7, 4 below), and
# a U-Net at 40^3 in 3x1x1 overlapped tiles (its 2x upsampling boundaries cannot be exchanged)
CASES += [("cosmoflow", 50, (3, 2, 1), "overlap"), ("cosmoflow", 50, (3, 2, 1), "exchange"),
          ("unet3d", 40, (3, 1, 1), "overlap")]


@pytest.mark.parametrize("name,size,grid,mode", CASES)
def test_partitioned_model_is_bit_exact(cnn3d_export, name, size, grid, mode):
    g, _ = cnn3d_export(name, size)
    n = 2 if name.startswith("cosmoflow") else 1
    x = sample_codes(g.values[g.input], n, seed=11)
    want = run_ir(g, x)
    p = Partition.plan(g, grid, mode)
    done, stats = [], {}
    got = p.run(x, workers=2 if np.prod(grid) > 1 else 1, progress=done.append, stats=stats)
    assert got.shape == want.shape and np.array_equal(got, want)
    assert sum(done) == p.n_tasks()
    # the planner's halo == what this run moved to each block
    plan = p.report()
    assert [stats[b.index]["halo_voxels"] for b in plan.blocks] == [b.halo_voxels for b in plan.blocks]
    assert (plan.halo_bytes == 0) == (np.prod(grid) == 1)
    if name == "cosmoflow" and size == 64:  # the model's exact onnxruntime reference agrees
        assert np.array_equal(got, OrtReference(reference_model(g)).run(x))
    # the spatial segment is cut while every block still holds a voxel
    extent = g.values[p.cut].shape[1:]
    assert all(k <= e for k, e in zip(grid, extent))


def test_unet_grid_that_breaks_upsampling_alignment_names_the_layer(cnn3d_export):
    from tessera.compiler.errors import UnsupportedModelError

    g, _ = cnn3d_export("unet3d", 40)
    with pytest.raises(UnsupportedModelError, match=r"grid 3x1x1 breaks the alignment of layer '/up\.\d/ConvTranspose'"):
        Partition.plan(g, (3, 1, 1), "exchange")
