"""Per-layer reuse factors (``HlsOptions.layer_reuse``) reach every kernel's config: hls4ml's
own layers and Tessera's extension kernels (3D convolution, pooling, recurrent cells)."""

from __future__ import annotations

import pytest

from tessera.compiler.writer import write_project
from tessera.compiler.errors import UnsupportedModelError
from tessera.compiler.lower.hls4ml_lower import HlsOptions

from .conftest import conv3d_chain, project_reuse


def test_layer_reuse_reaches_the_extension_kernels(make_graph, make_type, rng, rnn_builders, tmp_path):
    g = conv3d_chain(make_graph, make_type, rng, size=6, ch=2)
    convs = [n.name for n in g.nodes if n.op == "conv"]
    want = dict(zip(convs, (2, 9, 27)))
    prj = write_project(g, None, tmp_path / "conv3d", HlsOptions(io_type="io_stream", reuse=3, layer_reuse=want),
                        tb_samples=2)
    got = project_reuse(prj)
    layers = [name for name in got if name.endswith("_conv")]
    assert [got[n] for n in layers] == [2, 9, 27]
    assert all(r == 3 for n, r in got.items() if not n.endswith("_conv"))  # the others keep --reuse

    lstm = make_graph(make_type(8, 6, True, (4, 3)), ("lstm", rnn_builders["lstm"](rng, 3, 4)))
    prj = write_project(lstm, None, tmp_path / "lstm", HlsOptions(layer_reuse={lstm.nodes[0].name: 7}), tb_samples=2)
    assert [r for n, r in project_reuse(prj).items() if n.endswith("_lstm")] == [7]


def test_layer_reuse_must_be_positive():
    with pytest.raises(UnsupportedModelError, match="reuse factors must be >= 1"):
        HlsOptions(layer_reuse={"n0_conv": 0})
