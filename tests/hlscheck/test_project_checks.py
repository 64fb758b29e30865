"""``tessera check`` on generated projects: the synthesis branch compiles, the lint is clean,
and the bounded-FIFO C-simulation passes at the declared depths and catches a FIFO that is
too shallow (a skip connection that deadlocks in hardware), naming it."""

from __future__ import annotations

import re

import numpy as np
import pytest
from click.testing import CliRunner

from tessera.cli import main
from tessera.compiler.hlscheck.check import check_project
from tessera.compiler.hlscheck.fifo import bounded_top
from tessera.compiler.lower.hls4ml_lower import HlsOptions
from tessera.compiler.writer import write_project

pytestmark = pytest.mark.csim


@pytest.fixture(scope="module")
def skip_projects(tmp_path_factory):
    """A 2D skip block (conv branch beside a relu branch, joined by Concat and Add)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from conftest import _skip_block, dag_graph, full_range

    g = dag_graph(full_range(8, 3, True, (2, 8, 8)), _skip_block(np.random.default_rng(3), 2, 2))
    root = tmp_path_factory.mktemp("skip")
    return {io: write_project(g, None, root / io, HlsOptions(io_type=io), tb_samples=4)
            for io in ("io_parallel", "io_stream")}


def short_branch(prj) -> tuple[str, str]:
    """The FIFOs of the skip connection's short branch: the relu's input and output."""
    top = next((prj / "firmware").glob("tessera_model.cpp")).read_text()
    m = re.search(r"nnet::relu<[^>]*>\((\w+), (\w+)\)", top)
    assert m, "no relu layer in the top function"
    return m.group(1), m.group(2)


def test_stream_project_passes_every_check(skip_projects):
    rep = check_project(skip_projects["io_stream"])
    assert rep.syntax.ok, rep.syntax.errors
    assert rep.linted and rep.lint == []
    assert rep.fifo.applicable and rep.fifo.ok, rep.fifo.line()
    assert rep.fifo.samples == 2 and len(rep.fifo.peaks) >= 8
    assert all(1 <= p.peak <= p.depth for p in rep.fifo.peaks)
    assert rep.ok


def test_shallow_skip_fifo_deadlocks_and_is_named(skip_projects):
    prj = skip_projects["io_stream"]
    relu_in, relu_out = short_branch(prj)
    rep = check_project(prj, syntax=False, lint=False, depths={relu_in: 1, relu_out: 1})
    assert not rep.ok and not rep.fifo.ok
    assert set(rep.fifo.deadlock) == {f"{relu_in} (depth 1)", f"{relu_out} (depth 1)"}
    assert f"full FIFO {relu_in} (depth 1)" in rep.fifo.line() or f"{relu_in} (depth 1)" in rep.fifo.line()
    # deep enough for the conv branch's lead (two rows of the zero-padded input): no deadlock
    deep = check_project(prj, syntax=False, lint=False, depths={relu_in: 2, relu_out: 30})
    assert deep.fifo.ok, deep.fifo.line()


def test_parallel_project_has_no_fifos_and_compiles_for_synthesis(skip_projects):
    rep = check_project(skip_projects["io_parallel"])
    assert rep.syntax.ok and rep.lint == [] and not rep.fifo.applicable and rep.ok
    assert rep.fifo.line() == "bounded FIFOs: none (io_parallel)"


def test_synthesis_only_error_is_caught(skip_projects, tmp_path):
    """Code only Vitis HLS compiles (the __SYNTHESIS__ side) is compiled by the check."""
    import shutil

    prj = tmp_path / "prj"
    shutil.copytree(skip_projects["io_parallel"], prj)
    top = prj / "firmware" / "tessera_model.cpp"
    top.write_text("#ifdef __SYNTHESIS__\nstatic int tessera_probe = no_such_name_in_synthesis;\n#endif\n" + top.read_text())
    rep = check_project(prj, lint=False, fifo=False)
    assert not rep.syntax.ok and not rep.ok
    assert "tessera_model.cpp:2" in rep.syntax.errors[0] and "no_such_name_in_synthesis" in rep.syntax.errors[0]


def test_bounded_top_rewrites_layers_and_refuses_unknown_fifos(skip_projects):
    src = (skip_projects["io_stream"] / "firmware" / "tessera_model.cpp").read_text()
    top, depths = bounded_top(src)
    calls = len(re.findall(r"^\s*nnet::\w+<.*>\(.*\);", src, flags=re.M)) - src.count("load_weights_from_txt")
    assert top.count("tessera_dataflow.add(") == calls and top.count("tessera_dataflow.run();") == 1
    assert all(f"{n}.tessera_bound({d});" in top for n, d in depths.items())
    from tessera.compiler.errors import ProjectError

    with pytest.raises(ProjectError, match="no FIFO named nope"):
        bounded_top(src, {"nope": 3})


def test_cli_check_exit_codes(skip_projects, tmp_path):
    prj = skip_projects["io_stream"]
    ok = CliRunner().invoke(main, ["check", str(prj), "--no-syntax", "--json", str(tmp_path / "c.json")])
    assert ok.exit_code == 0, ok.output
    assert "no deadlock" in ok.output and (tmp_path / "c.json").is_file()
    relu_in, relu_out = short_branch(prj)
    bad = CliRunner().invoke(main, ["check", str(prj), "--no-syntax", "--no-lint", "--depth", f"{relu_in}=1",
                                    "--depth", f"{relu_out}=1"])
    assert bad.exit_code == 1 and "deadlock" in bad.output and f"{relu_in} (depth 1)" in bad.output
    usage = CliRunner().invoke(main, ["check", str(prj), "--depth", "x=0"])
    assert usage.exit_code == 2


def _copy(skip_projects, tmp_path, io="io_parallel"):
    import shutil

    prj = tmp_path / "prj"
    shutil.copytree(skip_projects[io], prj)
    return prj


def _largest_header(prj):
    return max((prj / "firmware" / "weights").glob("*.h"), key=lambda h: h.stat().st_size)


def _set_token(header, index, value):
    """Replace the index-th value of the header's synthesis initializer."""
    text = header.read_text()
    head, body = text.split("] = {", 1)
    body, tail = body.split("};", 1)
    tokens = body.split(", ")
    tokens[index] = value
    header.write_text(f"{head}] = {{{', '.join(tokens)}}};{tail}")
    return tokens


