"""The halo arithmetic (tessera.compiler.partition.regions) against the integer reference:
outside an output block's required input span nothing changes the block (sufficient), and
every face of the span inside the volume does change it (tight)."""

from __future__ import annotations

import numpy as np
import pytest

from tessera.compiler.ir.types import FixedType
from tessera.compiler.ops import avgpool, conv, convtranspose, maxpool, quant, relu, upsample
from tessera.compiler.partition import required_spans
from tessera.compiler.reference.interpret import run_ir
from tessera.compiler.samples import sample_codes


def _conv(rng, cin, cout, k, s, p):
    w = rng.integers(1, 8, size=(cout, cin, *k))  # positive weights: every tap matters
    return conv.Attrs(w, FixedType(4, 0, False), None, None, s, p)


def _chains(rng):
    q = quant.Attrs(FixedType(20, 0, True), False, "ROUND")  # wide: no saturation hides a change
    return {
        "conv_pool": [("conv", _conv(rng, 2, 3, (3, 3, 3), (1, 1, 1), (1, 1, 1, 1, 1, 1))), ("relu", relu.Attrs()),
                      ("maxpool", maxpool.Attrs((2, 2, 2), (2, 2, 2))),
                      ("conv", _conv(rng, 3, 2, (3, 2, 3), (2, 1, 1), (1, 0, 1, 0, 1, 1)))],
        "cosmoflow_stage": [("conv", _conv(rng, 2, 2, (3, 3, 3), (1, 1, 1), (1,) * 6)),
                            ("avgpool", avgpool.Attrs((3, 3, 3), (2, 2, 2), (1,) * 6, True, q))],
        "unet_up": [("conv", _conv(rng, 2, 2, (3, 3, 3), (1, 1, 1), (1,) * 6)),
                    ("convtranspose", convtranspose.Attrs(rng.integers(1, 8, size=(2, 2, 2, 2, 2)), FixedType(4, 0, False),
                                                          None, None, (2, 2, 2), (0,) * 6)),
                    ("upsample", upsample.Attrs((1, 2, 1)))],
        "tconv_k3s2": [("convtranspose", convtranspose.Attrs(rng.integers(1, 8, size=(2, 2, 3, 3, 3)),
                                                             FixedType(4, 0, False), None, None, (2, 2, 2), (1,) * 6))],
    }


@pytest.mark.parametrize("chain", ["conv_pool", "cosmoflow_stage", "unet_up", "tconv_k3s2"])
def test_required_span_is_sufficient_and_tight(make_graph, make_type, chain):
    rng = np.random.default_rng(5)
    g = make_graph(make_type(6, 0, False, (2, 9, 8, 7)), *_chains(rng)[chain])
    out = g.values[g.output]
    x = sample_codes(g.values[g.input], 1, seed=1)
    x[...] = rng.integers(1, 60, size=x.shape)  # positive, no saturation at zero
    y = run_ir(g, x)
    for trial in range(6):
        block = tuple((int(a), int(a) + int(rng.integers(1, n - a + 1)))
                      for a, n in ((rng.integers(0, n), n) for n in out.shape[1:]))
        span = required_spans(g, g.output, block)[g.input]
        sl = (slice(None), slice(None)) + tuple(slice(a, b) for a, b in block)
        inside = np.zeros(x.shape[2:], dtype=bool)
        inside[tuple(slice(a, b) for a, b in span)] = True
        x2 = x.copy()
        x2[:, :, ~inside] = rng.integers(1, 60, size=x2[:, :, ~inside].shape)  # outside the span: anything
        assert np.array_equal(run_ir(g, x2)[sl], y[sl]), (chain, block, span)
        for d, (a, b) in enumerate(span):  # each face of the span is read
            for face in (a, b - 1):
                x3 = x.copy()
                idx = [slice(None), slice(None)] + [slice(lo, hi) for lo, hi in span]
                idx[2 + d] = slice(face, face + 1)
                x3[tuple(idx)] += 50  # > the 27-voxel average pool's rounding
                assert not np.array_equal(run_ir(g, x3)[sl], y[sl]), (chain, block, span, d, face)


def test_skip_connection_takes_the_union(make_dag, make_type, skip_block, rng):
    """Through concat / add with a skip path, a value's span is the bounding box of what
    both paths read."""
    g = make_dag(make_type(8, 3, True, (2, 6, 5, 4)), skip_block(rng, 2, 3))
    spans = required_spans(g, g.output, ((1, 3), (0, 2), (2, 4)))
    assert g.input in spans
    for v, s in spans.items():
        assert all(0 <= a < b <= n for (a, b), n in zip(s, g.values[v].shape[1:]))


