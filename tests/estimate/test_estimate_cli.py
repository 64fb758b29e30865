"""``tessera estimate``: prints the labelled table, writes the JSON and the plot; bad grids
are one-line usage errors."""

from __future__ import annotations

import json

from click.testing import CliRunner

from tessera.cli import main
from tessera.compiler.estimate import choose_design, get_part


def test_estimate_writes_json_plot_and_table(exported, tmp_path):
    path, g = exported("digits_cnn_w8a8")
    out_json, out_png = tmp_path / "e" / "est.json", tmp_path / "e" / "est.png"
    r = CliRunner().invoke(main, ["estimate", str(path), "--part", "zu9eg", "--json", str(out_json), "--plot", str(out_png)])
    assert r.exit_code == 0, r.output
    assert "ESTIMATE" in r.output and "fits the part (every resource <= 80 %): yes" in r.output
    assert "compute roofline:" in r.output
    doc = json.loads(out_json.read_text())
    want = choose_design(g, get_part("zu9eg"), "auto", partition="auto")
    assert doc["estimate"] is True and "not a synthesis" in doc["label"]
    assert doc["part"]["key"] == "zu9eg" and doc["part"]["capacity"]["dsp"] == 2520
    assert doc["fits"] is True and doc["io_type"] == want.io_type and doc["ii_cycles"] == want.ii
    assert doc["reuse"] == {x.node: x.reuse for x in want.layers if x.mults}
    assert [x["node"] for x in doc["layers"]] == [n.name for n in g.nodes]
    assert doc["reuse_sweep"] and doc["roofline"]["percent"] > 0
    for layer in doc["layers"]:
        assert layer["node"] in r.output
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out_png.stat().st_size > 10_000


def test_estimate_explicit_grid_and_errors(exported, tmp_path):
    path, _ = exported("cosmoflow")
    out_json = tmp_path / "grid.json"
    r = CliRunner().invoke(main, ["estimate", str(path), "--part", "vu9p", "--partition", "2x2x2", "--io-type", "stream",
                                  "--json", str(out_json)])
    assert r.exit_code == 0, r.output
    unet, _ = exported("unet3d")  # 8^3: blocks of a 2x2x2 grid save nothing, as compile says too
    r = CliRunner().invoke(main, ["estimate", str(unet), "--partition", "2x2x2"])
    assert r.exit_code == 4 and "saves no on-chip memory" in r.output, r.output
    doc = json.loads(out_json.read_text())
    assert doc["grid"] == [2, 2, 2] and doc["blocks"] == 8 and doc["io_type"] == "io_stream"
    assert doc["executed_macs_per_sample"] >= doc["macs_per_sample"] and doc["cut"]
    r = CliRunner().invoke(main, ["estimate", str(path), "--partition", "2xa"])
    assert r.exit_code == 4 and len(r.output.strip().splitlines()) == 1 and "AxBxC" in r.output
    r = CliRunner().invoke(main, ["estimate", str(path), "--part", "xc7a35t"])
    assert r.exit_code == 4 and "catalogue" in r.output
    jet, _ = exported("jet_mlp_w8a8")
    r = CliRunner().invoke(main, ["estimate", str(jet), "--partition", "2x2x2"])
    assert r.exit_code == 4 and "no spatial segment" in r.output
