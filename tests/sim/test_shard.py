"""The top function compiled in several units (compiler/sim/shard.py): the derived sources
call the same kernels on the same arguments, a sharded build's library and testbench give
outputs == the exact integer reference and == the unsharded build's, a design whose sharded
build fails is built from the file as written, and a file of another form is not sharded."""

from __future__ import annotations

import numpy as np
import pytest

from tessera.compiler.ir.types import FixedType
from tessera.compiler.lower.hls4ml_lower import HlsOptions
from tessera.compiler.ops import conv, maxpool, quant, relu
from tessera.compiler.reference.interpret import run_ir
from tessera.compiler.samples import sample_codes
from tessera.compiler.sim import build as build_mod
from tessera.compiler.sim.build import Builder
from tessera.compiler.sim.csim import CSim
from tessera.compiler.sim.shard import HEAVY, LIGHT, LOADER, assign, parse_top, render_shards, shard_count
from tessera.compiler.writer import write_project

TOP = """#include <iostream>

#include "m.h"
#include "parameters.h"

void m(
    input_t x[16],
    result_t y[4]
) {
#ifndef __SYNTHESIS__
    static bool loaded_weights = false;
    if (!loaded_weights) {
        nnet::load_weights_from_txt<w_t, 64>(w2, "w2.txt");
        nnet::load_weights_from_txt<w_t, 16>(w4, "w4.txt");
        loaded_weights = true;    }
#endif
    layer2_t layer2_out[4];
    nnet::dense<input_t, layer2_t, config2>(x, layer2_out, w2); // fc1
    nnet::leaky_relu<layer2_t, p_t, layer3_t, leaky_relu_config3>(layer2_out, 0.125, layer3_out); // act
    nnet::dense<layer3_t, result_t, config4>(layer3_out, y, w4); // fc2
}
"""


def test_the_top_function_is_read_into_its_calls():
    top = parse_top(TOP, "m")
    assert [c.kernel.split("<")[0] for c in top.calls] == ["nnet::load_weights_from_txt"] * 2 + ["nnet::dense",
                                                                                                  "nnet::leaky_relu", "nnet::dense"]
    assert [c.cost for c in top.calls] == [LOADER, LOADER, HEAVY, LIGHT, HEAVY]
    assert top.calls[3].args == ("layer2_out", "0.125", "layer3_out") and top.calls[3].rest == " // act"
    assert top.calls[0].args == ("w2", '"w2.txt"')
    assert shard_count(top, 8) == 2 and shard_count(top, 1) == 1  # at most one unit per layer with weights
    # another form of call, or of the file, is compiled as written
    assert parse_top(TOP.replace("(x, layer2_out, w2)", "(x + 1, layer2_out, w2)"), "m") is None
    assert parse_top(TOP.replace("    layer2_t layer2_out[4];", "    nnet::fill_zero(layer2_out);"), "m") is None
    assert parse_top(TOP, "other") is None and shard_count(None, 8) == 1


def test_calls_are_spread_costliest_first_and_every_shard_reads_the_same_calls():
    top = parse_top(TOP, "m")
    owner = assign(top, 2)
    assert owner == (0, 0, 0, 0, 1)  # dense: shard 0; dense: shard 1 (with the bridge); the rest: shard 0
    s0, s1 = render_shards(top, owner, 2, "m_bridge.cpp", "g")
    # shard 0: the top function as written but for the call shard 1 owns, which is declared only
    assert "\nvoid m(" in s0 and "static void tessera_csim_copy(" not in s0
    assert "    nnet::dense<input_t, layer2_t, config2>(x, layer2_out, w2); // fc1" in s0
    assert "    tessera_csim_layer_4(layer3_out, y, w4); // fc2" in s0
    assert "template <class... A> void tessera_csim_layer_4(A &&...a);" in s0 and "__attribute__((used))" not in s0
    # shard 1: the bridge, its call's definition, and an unused copy of the function calling through wrappers only
    assert '#include "m_bridge.cpp"' in s1 and "\nvoid m(" not in s1
    assert ("template <class... A> __attribute__((used)) void tessera_csim_layer_4(A &&...a) "
            "{ nnet::dense<layer3_t, result_t, config4>(static_cast<A &&>(a)...); }") in s1
    assert "[[maybe_unused]] static void tessera_csim_copy(" in s1
    assert "nnet::dense<input_t" not in s1.split("tessera_csim_copy(")[1]  # shard 0's kernels are not instantiated here
    assert "    nnet::leaky_relu<layer2_t, p_t, layer3_t, leaky_relu_config3>(layer2_out, 0.125, layer3_out); // act" in s0
    assert "    tessera_csim_layer_3(layer2_out, 0.125, layer3_out); // act" in s1  # shard 0's, declared only
    assert '        tessera_csim_layer_0(w2, "w2.txt");' in s1 and "tessera_csim_layer_3(A &&...a) {" not in s1


