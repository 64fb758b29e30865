"""Files written whole or not at all: through a temporary sibling renamed at the end, so that
an interrupted write leaves no partial file (used for every record a project keeps beside its
sources: verify.json, synth.json, report.html, the CLI's outputs)."""

from __future__ import annotations

import os
from pathlib import Path


def write_atomically(path: Path, data: bytes | str) -> Path:
    """Write ``data`` (text as UTF-8) to ``path``, its folder created; ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


__all__ = ["write_atomically"]
