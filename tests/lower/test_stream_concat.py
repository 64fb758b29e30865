"""A Concat reading a flatten.  A flatten of a map stored channels-last keeps that order (the
consumers that read it, e.g. a dense layer, permute their weights), where the concatenation
kernel joins its inputs as stored: refused in one line in both io types.  In io_stream hls4ml's
stream flatten (``InplaceStreamFlatten``) keeps the words of the map before it, one per
position, where the kernel reads one word of every channel per position: a flatten of several
positions is refused there, exact in io_parallel.  Both once compiled and C-simulated wrong
(two steps of an LSTM's sequence flattened and joined in io_stream: 589 of 1,800 outputs;
two flattened (2, 3, 4) maps joined in io_parallel: 1,953 of 2,880)."""

from __future__ import annotations

import pytest

from tessera.compiler.errors import UnsupportedModelError
from tessera.compiler.lower.hls4ml_lower import HlsOptions
from tessera.compiler.ops import flatten, merge, relu
from tessera.compiler.writer import write_project

from ..csim.test_ops_csim import csim_exact


def _flattened_pair(make_dag, make_type, shape):
    """x ``shape``; cat(flatten(x), flatten(relu(x)))."""
    return make_dag(make_type(6, 2, True, shape), [
        ("f1", "flatten", ["x"], flatten.Attrs()),
        ("r", "relu", ["x"], relu.Attrs()),
        ("f2", "flatten", ["r"], flatten.Attrs()),
        ("cat", "concat", ["f1", "f2"], merge.Attrs()),
    ])


def _refusal(graph, tmp_path, io_type) -> str:
    with pytest.raises(UnsupportedModelError) as exc:
        write_project(graph, None, tmp_path / io_type, HlsOptions(io_type=io_type))
    line = str(exc.value)
    assert "\n" not in line and "node 'cat'" in line
    return line


@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_a_concat_of_flattened_channels_last_maps_is_refused(make_dag, make_type, tmp_path, io_type):
    assert "stored in another order" in _refusal(_flattened_pair(make_dag, make_type, (2, 3, 4)), tmp_path, io_type)


def test_a_concat_of_a_multi_word_flatten_is_refused_in_io_stream(make_dag, make_type, tmp_path):
    line = _refusal(_flattened_pair(make_dag, make_type, (1, 3, 4)), tmp_path, "io_stream")
    assert "12 words" in line and "--io-type parallel" in line


@pytest.mark.csim
def test_the_same_concat_is_exact_in_io_parallel(make_dag, make_type, tmp_path):
    csim_exact(_flattened_pair(make_dag, make_type, (1, 3, 4)), tmp_path, "io_parallel", n=60)


@pytest.mark.csim
def test_a_flatten_of_one_position_is_one_word_in_io_stream(make_dag, make_type, tmp_path):
    csim_exact(_flattened_pair(make_dag, make_type, (2, 1, 1)), tmp_path, "io_stream", n=60)
