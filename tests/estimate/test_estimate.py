"""The FPGA estimator: MAC counts equal the executed ones, monotone in reuse factor and block
size, chosen designs fit every catalogue part for every model kind, low-bit weights on
LUTs, the chooser's II is the smallest that fits."""

from __future__ import annotations

import numpy as np
import pytest

from tessera.compiler.errors import UnsupportedModelError
from tessera.compiler.estimate import (PARTS, choose_design, estimate, get_part, layer_works, sweep_reuse,
                                      valid_reuse_factors)
from tessera.compiler.estimate.chooser import candidate_grids
from tessera.compiler.estimate import mult_cost
from tessera.compiler.estimate.model import layer_estimate
from tessera.compiler.partition import plan_overlapped, run_block
from tessera.compiler.samples import sample_codes

from .conftest import BUILDERS, conv3d_chain


def shape_macs(graph) -> int:
    """Multiply-accumulates per sample counted from the shapes alone: what the integer
    reference executes (zero padding taps included, as its padded windows compute them)."""
    total = 0
    for n in graph.nodes:
        x, y, a = graph.values[n.inputs[0]], graph.values[n.output], n.attrs
        if n.op == "dense":
            total += a.weight.shape[0] * a.weight.shape[1]
        elif n.op == "conv":  # every output element sums C_in x kernel taps
            total += int(np.prod(y.shape)) * a.weight.shape[1] * int(np.prod(a.weight.shape[2:]))
        elif n.op == "convtranspose":  # every input element scatters into C_out x kernel outputs
            total += int(np.prod(x.shape)) * a.weight.shape[1] * int(np.prod(a.weight.shape[2:]))
        elif n.op in ("lstm", "gru"):
            t, i = x.shape
            gates = {"gru": 3, "lstm": 3 if getattr(a, "cifg", False) else 4}[n.op]
            total += t * gates * a.hidden * (i + a.hidden)
        elif n.op == "convlstm":
            t, c, h, w = x.shape
            enc = a.encoder
            total += t * 4 * enc.hidden * h * w * enc.kernel ** 2 * (c + enc.hidden)
            if a.forecaster is not None:
                total += a.steps_out * 4 * enc.hidden * h * w * a.forecaster.kernel ** 2 * enc.hidden
    return int(total)


@pytest.mark.parametrize("name", list(BUILDERS))
def test_macs_equal_the_shape_count(exported, name):
    _, g = exported(name)
    d = estimate(g, get_part("xcu250"))
    assert d.macs == shape_macs(g) > 0
    assert d.executed_macs == d.macs  # unpartitioned: nothing is recomputed


def test_partitioned_macs_equal_the_executed_blocks(exported):
    """A U-Net on a 2x2x2 grid: the estimate's executed MACs are those run_block counts
    while it runs every block on the integer reference, and exceed the whole-volume count
    by the plan's redundant fraction."""
    _, g = exported("unet3d")
    plan = plan_overlapped(g, (2, 2, 2))  # at the deepest cut (compile would refuse this grid here)
    d = estimate(g, get_part("xcu250"), plan=plan)
    x = sample_codes(g.values[g.input], 1, seed=0)
    executed = 0
    for b in plan.blocks:
        stats = {}
        run_block(g, plan.value, b.block, x, stats)
        executed += stats["macs"]
    head = sum(layer.macs for layer in d.layers if layer.blocks == 1)
    assert d.executed_macs == executed + head
    assert d.macs == shape_macs(g) < d.executed_macs
    assert d.executed_macs == pytest.approx(d.macs * (1 + d.redundant_fraction) + 0, rel=0, abs=head + 1)


def test_block_grid_estimates_use_the_cut_compile_makes(exported):
    """estimate(grid=...) plans up to choose_cut, the value `tessera compile --partition`
    cuts at, and refuses (like compile) a grid that saves nothing."""
    from tessera.compiler.errors import UnsupportedModelError
    from tessera.compiler.partition import choose_cut

    _, g = exported("cosmoflow")
    tried = 0
    for grid in [(2, 1, 1), (2, 2, 1), (2, 2, 2)]:
        try:
            cut = choose_cut(g, grid)
        except UnsupportedModelError as exc:
            with pytest.raises(UnsupportedModelError, match=str(exc).split(":")[0][:20]):
                estimate(g, get_part("xcu250"), grid=grid)
            continue
        d = estimate(g, get_part("xcu250"), grid=grid)
        assert d.cut == cut and d.grid == grid
        tried += 1
    assert tried >= 1


@pytest.mark.parametrize("name", ["jet_mlp_w8a8", "digits_cnn_w8a8", "lstm_ternary", "gru_binary",
                                  "convlstm_quaternary", "cosmoflow", "unet3d"])
