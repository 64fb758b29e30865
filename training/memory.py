"""Memory per rank against the spatial-parallel goal: a rank of P holds ``1/P`` of the
single-rank figure, up to a factor, plus what every process holds whole.

The goal (docs/training.md, "Memory accounting"): the largest rank's peak ``M_P`` satisfies
``M_P <= factor * M_1 / P + C``, where ``C`` is the memory a rank holds between steps --
parameters, gradients, Adam's two moments (all replicated: every rank holds them whole) and
its input block -- measured, not assumed.  Measured on CUDA as
``torch.cuda.max_memory_allocated`` and ``torch.cuda.memory_allocated`` after a step
(:func:`cuda_memory`); the arithmetic is :func:`memory_goal`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

__all__ = ["GoalRow", "cuda_memory", "memory_goal"]


def cuda_memory(device: torch.device) -> dict[str, int]:
    """This process's CUDA allocator figures on ``device``: the peak allocated, allocated
    now and the peak reserved (bytes)."""
    return {"max_allocated": int(torch.cuda.max_memory_allocated(device)),
            "allocated": int(torch.cuda.memory_allocated(device)),
            "max_reserved": int(torch.cuda.max_memory_reserved(device))}


@dataclass(frozen=True)
class GoalRow:
    """One rank count ``P``: the largest rank's peak against the goal."""

    P: int
    peak: int
    single_over_P: float
    ratio: float
    constant: int
    limit: float
    within_goal: bool
    ratio_without_constant: float

    def to_dict(self) -> dict:
        return asdict(self)


def memory_goal(peaks: dict[int, list[int]], between: dict[int, list[int]], factor: float = 1.15) -> list[GoalRow]:
    """``peaks[P]``: every rank's peak bytes at ``P`` ranks (``P = 1`` required);
    ``between[P]``: every rank's bytes held between steps.  ``C`` is the largest figure
    held between steps at any ``P``.  Per ``P``: ``M_P`` (the largest rank's peak), ``M_1 /
    P``, ``ratio = M_P / (M_1 / P)``, the limit ``factor * M_1 / P + C``, whether ``M_P``
    is within it, and ``(M_P - C) / ((M_1 - C) / P)`` (the ratio of what should divide)."""
    if 1 not in peaks:
        raise ValueError("memory_goal needs the single-rank figure (P = 1)")
    m1 = max(peaks[1])
    const = max(max(v) for v in between.values())
    rows = []
    for p in sorted(peaks):
        mp = max(peaks[p])
        limit = factor * m1 / p + const
        rows.append(GoalRow(p, mp, m1 / p, mp / (m1 / p), const, limit, mp <= limit,
                            (mp - const) / ((m1 - const) / p)))
    return rows
