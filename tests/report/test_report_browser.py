"""The report in a real browser: headless Chromium (Debian's ``chromium``) driven over the
DevTools protocol (``compiler/report/browser.py``) loads each project's ``report.html`` and
the rendered DOM must hold the drawing (one box per layer, named as the layers, one per port,
an arrow per edge, no two boxes overlapping), the layer table (names and output types of the
design record), the value ranges (a row per value), the verification's verdict and counts,
with no console message and no request but the file itself (every request is intercepted).

Projects: an HLS MLP (compiled and verified), an RTL MLP (with synthesis results beside the
estimate), a recurrent QuantLSTM, a partitioned 3D CNN, a model of two inputs (verified), the
six files of the public QONNX model zoo (where present), a report without a design record,
and hostile layer names.  The ``slow`` twins verify the RTL (and synthesize it with Yosys and
nextpnr), partitioned and recurrent projects too."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tessera.compiler import api
from tessera.compiler.report import DESIGN_JSON, DesignRecord, VerificationRecord, write_report
from tessera.compiler.report.browser import Chromium, find_chromium
from tessera.compiler.report.drawing import graph_of

from ..conformance.graphs import hls4ml_merge
from ..conformance.recurrent import hls4ml_quant_lstm
from ..conftest import qonnx_mlp
from ..e2e.test_qonnx_model_zoo import MODELS as ZOO_MODELS, ZOO, needs_zoo

pytestmark = pytest.mark.skipif(find_chromium() is None, reason="no Chromium to render the report in: apt-get install "
                                "chromium (or set TESSERA_CHROMIUM to a Chromium or Chrome executable)")

#: What the page shows, read from the rendered DOM in one evaluation.
FACTS = """(() => {
  const all = s => Array.from(document.querySelectorAll(s));
  const boxes = all('svg.design g.box').map(g => g.querySelector('rect').getBoundingClientRect());
  let overlaps = 0;
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i], b = boxes[j];
    if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) overlaps++;
  }
  const text = s => (document.querySelector(s) || {textContent: null}).textContent;
  return {
    title: document.title,
    sections: all('main > section').map(s => s.id),
    layers: all('svg.design g.box.layer').map(g => g.getAttribute('data-node')),
    ports: all('svg.design g.box.port').length,
    edges: all('svg.design path.edge').map(p => [p.getAttribute('data-from'), p.getAttribute('data-to')]),
    empty_boxes: boxes.filter(r => r.width < 100 || r.height < 30).length,
    overlaps: overlaps,
    table_names: all('table.layers tbody tr td:nth-child(2)').map(td => td.textContent),
    table_outputs: all('table.layers tbody tr td:nth-child(7)').map(td => td.textContent),
    range_rows: all('table.ranges tbody tr').length,
    strips: all('table.ranges svg.strip:not(.axis)').length,
    verdict: text('#verification .verdict'),
    verification: text('#verification'),
    synth_rows: all('table.synth tbody tr').map(tr => tr.textContent),
    summary: text('#summary'),
  };
})()"""


@pytest.fixture(scope="module")
def page():
    with Chromium() as browser:
        yield browser.page()


def facts_of(page, prj: Path) -> dict:
    """Open ``prj``'s report; what the DOM shows, after the checks every report passes: no
    request but the file, no console message, the drawing, the tables and the sections."""
    page.open(prj / "report.html")
    assert page.requests == [page.url], f"requests beyond the file: {page.requests}"
    assert page.console == [], page.console
    facts = page.evaluate(FACTS)
    record = DesignRecord.read(prj)
    names = [layer.node for layer in record.layers]
    assert facts["layers"] == names
    assert facts["ports"] == len(record.inputs) + len(record.outputs)
    _, edges, _ = graph_of(record)
    assert sorted(map(tuple, facts["edges"])) == sorted(set(edges))
    assert facts["overlaps"] == 0 and facts["empty_boxes"] == 0
    assert facts["table_names"] == names
    assert facts["table_outputs"] == [f"{layer.ftype.describe()} ({', '.join(map(str, layer.shape))})"
                                      for layer in record.layers]
    assert facts["range_rows"] == facts["strips"] == len(record.inputs) + len(record.layers)
    assert facts["sections"][:5] == ["summary", "design", "layers", "ranges", "verification"]
    assert (api.Manifest.read(prj).model_file or "") in facts["title"]
    verified = VerificationRecord.read(prj)
    if verified is None:
        assert facts["verdict"] == "Not verified yet." and "not verified yet" in facts["summary"]
    else:
        assert facts["verdict"] == verified.verdict
        assert f"{verified.samples:,}" in facts["verification"] and f"{verified.outputs:,}" in facts["verification"]
    return facts


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    work = tmp_path_factory.mktemp("mlp")
    return qonnx_mlp(work / "mlp.onnx")


def test_verified_hls_project(page, mlp, tmp_path):
    prj = api.compile_model(mlp, tmp_path / "prj", api.CompileOptions(tb_samples=4)).project
    report = api.verify_project(mlp, prj, api.VerifyOptions(samples=300, user_samples=20))
    assert report.passed
    facts = facts_of(page, prj)
    assert facts["layers"] == ["MatMul_0", "Relu_0", "Quant_y"]
    assert "verified: 300 samples, 1200 outputs, 0 mismatches" == facts["verdict"]
    assert "C-simulation mismatches0" in facts["verification"].replace("\n", "")
    assert "synthesis" not in facts["sections"]


def test_rtl_project_shows_synthesis_beside_the_estimate(page, mlp, tmp_path):
    pytest.importorskip("da4ml")
    from tessera.compiler.synth.place import PlaceResult
    from tessera.compiler.synth.run import SynthReport, SynthResult
    from tessera.compiler.synth.stats import CellCounts
    from tessera.compiler.synth.yosys import ToolTime

    prj = api.compile_model(mlp, tmp_path / "prj", api.CompileOptions(backend="rtl", tb_samples=4)).project
    facts = facts_of(page, prj)
    assert "synthesis" in facts["sections"] and facts["synth_rows"] == []
    rtl = api.Manifest.read(prj).rtl
    record = DesignRecord.read(prj)  # the estimate of the very trace the Verilog was written from
    assert record.estimate.totals.lut == rtl.lut_estimate == sum(layer.cost.lut for layer in record.layers)
    assert record.estimate.totals.latency == rtl.latency and all(layer.reuse is None for layer in record.layers)
    counts = CellCounts(luts=409, ffs=310, carries=183, dsps=0, brams=0, ios=68, cells={"CCU2C": 183})
    result = SynthResult("ecp5-25k", "LFE5U-25F-6BG381C", "tessera_top", counts, rtl.lut_estimate, rtl.register_bits,
                         None, PlaceResult(95.0, 100.0), ToolTime(5.0, 5.0), 9.0, 8.0)
    SynthReport({}).with_result(result).write(prj)
    write_report(prj)
    facts = facts_of(page, prj)
    (row,) = facts["synth_rows"]
    assert "ecp5-25k" in row and "409" in row and f"{rtl.lut_estimate:,}" in row and "95.0 MHz" in row


def test_recurrent_project(page, tmp_path):
    prj = api.compile_model(hls4ml_quant_lstm(tmp_path / "lstm.onnx"), tmp_path / "prj",
                            api.CompileOptions(tb_samples=4)).project
    facts = facts_of(page, prj)
    record = DesignRecord.read(prj)
    assert [layer.kind for layer in record.layers] == ["recurrent"] and record.layers[0].weight
    assert facts["layers"] == [record.layers[0].node] and "lstm" in facts["table_names"][0].lower()


@pytest.fixture(scope="module")
def model3d(tmp_path_factory, brevitas_kit):
    import torch

    from tessera.models.train import export_model

    net3d, calibrated = brevitas_kit
    model = calibrated(net3d(), (2, 4, 4, 4))
    return export_model(model, torch.randn(1, 2, 4, 4, 4), tmp_path_factory.mktemp("m3d") / "m3d.onnx")


def test_partitioned_3d_project(page, model3d, tmp_path):
    prj = api.compile_model(model3d, tmp_path / "prj", api.CompileOptions(grid="2x1x1")).project
    facts = facts_of(page, prj)
    assert "partition" in facts["sections"] and len(facts["layers"]) >= 6
    assert "2 x 1 x 1 blocks" in facts["summary"]


def test_two_inputs_verified(page, tmp_path):
    model = hls4ml_merge("add")(tmp_path / "merge.onnx")
    prj = api.compile_model(model, tmp_path / "prj", api.CompileOptions(tb_samples=4)).project
    assert api.verify_project(model, prj, api.VerifyOptions(samples=100, user_samples=0)).passed
    facts = facts_of(page, prj)
    assert facts["ports"] == 3 and len(facts["edges"]) == 4  # x0, x1 -> add -> quant -> output
    reached = VerificationRecord.read(prj).reached
    assert len(reached) == 2 + len(facts["layers"])


@needs_zoo
@pytest.mark.parametrize("name", sorted(ZOO_MODELS))
def test_qonnx_zoo_model(page, name, tmp_path):
    path, input_type = ZOO_MODELS[name]
    prj = api.compile_model(ZOO / path, tmp_path / "prj", api.CompileOptions(tb_samples=4, input_type=input_type)).project
    facts = facts_of(page, prj)
    assert len(facts["layers"]) >= 7


def test_project_without_a_design_record(page, mlp, tmp_path):
    """A project compiled without a design record (e.g. a partitioned project's kernel) is
    reported from its manifest: the layers in order, dashed arrows."""
    prj = api.compile_model(mlp, tmp_path / "prj", api.CompileOptions(tb_samples=4)).project
    (prj / DESIGN_JSON).unlink()
    write_report(prj)
    page.open(prj / "report.html")
    assert page.requests == [page.url] and page.console == []
    facts = page.evaluate(FACTS)
    assert facts["layers"] == ["MatMul_0", "Relu_0", "Quant_y"] and len(facts["edges"]) == 4
    assert page.evaluate("document.querySelectorAll('path.edge.dashed').length") == 4


def test_hostile_names_are_shown_not_run(page, mlp, tmp_path):
    prj = api.compile_model(mlp, tmp_path / "prj", api.CompileOptions(tb_samples=4)).project
    record = DesignRecord.read(prj)
    evil = '<img src="http://127.0.0.1:9/x.png" onerror="console.error(1)">'
    layers = (replace(record.layers[0], node=evil), *record.layers[1:])
    replace(record, layers=layers).write(prj)
    manifest = api.Manifest.read(prj)
    replace(manifest, model_file="<script>console.error(2)</script>.onnx").write(prj)
    write_report(prj)
    facts = facts_of(page, prj)
    assert facts["layers"][0] == evil and facts["table_names"][0] == evil


def test_the_guard_sees_requests_and_errors(page, tmp_path):
    """The checks above can fail: a page fetching an image and logging an error is caught."""
    html = tmp_path / "leaky.html"
    html.write_text('<html><body><img src="http://127.0.0.1:9/x.png"><script>console.error("boom")</script></body></html>')
    page.open(html)
    assert "http://127.0.0.1:9/x.png" in page.requests
    assert any("boom" in line for line in page.console)


def test_print_stylesheet(page, mlp, tmp_path):
    """Printed, the navigation is hidden and the drawing is not cut to a scrolling frame."""
    prj = api.compile_model(mlp, tmp_path / "prj", api.CompileOptions(tb_samples=4)).project
    page.open(prj / "report.html")
    page.command("Emulation.setEmulatedMedia", media="print")
    try:
        shown = page.evaluate("[getComputedStyle(document.querySelector('nav')).display, "
                              "getComputedStyle(document.querySelector('.drawing')).maxHeight]")
    finally:
        page.command("Emulation.setEmulatedMedia", media="")
    assert shown == ["none", "none"]
    pdf = page.command("Page.printToPDF", landscape=True)
    assert len(pdf["data"]) > 10_000


# -- the slow twins: the same projects verified (RTL: also synthesized) --------------------

@pytest.mark.slow
def test_rtl_project_verified_and_synthesized(page, mlp, tmp_path):
    pytest.importorskip("da4ml")
    from click.testing import CliRunner

    from tessera.cli import main

    prj = tmp_path / "prj"
    runner = CliRunner()
    for args in (["compile", str(mlp), "-o", str(prj), "--backend", "rtl"],
                 ["verify", str(mlp), str(prj), "--samples", "500"],
                 ["synth", str(prj), "--target", "ecp5-25k"]):
        r = runner.invoke(main, args)
        assert r.exit_code == 0, r.output
    facts = facts_of(page, prj)
    assert facts["verdict"].startswith("verified: 500 samples") and "RTL simulation" in facts["verification"]
    (row,) = facts["synth_rows"]
    assert "ecp5-25k" in row and "MHz" in row


@pytest.mark.slow
def test_partitioned_3d_project_verified(page, model3d, tmp_path):
    prj = api.compile_model(model3d, tmp_path / "prj", api.CompileOptions(grid="2x1x1")).project
    assert api.verify_project(model3d, prj, api.VerifyOptions(samples=50, user_samples=0)).passed
    facts = facts_of(page, prj)
    assert facts["verdict"].startswith("verified: 50 samples")


@pytest.mark.slow
def test_recurrent_project_verified(page, tmp_path):
    model = hls4ml_quant_lstm(tmp_path / "lstm.onnx")
    prj = api.compile_model(model, tmp_path / "prj", api.CompileOptions(tb_samples=4)).project
    assert api.verify_project(model, prj, api.VerifyOptions(samples=50, user_samples=0)).passed
    facts = facts_of(page, prj)
    assert facts["verdict"].startswith("verified: 50 samples") and "independent check" in facts["verification"]
    record = DesignRecord.read(prj)
    assert set(VerificationRecord.read(prj).reached) == {*(p.value for p in record.inputs), *(l.output for l in record.layers)}
