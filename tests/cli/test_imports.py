"""Commands import what they use: ``tessera --help`` loads no command module, ``tessera
emulate`` none of the model tools (onnx, qonnx, hls4ml, torch), and every command is in the
group's table.  Read from ``python -X importtime`` (which modules, never how long)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import numpy as np
import pytest

from tessera.cli.app import COMMANDS, main

#: What a command that only runs a compiled project needs none of.
MODEL_TOOLS = ("onnx", "onnxruntime", "qonnx", "hls4ml", "torch", "brevitas", "tessera.compiler.frontend",
               "tessera.compiler.writer", "tessera.compiler.verify")


def imported(*args: str, cwd=None) -> set[str]:
    """The modules ``python -m tessera.cli ARGS`` imports (it must succeed)."""
    res = subprocess.run([sys.executable, "-X", "importtime", "-m", "tessera.cli", *args], capture_output=True,
                         text=True, cwd=cwd)
    assert res.returncode == 0, res.stderr[-2000:]
    return {ln.split("|")[-1].strip() for ln in res.stderr.splitlines() if ln.startswith("import time:")}


def test_every_command_is_in_the_table():
    for module in {entry.module for entry in COMMANDS.values()}:
        importlib.import_module(f"tessera.cli.{module}")
    assert set(main.commands) == set(COMMANDS)


def test_help_loads_no_command_module():
    found = imported("--help")
    assert "tessera.cli.app" in found
    assert not {m for m in found if m.startswith("tessera.cli.") and m != "tessera.cli.app"}, found
    assert not found & {"numpy", "tessera.compiler.api", *MODEL_TOOLS}, found


@pytest.mark.csim
def test_emulate_loads_no_model_tool(tmp_path, make_qonnx_mlp):
    from tessera.compiler import api

    model = make_qonnx_mlp(tmp_path / "m.onnx")
    prj = api.compile_model(model, tmp_path / "prj", api.CompileOptions(tb_samples=4)).project
    np.save(tmp_path / "x.npy", np.zeros((3, 6), dtype=np.float32))
    found = imported("emulate", str(prj), "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy"))
    assert "tessera.compiler.sim.csim" in found and (tmp_path / "y.npy").is_file()
    assert not {m for m in found if m.split(".")[0] in MODEL_TOOLS or m.startswith(MODEL_TOOLS)}, \
        sorted(m for m in found if m.startswith(MODEL_TOOLS))
