"""Partitioned execution of the real 3D CNNs (quantized CosmoFlow and 3D U-Net, Brevitas
exports at reduced width) at 64^3: both modes, the issue's grids and a size the grid does
not divide == the unpartitioned integer reference and its exact onnxruntime reference, bit
for bit; the planner's counts == the executed schedule's."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from tessera.compiler.partition.runtime import Partition
from tessera.compiler.reference.emit import OrtReference, emit_reference
from tessera.compiler.reference.interpret import run_ir
from tessera.compiler.samples import sample_codes

_GRAPHS: dict = {}


def cnn3d_graph(tmp_path_factory, name: str, size: int):
    """A Brevitas model (width 1/16, BatchNorm statistics warmed, folded) exported at
    ``size``^3 and compiled to the typed IR; one per test session."""
    key = (name, size)
    if key not in _GRAPHS:
        import torch

        from tessera.compiler.frontend import compile_ir
        from tessera.models.cnn3d import build_cnn3d, fold_batchnorm
        from tessera.models.train3d import export_cnn3d

        cin, nout = (4, 4) if name.startswith("cosmoflow") else (1, 3)
        torch.manual_seed(0)
        m = build_cnn3d(name, width=1 / 16, input_size=size, in_channels=cin, n_out=nout)
        x = torch.rand(2, cin, size, size, size, generator=torch.Generator().manual_seed(0))
        m.train()
        with torch.no_grad():
            m(x)
        m = fold_batchnorm(m.eval())
        path = tmp_path_factory.mktemp("cnn3d") / f"{name}{size}.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            export_cnn3d(m, x[:1], path)
        _GRAPHS[key] = compile_ir(path), path
    return _GRAPHS[key]


CASES = [(name, 64, grid, mode) for name in ("cosmoflow", "unet3d")
         for grid in ((1, 1, 1), (2, 1, 1), (2, 2, 2), (4, 2, 1)) for mode in ("overlap", "exchange")]
# sizes the grid does not divide: CosmoFlow 50^3 in 3x2x1 blocks (25, 13, 7, 4 below), and
# a U-Net at 40^3 in 3x1x1 overlapped tiles (its 2x upsampling boundaries cannot be exchanged)
CASES += [("cosmoflow", 50, (3, 2, 1), "overlap"), ("cosmoflow", 50, (3, 2, 1), "exchange"),
          ("unet3d", 40, (3, 1, 1), "overlap")]


@pytest.mark.parametrize("name,size,grid,mode", CASES)
def test_partitioned_model_is_bit_exact(tmp_path_factory, name, size, grid, mode):
    g, _ = cnn3d_graph(tmp_path_factory, name, size)
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
        assert np.array_equal(got, OrtReference(emit_reference(g)).run(x))
    # the spatial segment is cut while every block still holds a voxel
    extent = g.values[p.cut].shape[1:]
    assert all(k <= e for k, e in zip(grid, extent))


def test_unet_grid_that_breaks_upsampling_alignment_names_the_layer(tmp_path_factory):
    from tessera.compiler.errors import UnsupportedModelError

    g, _ = cnn3d_graph(tmp_path_factory, "unet3d", 40)
    with pytest.raises(UnsupportedModelError, match=r"grid 3x1x1 breaks the alignment of layer '/up\.\d/ConvTranspose'"):
        Partition.plan(g, (3, 1, 1), "exchange")
