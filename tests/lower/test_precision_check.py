"""The lowering's guard against hls4ml changing a precision we set."""

from tessera.compiler.lower.hls4ml_lower import _same_precision


def test_layout_changes_are_refused():
    assert not _same_precision("fixed<9,3,TRN,WRAP,0>", "fixed<8,3>")
    assert not _same_precision("ufixed<8,3>", "fixed<8,3>")
    assert not _same_precision("fixed<8,4>", "fixed<8,3>")


def test_requant_modes_must_survive():
    assert not _same_precision("fixed<8,3,TRN,WRAP,0>", "fixed<8,3,RND_CONV,SAT>")
    assert not _same_precision("fixed<8,3,RND_CONV,SAT,0>", "fixed<8,3,RND_CONV,SAT_SYM>")
    assert _same_precision("fixed<8,3,RND_CONV,SAT_SYM,0>", "fixed<8,3,RND_CONV,SAT_SYM>")


def test_exact_by_construction_types_may_change_modes():
    assert _same_precision("fixed<8,3,RND_CONV,SAT,0>", "fixed<8,3,TRN,WRAP>")
    assert _same_precision("fixed<8,3>", "fixed<8,3,TRN,WRAP>")
