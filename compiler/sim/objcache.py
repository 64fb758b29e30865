"""Content-addressed store of the C-simulation build's objects and precompiled headers.

An entry's key is the sha256 of everything that determines it (compiler, flags, the
preprocessed source: :mod:`.build`), so an entry is never stale: a changed source is another
key.  Entries are written to a temporary name and renamed into place (concurrent builds of
the same key are safe), a hit refreshes the entry's time, and the store drops its least
recently used entries when it grows past its limit (never one used in the last ten minutes:
a running build may be reading it).

Where: ``$TESSERA_CACHE/csim`` (default ``~/.cache/tessera/csim``); ``TESSERA_CSIM_CACHE=off``
turns it off (every build compiles every unit, as a first build on a new machine does).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

#: The store's size limit (bytes) before its oldest entries are removed: ``TESSERA_CSIM_CACHE_MB``.
DEFAULT_LIMIT_MB = 2048
#: Entries used (read or written) this recently are never removed.
IN_USE_S = 600.0


def cache_root() -> Path:
    """The project's cache root: ``$TESSERA_CACHE`` or ``~/.cache/tessera``."""
    env = os.environ.get("TESSERA_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "tessera"


class ObjectCache:
    """Files by key under ``root`` (``None``: no store; every lookup misses)."""

    def __init__(self, root: Path | None, limit_bytes: int = DEFAULT_LIMIT_MB << 20):
        self.root = root
        self.limit_bytes = limit_bytes

    @classmethod
    def default(cls) -> "ObjectCache":
        if os.environ.get("TESSERA_CSIM_CACHE", "").lower() in ("0", "off", "no", "false"):
            return cls(None)
        mb = int(os.environ.get("TESSERA_CSIM_CACHE_MB", DEFAULT_LIMIT_MB))
        return cls(cache_root() / "csim", mb << 20)

    @property
    def enabled(self) -> bool:
        return self.root is not None

    def path(self, key: str, suffix: str) -> Path:
        assert self.root is not None
        return self.root / key[:2] / f"{key}{suffix}"

    def get(self, key: str, suffix: str) -> Path | None:
        """The entry, its time refreshed, or None."""
        if self.root is None:
            return None
        p = self.path(key, suffix)
        try:
            os.utime(p)
        except OSError:
            return None
        return p

    def put(self, key: str, suffix: str, built: Path) -> Path:
        """Move the freshly built file ``built`` into the store; returns its place there (or
        ``built`` itself when there is no store)."""
        if self.root is None:
            return built
        dest = self.path(key, suffix)
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}-", dir=dest.parent)
        os.close(fd)
        shutil.move(str(built), tmp)
        os.replace(tmp, dest)
        self.prune()
        return dest

    def evict(self, key: str, suffix: str) -> None:
        """Remove an entry that proved unusable (e.g. a truncated object the linker refused)."""
        if self.root is not None:
            self.path(key, suffix).unlink(missing_ok=True)

    def prune(self, now: float | None = None) -> list[Path]:
        """Remove the least recently used entries while the store is over its limit, never
        one used in the last :data:`IN_USE_S` seconds (a build running now may be reading it:
        the store may stay over its limit until they age)."""
        if self.root is None or not self.root.is_dir():
            return []
        now = time.time() if now is None else now
        entries = []
        for p in self.root.rglob("*"):
            try:
                if p.is_file():
                    st = p.stat()
                    entries.append((st.st_mtime, st.st_size, p))
            except OSError:  # removed meanwhile by another process's prune
                continue
        total = sum(size for _, size, _ in entries)
        removed = []
        for mtime, size, p in sorted(entries, key=lambda e: e[0]):
            if total <= self.limit_bytes or mtime > now - IN_USE_S:
                break
            p.unlink(missing_ok=True)
            total -= size
            removed.append(p)
        return removed


__all__ = ["DEFAULT_LIMIT_MB", "IN_USE_S", "ObjectCache", "cache_root"]
