"""Tessera's hls4ml extension layers, registered through hls4ml's public extension API.

Each op declares its extension layers (``OpDef.extensions``, :class:`~..ops.base.extension.Extension`):
here every declaration becomes one hls4ml ``Layer`` subclass (its attributes those its config
fields name, ``ops/base/extension.py``), a config and a function template that fill the
declaration's field dataclasses from the hls4ml layer and render them
(:func:`tessera.hls_templates.render`, which fails on a missing or an unused key), and the
header as a backend source.  ``register()`` is idempotent and is called by the lowering
before an hls4ml model is built.
"""

from __future__ import annotations

from dataclasses import fields
from numbers import Integral

from hls4ml.backends import get_backend
from hls4ml.backends.template import FunctionCallTemplate, LayerConfigTemplate
from hls4ml.model.attributes import Attribute, TypeAttribute, WeightAttribute
from hls4ml.model.layers import Layer, register_layer

from ...hls_templates import path as template_path
from ...hls_templates import render
from ..ops import OPS
from ..ops.base.extension import Computed, Extension, KernelCall, LayerConfig, MergeCall, Source

BACKENDS = ("Vivado", "Vitis")
#: Headers every kernel may include (hls_templates/common/).
COMMON_HEADERS = ("common/nnet_tessera_stream.h", "common/nnet_tessera_rounding.h", "common/nnet_tessera_codes.h")


def extensions() -> dict[str, Extension]:
    """Every op's extension layers, by hls4ml class name."""
    return {ext.layer: ext for op in OPS.values() for ext in op.extensions}


#: hls4ml's value type of an attribute, by its config field's Python type
VALUE_TYPES: dict[type, type] = {int: Integral, bool: bool, str: str}


def layer_class(ext: Extension) -> type:
    """The hls4ml ``Layer`` subclass of one declaration."""
    expected = [*(Attribute(name, value_type=VALUE_TYPES[kind]) for name, kind in ext.config_attributes()),
                *(Attribute(a) for a in ext.attributes), *(WeightAttribute(w.name) for w in ext.weights),
                *(TypeAttribute(w.name) for w in ext.weights), *(TypeAttribute(t) for t in ext.precisions())]

    def initialize(self):
        for t in ext.precisions():  # hls4ml sets accum_t itself; any other precision attribute from the config
            if t != "accum":
                self._set_type_t(t)
        self.add_output_variable(list(ext.output_shape(self)))
        for w in ext.weights:
            self.add_weights_variable(name=w.name, var_name=w.var, data=w.name)

    return type(ext.layer, (Layer,), {"__doc__": ext.doc, "_expected_attributes": expected, "initialize": initialize})


def config_of(ext: Extension, node) -> LayerConfig:
    """The config template's fields of the hls4ml layer ``node``."""
    values = {}
    for f in fields(ext.config):
        source = ext.source(f)
        if source is Source.COMPUTED:
            values[f.name] = f.metadata[Computed].of_layer(node)
        elif source is Source.WEIGHT_TYPE:
            values[f.name] = node.get_weights(f.name[:-2]).type.name
        elif source is Source.PRECISION:
            values[f.name] = node.get_attr(f.name).name
        else:
            values[f.name] = node.get_attr(f.name)
    return ext.config.build(values)


def call_of(ext: Extension, node) -> KernelCall | MergeCall:
    """The function template's fields of the hls4ml layer ``node``: its variables, config
    and weight arrays."""
    io = node.model.config.get_config_value("IOType")
    out = node.get_output_variable()
    values = {"form": "stream" if io == "io_stream" else "cl", "config": f"config{node.index}",
              "output": out.name, "output_t": out.type.name}
    inputs = [node.get_input_variable(name) for name in node.inputs]
    if issubclass(ext.call, MergeCall):
        for i, var in enumerate(inputs, start=1):
            values[f"input{i}"], values[f"input{i}_t"] = var.name, var.type.name
    else:
        values["input"], values["input_t"] = inputs[0].name, inputs[0].type.name
    values.update({w.name: node.get_weights(w.name).name for w in ext.weights})
    return ext.call.build(values)


def _config_template(ext: Extension, layer: type):
    class ConfigTemplate(LayerConfigTemplate):
        def __init__(self):
            super().__init__(layer)

        def format(self, node):
            return render(config_of(ext, node))

    ConfigTemplate.__name__ = f"{ext.layer}ConfigTemplate"
    return ConfigTemplate


def _function_template(ext: Extension, layer: type):
    class FunctionTemplate(FunctionCallTemplate):
        def __init__(self):
            super().__init__(layer, include_header=[f"nnet_utils/{ext.header}"])

        def format(self, node):
            return render(call_of(ext, node)).strip()

    FunctionTemplate.__name__ = f"{ext.layer}FunctionTemplate"
    return FunctionTemplate


_registered = False


def _register_source(backend, rel: str) -> None:
    source = template_path(rel)
    if f"nnet_utils/{source.name}" not in backend.get_custom_source():
        backend.register_source(source)


def register() -> None:
    global _registered
    if _registered:
        return
    for backend_name in BACKENDS:
        for rel in COMMON_HEADERS:
            _register_source(get_backend(backend_name), rel)
    for name, ext in extensions().items():
        layer = layer_class(ext)
        register_layer(name, layer)
        for backend_name in BACKENDS:
            backend = get_backend(backend_name)
            backend.register_template(_config_template(ext, layer))
            backend.register_template(_function_template(ext, layer))
            _register_source(backend, f"{ext.folder}/{ext.header}")
    _registered = True


__all__ = ["BACKENDS", "COMMON_HEADERS", "VALUE_TYPES", "call_of", "config_of", "extensions", "layer_class", "register"]
