"""Tessera's hls4ml extension layers, registered through hls4ml's public extension API.

Each op declares its extension layers (``OpDef.extensions``, :class:`~..ops.extension.Extension`):
here every declaration becomes one hls4ml ``Layer`` subclass, a config and a function
template rendered from the glue files beside its C++ header in ``hls_templates/<folder>/``
(:func:`tessera.hls_templates.render`, which fails on a missing key), and the header as a
backend source.  ``register()`` is idempotent and is called by the lowering before an hls4ml
model is built.
"""

from __future__ import annotations

from hls4ml.backends import get_backend
from hls4ml.backends.template import FunctionCallTemplate, LayerConfigTemplate
from hls4ml.model.attributes import Attribute, TypeAttribute, WeightAttribute
from hls4ml.model.layers import Layer, register_layer

from ...hls_templates import path as template_path
from ...hls_templates import render
from ..ops import OPS
from ..ops.extension import Extension

BACKENDS = ("Vivado", "Vitis")
#: Headers every kernel may include (hls_templates/common/).
COMMON_HEADERS = ("common/nnet_tessera_stream.h", "common/nnet_tessera_rounding.h", "common/nnet_tessera_codes.h")


def extensions() -> dict[str, Extension]:
    """Every op's extension layers, by hls4ml class name."""
    return {ext.layer: ext for op in OPS.values() for ext in op.extensions}


def layer_class(ext: Extension) -> type:
    """The hls4ml ``Layer`` subclass of one declaration."""
    expected = [*(Attribute(a) for a in ext.attributes), *(Attribute(a, value_type=bool) for a in ext.flags),
                *(Attribute(a, value_type=str) for a in ext.texts), *(WeightAttribute(w.name) for w in ext.weights),
                *(TypeAttribute(w.name) for w in ext.weights), *(TypeAttribute(t) for t in ext.types)]

    def initialize(self):
        for t in ext.types:  # hls4ml sets accum_t itself; any other precision attribute from the config
            if t != "accum":
                self._set_type_t(t)
        self.add_output_variable(list(ext.output_shape(self)))
        for w in ext.weights:
            self.add_weights_variable(name=w.name, var_name=w.var, data=w.name)

    return type(ext.layer, (Layer,), {"__doc__": ext.doc, "_expected_attributes": expected, "initialize": initialize})


def _config_template(ext: Extension, layer: type):
    class ConfigTemplate(LayerConfigTemplate):
        def __init__(self):
            super().__init__(layer)

        def format(self, node):
            params = {k: node.get_attr(k) for k in ext.config_keys}
            params = {k: str(v).lower() if isinstance(v, bool) else v for k, v in params.items()}
            params.update(index=node.index, reuse=node.get_attr("reuse_factor", 1))
            if ext.config_types is not None:
                params.update(ext.config_types(node))
            return render(f"{ext.folder}/{ext.prefix}config.tpl", **params)

    ConfigTemplate.__name__ = f"{ext.layer}ConfigTemplate"
    return ConfigTemplate


def _function_template(ext: Extension, layer: type):
    class FunctionTemplate(FunctionCallTemplate):
        def __init__(self):
            super().__init__(layer, include_header=[f"nnet_utils/{ext.header}"])

        def format(self, node):
            params = self._default_function_params(node)
            io = node.model.config.get_config_value("IOType")
            params["form"] = "stream" if io == "io_stream" else "cl"
            for w in ext.weights:
                params[w.key] = node.get_weights(w.name).name
            keys = ["form", "output_t", "config", "output"] + [w.key for w in ext.weights]
            if ext.n_inputs == 1:
                keys += ["input_t", "input"]
            else:
                for i, name in enumerate(node.inputs, start=1):
                    var = node.get_input_variable(name)
                    params[f"input{i}"], params[f"input{i}_t"] = var.name, var.type.name
                    keys += [f"input{i}", f"input{i}_t"]
            return render(f"{ext.folder}/{ext.prefix}function.tpl", **{k: params[k] for k in keys}).strip()

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


__all__ = ["BACKENDS", "COMMON_HEADERS", "extensions", "layer_class", "register"]
