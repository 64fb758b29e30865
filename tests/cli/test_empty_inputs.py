"""Arrays of no sample, to every command that reads samples (``emulate --input``, with and
without ``--codes``; ``verify --data``; ``verify --samples 0`` without ``--data``): one line
naming what is empty, exit code 8, no output file written -- never an internal error (once:
``cannot reshape array of size 0`` from the project's layout map)."""

from __future__ import annotations

import numpy as np
import pytest

from tessera.compiler import api
from tessera.compiler.errors import InputDataError

from .test_bad_input import one_line_error, run
from .test_ports import two_by_two


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    from ..conftest import qonnx_mlp

    folder = tmp_path_factory.mktemp("empty")
    model = qonnx_mlp(folder / "m.onnx")
    prj = api.compile_model(model, folder / "prj", api.CompileOptions(tb_samples=4)).project
    return folder, model, prj


@pytest.mark.parametrize("shape", [(0, 6), (0,), (0, 1, 6)])
@pytest.mark.parametrize("codes", [False, True])
def test_emulate_of_no_sample_is_one_line(project, tmp_path, shape, codes):
    _, _, prj = project
    np.save(tmp_path / "x.npy", np.zeros(shape, dtype=np.int64 if codes else np.float32))
    code, text = run("emulate", prj, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy",
                     *(["--codes"] if codes else []))
    line = one_line_error(text)
    assert code == 8 and "x.npy" in line and "no sample" in line, text
    assert not (tmp_path / "y.npy").exists()


def test_verify_on_data_of_no_sample_is_one_line(project, tmp_path):
    _, model, prj = project
    np.save(tmp_path / "d.npy", np.zeros((0, 6), dtype=np.float32))
    code, text = run("verify", model, prj, "--data", tmp_path / "d.npy", "--samples", "4")
    line = one_line_error(text)
    assert code == 8 and "--data" in line and "d.npy" in line and "no sample" in line, text


def test_verify_of_no_sample_at_all_is_one_line(project):
    _, model, prj = project
    code, text = run("verify", model, prj, "--samples", "0")
    line = one_line_error(text)
    assert code == 8 and "--samples 0" in line and "--data" in line, text


def test_the_api_refuses_no_sample_too(project):
    _, model, prj = project
    with pytest.raises(InputDataError, match="no sample") as info:
        api.emulate(prj, np.zeros((0, 6)))
    assert "\n" not in str(info.value)
    with pytest.raises(InputDataError, match="--samples 0") as info:
        api.verify_project(model, prj, api.VerifyOptions(samples=0, user_samples=0))
    assert "\n" not in str(info.value)


def test_one_empty_input_of_several_is_named(tmp_path):
    model = two_by_two(tmp_path / "m.onnx")
    prj = api.compile_model(model, tmp_path / "prj", api.CompileOptions(tb_samples=4)).project
    np.savez(tmp_path / "x.npz", a=np.zeros((3, 6), dtype=np.float32), b=np.zeros((0, 6), dtype=np.float32))
    code, text = run("emulate", prj, "--input", tmp_path / "x.npz", "--output", tmp_path / "y.npz")
    line = one_line_error(text)
    assert code == 8 and "x.npz (b)" in line and "no sample" in line, text
