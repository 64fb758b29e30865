"""The C-simulation build (compiler/sim/build.py): an unchanged project is not rebuilt, a
second project with the same sources links the stored objects and compiles nothing (a
retrained model reads its own weights), a changed source or header is always rebuilt (never
a stale object or precompiled header), a truncated stored object is replaced, and the
store can be turned off.  Every check compares outputs with the exact reference (==)."""

from __future__ import annotations

import os
import shutil
import time

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from tessera.compiler import api
from tessera.compiler.reference.model import OrtReference, reference_model
from tessera.compiler.samples import sample_codes
from tessera.compiler.sim.build import Builder, loader_declarations
from tessera.compiler.sim.csim import CSim
from tessera.compiler.sim.objcache import IN_USE_S, ObjectCache

pytestmark = pytest.mark.csim


@pytest.fixture(autouse=True)
def store(tmp_path, monkeypatch):
    """A fresh object store per test."""
    monkeypatch.setenv("TESSERA_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("TESSERA_CSIM_CACHE", raising=False)
    return tmp_path / "cache" / "csim"


def _project(model, out):
    return api.compile_model(model, out, api.CompileOptions(tb_samples=8, force=True)).project


def _exact(model, prj, n=40):
    """(codes, C-simulation outputs, exact reference outputs) on n random full-range inputs."""
    graph = api.load_model(model)
    codes = sample_codes(graph.values[graph.input], n, seed=5)
    sim = CSim(prj)
    try:
        got = sim.run_codes(codes)
    finally:
        sim.close()
    return codes, got, OrtReference(reference_model(graph)).run(codes)


def _permuted_weights(src, dst):
    """The same model with its weight matrix's rows permuted: the same types and layer
    configurations (range, zero count), other outputs -- a retrained model, as the build sees it."""
    m = onnx.load(str(src))
    for init in m.graph.initializer:
        if init.name == "W":
            w = numpy_helper.to_array(init)
            init.CopyFrom(numpy_helper.from_array(w[::-1].copy(), "W"))
    onnx.save(m, str(dst))
    return dst


def test_unchanged_project_is_not_rebuilt(tmp_path, make_qonnx_mlp):
    prj = _project(make_qonnx_mlp(tmp_path / "m.onnx"), tmp_path / "prj")
    first = Builder().build(prj, testbench=True)
    assert first.rebuilt and first.compiled == 5 and first.reused == 0
    again = Builder().build(prj, testbench=True)
    assert not again.rebuilt and again.units == [] and again.library == first.library
    assert CSim(prj).testbench()[0] == 0


def test_a_retrained_model_links_the_stored_objects_and_reads_its_own_weights(tmp_path, make_qonnx_mlp):
    a = make_qonnx_mlp(tmp_path / "a.onnx")
    b = _permuted_weights(a, tmp_path / "b.onnx")
    pa, pb = _project(a, tmp_path / "pa"), _project(b, tmp_path / "pb")
    assert Builder().build(pa, testbench=True).compiled == 5
    rb = Builder().build(pb, testbench=True)
    assert rb.compiled == 0 and rb.reused == 5, rb.line()
    _, got_a, ref_a = _exact(a, pa)
    _, got_b, ref_b = _exact(b, pb)
    assert np.array_equal(got_a, ref_a) and np.array_equal(got_b, ref_b)
    assert not np.array_equal(ref_a, ref_b)  # the shared objects read each project's own weights
    assert CSim(pb).testbench()[0] == 0


def test_a_changed_header_is_rebuilt_never_a_stale_precompiled_one(tmp_path, make_qonnx_mlp):
    """Project B's copy of nnet_helpers.h (part of the precompiled prelude) adds 1/8 to every
    output the bridge converts: B must get its own prelude and objects, and show the change."""
    model = make_qonnx_mlp(tmp_path / "m.onnx")
    pa = _project(model, tmp_path / "pa")
    assert Builder().precompile(pa) == "built"
    assert Builder().build(pa).precompiled_header == "reused"
    pb = tmp_path / "pb"
    shutil.copytree(pa, pb)
    for p in (pb / "firmware").glob("*.so"):
        p.unlink()
    helpers = pb / "firmware" / "nnet_utils" / "nnet_helpers.h"
    text = helpers.read_text()
    old = "dst[i] = dstType(src[i]);"
    assert text.count(old) >= 1
    helpers.write_text(text.replace(old, old + " if constexpr (std::is_same<dstType, double>::value) dst[i] += 0.125;"))
    rb = Builder().build(pb)
    assert rb.compiled >= 2 and rb.precompiled_header == "building", rb.line()  # its own, not A's
    codes, got_a, ref = _exact(model, pa)
    _, got_b, _ = _exact(model, pb)
    assert np.array_equal(got_a, ref)
    frac = CSim(pb).manifest.outputs[0].ftype.frac
    assert np.array_equal(got_b, ref + 2 ** (frac - 3))  # 0.125 on the output grid


def test_a_changed_top_function_is_recompiled(tmp_path, make_qonnx_mlp):
    model = make_qonnx_mlp(tmp_path / "m.onnx")
    prj = _project(model, tmp_path / "prj")
    Builder().build(prj)
    src = prj / "firmware" / "tessera_model.cpp"
    mark = "// hls-fpga-machine-learning insert layers"
    src.write_text(src.read_text().replace(mark, f"{mark}\n    // a comment only: the same preprocessed unit"))
    same = Builder().build(prj)
    assert same.rebuilt and same.compiled == 0  # relinked from the store, the stamp renewed
    sim = CSim(prj)
    sim.build()
    text = src.read_text()
    src.write_text("#include <cstdlib>\n" + text.replace(mark, f"{mark}\n    if (x_in[0] == 0) abort();"))
    changed = Builder().build(prj)
    assert [u.unit for u in changed.units if not u.cached] == ["top"], changed.line()


def test_the_weight_loaders_are_declared_as_the_projects_own_header_defines_them(tmp_path, make_qonnx_mlp):
    """The prelude gives hls4ml's weight loaders an optimisation level of their own by
    declaring them again: the declarations are copied from the project's nnet_helpers.h, so a
    loader of another form is left as it is (never a declaration of another template)."""
    prj = _project(make_qonnx_mlp(tmp_path / "m.onnx"), tmp_path / "prj")
    decls = loader_declarations(prj).splitlines()
    assert len(decls) == 3 and all('__attribute__((optimize("Og")))' in d for d in decls)
    assert 'template <class T, size_t SIZE> __attribute__((optimize("Og"))) void load_weights_from_txt(T *w, ' \
           'const char *fname);' in decls
    helpers = prj / "firmware" / "nnet_utils" / "nnet_helpers.h"
    helpers.write_text(helpers.read_text().replace("void load_weights_from_txt(T *w, const char *fname) {",
                                                   "void load_weights_from_txt(T *w, const char *fname, int) {"))
    changed = loader_declarations(prj)
    assert "load_weights_from_txt(T *w, const char *fname, int);" in changed and len(changed.splitlines()) == 3


def test_a_truncated_stored_object_is_compiled_again(tmp_path, make_qonnx_mlp, store):
    model = make_qonnx_mlp(tmp_path / "m.onnx")
    pa, pb = _project(model, tmp_path / "pa"), _project(model, tmp_path / "pb")
    ra = Builder().build(pa)
    top = next(u.object for u in ra.units if u.unit == "top")
    top.write_bytes(top.read_bytes()[:100])
    rb = Builder().build(pb)
    assert rb.rebuilt
    _, got, ref = _exact(model, pb)
    assert np.array_equal(got, ref)


def test_the_store_can_be_turned_off(tmp_path, make_qonnx_mlp, store, monkeypatch):
    monkeypatch.setenv("TESSERA_CSIM_CACHE", "off")
    model = make_qonnx_mlp(tmp_path / "m.onnx")
    pa, pb = _project(model, tmp_path / "pa"), _project(model, tmp_path / "pb")
    assert Builder().build(pa).compiled == 4  # the library's four units: no testbench asked
    rb = Builder().build(pb)
    assert rb.compiled == 4 and rb.precompiled_header == "none"
    assert not store.exists()
    _, got, ref = _exact(model, pb)
    assert np.array_equal(got, ref)


def test_the_store_drops_its_least_recently_used_entries_never_one_in_use(tmp_path):
    """Over its limit, the store drops the entries least recently used, but none used within
    IN_USE_S (a running build may be reading it)."""
    cache = ObjectCache(tmp_path / "c", limit_bytes=2500)
    keys = ["aa" + "0" * 62, "bb" + "1" * 62, "cc" + "2" * 62]
    for i, key in enumerate(keys):
        f = tmp_path / f"o{i}"
        f.write_bytes(b"x" * 1000)
        cache.put(key, ".o", f)
    assert all(cache.get(k, ".o") is not None for k in keys)  # all three in use: kept, over the limit
    old = time.time() - 2 * IN_USE_S
    for k, age in zip(keys, (0, 10, 20)):  # used long ago: bb most recently, then aa, then cc
        os.utime(cache.path(k, ".o"), (old - age, old - age))
    os.utime(cache.path(keys[1], ".o"))
    assert cache.prune() == [cache.path(keys[2], ".o")]
    assert cache.get(keys[0], ".o") is not None and cache.get(keys[1], ".o") is not None
