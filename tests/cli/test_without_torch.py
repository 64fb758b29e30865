"""The core install has neither torch nor Brevitas (they come with the ``[train]`` extra,
pyproject.toml): ``tessera --help``, ``inspect``, ``compile``, ``emulate``, ``verify``,
``check`` and ``estimate`` run in processes where importing torch or Brevitas fails, and
verify finds 0 mismatches; a command that trains stops in one line naming the extra (exit 5,
docs/cli.md)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tessera.cli.app import TRAIN_EXTRA

EXIT_TOOLCHAIN = 5

#: ``python -c`` this, then the command's arguments: ``tessera`` in a process where every
#: package of the [train] extra is missing, as in a core install.
WITHOUT_TRAIN_EXTRA = f"""
import runpy, sys
from importlib.abc import MetaPathFinder

class NotInstalled(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {TRAIN_EXTRA!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

sys.meta_path.insert(0, NotInstalled())
runpy.run_module("tessera.cli", run_name="__main__", alter_sys=True)
"""


def tessera(*args, cwd) -> subprocess.CompletedProcess:
    """``tessera ARGS`` without the [train] extra."""
    return subprocess.run([sys.executable, "-c", WITHOUT_TRAIN_EXTRA, *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def ok(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    assert "torch" not in res.stderr and "brevitas" not in res.stderr, res.stderr[-3000:]
    return res.stdout


@pytest.mark.csim
def test_core_commands_run_without_torch(tmp_path, make_qonnx_mlp):
    model = make_qonnx_mlp(tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.random.default_rng(0).uniform(-8, 8, size=(16, 6)).astype(np.float32))
    assert "compile" in ok(tessera("--help", cwd=tmp_path))
    assert "total MACs per sample: 24" in ok(tessera("inspect", model, cwd=tmp_path))
    assert "compiled" in ok(tessera("compile", model, "-o", "prj", "--tb-samples", "4", cwd=tmp_path))
    assert "emulated 16 samples" in ok(tessera("emulate", "prj", "--input", "x.npy", "--output", "y.npy", cwd=tmp_path))
    assert np.load(tmp_path / "y.npy").shape == (16, 4)
    lines = ok(tessera("verify", model, "prj", "--samples", "200", "--data", "x.npy", cwd=tmp_path)).splitlines()
    assert lines[-1].startswith("verified: 216 samples") and lines[-1].endswith(" 0 mismatches"), lines
    assert any(ln.startswith("independent check: ") for ln in lines), lines
    assert "ok    lint" in ok(tessera("check", "prj", cwd=tmp_path))
    assert "fits the part" in ok(tessera("estimate", model, cwd=tmp_path))
    ok(tessera("report", "prj", "-o", "page.html", cwd=tmp_path))
    page = (tmp_path / "page.html").read_text()
    assert "verified: 216 samples" in page and "<svg" in page


@pytest.mark.parametrize("args", [("train", "jet_mlp_w4a4", "--epochs", "1", "-o", "t"), ("models",),
                                  ("demo", "-o", "d"), ("plan", "train", "cosmoflow", "--ranks", "4")])
def test_training_commands_name_the_extra_in_one_line(tmp_path, args):
    res = tessera(*args, cwd=tmp_path)
    assert res.returncode == EXIT_TOOLCHAIN, res.stderr[-3000:]
    assert res.stdout == "" and res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith("error: ") and "needs torch" in res.stderr, res.stderr
    assert res.stderr.rstrip().endswith("pip install 'tessera[train]'"), res.stderr
    assert not list(tmp_path.iterdir())  # nothing written
