"""The lint for what Vitis HLS rejects: each rule finds its construct, accepts the forms
our kernels use, and every kernel template is clean as Vitis HLS sees it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tessera.compiler.hlscheck.lint import Rule, lint_source, own_source, plain_source

BAD = {
    Rule.DYNAMIC_ALLOCATION: ["void f(int *x) { int *p = new int[4]; x[0] = p[0]; }",
                              "void f() { void *p = malloc(4); }", "void f(int *p) { delete p; }"],
    Rule.STD_CONTAINER: ["void f() { std::vector<int> v(3); }", "void f() { std::map<int, int> m; }",
                         "void f(std::function<void()> g) { }"],
    Rule.POINTER_TO_POINTER: ["void f(int **rows, int n) { }", "void f() { const ap_int<4> * const *p; }"],
    Rule.NULL_POINTER: ["void g(const int *w); void f() { g((const fc::wx_t*)0); }", "void f() { g(nullptr); }",
                        "template <class T> void f() { g((const typename T::wx_t *)0); }"],
    Rule.RECURSION: ["int f(int n) { return n ? f(n - 1) : 0; }",
                     "int a(int n);\nint b(int n) { return a(n); }\nint a(int n) { return n ? b(n - 1) : 0; }"],
    Rule.UNBOUNDED_LOOP: ["void f(int n) { while (n > 0) { n--; } }", "void f(int n) { for (int i = 0; i < n; i++) { } }",
                          "void f(int n) { do { n--; } while (n); }"],
}

GOOD = """
template <class T, typename CONFIG_T, int NB> void f(T *x) {
    const int H = CONFIG_T::in_height, W = CONFIG_T::in_width;
    for (int i = 0; i < (int)CONFIG_T::n_in; i++) { x[i] = 0; }
    for (int i = 0; i < H * W * NB; i++) x[i] = x[i] * *x;
    for (unsigned i = 0; i < tessera_ring<CONFIG_T>::n_planes; i++) { }
    for (int i = 0; i < 4; i++) { }
    int n = x[0];
    while (n > 0) {
        #pragma HLS LOOP_TRIPCOUNT min=0 max=8
        n--;
    }
}
"""


@pytest.mark.parametrize("rule,code", [(r, c) for r, codes in BAD.items() for c in codes])
def test_each_rule_finds_its_construct(rule, code):
    found = lint_source(plain_source(code, "bad.h"))
    assert [f.rule for f in found] == [rule], [f.line_text() for f in found]
    assert found[0].file == "bad.h" and found[0].line >= 1


def test_forms_our_kernels_use_are_accepted():
    found = lint_source(plain_source(GOOD, "good.h"))
    assert found == [], [f.line_text() for f in found]


def test_findings_name_file_and_line_through_the_preprocessor():
    view = '# 1 "firmware/nnet_utils/nnet_tessera_x.h"\nvoid f() {\n  int *p = new int;\n}\n# 1 "firmware/nnet_utils/nnet_dense.h"\nvoid g() { std::vector<int> v; }\n'
    found = lint_source(own_source(view))
    assert [(f.file, f.line, f.rule) for f in found] == [("firmware/nnet_utils/nnet_tessera_x.h", 2, Rule.DYNAMIC_ALLOCATION)]


@pytest.mark.csim
def test_every_kernel_template_is_clean_as_vitis_sees_it(tmp_path):
    """All of hls_templates/*/*.h, preprocessed with __SYNTHESIS__ against hls4ml's headers."""
    import hls4ml

    import tessera.hls_templates as templates

    vivado = Path(hls4ml.__file__).parent / "templates" / "vivado"
    root = Path(templates.__file__).parent
    headers = sorted(root.glob("*/nnet_tessera_*.h"))
    assert len(headers) >= 14
    unit = tmp_path / "all.cpp"
    unit.write_text("".join(f'#include "{h}"\n' for h in ("ap_fixed.h", "ap_int.h", "hls_stream.h"))
                    + "#define __SYNTHESIS__\n" + "".join(f'#include "{h.name}"\n' for h in headers))
    incs = [f"-I{vivado / 'ap_types'}", f"-I{vivado / 'nnet_utils'}", *sorted({f"-I{h.parent}" for h in headers})]
    res = subprocess.run([shutil.which("g++"), "-std=c++17", "-E", *incs, str(unit)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    src = own_source(res.stdout, re.compile(r"nnet_tessera_\w+\.h$"))
    assert {Path(f).name for f, _ in src.origin} == {h.name for h in headers}
    found = lint_source(src)
    assert found == [], [f.line_text() for f in found]
