"""The peers' models (tests/conformance/cases.py, graphs.py) that are refused, each in one
line where its exactness is impossible, and the suite's own bookkeeping.  The models that
verify run in ``test_conformance_parallel.py`` and ``test_conformance_stream.py`` (see
:mod:`.check`).  ``bench/conformance.py`` runs ``tessera check`` on every project (a g++ pass
per check, several seconds each: not repeated here)."""

from __future__ import annotations

import pytest

from tessera.compiler.api import CompileOptions, compile_model
from tessera.compiler.errors import TesseraError

from . import cases
from .check import CASES, REFUSED, models, verified_params  # noqa: F401 - models is a fixture


@pytest.mark.parametrize("case", REFUSED, ids=[c.name for c in REFUSED])
def test_peer_model_is_refused_in_one_line(case, models, tmp_path):  # noqa: F811
    with pytest.raises(TesseraError, match=case.refusal) as info:
        compile_model(models(case), tmp_path / "prj", CompileOptions(input_type=case.input_type))
    assert "\n" not in str(info.value)
    assert not (tmp_path / "prj").exists()


def test_every_case_cites_its_peer():
    assert len({c.name for c in CASES}) == len(CASES)
    for c in CASES:
        assert c.peer.split()[0] in ("hls4ml", "FINN", "Brevitas", "qonnx"), c.name
        assert set(c.io_types) <= set(cases.BOTH) and c.io_types, c.name


def test_the_default_run_holds_every_case_in_one_io_type_and_both_io_types():
    default = {io: [p.values[0].name for p in verified_params(io) if not any(m.name == "slow" for m in p.marks)]
               for io in cases.BOTH}
    names = [n for io in cases.BOTH for n in default[io]]
    assert sorted(names) == sorted(c.name for c in CASES if c.refusal is None)
    assert all(default[io] for io in cases.BOTH)
