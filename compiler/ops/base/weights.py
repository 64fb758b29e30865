"""Integer weight codes and the codebook they lie on: what the linear ops, the recurrent
cells and the estimator share about stored weights."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from ...ir.types import FixedType


class Codebook(StrEnum):
    """The set of codes a weight matrix lies on, and how the kernels store and multiply it."""

    INT = "int"
    BINARY = "binary"  # {-1, 1}: stored in 1 bit (b -> 2b - 1), products are sign selections
    TERNARY = "ternary"  # {-1, 0, 1}: 2 bits
    QUATERNARY = "quaternary"  # {-2, -1, 1, 2}: 3 bits, a sign selection and one shift

    @property
    def storage_bits(self) -> int | None:
        """Bits per stored code (None: the integer code width)."""
        return {Codebook.BINARY: 1, Codebook.TERNARY: 2, Codebook.QUATERNARY: 3}.get(self)

    @property
    def cpp(self) -> str:
        """The kernels' enumerator (nnet_tessera_rnn.h)."""
        return f"TESSERA_W_{self.name}"



@dataclass(frozen=True, eq=False)
class Weights:
    """Integer weight codes ``(out, in)`` (dense) or ``(out, in, k, k)`` (conv) at ``frac``,
    and the codebook they lie on (``int``, ``binary``, ``ternary``, ``quaternary``)."""

    codes: np.ndarray
    frac: int
    mult: int = 1  # a float scale's odd part, factored out of the codes

    @property
    def kind(self) -> Codebook:
        vals = set(np.unique(self.codes).tolist())
        if vals <= {-1, 1}:
            return Codebook.BINARY
        if vals <= {-1, 0, 1}:
            return Codebook.TERNARY
        if vals <= {-2, -1, 1, 2}:
            return Codebook.QUATERNARY
        return Codebook.INT

    @property
    def ftype(self) -> FixedType:
        return FixedType.for_range(min(int(self.codes.min()), 0), max(int(self.codes.max()), 0), self.frac)


__all__ = ["Codebook", "Weights"]
