"""Exact arithmetic, below the IR: the QONNX rounding modes (:mod:`.rounding`), the one
requantization primitive and its multiply-shift / threshold proofs (:mod:`.requant`), exact
integer contractions and limbs (:mod:`.integer`), and the boxes of spatial positions an op
reads (:mod:`.spans`).  Nothing here knows the IR or any op; ``ir/`` and ``ops/`` import it."""
