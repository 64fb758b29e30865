"""C++ sources and glue templates shipped with Tessera.

Kernels are real ``.h`` files; the small glue files are ``.tpl`` rendered with
:func:`render`, which fails loudly on a missing key.
"""

from __future__ import annotations

from pathlib import Path
from string import Template

ROOT = Path(__file__).resolve().parent


def path(rel: str) -> Path:
    p = ROOT / rel
    if not p.exists():
        raise FileNotFoundError(f"template {rel} is missing from tessera.hls_templates")
    return p


def render(rel: str, **values: object) -> str:
    """Render a ``.tpl`` file; a placeholder without a value raises ``KeyError``."""
    return Template(path(rel).read_text()).substitute({k: str(v) for k, v in values.items()})
