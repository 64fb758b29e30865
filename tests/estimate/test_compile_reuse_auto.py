"""``tessera compile --reuse auto``: the project's per-layer reuse factors are the chooser's."""

from __future__ import annotations

from click.testing import CliRunner

from tessera.cli import main
from tessera.compiler.estimate import choose_reuse
from tessera.compiler.project import Manifest

from .conftest import project_reuse


def test_compile_reuse_auto_uses_the_chooser(exported, tmp_path):
    """CosmoFlow (Tessera's 3D convolution kernels and hls4ml's Dense) in io_stream on the
    ZU9EG: the layers get different factors, each written into its layer's config."""
    path, g = exported("cosmoflow")
    want = choose_reuse(g, "zu9eg", "io_stream")
    assert len(set(want.values())) > 3
    prj = tmp_path / "prj"
    r = CliRunner().invoke(main, ["compile", str(path), "-o", str(prj), "--reuse", "auto", "--part", "zu9eg",
                                  "--io-type", "stream", "--tb-samples", "4"])
    assert r.exit_code == 0, r.output
    got = project_reuse(prj)
    linear = [name for name in got if name.endswith(("_conv", "_dense"))]
    assert [got[n] for n in linear] == [want[n.name] for n in g.nodes if n.name in want]
    assert Manifest.read(prj).options.layer_reuse == want


def test_compile_reuse_takes_an_integer_or_auto(exported, tmp_path):
    path, _ = exported("jet_mlp_w8a8")
    r = CliRunner().invoke(main, ["compile", str(path), "-o", str(tmp_path / "p3"), "--reuse", "4", "--tb-samples", "4"])
    assert r.exit_code == 0, r.output
    assert set(project_reuse(tmp_path / "p3").values()) == {4}
    for bad in ("0", "fast"):
        r = CliRunner().invoke(main, ["compile", str(path), "-o", str(tmp_path / "p_bad"), "--reuse", bad])
        assert r.exit_code == 2 and "--reuse" in r.output
        assert not (tmp_path / "p_bad").exists()
