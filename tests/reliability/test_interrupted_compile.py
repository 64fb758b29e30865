"""An interrupted compile never leaves a project that looks complete (docs/reliability.md).

A real ``tessera compile`` process is killed (SIGKILL: no clean-up runs) at several moments
while it writes its temporary folder, and interrupted with SIGINT (Ctrl-C).  Afterwards the
output folder does not exist; the next compile removes the dead process's temporary folder
and produces a project that verifies."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tessera.cli import main


def _start(model: Path, out: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # many testbench samples: the write phase lasts long enough to be hit at several moments
    # SIGINT at its default: a test runner started in the background inherits it ignored, and
    # Python then never raises KeyboardInterrupt (what Ctrl-C in a terminal does)
    return subprocess.Popen([sys.executable, "-m", "tessera.cli", "compile", str(model), "-o", str(out),
                             "--tb-samples", "20000"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_for_tmp(proc: subprocess.Popen, out: Path, timeout: float = 120.0) -> Path:
    t0 = time.monotonic()
    pattern = f".{out.name}.tessera-tmp-{proc.pid}"
    while time.monotonic() - t0 < timeout:
        tmp = out.parent / pattern
        if tmp.exists():
            return tmp
        if proc.poll() is not None:
            pytest.fail(f"compile finished before its temporary folder was seen: {proc.stdout.read().decode()[-500:]}")
        time.sleep(0.002)
    proc.kill()
    pytest.fail("no temporary folder appeared")


def test_sigkill_mid_write_leaves_no_project(tmp_path, make_qonnx_mlp):
    model = make_qonnx_mlp(tmp_path / "m.onnx")
    out = tmp_path / "prj"
    killed = []
    for delay in (0.0, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32):
        proc = _start(model, out)
        tmp = _wait_for_tmp(proc, out)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        if out.exists():  # renamed before the signal landed: then it is the complete project
            assert (out / "tessera.json").is_file() and (out / "tb_data" / "tessera_expected_codes.txt").is_file()
            assert not tmp.exists()
            shutil.rmtree(out)
            continue
        assert proc.returncode == -signal.SIGKILL
        assert tmp.exists()  # the dead process's partial work, under a hidden temporary name
        killed.append(tmp)
    assert len(killed) >= 3, "the kills did not land while the project was being written"
    code = CliRunner().invoke(main, ["compile", str(model), "-o", str(out), "--tb-samples", "16"])
    assert code.exit_code == 0, code.output
    assert not any(t.exists() for t in killed), "the next compile did not remove the stale temporary folders"
    r = CliRunner().invoke(main, ["verify", str(model), str(out), "--samples", "40"])
    assert r.exit_code == 0 and "0 mismatches" in r.output, r.output


def test_ctrl_c_cleans_up(tmp_path, make_qonnx_mlp):
    model = make_qonnx_mlp(tmp_path / "m.onnx")
    out = tmp_path / "prj"
    interrupted = 0
    for delay in (0.0, 0.0, 0.0, 0.002, 0.005, 0.01):
        proc = _start(model, out)
        tmp = _wait_for_tmp(proc, out)
        # frozen while it writes, Ctrl-C queued, then thawed: the interrupt lands mid-write
        # however fast this machine writes the project
        proc.send_signal(signal.SIGSTOP)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGCONT)
        text = proc.communicate(timeout=60)[0].decode()
        if out.exists():  # finished first
            assert proc.returncode == 0 and (out / "tessera.json").is_file()
            shutil.rmtree(out)
            continue
        assert proc.returncode == 130, text
        assert "Traceback" not in text and "interrupted" in text.lower(), text
        assert not tmp.exists(), "Ctrl-C left the temporary folder"
        interrupted += 1
    assert interrupted >= 2


def test_live_compiles_temporary_folder_is_left_alone(tmp_path):
    """Stale-folder clean-up only touches folders of processes that are gone."""
    from tessera.compiler.writer import remove_stale_tmp

    out = tmp_path / "prj"
    live = tmp_path / f".prj.tessera-tmp-{os.getpid()}"
    dead_proc = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_proc.wait()
    dead = tmp_path / f".prj.tessera-tmp-{dead_proc.pid}"
    other = tmp_path / f".other.tessera-tmp-{dead_proc.pid}"
    for d in (live, dead, other):
        d.mkdir()
    assert remove_stale_tmp(out) == [dead]
    assert live.exists() and other.exists() and not dead.exists()


def test_force_replaces_and_refusal_keeps(tmp_path, make_qonnx_mlp):
    """Without --force a non-empty folder (ours or not) is left untouched (exit 6); with it,
    the folder is replaced by the complete project in one rename."""
    model = make_qonnx_mlp(tmp_path / "m.onnx")
    out = tmp_path / "prj"
    out.mkdir()
    (out / "notes.txt").write_text("user data")
    r = CliRunner().invoke(main, ["compile", str(model), "-o", str(out)])
    assert r.exit_code == 6 and (out / "notes.txt").read_text() == "user data"
    r = CliRunner().invoke(main, ["compile", str(model), "-o", str(out), "--force"])
    assert r.exit_code == 0, r.output
    assert not (out / "notes.txt").exists() and (out / "tessera.json").is_file()
    r = CliRunner().invoke(main, ["compile", str(model), "-o", str(out)])  # our own project: still refused
    assert r.exit_code == 6 and (out / "tessera.json").is_file()