def _two_conv_graph(make_graph, make_type, rng):
    w1 = rng.integers(-7, 7, size=(4, 3, 3, 3), endpoint=True)
    w2 = rng.integers(-7, 7, size=(3, 4, 3, 3), endpoint=True)
    return make_graph(
        make_type(6, 5, False, (3, 8, 8)),
        ("conv", conv.Attrs(w1, FixedType(4, 3, True), rng.integers(-50, 50, size=4), FixedType(8, 8, True), (1, 1),
                            (1, 1, 1, 1))),
        ("relu", relu.Attrs()),
        ("requant", quant.Attrs(FixedType(6, 4, False), False, "ROUND")),
        ("maxpool", maxpool.Attrs((2, 2), (2, 2))),
        ("conv", conv.Attrs(w2, FixedType(4, 3, True), None, None, (1, 1), (0, 0, 0, 0))),
        ("requant", quant.Attrs(FixedType(8, 3, True), False, "ROUND")),
    )


def _assert_exact(graph, prj, seed: int, n: int = 50) -> None:
    codes = sample_codes(graph.values[graph.input], n, seed=seed)
    sim = CSim(prj, workers=1)
    try:
        assert np.array_equal(sim.run_codes(codes), run_ir(graph, codes))
    finally:
        sim.close()


@pytest.mark.csim
@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_a_sharded_build_equals_the_reference_and_the_unsharded_build(make_graph, make_type, rng, tmp_path,
                                                                      monkeypatch, io_type):
    monkeypatch.setenv("TESSERA_CACHE", str(tmp_path / "cache"))
    graph = _two_conv_graph(make_graph, make_type, rng)
    prj = write_project(graph, None, tmp_path / "prj", HlsOptions(io_type=io_type), tb_samples=16)
    codes = sample_codes(graph.values[graph.input], 120, seed=3)
    want = run_ir(graph, codes)
    outputs = {}
    for shards in (2, 1):
        rep = Builder(jobs=2, shards=shards).build(prj, rebuild=True, testbench=True)
        assert rep.shards == shards and rep.shard_error is None, rep.shard_error
        assert {u.unit for u in rep.units} == {"top", "bridge", "ports", "rt", "tb"}
        sim = CSim(prj, workers=1)
        try:
            outputs[shards] = sim.run_codes(codes)
            assert not sim.last_build.rebuilt  # the library just built
            assert sim.testbench()[0] == 0  # the testbench, linked from the same objects
        finally:
            sim.close()
        assert np.array_equal(outputs[shards], want)
    assert np.array_equal(outputs[2], outputs[1])


@pytest.mark.csim
def test_a_sharded_build_that_fails_is_built_from_the_file_as_written(make_graph, make_type, rng, tmp_path,
                                                                       monkeypatch):
    monkeypatch.setenv("TESSERA_CACHE", str(tmp_path / "cache"))
    graph = _two_conv_graph(make_graph, make_type, rng)
    prj = write_project(graph, None, tmp_path / "prj", HlsOptions(io_type="io_parallel"), tb_samples=16)
    real = build_mod.render_shards
    monkeypatch.setattr(build_mod, "render_shards", lambda *a: [t + "\nthis is not C++;" for t in real(*a)])
    rep = Builder(jobs=2, shards=2).build(prj, rebuild=True)
    assert rep.shards == 1 and "build failed" in rep.shard_error and "built as written" in rep.line()
    _assert_exact(graph, prj, seed=4)


@pytest.mark.csim
def test_the_units_do_not_depend_on_the_build_jobs_so_a_second_project_compiles_nothing(make_graph, make_type, rng,
                                                                                        tmp_path, monkeypatch):
    """The shards are chosen by the design and the machine, never by a caller's ``jobs``: the
    same design written into another folder and built one job at a time links the objects
    the first build stored (with the same units) and gives the same outputs."""
    monkeypatch.setenv("TESSERA_CACHE", str(tmp_path / "cache"))
    graph = _two_conv_graph(make_graph, make_type, rng)
    pa = write_project(graph, None, tmp_path / "pa", HlsOptions(io_type="io_stream"), tb_samples=16)
    pb = write_project(graph, None, tmp_path / "pb", HlsOptions(io_type="io_stream"), tb_samples=16)
    ra, rb = Builder().build(pa), Builder(jobs=1).build(pb)
    assert ra.compiled == 4 and rb.compiled == 0 and rb.shards == ra.shards, (ra.line(), rb.line())
    _assert_exact(graph, pb, seed=6)
