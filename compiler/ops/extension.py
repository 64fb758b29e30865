"""How an op declares a Tessera hls4ml extension layer (for what hls4ml lacks).

An op module lists its extension layers in ``OpDef.extensions``: the hls4ml layer's class
name and attributes, its C++ header in ``hls_templates/<folder>/`` and the glue templates
beside it (``<prefix>config.tpl``, ``<prefix>function.tpl``).  The declaration is data, so
importing the ops does not import hls4ml; ``lower/extensions.py`` turns each declaration
into an hls4ml ``Layer`` subclass and registers it, its templates and its header through
hls4ml's public extension API (``register_layer``, ``backend.register_template``,
``backend.register_source``), as hls4ml's own ``test_extensions.py`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

DIMS = ("depth", "height", "width")


@dataclass(frozen=True)
class Weight:
    """A weight array of an extension layer (its data arrives as ``<name>_data``)."""

    name: str
    var: str  # the C++ array, with ``{index}`` for the layer index
    key: str  # the placeholder of the function template that receives the array


@dataclass(frozen=True)
class Extension:
    """One hls4ml extension layer, declared by the op that lowers to it."""

    layer: str  # hls4ml class name, e.g. TesseraConv3D
    doc: str
    folder: str  # in hls_templates/
    header: str
    #: attributes rendered into the config template (a subset of the attributes below)
    config_keys: tuple[str, ...]
    #: the output variable's shape (channels-last), from the hls4ml layer
    output_shape: Callable[[Any], list[int]]
    attributes: tuple[str, ...] = ()  # integer attributes hls4ml checks
    flags: tuple[str, ...] = ()  # boolean attributes
    texts: tuple[str, ...] = ()  # string attributes
    weights: tuple[Weight, ...] = ()
    types: tuple[str, ...] = ()  # precision attributes besides the weights' (e.g. accum)
    prefix: str = ""  # glue templates are <prefix>config.tpl and <prefix>function.tpl
    n_inputs: int = 1
    #: extra config template values from the hls4ml layer (type names)
    config_types: Callable[[Any], dict] | None = None


def attr_shape(*names: str, last: str | None = None) -> Callable[[Any], list[int]]:
    """An output shape made of the layer's attributes ``names`` (and ``last``, the channels)."""
    keys = names + ((last,) if last else ())
    return lambda layer: [layer.get_attr(k) for k in keys]


def out_shape_attr(layer) -> list[int]:
    """The output shape the lowering passed as ``out_shape``."""
    return list(layer.get_attr("out_shape"))


def weight_types(names: tuple[str, ...]) -> Callable[[Any], dict]:
    """``<name>_t`` type names of the layer's weights, for its config template."""
    return lambda layer: {f"{n}_t": layer.get_weights(n).type.name for n in names}


__all__ = ["DIMS", "Extension", "Weight", "attr_shape", "out_shape_attr", "weight_types"]