@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_monotone_in_reuse_factor(exported, name, io_type):
    _, g = exported(name)
    reusable = 0
    for lw in layer_works(g, io_type):
        rs = valid_reuse_factors(lw.work)
        assert rs[0] == 1 and rs == sorted(set(rs))
        ests = [layer_estimate(lw, r, io_type, "latency") for r in rs]
        for a, b in zip(ests, ests[1:]):
            assert a.ii <= b.ii and a.latency <= b.latency
            assert a.dsp >= b.dsp and a.lut >= b.lut and a.ff >= b.ff and a.bram18 == b.bram18
            assert a.multipliers >= b.multipliers
        if lw.work.reusable:
            reusable += 1
            assert ests[-1].ii > ests[0].ii and ests[-1].multipliers < ests[0].multipliers or rs == [1]
    assert reusable > 0
    sweep = sweep_reuse(g, get_part("xcu250"), io_type)  # one factor for every layer, growing
    for a, b in zip(sweep, sweep[1:]):
        assert a.ii <= b.ii and a.latency <= b.latency
        assert all(a.totals[k] >= b.totals[k] for k in ("dsp", "lut", "ff"))


def test_hls4ml_reuse_rule_for_its_own_layers(exported):
    """Dense / Conv2D take the factors hls4ml's backend accepts; Tessera's kernels the
    divisors of their multiplier count."""
    from hls4ml.backends import get_backend

    backend = get_backend("Vitis")
    _, g = exported("digits_cnn_w8a8")
    for lw in layer_works(g, "io_parallel"):
        if not lw.work.reusable:
            continue
        n_in, n_out = lw.work.reuse_dims
        assert valid_reuse_factors(lw.work) == backend.get_valid_reuse_factors(n_in, n_out)
    _, g = exported("unet3d")
    conv3d = [lw for lw in layer_works(g, "io_stream") if lw.op == "conv"][0]
    assert conv3d.work.reuse_dims is None
    assert valid_reuse_factors(conv3d.work) == [r for r in range(1, conv3d.work.mults + 1) if conv3d.work.mults % r == 0]


