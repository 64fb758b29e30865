"""Every command, every bad argument: each path a command reads or writes, given as a missing
path, an empty file, a folder instead of a file, garbage bytes, the wrong kind of file or an
interrupted project, fails in one line that names it, with its documented exit code (docs/cli.md),
never as an internal error, and leaves nothing written."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tessera.cli import main

#: The documented exit codes (docs/cli.md) of each kind of argument.
EXIT_USAGE, EXIT_MODEL, EXIT_PROJECT, EXIT_INPUT = 2, 3, 6, 8
#: Bad files in the work folder: a path that does not exist, an empty file, a folder, garbage bytes.
BAD_FILES = ("missing", "empty", "folder", "garbage")
#: Outputs a failing command must not leave behind.
OUTPUTS = ("out_prj", "y.npy", "report.json", "check.json", "estimate.json", "estimate.png")


@pytest.fixture(scope="module")
def work(tmp_path_factory, make_qonnx_mlp):
    """A model, a compiled project, an input array, bad files and interrupted projects."""
    w = tmp_path_factory.mktemp("bad_arguments")
    make_qonnx_mlp(w / "m.onnx")
    r = CliRunner().invoke(main, ["compile", str(w / "m.onnx"), "-o", str(w / "prj"), "--tb-samples", "4"])
    assert r.exit_code == 0, r.output
    np.save(w / "x.npy", np.zeros((3, 6), dtype=np.float32))
    (w / "empty").write_bytes(b"")
    (w / "folder").mkdir()
    (w / "garbage").write_bytes(bytes(range(256)) * 8)
    # what a compile killed, or a folder copied in part, leaves
    shutil.copytree(w / "prj", w / "prj_no_manifest")
    (w / "prj_no_manifest" / "tessera.json").unlink()
    shutil.copytree(w / "prj", w / "prj_cut_manifest")
    manifest = w / "prj_cut_manifest" / "tessera.json"
    manifest.write_text(manifest.read_text()[:300])
    shutil.copytree(w / "prj", w / "prj_no_firmware")
    shutil.rmtree(w / "prj_no_firmware" / "firmware")
    return w


@dataclass(frozen=True)
class Case:
    """A command line with one bad argument: ``{bad}`` is the bad path, ``{w}`` the work folder."""

    args: tuple[str, ...]
    bad: str
    exit_code: int
    #: what the error line must name: the bad path, or the option
    names: str = "{bad}"

    def run(self, w: Path):
        bad = str(w / self.bad)
        args = [a.format(w=w, bad=bad) for a in self.args]
        res = CliRunner().invoke(main, args)
        return res, self.names.format(bad=bad)


MODEL_COMMANDS = (("compile", "{bad}", "-o", "{w}/out_prj"), ("inspect", "{bad}"),
                  ("estimate", "{bad}", "--json", "{w}/estimate.json", "--plot", "{w}/estimate.png"),
                  ("verify", "{bad}", "{w}/prj", "--samples", "2", "--report", "{w}/report.json"))
PROJECT_COMMANDS = (("emulate", "{bad}", "--input", "{w}/x.npy", "--output", "{w}/y.npy"),
                    ("verify", "{w}/m.onnx", "{bad}", "--samples", "2", "--report", "{w}/report.json"),
                    ("check", "{bad}", "--no-fifo", "--json", "{w}/check.json"))
ARRAY_COMMANDS = (("emulate", "{w}/prj", "--input", "{bad}", "--output", "{w}/y.npy"),
                  ("verify", "{w}/m.onnx", "{w}/prj", "--samples", "2", "--data", "{bad}", "--report", "{w}/report.json"),
                  ("verify", "{w}/m.onnx", "{w}/prj", "--samples", "2", "--data", "{w}/x.npy", "--expected", "{bad}",
                   "--report", "{w}/report.json"))
OUTPUT_CASES = (Case(("compile", "{w}/m.onnx", "-o", "{bad}/out_prj"), "garbage", EXIT_USAGE, "--output"),
                Case(("emulate", "{w}/prj", "--input", "{w}/x.npy", "--output", "{bad}"), "folder", EXIT_USAGE, "--output"),
                Case(("emulate", "{w}/prj", "--input", "{w}/x.npy", "--output", "{bad}/y.npy"), "garbage", EXIT_USAGE,
                     "--output"),
                Case(("verify", "{w}/m.onnx", "{w}/prj", "--report", "{bad}"), "folder", EXIT_USAGE, "--report"),
                Case(("check", "{w}/prj", "--json", "{bad}"), "folder", EXIT_USAGE, "--json"),
                Case(("estimate", "{w}/m.onnx", "--json", "{bad}"), "folder", EXIT_USAGE, "--json"),
                Case(("estimate", "{w}/m.onnx", "--plot", "{bad}"), "folder", EXIT_USAGE, "--plot"))
CASES = [
    *(Case(cmd, bad, EXIT_MODEL) for cmd in MODEL_COMMANDS for bad in (*BAD_FILES, "x.npy")),
    *(Case(cmd, bad, EXIT_PROJECT) for cmd in PROJECT_COMMANDS
      for bad in (*BAD_FILES, "m.onnx", "prj_no_manifest", "prj_cut_manifest", "prj_no_firmware")),
    *(Case(cmd, bad, EXIT_INPUT) for cmd in ARRAY_COMMANDS for bad in (*BAD_FILES, "m.onnx")),
    *OUTPUT_CASES,
]


def case_id(case: Case) -> str:
    """command-argument-bad file, e.g. ``verify---data-empty``."""
    i = next(k for k, a in enumerate(case.args) if "{bad}" in a)
    where = case.args[i - 1] if case.args[i - 1].startswith("-") else f"arg{i}"
    return f"{case.args[0]}-{where}-{case.bad}"


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_a_bad_argument_is_one_line_naming_it(work, case):
    res, named = case.run(work)
    lines = [ln for ln in res.output.strip().splitlines() if ln.strip()]
    assert "Traceback" not in res.output and "internal error" not in res.output, res.output
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], res.output
    assert res.exit_code == case.exit_code, res.output
    assert not any((work / name).exists() for name in OUTPUTS), [n for n in OUTPUTS if (work / n).exists()]
