"""The project manifest (compiler/project.py): a compiled project's tessera.json read into
typed values and written back unchanged, the input / output encodings, and one line naming
the project for a missing, corrupt, older or newer manifest."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest
from click.testing import CliRunner

from tessera.cli import main
from tessera.compiler import api
from tessera.compiler.errors import InputDataError, ProjectError, SimulationError
from tessera.compiler.ir.types import FixedType
from tessera.compiler.lower.hls4ml_lower import HlsOptions, channels_last_perm
from tessera.compiler.ops import IoType, relu
from tessera.compiler.project import FORMAT, MANIFEST, IoEntry, Manifest, PartitionEntry, sha256

from .conftest import full_range, one_op_graph


@pytest.mark.parametrize("scales", [{}, {"act_scale": 0.037, "weight_scale": 0.011}], ids=["power_of_two", "float"])
def test_a_compiled_projects_manifest_round_trips(tmp_path, make_qonnx_mlp, scales):
    model = make_qonnx_mlp(tmp_path / "m.onnx", **scales)
    prj = api.compile_model(model, tmp_path / "prj", api.CompileOptions(io_type="io_stream", tb_samples=4)).project
    written = json.loads((prj / MANIFEST).read_text())
    m = Manifest.read(prj)
    assert m.to_json() == written and Manifest.from_json(m.to_json()) == m
    assert m.format == FORMAT and m.model_sha256 == sha256(model) and m.compiled_from(model) and m.partition is None
    assert m.options.io_type == IoType.STREAM and m.input.shape == (6,) and m.output.shape == (4,)
    assert (m.input_quants[0].input_map is not None) == bool(scales)
    assert [r.node for r in m.layers] == [n.name for n in api.load_model(model).nodes] and m.hls_layers
    assert m.testbench_samples == 4 and m.register_arrays is not None
    part = PartitionEntry("overlap", (2, 1, 1), "v3", {"0123abcd": "kernels/k0", "4567ef01": "kernels/k1"}, "tail",
                          2, 0.125, 4096, 65536)
    with_part = dataclasses.replace(m, partition=part)
    assert Manifest.from_json(json.loads(json.dumps(with_part.to_json()))) == with_part
    assert part.folders() == ["kernels/k0", "kernels/k1", "tail"]


def test_the_io_encodings_are_exact_and_inverse():
    """ONNX-order codes <-> hls4ml's channels-last doubles; off-grid values are refused."""
    shape, ftype = (3, 2, 4), FixedType(8, 3, True)
    io = IoEntry(shape, ftype, ftype.min_code, ftype.max_code, tuple(int(i) for i in channels_last_perm(shape)))
    codes = np.random.default_rng(0).integers(ftype.min_code, ftype.max_code + 1, size=(5, *shape))
    values = io.to_hls(codes)
    assert np.array_equal(values, np.moveaxis(codes, 1, -1).reshape(5, -1) * 2.0 ** -3)
    assert np.array_equal(io.from_hls(values), codes) and np.array_equal(io.real(codes), codes * 2.0 ** -3)
    with pytest.raises(SimulationError, match="off the output type's grid"):
        io.from_hls(values + 2.0 ** -5)
    assert np.array_equal(io.check_codes(codes, "x.npy"), codes)
    with pytest.raises(InputDataError, match=r"x.npy: codes outside the input type's range \[-128, 127\]"):
        io.check_codes(codes * 2, "x.npy")


def _project(tmp_path):
    graph = one_op_graph(full_range(8, 0, True, (4,)), ("relu", relu.Attrs()))
    m = Manifest.of(graph, None, HlsOptions(), {graph.input: np.arange(4), graph.output: np.arange(4)})
    prj = tmp_path / "prj"
    prj.mkdir()
    m.write(prj)
    assert Manifest.read(prj) == m
    return prj, m.to_json()


def _older(raw):
    raw.pop("format")  # format 1 recorded none
    return raw, f"written by tessera format 1; this tessera reads format {FORMAT}: recompile it"


def _newer(raw):
    return {**raw, "format": FORMAT + 1}, f"written by tessera format {FORMAT + 1}; this tessera reads format {FORMAT}"


def _incomplete(raw):
    raw.pop("outputs")
    return raw, f"has a corrupt {MANIFEST} (KeyError: 'outputs')"


@pytest.mark.parametrize("change", [_older, _newer, _incomplete])
def test_another_format_or_a_corrupt_manifest_is_one_line_naming_the_project(tmp_path, change):
    prj, raw = _project(tmp_path)
    data, message = change(raw)
    (prj / MANIFEST).write_text(json.dumps(data))
    with pytest.raises(ProjectError, match=re.escape(message)) as err:
        Manifest.read(prj)
    assert str(prj) in str(err.value) and "\n" not in str(err.value)
    _emulate_fails_in_one_line(tmp_path, prj, message)


def test_a_manifest_that_is_not_json_or_missing_is_one_line(tmp_path):
    prj, _ = _project(tmp_path)
    (prj / MANIFEST).write_text('{"format": 2, "model_file": nul')
    _emulate_fails_in_one_line(tmp_path, prj, f"{prj / MANIFEST} is corrupt (not JSON)")
    (prj / MANIFEST).unlink()
    _emulate_fails_in_one_line(tmp_path, prj, f"{prj} is not a Tessera project (no {MANIFEST}")


def _emulate_fails_in_one_line(tmp_path, prj, message):
    np.save(tmp_path / "x.npy", np.zeros((2, 4)))
    r = CliRunner().invoke(main, ["emulate", str(prj), "--input", str(tmp_path / "x.npy"), "--output",
                                  str(tmp_path / "y.npy")])
    lines = [ln for ln in r.output.strip().splitlines() if ln.strip()]
    assert r.exit_code == ProjectError.exit_code and len(lines) == 1 and "Traceback" not in r.output, r.output
    assert message in " ".join(r.output.split()) and not (tmp_path / "y.npy").exists()