@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_monotone_in_block_size(exported, io_type):
    """Nested grids (each block inside a block of the coarser grid): smaller blocks need no
    more hardware per block and no more cycles per block, but the whole volume takes no
    fewer cycles and no fewer MACs (halo recompute)."""
    _, g = exported("unet3d")
    part = get_part("xcu250")
    grids = [(1, 1, 1), (1, 1, 2), (1, 2, 2), (2, 2, 2), (2, 2, 4), (4, 4, 4)]
    # one segment for all grids (the deepest cut): the property is about block size alone
    designs = [estimate(g, part, 1, io_type, plan=plan_overlapped(g, grid) if max(grid) > 1 else None) for grid in grids]

    def seg(d):
        return [layer for layer in d.layers if d.grid is None or layer.blocks > 1]

    for a, b in zip(designs, designs[1:]):
        for key in ("dsp", "lut", "ff", "bram18"):
            assert sum(getattr(x, key) for x in seg(a)) >= sum(getattr(x, key) for x in seg(b)), key
        per_block = lambda d: max(x.ii // x.blocks for x in seg(d))  # noqa: E731
        assert per_block(a) >= per_block(b)
        assert max(x.latency for x in seg(a)) >= max(x.latency for x in seg(b))
        assert sum(x.ii for x in seg(a)) <= sum(x.ii for x in seg(b))
        assert a.executed_macs <= b.executed_macs
    assert designs[-1].executed_macs > designs[0].executed_macs


@pytest.mark.parametrize("part", list(PARTS))
@pytest.mark.parametrize("name", list(BUILDERS))
def test_chosen_design_fits_every_part(exported, name, part):
    _, g = exported(name)
    p = get_part(part)
    d = choose_design(g, p, "auto", partition="auto")
    assert d.fits, (d.io_type, d.grid, d.utilization)
    cap = p.capacity()
    for key, used in d.totals.items():
        assert used <= d.utilization_limit * cap[key], key
    lws = {lw.node: lw for lw in layer_works(g, d.io_type, d.plan)}
    for layer in d.layers:
        assert layer.reuse in valid_reuse_factors(lws[layer.node].work)
    roof = d.roofline()
    assert 0 < roof["percent"] <= 100.0 + 1e-9


@pytest.mark.parametrize("name,part", [("jet_mlp_w8a8", "zu9eg"), ("digits_cnn_w8a8", "zu9eg"),
                                       ("cosmoflow", "zu9eg"), ("convlstm_quaternary", "xcu250")])
def test_chosen_ii_is_the_smallest_that_fits(exported, name, part):
    """At II - 1, even the least-resource assignment (each layer's largest allowed reuse
    factor meeting it) does not fit."""
    _, g = exported(name)
    p = get_part(part)
    checked = 0
    for io_type in ("io_parallel", "io_stream"):
        d = choose_design(g, p, io_type, partition="none")
        if not d.fits:  # e.g. io_parallel arrays of a CNN on the ZU9EG: no reuse factor helps
            assert all(x.reuse == valid_reuse_factors(w.work)[-1] for x, w in zip(d.layers, layer_works(g, io_type)))
            continue
        checked += 1
        target = d.ii - 1
        reuse = {}
        feasible = True
        for lw in layer_works(g, io_type):
            ok = [r for r in valid_reuse_factors(lw.work) if lw.work.steps * r <= target]
            feasible &= bool(ok)
            reuse[lw.node] = max(ok, default=1)
        if feasible:
            assert not estimate(g, p, reuse, io_type).fits
    assert checked


def test_partition_auto_finds_a_grid_when_the_volume_does_not_fit(make_graph, make_type, rng):
    """io_parallel keeps every array in registers: a 32^3 x 4 conv chain does not fit the
    ZU9EG whole, and the chooser cuts it into blocks that do (each block its volume plus a
    halo of a few voxels).  (A U-Net would not: its receptive field spans the volume,
    so every block's span is nearly the whole input.)"""
    g = conv3d_chain(make_graph, make_type, rng)
    p = get_part("zu9eg")
    whole = choose_design(g, p, "io_parallel", partition="none")
    assert not whole.fits
    d = choose_design(g, p, "io_parallel", partition="auto")
    assert d.fits and d.grid is not None and d.n_blocks > 1
    assert d.redundant_fraction > 0 and d.executed_macs > d.macs == shape_macs(g)
    assert all(layer.blocks == d.n_blocks for layer in d.layers)
    fewer = [grid for grid in candidate_grids(g.values[g.output].shape[1:]) if np.prod(grid) < d.n_blocks]
    assert fewer and not any(estimate(g, p, 1, "io_parallel", grid=grid).fits and
                             choose_design(g, p, "io_parallel", partition=grid).fits for grid in fewer)


def test_low_bit_weights_use_luts_not_dsps(exported):
    assert mult_cost("binary", 8, 1) == ("lut", 8, 0)
    assert mult_cost("ternary", 8, 2) == ("lut", 8, 0)
    assert mult_cost("quaternary", 8, 3) == ("lut", 9, 0)
    assert mult_cost("int", 4, 4) == ("lut", 16, 0)
    assert mult_cost("int", 8, 8) == ("dsp", 0, 1)
    assert mult_cost("int", 30, 20) == ("dsp", 0, 2)  # two 27 x 18 tiles
    part = get_part("xcu250")
    for name in ("digits_cnn_binary", "digits_cnn_ternary"):
        d = estimate(exported(name)[1], part)
        assert d.totals["dsp"] == 0
        assert all(x.mult_kind == "lut" for x in d.layers if x.mults)
    assert estimate(exported("digits_cnn_w8a8")[1], part).totals["dsp"] > 0
    for name in ("lstm_ternary", "gru_binary", "convlstm_quaternary"):
        d = estimate(exported(name)[1], part)
        cell = [x for x in d.layers if x.op in ("lstm", "gru", "convlstm")]
        assert cell and all(x.mult_kind == "lut" and x.dsp == 0 for x in cell)


def test_resource_strategy_moves_weights_to_block_ram(exported):
    """Latency strategy: weights are fabric constants (LUTs); Resource: hls4ml's reshaped
    weight memory of R words, block RAM once R is deeper than a LUT6 (here 64 < R <= 512)."""
    from tessera.compiler.ops import OPS

    def node_weight_bits(n):
        return OPS[n.op].weight_bits(n.attrs)

    _, g = exported("digits_cnn_w8a8")
    part = get_part("xcu250")
    lws = layer_works(g, "io_parallel")
    deep = {lw.node: [r for r in valid_reuse_factors(lw.work) if 64 < r <= 512] for lw in lws if lw.work.reusable}
    reuse = {node: rs[0] for node, rs in deep.items() if rs}
    assert reuse, deep
    lat, res = estimate(g, part, reuse, strategy="latency"), estimate(g, part, reuse, strategy="resource")
    assert lat.totals["bram18"] == 0
    for a, b, n in zip(lat.layers, res.layers, g.nodes):
        wb = node_weight_bits(n)
        if n.name in reuse:  # ceil(wb / R) bits a word, R words: ceil(word / 36) RAMB18 in 36 x 512
            assert b.bram18 - a.bram18 == -(-(-(-wb // reuse[n.name])) // 36) > 0
        else:  # the shallow weight memory of R = 1: registers
            assert b.bram18 == a.bram18 and b.ff - a.ff == wb
        assert a.lut - b.lut == -(-wb // 64)
    assert (lat.ii, lat.totals["dsp"]) == (res.ii, res.totals["dsp"])


def test_memory_tiles_and_storage():
    """A bank's RAMB18 count is its cheapest tile shape (UG573); depth 1 is registers, up to
    64 words distributed RAM, ap_shift_reg line buffers SRL LUTs (32 words per LUT)."""
    from tessera.compiler.ops.base.cost import Memory, Storage

    cases = {(18, 1024): 1, (36, 512): 1, (72, 512): 2, (8, 2048): 1, (9, 2049): 2, (1, 16385): 2, (1000, 121): 28,
             (4, 65): 1}
    for (word, depth), tiles in cases.items():
        m = Memory(3, depth, word)
        assert (m.bram18, m.lutram_luts, m.register_bits) == (3 * tiles, 0, 0), (word, depth)
    assert (Memory(5, 1, 8).register_bits, Memory(5, 1, 8).bram18) == (40, 0)
    assert (Memory(2, 64, 8).lutram_luts, Memory(2, 64, 8).bram18) == (16, 0)
    shift = Memory(4, 33, 8, Storage.SHIFT)
    assert (shift.srl_luts, shift.bram18, shift.lutram_luts) == (4 * 8 * 2, 0, 0)


@pytest.mark.parametrize("name,kernel_rank", [("digits_cnn_w8a8", 2), ("cosmoflow", 3)])
def test_stream_buffers_follow_the_kernels(exported, name, kernel_rank):
    """io_stream window buffers as the kernels declare them: hls4ml's 2D line buffer is
    (k_h - 1) x C shift registers of the padded row; Tessera's 3D plane buffer is k^3 x C
    banks (complete over planes and channels, cyclic by k over rows and columns) holding
    k_0 padded planes.  io_parallel keeps none."""
    from tessera.compiler.ops import OPS, Trait
    from tessera.compiler.ops.base.cost import Storage, padded

    _, g = exported(name)
    seen = 0
    for lw, n in zip(layer_works(g, "io_stream"), g.nodes):
        op = OPS[n.op]
        if Trait.WINDOW not in op.traits or not hasattr(n.attrs, "weight"):
            continue
        x = g.values[n.inputs[0]]
        k = n.attrs.weight.shape[2:]
        (buf,) = lw.work.line_buffer
        ext = padded(x, n.attrs.pads)
        if kernel_rank == 2:
            assert (buf.storage, buf.banks, buf.depth) == (Storage.SHIFT, (k[0] - 1) * x.shape[0], ext[1])
        else:
            assert (buf.storage, buf.banks) == (Storage.RAM, k[0] * k[1] * k[2] * x.shape[0])
            assert buf.depth == -(-ext[1] // k[1]) * -(-ext[2] // k[2])
        assert buf.word_bits == x.ftype.width
        assert lw.work.memories("io_parallel") == lw.work.state
        seen += 1
    assert seen > 0


def test_every_op_has_a_cost_facet(exported):
    """Every registered op implements the whole contract (no abstract facet left), and the
    estimator gets a Work from each node of a real model through it."""
    from tessera.compiler.estimate import node_work
    from tessera.compiler.ops import OPS, OpDef
    from tessera.compiler.ops.base.cost import Work

    for name, op in OPS.items():
        assert isinstance(op, OpDef) and op.name == name
        assert not type(op).__abstractmethods__, (name, type(op).__abstractmethods__)
    _, g = exported("digits_cnn_w8a8")
    for n in g.nodes:
        w = node_work(n, [g.values[v] for v in n.inputs], g.values[n.output], "io_parallel")
        assert isinstance(w, Work) and w.macs == OPS[n.op].macs(n.attrs, [g.values[v] for v in n.inputs], g.values[n.output])


def test_part_catalogue():
    u250 = get_part("xcu250")
    assert get_part("xcu250-figd2104-2L-e") is u250 and get_part("VU9P").dsp == 6840
    assert (u250.dsp, u250.lut, u250.ff, u250.bram36, u250.uram) == (12288, 1728000, 3456000, 2688, 1280)
    assert u250.bram18 == 2 * 2688
    assert get_part("zu9eg").capacity() == {"dsp": 2520, "lut": 274080, "ff": 548160, "bram18": 2 * 912}
    with pytest.raises(UnsupportedModelError, match="xcu250"):
        get_part("xc7a35t")


def test_only_3d_segments_are_partitioned(exported):
    """compile --partition cuts AxBxC blocks of 3D volumes: a 2D CNN gets no block grid from
    the chooser (it chose 1x2 once, which compile then refused)."""
    from tessera.compiler.estimate.chooser import partitionable

    assert not partitionable(exported("digits_cnn_w8a8")[1])
    assert partitionable(exported("cosmoflow")[1])
    d = choose_design(exported("digits_cnn_w8a8")[1], get_part("zu9eg"), "io_parallel", partition="auto")
    assert d.grid is None
