"""Fault injection for the distributed trainer's reliability tests (not part of the package).

``torchrun ... tests/training/faults.py ARGS`` runs ``tessera ARGS`` on every rank, with the
fault of ``TESSERA_FAULT_INJECT=KIND:step=K[:rank=R][:attempt=A]`` installed through the
trainer's hooks (:data:`tessera.training.trainer.HOOKS`): rank ``R`` (default 0), on torchrun
attempt ``A`` (default 0, ``TORCHELASTIC_RESTART_COUNT``), during the run's ``K``-th optimizer
step: ``exit`` -- exit at once (``os._exit``, code 86) between forward and backward; ``hang``
-- stay alive there and never answer again; ``checkpoint`` -- write half of the checkpoint
after step ``K`` to its temporary file and ``SIGKILL`` itself before the rename.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

FAULT_ENV = "TESSERA_FAULT_INJECT"
FAULT_EXIT_CODE = 86
KINDS = ("exit", "hang", "checkpoint")


@dataclass(frozen=True)
class Fault:
    kind: str
    step: int
    rank: int = 0
    attempt: int = 0

    def fire(self, path: Path | None = None) -> None:
        print(f"fault injected: {self.kind} at step {self.step} on rank {self.rank} (time {time.time():.3f})",
              file=sys.stderr, flush=True)
        if self.kind == "exit":
            os._exit(FAULT_EXIT_CODE)
        if self.kind == "hang":  # alive, never answering
            while True:
                time.sleep(3600)
        if self.kind == "checkpoint" and path is not None:  # a write cut off half way
            with open(path, "r+b") as fh:
                fh.truncate(max(1, path.stat().st_size // 2))
            os.kill(os.getpid(), signal.SIGKILL)


def parse(spec: str) -> Fault:
    kind, *opts = spec.split(":")
    try:
        fault = Fault(kind, **{k: int(v) for k, v in (o.split("=", 1) for o in opts)})
    except (TypeError, ValueError):
        raise SystemExit(f"{FAULT_ENV}={spec!r}: expected exit|hang|checkpoint:step=K[:rank=R][:attempt=A]") from None
    if kind not in KINDS:
        raise SystemExit(f"{FAULT_ENV}={spec!r}: unknown fault {kind!r} ({', '.join(KINDS)})")
    return fault


def install(fault: Fault, rank: int, attempt: int) -> None:
    """This rank's fault, on this attempt, into the trainer's hooks."""
    from tessera.training.trainer import HOOKS

    if fault.rank != rank or fault.attempt != attempt:
        return
    if fault.kind == "checkpoint":
        HOOKS.checkpoint = lambda step, tmp: fault.fire(tmp) if step == fault.step else None
    else:
        HOOKS.step = lambda step: fault.fire() if step == fault.step else None


if __name__ == "__main__":
    spec = os.environ.get(FAULT_ENV)
    if spec:
        install(parse(spec), int(os.environ.get("RANK", "0")), int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")))
    from tessera.cli import main

    main(sys.argv[1:], prog_name="tessera")
