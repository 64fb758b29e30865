"""How an op declares a Tessera hls4ml extension layer (for what hls4ml lacks).

An op module lists its extension layers in ``OpDef.extensions``: the hls4ml layer's class
name, its C++ header in ``hls_templates/<folder>/``, its weights, and two dataclasses of
template fields (:class:`tessera.hls_templates.Fields`): ``config`` for its config template
and ``call`` for its function template, whose field names are those templates'
placeholders.  The config dataclass is the single source of the layer's fields: each is

* ``computed(fn)``: computed from the hls4ml layer (its index, reuse factor, multiplier limit);
* ``<name>_t`` for a weight ``<name>``: that weight's C++ type name;
* any other ``<name>_t``: the type name of the layer's precision ``<name>`` (``accum_t``);
* anything else: the layer attribute of that name, of the field's type (``int``, ``bool``,
  ``str``), which the lowering sets and hls4ml checks.

The declaration is data, so importing the ops does not import hls4ml; ``lower/extensions.py``
turns each declaration into an hls4ml ``Layer`` subclass and registers it, its templates and
its header through hls4ml's public extension API (``register_layer``,
``backend.register_template``, ``backend.register_source``), as hls4ml's own
``test_extensions.py`` does.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable

from ....hls_templates import Fields

DIMS = ("depth", "height", "width")


class Source(Enum):
    """Where an extension layer's config field comes from."""

    COMPUTED = "computed from the hls4ml layer"
    WEIGHT_TYPE = "the C++ type name of the weight it is named after"
    PRECISION = "the C++ type name of the precision it is named after"
    ATTRIBUTE = "the layer attribute of the same name"


@dataclass(frozen=True)
class Computed:
    """The function a computed config field is computed with, from the hls4ml layer."""

    of_layer: Callable[[Any], object]


def computed(of_layer: Callable[[Any], object]) -> Any:
    """A config field computed from the hls4ml layer by ``of_layer`` (not a layer attribute)."""
    return dataclasses.field(metadata={Computed: Computed(of_layer)})


def layer_index(layer) -> int:
    return layer.index


def layer_reuse(layer) -> int:
    """The layer's reuse factor (hls4ml's configuration; 1 where it sets none)."""
    return layer.get_attr("reuse_factor", 1)


@dataclass(frozen=True)
class LayerConfig(Fields):
    """The fields of an extension layer's config template (``struct config<index>``)."""

    index: int = computed(layer_index)


@dataclass(frozen=True)
class KernelCall(Fields):
    """The fields of a one-input kernel's function template."""

    form: str  # the kernel's suffix: cl (io_parallel) or stream (io_stream)
    input_t: str
    output_t: str
    config: str
    input: str
    output: str


@dataclass(frozen=True)
class MergeCall(Fields):
    """The fields of a two-input kernel's function template."""

    form: str
    input1_t: str
    input2_t: str
    output_t: str
    config: str
    input1: str
    input2: str
    output: str


@dataclass(frozen=True)
class Weight:
    """A weight array of an extension layer: its data arrives as ``<name>_data``, its C++
    array is passed to the kernel through the function template's placeholder ``<name>``."""

    name: str
    var: str  # the C++ array, with ``{index}`` for the layer index


@dataclass(frozen=True)
class Extension:
    """One hls4ml extension layer, declared by the op that lowers to it."""

    layer: str  # hls4ml class name, e.g. TesseraConv3D
    doc: str
    folder: str  # in hls_templates/
    header: str
    config: type[LayerConfig]
    call: type[KernelCall] | type[MergeCall]
    #: the output variable's shape (channels-last), from the hls4ml layer
    output_shape: Callable[[Any], list[int]]
    #: integer attributes hls4ml checks that no config field renders
    attributes: tuple[str, ...] = ()
    weights: tuple[Weight, ...] = ()

    def source(self, field: dataclasses.Field) -> Source:
        """Where the config field ``field`` comes from (the module's docstring)."""
        if Computed in field.metadata:
            return Source.COMPUTED
        if field.name.endswith("_t"):
            return Source.WEIGHT_TYPE if field.name[:-2] in {w.name for w in self.weights} else Source.PRECISION
        return Source.ATTRIBUTE

    def config_fields(self, source: Source) -> list[dataclasses.Field]:
        return [f for f in dataclasses.fields(self.config) if self.source(f) is source]

    def config_attributes(self) -> list[tuple[str, type]]:
        """(name, Python type) of every layer attribute the config renders."""
        hints = typing.get_type_hints(self.config)
        return [(f.name, hints[f.name]) for f in self.config_fields(Source.ATTRIBUTE)]

    def precisions(self) -> list[str]:
        """The precisions (besides the weights') whose type names the config renders."""
        return [f.name[:-2] for f in self.config_fields(Source.PRECISION)]


def attr_shape(*names: str, last: str | None = None) -> Callable[[Any], list[int]]:
    """An output shape made of the layer's attributes ``names`` (and ``last``, the channels)."""
    keys = names + ((last,) if last else ())
    return lambda layer: [layer.get_attr(k) for k in keys]


def map_shape(sizes: Callable[[Any], list[int]], last: str) -> Callable[[Any], list[int]]:
    """The output shape of a 3D kernel run on a map of ``spatial_dims`` axes (a 1D or 2D map
    as a volume of leading unit axes): ``sizes(layer)`` of the three axes, the unit axes
    dropped, then the channels (attribute ``last``).  hls4ml's own layers after it read the
    map's rank from this shape (a Conv2D's im2col reads (H, W, C))."""
    return lambda layer: [*sizes(layer)[3 - layer.get_attr("spatial_dims"):], layer.get_attr(last)]


def out_shape_attr(layer) -> list[int]:
    """The output shape the lowering passed as ``out_shape``."""
    return list(layer.get_attr("out_shape"))


def elementwise_shape(layer) -> list[int]:
    """An elementwise layer's output shape: its input's.  In io_stream a flatten before it is
    hls4ml's in-place stream flatten (``InplaceStreamFlatten``: the stream of the map before it,
    word for word), so the output takes that map's shape and the stream's words stay the same."""
    shape = list(layer.get_input_variable().shape)
    before = layer.get_input_node()
    if (layer.model.config.get_config_value("IOType") == "io_stream" and len(shape) == 1
            and before.class_name == "Reshape" and len(before.get_input_variable().shape) > 1):
        return list(before.get_input_variable().shape)
    return shape


__all__ = ["DIMS", "Computed", "Extension", "KernelCall", "LayerConfig", "MergeCall", "Source", "Weight", "attr_shape",
           "computed", "elementwise_shape", "layer_index", "layer_reuse", "map_shape", "out_shape_attr"]
