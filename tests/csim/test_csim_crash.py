"""A crash inside the C++ of a C-simulation (assert/abort, segmentation fault) is a one-line
error with exit code 7 naming the signal and the sample; the Python process lives on, and
the next run after a fix works (docs/reliability.md)."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from tessera.cli import main
from tessera.compiler.errors import SimulationError
from tessera.compiler.sim.csim import CSim

pytestmark = pytest.mark.csim

MARK = "// hls-fpga-machine-learning insert layers"

FAULTS = {
    "abort": ("static int calls = 0; if (++calls == 3) { std::cerr << \"injected fault\" << std::endl; abort(); }",
              "SIGABRT"),
    "assert": ("static int calls = 0; assert(++calls != 3 && \"injected assertion\");", "SIGABRT"),
    "segfault": ("static int calls = 0; if (++calls == 3) { volatile int *p = nullptr; *p = 1; }", "SIGSEGV"),
}


@pytest.fixture
def project(tmp_path, make_qonnx_mlp):
    model = make_qonnx_mlp(tmp_path / "m.onnx")
    r = CliRunner().invoke(main, ["compile", str(model), "-o", str(tmp_path / "prj"), "--tb-samples", "8"])
    assert r.exit_code == 0, r.output
    return model, tmp_path / "prj"


def _inject(prj, code):
    src = prj / "firmware" / "tessera_model.cpp"
    text = src.read_text()
    assert MARK in text
    src.write_text("#include <cassert>\n#include <cstdlib>\n" + text.replace(MARK, f"{MARK}\n    {code}"))
    for lib in (prj / "firmware").glob("*.so"):
        lib.unlink()


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_crash_is_a_clean_error(project, tmp_path, fault):
    model, prj = project
    _inject(prj, FAULTS[fault][0])
    x = np.zeros((6, 6), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    r = CliRunner().invoke(main, ["emulate", str(prj), "--input", str(tmp_path / "x.npy"),
                                  "--output", str(tmp_path / "y.npy")])
    lines = [ln for ln in r.output.strip().splitlines() if ln.strip() and "%" not in ln]
    assert r.exit_code == 7, r.output
    assert "Traceback" not in r.output
    assert "crashed" in lines[-1] and FAULTS[fault][1] in lines[-1] and "sample 2" in lines[-1], r.output
    if fault == "abort":
        assert "injected fault" in lines[-1]
    assert not (tmp_path / "y.npy").exists()
    r = CliRunner().invoke(main, ["verify", str(model), str(prj), "--samples", "20"])
    assert r.exit_code == 7 and FAULTS[fault][1] in r.output, r.output


def test_the_same_simulator_recovers_after_a_crash(project):
    """A crash ends the child process only: after the source is fixed and rebuilt, the same
    CSim object runs again and its results equal a fresh one's."""
    _, prj = project
    original = (prj / "firmware" / "tessera_model.cpp").read_text()
    sim = CSim(prj)
    codes = np.arange(-12, 12, dtype=np.int64).reshape(4, 6)
    try:
        _inject(prj, FAULTS["segfault"][0])
        with pytest.raises(SimulationError, match="SIGSEGV"):
            sim.run_codes(codes)
    finally:
        (prj / "firmware" / "tessera_model.cpp").write_text(original)
    sim.build(rebuild=True)
    got = sim.run_codes(codes)
    again = sim.run_codes(codes)  # the child serves many requests
    assert np.array_equal(got, again)
    fresh = CSim(prj)
    assert np.array_equal(got, fresh.run_codes(codes))
    sim.close()
    fresh.close()
