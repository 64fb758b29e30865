"""Bad input: one-line error, documented exit code, no traceback, no half-written project."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tessera.cli import main


def run(*args, env=None):
    res = CliRunner().invoke(main, [str(a) for a in args], env=env)
    return res.exit_code, res.output


def one_line_error(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    assert lines and "Traceback" not in text, text
    assert len(lines) == 1, text
    return lines[0]


def test_missing_file(tmp_path):
    code, text = run("compile", tmp_path / "nope.onnx", "-o", tmp_path / "prj")
    assert code == 3 and "not found" in one_line_error(text)
    assert not (tmp_path / "prj").exists()


def test_truncated_file(tmp_path, make_qonnx_mlp):
    good = make_qonnx_mlp(tmp_path / "m.onnx")
    data = good.read_bytes()
    for cut in (len(data) // 3, len(data) // 2, len(data) - 7):
        bad = tmp_path / f"cut{cut}.onnx"
        bad.write_bytes(data[:cut])
        code, text = run("compile", bad, "-o", tmp_path / f"prj{cut}")
        assert code == 3, text
        assert str(bad.name) in one_line_error(text)
        assert not (tmp_path / f"prj{cut}").exists()


def test_not_onnx(tmp_path):
    bad = tmp_path / "model.onnx"
    bad.write_text("this is a text file, not a protobuf\n" * 10)
    code, text = run("inspect", bad)
    assert code == 3 and "model.onnx" in one_line_error(text)


def test_unsupported_op_names_op_and_node(tmp_path, make_qonnx_mlp):
    m = make_qonnx_mlp(tmp_path / "m.onnx", insert=("Erf", {}))
    code, text = run("compile", m, "-o", tmp_path / "prj")
    line = one_line_error(text)
    assert code == 4 and "Erf" in line and "Erf_bad" in line
    assert not (tmp_path / "prj").exists()


def test_float_activation_scale_is_inspected_with_its_proven_form(tmp_path, make_qonnx_mlp):
    m = make_qonnx_mlp(tmp_path / "m.onnx", act_scale=0.1)
    code, text = run("inspect", m)
    assert code == 0 and "rescale" in text and "multiply-shift" in text


def test_float_weight_scale_is_inspected_with_its_proven_form(tmp_path, make_qonnx_mlp):
    m = make_qonnx_mlp(tmp_path / "m.onnx", weight_scale=0.0123)
    code, text = run("inspect", m)
    assert code == 0 and "rescale" in text and "shift" in text


def test_refuses_to_overwrite(tmp_path, make_qonnx_mlp):
    m = make_qonnx_mlp(tmp_path / "m.onnx")
    (tmp_path / "prj").mkdir()
    (tmp_path / "prj" / "mine.txt").write_text("user data")
    code, text = run("compile", m, "-o", tmp_path / "prj")
    assert code == 6 and "--force" in one_line_error(text)
    assert (tmp_path / "prj" / "mine.txt").read_text() == "user data"


def test_not_a_project(tmp_path, make_qonnx_mlp):
    m = make_qonnx_mlp(tmp_path / "m.onnx")
    (tmp_path / "empty").mkdir()
    code, text = run("verify", m, tmp_path / "empty")
    assert code == 6 and "not a Tessera project" in one_line_error(text)


@pytest.mark.csim
def test_missing_gxx(tmp_path, make_qonnx_mlp):
    m = make_qonnx_mlp(tmp_path / "m.onnx")
    code, text = run("compile", m, "-o", tmp_path / "prj")
    assert code == 0, text
    import numpy as np

    np.save(tmp_path / "x.npy", np.zeros((2, 6), dtype=np.float32))
    bindir = tmp_path / "bin"  # a PATH with python and bash but no g++
    bindir.mkdir()
    for tool in ("bash", "python3"):
        os.symlink(subprocess.check_output(["which", tool], text=True).strip(), bindir / tool)
    env = {"PATH": str(bindir)}
    res = subprocess.run([sys.executable, "-m", "tessera.cli", "emulate", str(tmp_path / "prj"), "--input",
                          str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy")], capture_output=True, text=True,
                         env={**os.environ, **env})
    assert res.returncode == 5, res.stderr
    assert "g++" in one_line_error(res.stderr + res.stdout)
    assert not (tmp_path / "y.npy").exists()


def test_wrong_input_shape(tmp_path, make_qonnx_mlp):
    import numpy as np

    m = make_qonnx_mlp(tmp_path / "m.onnx")
    assert run("compile", m, "-o", tmp_path / "prj")[0] == 0
    np.save(tmp_path / "x.npy", np.zeros((2, 5), dtype=np.float32))
    code, text = run("emulate", tmp_path / "prj", "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy")
    assert code == 8 and "x.npy" in one_line_error(text)


def test_verify_refuses_other_model(tmp_path, make_qonnx_mlp):
    a = make_qonnx_mlp(tmp_path / "a.onnx", seed=1)
    b = make_qonnx_mlp(tmp_path / "b.onnx", seed=2)
    assert run("compile", a, "-o", tmp_path / "prj")[0] == 0
    code, text = run("verify", b, tmp_path / "prj")
    assert code == 6 and "different model" in one_line_error(text)


def test_error_text_with_markup_brackets_is_printed_verbatim():
    """Messages are printed as text: '[/x]' in an error (e.g. a gloo address) is not markup."""
    from tessera.cli.app import handle_errors
    from tessera.compiler.errors import DataError

    def boom(*a, **k):
        raise DataError("could not reach [/tmp/store] at [::1]:29500 [bold]")

    wrapped = handle_errors(boom)
    import click

    @click.command()
    def cmd():
        wrapped()

    res = CliRunner().invoke(cmd, [])
    assert res.exit_code == 9, res.output
    assert "[/tmp/store] at [::1]:29500 [bold]" in one_line_error(res.output)