def test_weights_scan_compares_synthesis_initializers_with_csim_values(skip_projects, tmp_path):
    from tessera.compiler.hlscheck.weights import scalar_types, scan_weights

    prj = _copy(skip_projects, tmp_path)
    rep, arrays = scan_weights(prj)
    assert rep.ok and rep.arrays == len(arrays) == len(list((prj / "firmware" / "weights").glob("*.h")))
    assert rep.values == sum(a.size for a in arrays) > 0 and rep.shortened == ()
    header = _largest_header(prj)
    arr = next(a for a in arrays if a.header.name == header.name)
    t = scalar_types((prj / "firmware" / "defines.h").read_text())[arr.type_name]
    tokens = header.read_text().split("] = {", 1)[1].split("};", 1)[0].split(", ")
    last = len(tokens) - 1
    # a value C-simulation never sees (the .txt keeps the old one), still exact in the type
    other = "0" if tokens[last] != "0" else "1"
    _set_token(header, last, other)
    rep, _ = scan_weights(prj)
    assert not rep.ok and rep.findings == [
        f"{header.name} ({arr.name}): element {last} is {other} in synthesis and {tokens[last]} in C-simulation "
        f"({header.with_suffix('.txt').name})"]
    # a value the type cannot hold
    big = str(2 ** t.ftype.int_bits)
    _set_token(header, last, big)
    rep, _ = scan_weights(prj)
    assert rep.findings == [f"{header.name} ({arr.name}): value {big} is not exact in {arr.type_name}"]
    # one value too few
    text = header.read_text()
    header.write_text(text.replace(f", {big}}};", "};"))
    rep, _ = scan_weights(prj)
    assert rep.findings == [f"{header.name} ({arr.name}): {last} initializer values for {arr.size} elements"]


def test_large_arrays_reach_gxx_shortened_and_are_still_scanned_in_full(skip_projects, tmp_path, monkeypatch):
    """Past FULL_VALUES the syntax pass compiles the largest arrays' first values only (g++
    holds each class-type initializer as a constructor call); the scan still reads their every value."""
    from tessera.compiler.hlscheck import weights

    monkeypatch.setattr(weights, "FULL_VALUES", 0)
    monkeypatch.setattr(weights, "KEPT_VALUES", 4)
    prj = _copy(skip_projects, tmp_path)
    rep = check_project(prj, fifo=False)
    assert rep.ok and rep.syntax.ok and rep.lint == [], rep.lines()
    header = _largest_header(prj)
    arrays = weights.read_arrays(prj)
    arr = next(a for a in arrays if a.header.name == header.name)
    assert arr.count > 4 and arr.name in rep.weights.shortened
    stand = (prj / ".csim" / "synthesis_weights.h").read_text()
    assert f"#define {arr.guard}\n{arr.type_name} {arr.name}[{arr.size}] = {{{', '.join(arr.head)}}};" in stand
    # past the values g++ sees: a mismatch the scan alone catches
    tokens = _set_token(header, arr.count - 1, "not_a_value")
    rep = check_project(prj, lint=False, fifo=False)
    assert rep.syntax.ok and not rep.weights.ok and not rep.ok
    assert rep.weights.findings == [f"{header.name} ({arr.name}): value 'not_a_value' is not a number"]
    assert len(tokens) == arr.count


def test_fifo_processes_get_a_large_stack(tmp_path):
    """Each process of the bounded-FIFO region runs on its own thread with a stack for the
    layers' working arrays (hls4ml's io_stream convs hold a K*K*C x F array per pixel): 64 MB
    of locals, eight times the usual thread default, runs."""
    import subprocess

    from tessera.compiler.sim.build import require_gxx
    from tessera.hls_templates import path as template_path

    (tmp_path / "probe.cpp").write_text(
        f'#include "{template_path("sim/tessera_bounded_stream.h")}"\n'
        "static long touch() { volatile char big[64 << 20]; for (long i = 0; i < (64 << 20); i += 4096) big[i] = 1;\n"
        "  long s = 0; for (long i = 0; i < (64 << 20); i += 4096) s += big[i]; return s; }\n"
        "int main() { long a = 0, b = 0; tessera_fifo::Region r; r.add([&]() { a = touch(); });\n"
        "  r.add([&]() { b = touch(); }); r.run(); return a == (64 << 20) / 4096 && a == b ? 0 : 1; }\n")
    subprocess.run([require_gxx(), "-std=c++17", "-O1", "-pthread", "probe.cpp", "-o", "probe"], cwd=tmp_path,
                   check=True)
    res = subprocess.run(["bash", "-c", "ulimit -s 8192; exec ./probe"], cwd=tmp_path)
    assert res.returncode == 0
