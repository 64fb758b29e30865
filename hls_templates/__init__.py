"""C++ sources and glue templates shipped with Tessera.

Kernels are real ``.h`` files; the small glue files are ``.tpl`` rendered with
:func:`render` from a :class:`Fields` dataclass: one frozen dataclass per template, whose
field names are exactly the template's placeholders.  A placeholder without a field, or a
field no placeholder uses, raises :class:`TemplateFieldsError` naming the template and the
keys.
"""

from __future__ import annotations

import dataclasses
import numbers
from enum import Enum
from pathlib import Path
from string import Template
from typing import ClassVar, Mapping

ROOT = Path(__file__).resolve().parent


class TemplateFieldsError(ValueError):
    """A template's fields are not exactly its placeholders."""


@dataclasses.dataclass(frozen=True)
class Fields:
    """The fields of the template ``template`` (a path in this package): a subclass is a
    frozen dataclass whose field names are that template's placeholders.  Values render as
    C++: ``bool`` as ``true`` / ``false``, an enum as its ``cpp`` name, integers and
    strings as they are."""

    template: ClassVar[str]

    @classmethod
    def build(cls, values: Mapping[str, object]):
        """The fields from ``values`` keyed by field name (a layer's attributes, say);
        :class:`TemplateFieldsError` unless the keys are exactly the fields."""
        mismatch(cls.template, cls.__name__, {f.name for f in dataclasses.fields(cls)}, set(values),
                 ("fields without a value", "values no field takes"))
        return cls(**values)


def path(rel: str) -> Path:
    p = ROOT / rel
    if not p.exists():
        raise FileNotFoundError(f"template {rel} is missing from tessera.hls_templates")
    return p


def placeholders(rel: str) -> set[str]:
    """The placeholders of template ``rel``."""
    template = Template(path(rel).read_text())
    if not template.is_valid():
        raise TemplateFieldsError(f"template {rel} has a malformed placeholder")
    return set(template.get_identifiers())


def mismatch(rel: str, fields_name: str, wanted: set[str], given: set[str], says: tuple[str, str]) -> None:
    """Raise naming ``rel``, ``fields_name`` and the keys unless ``given`` == ``wanted``
    (``says``: what a wanted key without a given one is, and a given key not wanted)."""
    missing, unused = sorted(wanted - given), sorted(given - wanted)
    if missing or unused:
        parts = [f"{say}: {', '.join(keys)}" for say, keys in zip(says, (missing, unused)) if keys]
        raise TemplateFieldsError(f"template {rel} rendered from {fields_name}: {'; '.join(parts)}")


def cpp_text(value: object) -> str:
    """A field's value as the template's C++ text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Enum):
        return value.cpp
    if isinstance(value, (numbers.Integral, str)):
        return str(value)
    raise TypeError(f"a template field holds {type(value).__name__} {value!r} (bool, integer, string or enum)")


def render(fields: Fields) -> str:
    """The template of ``fields`` with each placeholder replaced by its field's C++ text."""
    rel = fields.template
    values = {f.name: getattr(fields, f.name) for f in dataclasses.fields(fields)}
    mismatch(rel, type(fields).__name__, placeholders(rel), set(values),
             ("placeholders without a field", "fields no placeholder uses"))
    return Template(path(rel).read_text()).substitute({k: cpp_text(v) for k, v in values.items()})


__all__ = ["Fields", "ROOT", "TemplateFieldsError", "cpp_text", "path", "placeholders", "render"]