@pytest.mark.parametrize("chain", ["conv_pool", "cosmoflow_stage", "unet_up", "tconv_k3s2"])
@pytest.mark.parametrize("grid", [(1, 1, 1), (2, 1, 1), (2, 2, 2), (3, 2, 1)])
def test_tiles_equal_the_unpartitioned_run(make_graph, make_type, chain, grid):
    """Overlapped tiles (each block from its own input span) stitched == the whole volume,
    bit for bit, including grids that do not divide the extent."""
    from tessera.compiler.partition.execute import run_block

    rng = np.random.default_rng(7)
    g = make_graph(make_type(6, 0, False, (2, 9, 8, 7)), *_chains(rng)[chain])
    x = sample_codes(g.values[g.input], 3, seed=2)
    want = run_ir(g, x)
    got = np.full_like(want, -(1 << 40))
    extent = g.values[g.output].shape[1:]
    for idx in np.ndindex(*grid):
        block = tuple((n * i // k, n * (i + 1) // k) for n, i, k in zip(extent, idx, grid))
        if any(a >= b for a, b in block):
            continue
        got[(slice(None), slice(None)) + tuple(slice(a, b) for a, b in block)] = run_block(g, g.output, block, x)
    assert np.array_equal(got, want)


def test_tiles_through_skip_connections(make_dag, make_type, skip_block, rng):
    from tessera.compiler.partition.execute import run_block

    g = make_dag(make_type(8, 3, True, (2, 6, 5, 4)), skip_block(rng, 2, 3))
    x = sample_codes(g.values[g.input], 4, seed=3)
    want = run_ir(g, x)
    block = ((1, 4), (2, 5), (0, 3))
    assert np.array_equal(run_block(g, g.output, block, x), want[:, :, 1:4, 2:5, 0:3])


@pytest.mark.parametrize("chain", ["conv_pool", "cosmoflow_stage", "unet_up"])
@pytest.mark.parametrize("grid", [(1, 1, 1), (2, 1, 1), (2, 2, 2), (3, 2, 1)])
def test_plan_equals_the_executed_schedule(make_graph, make_type, chain, grid):
    """Planner counts (MACs, input voxels read, peak working set) == what run_block did, per
    block; redundant compute and halo are zero for one block and grow with the grid."""
    from tessera.compiler.partition.execute import run_block
    from tessera.compiler.partition.plan import plan_overlapped

    rng = np.random.default_rng(7)
    g = make_graph(make_type(6, 0, False, (2, 9, 8, 7)), *_chains(rng)[chain])
    x = sample_codes(g.values[g.input], 1, seed=2)
    if any(k > n for k, n in zip(grid, g.values[g.output].shape[1:])):
        from tessera.compiler.errors import UnsupportedModelError

        with pytest.raises(UnsupportedModelError, match="more blocks than voxels"):
            plan_overlapped(g, grid)
        return
    plan = plan_overlapped(g, grid)
    assert len(plan.blocks) == int(np.prod(grid))
    for b in plan.blocks:
        stats = {}
        run_block(g, plan.value, b.block, x, stats)
        assert (stats["macs"], stats["input_voxels"], stats["peak_bytes"]) == (b.macs, b.input_voxels, b.peak_bytes)
    if grid == (1, 1, 1):
        assert plan.redundant_fraction == 0 and plan.halo_bytes == 0
    else:  # every chain starts with a padded 3x3x3 conv: blocks read their neighbours' voxels
        assert plan.halo_bytes > 0 and plan.redundant_fraction >= 0
        if chain == "conv_pool":  # two stacked windows: the first conv's overlap is recomputed
            assert plan.redundant_fraction > 0


def test_grid_for_budget_fits_or_names_the_layer(make_graph, make_type):
    from tessera.compiler.errors import UnsupportedModelError
    from tessera.compiler.partition import grid_for_budget, plan_overlapped

    rng = np.random.default_rng(7)
    g = make_graph(make_type(6, 0, False, (2, 9, 8, 7)), *_chains(rng)["conv_pool"])
    whole = plan_overlapped(g, (1, 1, 1)).max_block_bytes
    finest = plan_overlapped(g, g.values[g.output].shape[1:]).max_block_bytes
    budget = (whole + finest) // 2
    p = grid_for_budget(g, budget)
    assert np.prod(p.grid) > 1 and p.max_block_bytes <= budget < whole
    with pytest.raises(UnsupportedModelError, match="no block grid fits 10 bytes.*at layer"):
        grid_for_budget(g, 10)


@pytest.mark.parametrize("chain", ["conv_pool", "cosmoflow_stage", "unet_up", "tconv_k3s2"])
@pytest.mark.parametrize("grid", [(1, 1, 1), (2, 1, 1), (2, 2, 2), (3, 2, 1)])
def test_block_graphs_equal_the_executed_blocks(make_graph, make_type, chain, grid):
    """The specialised block graph (what a block kernel is compiled from) computes, on its
    input region, exactly the block of the unpartitioned run."""
    from tessera.compiler.partition.regions import grid_blocks
    from tessera.compiler.partition.specialise import block_graph

    rng = np.random.default_rng(7)
    g = make_graph(make_type(6, 0, False, (2, 9, 8, 7)), *_chains(rng)[chain])
    x = sample_codes(g.values[g.input], 3, seed=2)
    want = run_ir(g, x)
    extent = g.values[g.output].shape[1:]
    if any(k > n for k, n in zip(grid, extent)):
        return
    for _, block in grid_blocks(extent, grid):
        bg, region = block_graph(g, g.output, block)
        xr = x[(slice(None), slice(None)) + tuple(slice(a, b) for a, b in region)]
        got = run_ir(bg, xr)
        assert np.array_equal(got, want[(slice(None), slice(None)) + tuple(slice(a, b) for a, b in block)]), block


def test_block_graph_crops_a_skip_connection(make_dag, make_type, skip_block, rng):
    """Through a skip connection the deeper path reads more than the merge: the block graph
    crops the skip value for the merge."""
    from tessera.compiler.partition.specialise import block_graph

    g = make_dag(make_type(8, 3, True, (2, 6, 5, 4)), skip_block(rng, 2, 3))
    x = sample_codes(g.values[g.input], 4, seed=3)
    want = run_ir(g, x)
    block = ((1, 4), (2, 5), (0, 3))
    bg, region = block_graph(g, g.output, block)
    assert any(n.op == "crop" for n in bg.nodes)
    got = run_ir(bg, x[(slice(None), slice(None)) + tuple(slice(a, b) for a, b in region)])
    assert np.array_equal(got, want[:, :, 1:4, 2:5, 0:3])


@pytest.mark.parametrize("chain", ["conv_pool", "cosmoflow_stage", "unet_up", "tconv_k3s2"])
@pytest.mark.parametrize("grid", [(1, 1, 1), (2, 1, 1), (2, 2, 2), (3, 2, 1)])
def test_halo_exchange_equals_the_unpartitioned_run_and_its_plan(make_graph, make_type, chain, grid):
    """Per-layer halo exchange: bit-identical to the whole volume; the plan's MACs (no
    redundant compute), halo voxels received and peak bytes equal what the execution did;
    grids the layers cannot carry are refused naming the layer."""
    from tessera.compiler.errors import UnsupportedModelError
    from tessera.compiler.partition.exchange import plan_exchange, run_exchange

    rng = np.random.default_rng(7)
    g = make_graph(make_type(6, 0, False, (2, 9, 8, 7)), *_chains(rng)[chain])
    x = sample_codes(g.values[g.input], 3, seed=2)
    if any(k > n for k, n in zip(grid, g.values[g.output].shape[1:])):
        with pytest.raises(UnsupportedModelError, match="more blocks than voxels"):
            plan_exchange(g, grid, g.output)
        return
    try:
        plan = plan_exchange(g, grid, g.output)
    except UnsupportedModelError as exc:
        # only upsampling layers can refuse a grid of these chains: the boundary named must
        # really be off the factor's multiples
        import re

        m = re.search(r"layer '(\w+)' \((convtranspose|upsample), factor (\d+)\): a block boundary at (\d+)", str(exc))
        assert m and chain in ("unet_up", "tconv_k3s2"), str(exc)
        assert int(m.group(4)) % int(m.group(3)) != 0
        return
    stats = {}
    got = run_exchange(g, g.output, grid, x, stats)
    assert np.array_equal(got, run_ir(g, x))
    if chain == "tconv_k3s2" and np.prod(grid) > 1:
        # a k3 s2 transposed conv scatters each input over 3 outputs: a boundary input's
        # products that land in the neighbour's box are computed by both blocks
        assert plan.redundant_fraction > 0
    else:
        assert plan.redundant_fraction == 0
    for b in plan.blocks:
        s = stats[b.index]
        assert (s["macs"], s["halo_voxels"], s.get("halo_bytes", 0), s["peak_bytes"]) == \
            (b.macs, b.halo_voxels, b.halo_bytes, b.peak_bytes)
    if np.prod(grid) > 1:
        assert plan.halo_bytes > 0
    else:
        assert plan.halo_bytes == 0


def test_halo_exchange_through_skip_connections(make_dag, make_type, skip_block, rng):
    from tessera.compiler.partition.exchange import plan_exchange, run_exchange

    g = make_dag(make_type(8, 3, True, (2, 6, 5, 4)), skip_block(rng, 2, 3))
    x = sample_codes(g.values[g.input], 4, seed=3)
    stats = {}
    assert np.array_equal(run_exchange(g, g.output, (2, 2, 1), x, stats), run_ir(g, x))
    plan = plan_exchange(g, (2, 2, 1), g.output)
    assert [stats[b.index]["halo_voxels"] for b in plan.blocks] == [b.halo_voxels for b in plan.blocks]
