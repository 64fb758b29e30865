"""The conformance suite's own bookkeeping (tests/conformance/cases.py, graphs.py,
recurrent.py).  The models verify in ``test_conformance_parallel.py`` and
``test_conformance_stream.py`` (see :mod:`.check`).  ``bench/conformance.py`` runs ``tessera
check`` on every project (a g++ pass per check, several seconds each: not repeated here)."""

from __future__ import annotations

from . import cases
from .check import CASES, verified_params


def test_every_case_cites_its_peer():
    assert len({c.name for c in CASES}) == len(CASES)
    for c in CASES:
        # a peer's test or example, or a pattern of users' deployed models (issue: unseen models)
        assert c.peer.split()[0] in ("hls4ml", "FINN", "Brevitas", "qonnx", "users'"), c.name
        assert set(c.io_types) <= set(cases.BOTH) and c.io_types, c.name


def test_the_default_run_holds_every_case_in_one_io_type_and_both_io_types():
    default = {io: [p.values[0].name for p in verified_params(io) if not any(m.name == "slow" for m in p.marks)]
               for io in cases.BOTH}
    names = [n for io in cases.BOTH for n in default[io]]
    assert sorted(names) == sorted(c.name for c in CASES)
    assert all(default[io] for io in cases.BOTH)
