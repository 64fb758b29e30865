"""The weights scan on hand-written headers in the hls4ml writer's form: what synthesis
would store vs what C-simulation loaded, type exactness, and literals that round on the way."""

from __future__ import annotations

import numpy as np
import pytest

from tessera.compiler.hlscheck.weights import scan_weights
from tessera.compiler.lower.hls4ml_lower import HlsOptions
from tessera.compiler.ops import relu
from tessera.compiler.project import Manifest

from ..conftest import full_range, one_op_graph

TYPES = """typedef ap_fixed<60,60> wide_fixed_t;
typedef ap_int<60> wide_int_t;
typedef ap_fixed<8,3,AP_RND_CONV,AP_SAT> frac_t;
typedef ap_ufixed<4,-2> tiny_t;
typedef nnet::array<ap_fixed<8,3>, 4*1> layer2_t;
"""


def header(name: str, type_name: str, values: list[str]) -> str:
    guard = f"{name.upper()}_H_"
    return (f"//Numpy array shape [{len(values)}]\n\n#ifndef {guard}\n#define {guard}\n\n#ifndef __SYNTHESIS__\n"
            f"{type_name} {name}[{len(values)}];\n#else\n{type_name} {name}[{len(values)}] = {{{', '.join(values)}}};\n"
            "\n#endif\n\n#endif\n")


def project(tmp_path, arrays: dict[str, tuple[str, list[str]]], txt: dict[str, list[str]] | None = None):
    w = tmp_path / "firmware" / "weights"
    w.mkdir(parents=True)
    (tmp_path / "firmware" / "defines.h").write_text(TYPES)
    graph = one_op_graph(full_range(8, 0, True, (4,)), ("relu", relu.Attrs()))
    Manifest.of(graph, None, HlsOptions(), {graph.input: np.arange(4), graph.output: np.arange(4)}).write(tmp_path)  # the scan reads any project
    for name, (type_name, values) in arrays.items():
        (w / f"{name}.h").write_text(header(name, type_name, values))
        (w / f"{name}.txt").write_text(", ".join((txt or {}).get(name, values)))
    return tmp_path


@pytest.mark.parametrize("type_name,values,finding", [
    ("frac_t", ["0.25", "-4", "3.96875", "0.03125"], None),
    ("tiny_t", ["0.234375", "0.015625", "0"], None),
    ("wide_int_t", [str(2 ** 53 + 1), str(-(2 ** 59))], None),  # ap_int's loader reads the digits
    ("wide_fixed_t", [str(2 ** 53 + 1)], "is rounded on its way"),  # ap_fixed's loader reads a double
    ("frac_t", ["0.3"], "value 0.3 is not exact in frac_t"),
    ("frac_t", ["4"], "value 4 is not exact in frac_t"),
    ("tiny_t", ["0.25"], "value 0.25 is not exact in tiny_t"),
    ("layer2_t", ["1"], "type layer2_t is not an ap_fixed"),
])
def test_values_are_exact_in_their_type_on_both_paths(tmp_path, type_name, values, finding):
    rep, _ = scan_weights(project(tmp_path, {"w2": (type_name, values)}))
    if finding is None:
        assert rep.ok and rep.arrays == 1 and rep.values == len(values), rep.findings
    else:
        assert len(rep.findings) == 1 and finding in rep.findings[0] and rep.findings[0].startswith("w2.h (w2)")


def test_synthesis_and_csimulation_copies_must_agree(tmp_path):
    prj = project(tmp_path, {"w2": ("frac_t", ["1", "2.5", "-3"]), "b2": ("frac_t", ["0.5"])},
                  txt={"w2": ["1.0", "2.50", "-3"], "b2": ["0.25"]})
    rep, _ = scan_weights(prj)
    # the same value written differently agrees; a different value is named with its position
    assert rep.findings == ["b2.h (b2): element 0 is 0.5 in synthesis and 0.25 in C-simulation (b2.txt)"]
    (prj / "firmware" / "weights" / "b2.txt").write_text("0.5, 0.5")
    assert scan_weights(prj)[0].findings == ["b2.h (b2): b2.txt holds 2 values for 1 elements"]
    (prj / "firmware" / "weights" / "b2.txt").unlink()
    assert scan_weights(prj)[0].findings == ["b2.h (b2): no b2.txt (C-simulation's copy)"]


def test_a_folder_that_is_not_a_project_is_one_line(tmp_path):
    from tessera.compiler.errors import ProjectError

    with pytest.raises(ProjectError, match="is not a Tessera project"):
        scan_weights(tmp_path)
    prj = project(tmp_path, {"w2": ("frac_t", ["1"])})
    (prj / "firmware" / "defines.h").unlink()
    assert scan_weights(prj)[0].findings == ["firmware/defines.h is missing: the project's types are unknown"]


def test_headers_not_in_the_writers_form_are_reported(tmp_path):
    prj = project(tmp_path, {"w2": ("frac_t", ["1", "2"])})
    h = prj / "firmware" / "weights" / "w2.h"
    h.write_text(h.read_text().replace("frac_t w2[2] = {", "frac_t w3[2] = {"))
    rep, arrays = scan_weights(prj)
    assert arrays == [] and rep.findings == [
        "w2.h: not the writer's two declarations of one array under an include guard"]
