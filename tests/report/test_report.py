"""The report without a browser: what compile and verify record for it (``design.json``,
``verify.json``: every reached code range inside the range type inference proved), the
layered layout (no box over another, arrows downward, skips around boxes, 60 layers and wide
fan-outs), the requantization facet, the integer semantics' incremental ranges, escaping, and
``tessera report`` (its output, and its one-line errors)."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner

from tessera.cli import main
from tessera.compiler import api
from tessera.compiler.exact.requant import Step
from tessera.compiler.exact.rounding import Rounding
from tessera.compiler.ir.types import FixedType, TensorType
from tessera.compiler.ops import OPS, quant, rescale
from tessera.compiler.reference.interpret import run_ir
from tessera.compiler.report import DESIGN_JSON, REPORT_HTML, VERIFY_JSON, DesignRecord, VerificationRecord
from tessera.compiler.report.layout import BOX_HEIGHT, BOX_WIDTH, layout
from tessera.compiler.report.page import render_page
from tessera.compiler.report.ranges import bits_needed
from tessera.compiler.samples import input_samples


@pytest.fixture(scope="module")
def verified(tmp_path_factory, make_qonnx_mlp):
    """The MLP compiled and verified (through the API, as the CLI does)."""
    work = tmp_path_factory.mktemp("report")
    model = make_qonnx_mlp(work / "m.onnx")
    prj = api.compile_model(model, work / "prj", api.CompileOptions(tb_samples=4)).project
    assert (prj / DESIGN_JSON).is_file() and (prj / REPORT_HTML).is_file() and not (prj / VERIFY_JSON).exists()
    assert "Not verified yet." in (prj / REPORT_HTML).read_text()
    report = api.verify_project(model, prj, api.VerifyOptions(samples=400, user_samples=0))
    assert report.passed
    return model, prj, report


def test_compile_records_each_layer_and_its_edges(verified):
    _, prj, _ = verified
    record = DesignRecord.read(prj)
    assert [(layer.node, layer.op, layer.kind) for layer in record.layers] == \
        [("MatMul_0", "dense", "linear"), ("Relu_0", "relu", "elementwise"), ("Quant_y", "requant", "requant")]
    dense, relu, requant = record.layers
    assert dense.inputs == (record.inputs[0].value,) and relu.inputs == (dense.output,) and requant.inputs == (relu.output,)
    assert record.outputs[0].value == requant.output
    assert dense.weight == "s7.f6" and dense.accumulator == dense.ftype.describe() and dense.macs == 24
    assert requant.requantization.form == "shift" and "exact" in requant.requantization.exactness
    assert all(layer.reuse == 1 and layer.cost.lut is not None for layer in record.layers)
    assert record.estimate.totals.lut == sum(layer.cost.lut for layer in record.layers)
    assert DesignRecord.from_json(record.to_json()) == record


def test_verify_records_ranges_inside_the_inferred_ones(verified):
    _, prj, report = verified
    record, found = DesignRecord.read(prj), VerificationRecord.read(prj)
    assert found.verdict == report.verdict() and found.passed and found.samples == 400
    assert found.versions["tessera"] and found.versions["g++"] and re.fullmatch(r"\d{4}-\d\d-\d\dT.*", found.date)
    values = {p.value: (p.lo, p.hi) for p in record.inputs} | {layer.output: (layer.lo, layer.hi) for layer in record.layers}
    assert set(found.reached) == set(values)
    for value, (lo, hi) in found.reached.items():  # type inference is sound on these samples
        assert values[value][0] <= lo <= hi <= values[value][1], value
    assert found.reached[record.inputs[0].value] == (-128, 127)  # the extremes are among the samples
    assert VerificationRecord.from_json(found.to_json()) == found
    assert "verified: 400 samples" in (prj / REPORT_HTML).read_text()


def test_run_ir_ranges_are_the_min_and_max_of_every_value(verified):
    model, _, _ = verified
    graph = api.load_model(model)
    codes = input_samples(graph, 300, seed=3)
    ranges: dict[str, tuple[int, int]] = {}
    out = run_ir(graph, codes[:100], ranges=ranges)
    run_ir(graph, codes[100:], ranges=ranges)  # widened, batch by batch
    kept = run_ir(graph, codes, keep=set(graph.values))
    assert np.array_equal(out, run_ir(graph, codes[:100]))
    assert ranges == {v: (int(a.min()), int(a.max())) for v, a in kept.items()}


def test_requantization_facet():
    x = TensorType((4,), FixedType(16, 0, True), -30000, 30000)
    attrs = rescale.Attrs((Step(Fraction(3, 700), Fraction(1, 3), Rounding.ROUND, -128, 127),), FixedType(8, 0, True))
    found = OPS["rescale"].requantization(attrs, [x], None)
    impl = rescale.implementation(attrs, x)
    assert found.form == "multiply-shift" and found.exactness.startswith("proven")
    assert found.constants == (f"M = {impl.steps[0].mult}, C = {impl.steps[0].add}",)
    assert f">> {impl.shift}" in found.formula
    two_bits = rescale.Attrs(tuple(Step(Fraction(1, 9 + c), Fraction(0), Rounding.ROUND, -2, 1) for c in range(12)),
                             FixedType(2, 0, True))
    found = OPS["rescale"].requantization(two_bits, [TensorType((12, 3), x.ftype, -100, 100)], None)
    assert found.form == "thresholds" and found.channels == 12 and len(found.constants) == 8
    assert found.unlisted_channels == 4 and found.constants[0].startswith("s = +1, t = [")
    shift = OPS["requant"].requantization(quant.Attrs(FixedType(4, 1, False), False, "ROUND"),
                                          [TensorType((4,), FixedType(12, 6, True), -2048, 2047)], None)
    assert shift.formula == "clamp(R(x / 2^5), 0, 15)" and shift.constants == ("shift 5, rounding ROUND",)
    assert OPS["relu"].requantization(None, [x], x) is None


def _no_overlap(placed) -> None:
    boxes = placed.boxes
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert a.x + BOX_WIDTH <= b.x or b.x + BOX_WIDTH <= a.x or a.y + BOX_HEIGHT <= b.y or b.y + BOX_HEIGHT <= a.y, \
                (a, b)


def test_layout_of_a_60_layer_chain_is_one_column():
    keys = [f"n{i}" for i in range(62)]
    placed = layout(keys, list(zip(keys, keys[1:])))
    _no_overlap(placed)
    assert len({b.x for b in placed.boxes}) == 1 and placed.width < 2 * BOX_WIDTH
    assert all(r.points[0].y < r.points[-1].y for r in placed.routes)


def test_layout_routes_skips_around_boxes_and_spreads_fan_outs():
    keys = ["x", "a", "b", "c", "d", *(f"h{k}" for k in range(12)), "cat"]
    edges = [("x", "a"), ("a", "b"), ("b", "c"), ("c", "d"), ("a", "d"), ("x", "d")]
    edges += [("d", f"h{k}") for k in range(12)] + [(f"h{k}", "cat") for k in range(12)]
    placed = layout(keys, edges)
    _no_overlap(placed)
    at = {b.key: b for b in placed.boxes}
    for r in placed.routes:
        assert all(a.y <= b.y for a, b in zip(r.points, r.points[1:])), r  # always downward
        for p in r.points[1:-1]:  # a skip's waypoints lie beside every box of their row
            assert not any(b.x < p.x < b.x + BOX_WIDTH and b.y <= p.y <= b.y + BOX_HEIGHT for b in placed.boxes), (r, p)
    skip = next(r for r in placed.routes if (r.source, r.target) == ("a", "d"))
    assert len(skip.points) > 2 and at["b"].y < at["c"].y < at["d"].y
    assert len({at[f"h{k}"].y for k in range(12)}) == 1 and placed.width > 12 * BOX_WIDTH


def test_bits_needed():
    assert [bits_needed(lo, hi, True) for lo, hi in ((-128, 127), (0, 0), (-1, 0), (0, 127), (0, 128), (-129, 0))] == \
        [8, 1, 1, 8, 9, 9]
    assert [bits_needed(lo, hi, False) for lo, hi in ((0, 0), (0, 1), (0, 255), (3, 256))] == [1, 1, 8, 9]


def test_text_is_escaped(verified, tmp_path):
    _, prj, _ = verified
    copy = tmp_path / "prj"
    shutil.copytree(prj, copy)
    record = DesignRecord.read(copy)
    replace(record, layers=(replace(record.layers[0], node="<b>&\"'"), *record.layers[1:])).write(copy)
    html = render_page(copy)
    assert "<b>&" not in html and "&lt;b&gt;&amp;&quot;&#x27;" in html
    assert "http://" not in html and "https://" not in html and "<script" not in html


def test_report_command(verified, tmp_path):
    _, prj, _ = verified
    r = CliRunner().invoke(main, ["report", str(prj), "-o", str(tmp_path / "out" / "r.html")])
    assert r.exit_code == 0, r.output
    assert r.output.strip() == f"report: {tmp_path / 'out' / 'r.html'}"
    assert "verified: 400 samples" in (tmp_path / "out" / "r.html").read_text()
    r = CliRunner().invoke(main, ["report", str(prj)])
    assert r.exit_code == 0 and (prj / REPORT_HTML).is_file()


def test_report_command_errors_are_one_line(verified, tmp_path):
    _, prj, _ = verified
    cases = [(["report", str(tmp_path / "missing")], 6, "is not a Tessera project"),
             (["report", str(prj), "-o", str(tmp_path)], 2, "is a directory")]
    broken = tmp_path / "broken"
    shutil.copytree(prj, broken)
    (broken / DESIGN_JSON).write_text("{not json")
    cases.append((["report", str(broken)], 6, "design.json is corrupt"))
    for args, code, words in cases:
        r = CliRunner().invoke(main, args)
        assert r.exit_code == code, r.output
        assert len(r.output.strip().splitlines()) == 1 and words in r.output, r.output
