"""Selections of a recurrent sequence drawn at random (a property test: the random graphs of
tests/reliability/test_oracle_property.py draw no recurrent op): ``Gather`` of one step or
feature and ``Slice`` of steps and features, any bounds and step, on a QuantLSTM's sequence,
batch first ``(N, T, H)`` and time first ``(T, N, H)`` (brevitas' ``batch_first=False``).
Each draw is refused in one line (a negative step, an empty box, an index out of range) or
compiles to an exact reference (== the integer semantics) equal to the file itself, run by the
independent executor with its cell (compiler/independent/cells.py), on every output.  The
C-simulation of such selections is the conformance suite's (tests/conformance/sequences.py)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tessera.compiler.errors import UnsupportedModelError

from ..conformance.cases import _calibrated
from .test_real_constants import _exact_and_independent

STEPS, FEATURES, HIDDEN = 5, 3, 4
DRAWS = 10


@pytest.fixture(scope="module")
def sequences(tmp_path_factory):
    """A calibrated QuantLSTM returning its whole sequence, exported batch first and time first."""
    import brevitas.nn as qnn
    import torch
    from torch import nn

    from tessera.models.train import export_model

    folder, paths = tmp_path_factory.mktemp("sequences"), {}
    for batch_first in (True, False):
        class Whole(nn.Module):
            def __init__(self):
                super().__init__()
                self.inp = qnn.QuantIdentity(return_quant_tensor=False)
                self.lstm = qnn.QuantLSTM(FEATURES, HIDDEN, batch_first=batch_first)

            def forward(self, x):
                return self.lstm(self.inp(x))[0]

        example = torch.randn(1, STEPS, FEATURES) if batch_first else torch.randn(STEPS, 1, FEATURES)
        paths[batch_first] = export_model(_calibrated(Whole(), (STEPS, FEATURES)), example,
                                          folder / f"whole_{batch_first}.onnx")
    return paths


def _draw(rng: np.random.Generator, batch_first: bool) -> tuple[str, list, dict]:
    """A selection of the sequence: its op type, its constant inputs and its attributes."""
    time_axis = 1 if batch_first else 0
    dims = {time_axis: STEPS, 2: HIDDEN}
    axes = [int(a) for a in rng.permutation([time_axis, 2])[:int(rng.integers(1, 3))]]
    if rng.random() < 0.35:
        axis = axes[0]
        return "Gather", [np.array(int(rng.integers(-dims[axis] - 1, dims[axis] + 1)), dtype=np.int64)], {"axis": axis}
    starts = [int(rng.integers(-dims[a] - 1, dims[a] + 1)) for a in axes]
    ends = [int(rng.choice([rng.integers(-dims[a] - 1, dims[a] + 2), 2**63 - 1])) for a in axes]
    steps = [int(rng.choice([1, 1, 2, 3, -1])) for _ in axes]
    return "Slice", [np.array(v, dtype=np.int64) for v in (starts, ends, axes, steps)], {}


def _selected(path, out, op: str, constants: list, attributes: dict):
    """The exported file with the selection after the cell's sequence, as the graph output."""
    m = onnx.load(str(path))
    g = m.graph
    (cell,) = [n for n in g.node if n.op_type == "QuantLSTMCell"]
    sequence = cell.output[0]
    names = [f"selection_{k}" for k in range(len(constants))]
    g.initializer.extend(numpy_helper.from_array(v, name) for v, name in zip(constants, names))
    g.node.append(helper.make_node(op, [sequence, *names], ["selected"], name="selection", **attributes))
    rank = 3 - (op == "Gather" and constants[0].ndim == 0)
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("selected", TensorProto.FLOAT, ["n", *("d" + str(k) for k in range(rank - 1))]))
    onnx.save(m, str(out))
    return out


@pytest.mark.parametrize("batch_first", [True, False], ids=["batch_first", "time_first"])
def test_random_selections_of_a_sequence_are_exact_or_refused(tmp_path, sequences, batch_first):
    rng = np.random.default_rng(51 + batch_first)
    compiled, refused = [], []
    for k in range(DRAWS):
        op, constants, attributes = _draw(rng, batch_first)
        what = f"{op} {[c.tolist() for c in constants]} {attributes}"
        path = _selected(sequences[batch_first], tmp_path / f"s{k}.onnx", op, constants, attributes)
        try:
            g = _exact_and_independent(path, 100)
        except UnsupportedModelError as exc:
            assert str(exc) and "\n" not in str(exc), what
            refused.append(what)
            continue
        assert "lstm" in [n.op for n in g.nodes], what
        compiled.append(what)
    assert len(compiled) >= 3 and refused, (compiled, refused)
