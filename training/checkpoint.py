"""What a training checkpoint holds beyond ``state_dict``: brevitas' activation-statistics
state, and the atomic write of the whole training state (a temporary file, fsync, rename)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch

from ..models.runs import atomic_path

__all__ = ["quant_stats", "restore_quant_stats", "write_checkpoint"]


def quant_stats(net: torch.nn.Module) -> dict:
    """Counter, running statistic and raw value of every activation quantizer's
    runtime-statistics scale (brevitas ``ParameterFromRuntimeStatsScaling``).  Its
    ``state_dict`` holds the statistic folded into ``value`` and loading one ends the
    statistics phase, so a resume within the first ``ACT_STATS_STEPS`` steps would take
    another trajectory without these."""
    from brevitas.core.scaling.standalone import ParameterFromRuntimeStatsScaling

    return {name: {"counter": int(m.counter), "buffer": m.buffer.detach().cpu().clone(),
                   "value": m.value.detach().cpu().clone()}
            for name, m in net.named_modules() if isinstance(m, ParameterFromRuntimeStatsScaling)}


def restore_quant_stats(net: torch.nn.Module, stats: dict) -> None:
    modules = dict(net.named_modules())
    with torch.no_grad():
        for name, st in stats.items():
            m = modules[name]
            m.buffer.copy_(st["buffer"])
            m.value.copy_(st["value"])
            m.counter = int(st["counter"])


def write_checkpoint(path: Path, state: dict, written: Callable[[Path], None] | None = None) -> None:
    """``state`` to ``path`` atomically; ``written(tmp)`` is called once the temporary file is
    complete, before the rename (the reliability tests cut writes off there)."""
    with atomic_path(path) as tmp:
        torch.save(state, tmp)
        if written is not None:
            written(tmp)
