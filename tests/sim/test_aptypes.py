"""The C-simulation's view of ap_types (compiler/sim/aptypes.py): it only adds non-volatile
copies of the volatile-only clearUnusedBits, refuses headers of another form, computes the
same bits as the ap_types hls4ml ships, and is what the build compiles against."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import hls4ml
from tessera.compiler import api
from tessera.compiler.project import PACKED_ENTRY
from tessera.compiler.reference.model import OrtReference, reference_model
from tessera.compiler.samples import sample_codes
from tessera.compiler.sim.aptypes import HEADER, VIEW_DIR, ViewStatus, derive_view, rewrite
from tessera.compiler.sim.build import Builder
from tessera.compiler.sim.csim import CSim, _Worker

HLS4ML_AP_TYPES = Path(hls4ml.__file__).parent / "templates" / "vivado" / "ap_types"

HEADER_TEXT = """\
class ap_private {
  INLINE ValType get_VAL(void) const volatile { return VAL; }
  INLINE void clearUnusedBits(void) volatile
#if defined(__clang__)
      __attribute__((no_sanitize("undefined")))
#endif
  {
    enum { excess_bits = 3 };
    VAL = (ValType)(((int64_t)VAL << excess_bits) >> excess_bits);  // {braces} in a comment
  }
  INLINE void other(void) volatile { VAL = 0; }
};
"""


def _is_subsequence(small: list[str], big: list[str]) -> bool:
    it = iter(big)
    return all(line in it for line in small)


def test_rewrite_adds_a_verbatim_non_volatile_copy_and_changes_nothing_else():
    out = rewrite(HEADER_TEXT)
    assert out is not None
    old, new = HEADER_TEXT.split("\n"), out.split("\n")
    assert _is_subsequence(old, new) and len(new) == len(old) + 8
    start = new.index("  INLINE void clearUnusedBits(void)")
    assert new[start + 8] == "  INLINE void clearUnusedBits(void) volatile"
    assert new[start + 1 : start + 8] == new[start + 9 : start + 16]  # the body, verbatim
    assert "get_VAL(void) const volatile" in out and out.count("other(void)") == 1  # nothing else copied


@pytest.mark.parametrize("text", [
    HEADER_TEXT.replace("clearUnusedBits(void) volatile", "clearUnusedBits(void)"),  # nothing volatile-only
    HEADER_TEXT + "  INLINE void clearUnusedBits(void) { }\n",  # a non-volatile one already there
    HEADER_TEXT.split("  }\n")[0],  # the text ends inside the function
    "class ap_private {};\n",
])
def test_rewrite_refuses_a_header_of_another_form(text):
    assert rewrite(text) is None


def test_hls4mls_ap_private_gets_one_copy_per_definition():
    text = (HLS4ML_AP_TYPES / HEADER).read_text()
    out = rewrite(text)
    assert out is not None
    old, new = text.split("\n"), out.split("\n")
    assert _is_subsequence(old, new)
    defs = sum("clearUnusedBits(void) volatile" in ln for ln in old)
    assert defs == 2  # the single-word and the multi-word ap_private
    assert sum("void clearUnusedBits(void)" in ln and "volatile" not in ln for ln in new) == defs
    assert rewrite(out) is None  # idempotent: a view is not rewritten again


@pytest.mark.csim
def test_the_view_computes_the_same_bits_as_the_ap_types_hls4ml_ships(tmp_path):
    """Every quantization and overflow mode, narrow and multi-word widths: the same output."""
    view = tmp_path / "view"
    (view / "etc").mkdir(parents=True)
    (view / HEADER).write_text(rewrite((HLS4ML_AP_TYPES / HEADER).read_text()))
    src = Path(__file__).with_name("aptypes_ops.cpp")
    outputs = []
    for tag, incs in (("shipped", [f"-I{HLS4ML_AP_TYPES}"]), ("view", [f"-I{view}", f"-I{HLS4ML_AP_TYPES}"])):
        exe = tmp_path / f"ops_{tag}"
        subprocess.run([shutil.which("g++"), "-std=c++17", "-O2", "-w", *incs, str(src), "-o", str(exe)], check=True)
        outputs.append(subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout)
    lines = outputs[0].splitlines()
    assert len(lines) > 60_000 and len(set(lines)) > 10_000  # many distinct results, not a constant
    assert outputs[0] == outputs[1]


@pytest.mark.csim
def test_the_build_uses_the_view_and_never_modifies_the_project(tmp_path, make_qonnx_mlp, monkeypatch):
    monkeypatch.setenv("TESSERA_CACHE", str(tmp_path / "cache"))
    model = make_qonnx_mlp(tmp_path / "m.onnx")
    prj = api.compile_model(model, tmp_path / "prj", api.CompileOptions(tb_samples=8, force=True)).project
    shipped = prj / "firmware" / "ap_types" / HEADER
    before = hashlib.sha256(shipped.read_bytes()).hexdigest()
    graph = api.load_model(model)
    codes = sample_codes(graph.values[graph.input], 40, seed=3)
    ref = OrtReference(reference_model(graph)).run(codes)
    sim = CSim(prj)
    x, n_out = sim.bridge_inputs(codes), sim.manifest.output.size
    got = {}
    for view in (True, False):
        rep = Builder(aptypes_view=view).build(prj)
        assert rep.rebuilt and rep.aptypes == (ViewStatus.DERIVED if view else ViewStatus.AS_SHIPPED)
        worker = _Worker(rep.library, PACKED_ENTRY)  # this library, as built (CSim would rebuild with the view)
        try:
            got[view] = sim.output_codes(worker.run(x, n_out))
        finally:
            worker.close()
    assert (prj / VIEW_DIR / HEADER).is_file()
    assert hashlib.sha256(shipped.read_bytes()).hexdigest() == before
    assert np.array_equal(got[True], ref) and np.array_equal(got[False], ref)
    assert derive_view(prj) is ViewStatus.DERIVED
