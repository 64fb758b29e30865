"""Tessera's hls4ml extension layers (what hls4ml lacks), registered through its public API.

Each extension is one hls4ml ``Layer`` subclass, a C++ header in ``hls_templates/<op>/``,
and two glue templates beside it (``config.tpl``, ``function.tpl``) rendered with
:func:`tessera.hls_templates.render`, which fails on a missing key.  ``register()`` is
idempotent and is called by the lowering before an hls4ml model is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from hls4ml.backends import get_backend
from hls4ml.backends.template import FunctionCallTemplate, LayerConfigTemplate
from hls4ml.model.attributes import Attribute, TypeAttribute, WeightAttribute
from hls4ml.model.layers import Layer, register_layer

from ...hls_templates import path as template_path
from ...hls_templates import render

BACKENDS = ("Vivado", "Vitis")
DIMS = ("depth", "height", "width")


class TesseraConv3D(Layer):
    """3D convolution, channels-last; attributes mirror hls4ml's Conv2D plus depth."""

    _expected_attributes = [
        *(Attribute(f"{p}_{d}") for p in ("in", "out", "filt", "stride") for d in DIMS),
        *(Attribute(k) for k in ("n_chan", "n_filt", "pad_front", "pad_back", "pad_top", "pad_bottom", "pad_left", "pad_right")),
        WeightAttribute("weight"),
        WeightAttribute("bias"),
        TypeAttribute("weight"),
        TypeAttribute("bias"),
        TypeAttribute("accum"),
    ]

    def initialize(self):
        self.add_output_variable([self.get_attr(f"out_{d}") for d in DIMS] + [self.get_attr("n_filt")])
        self.add_weights_variable(name="weight", var_name="w{index}", data="weight")
        self.add_weights_variable(name="bias", var_name="b{index}", data="bias")


class TesseraConvTranspose3D(TesseraConv3D):
    """3D transposed convolution, channels-last; same attributes as TesseraConv3D."""


class TesseraAvgPool3D(Layer):
    """Average pooling fused with its Quant: exact window sum, one exact rational rounding."""

    _expected_attributes = [
        *(Attribute(f"{p}_{d}") for p in ("in", "out", "pool", "stride") for d in DIMS),
        *(Attribute(k) for k in ("n_filt", "pad_front", "pad_top", "pad_left", "count_include_pad", "num_shift",
                                 "den_shift", "rounding", "qmin", "qmax", "sum_bits", "out_bits")),
        TypeAttribute("accum"),
    ]

    def initialize(self):
        self.add_output_variable([self.get_attr(f"out_{d}") for d in DIMS] + [self.get_attr("n_filt")])


class TesseraUpsample3D(Layer):
    """Nearest-neighbour upsampling by integer factors, channels-last."""

    _expected_attributes = [*(Attribute(f"{p}_{d}") for p in ("in", "factor") for d in DIMS), Attribute("n_chan")]

    def initialize(self):
        self.add_output_variable([self.get_attr(f"in_{d}") * self.get_attr(f"factor_{d}") for d in DIMS]
                                 + [self.get_attr("n_chan")])


class TesseraCrop3D(Layer):
    """A box of a channels-last tensor (inserted by the spatial partitioner)."""

    _expected_attributes = [*(Attribute(f"{p}_{d}") for p in ("in", "start", "out") for d in DIMS), Attribute("n_chan")]

    def initialize(self):
        self.add_output_variable([self.get_attr(f"out_{d}") for d in DIMS] + [self.get_attr("n_chan")])


class TesseraMaxPool3D(Layer):
    """3D max pooling, channels-last, no padding."""

    _expected_attributes = [
        *(Attribute(f"{p}_{d}") for p in ("in", "out", "pool", "stride") for d in DIMS),
        Attribute("n_filt"),
    ]

    def initialize(self):
        self.add_output_variable([self.get_attr(f"out_{d}") for d in DIMS] + [self.get_attr("n_filt")])


class TesseraConcat(Layer):
    """Channel concatenation of two channels-last tensors of any rank."""

    _expected_attributes = [Attribute("n_pos"), Attribute("n_chan1"), Attribute("n_chan2")]

    def initialize(self):
        self.add_output_variable(list(self.get_attr("out_shape")))


class TesseraAdd(Layer):
    """Elementwise sum of two tensors of the same shape and layout."""

    _expected_attributes = [Attribute("n_elem"), Attribute("n_chan")]

    def initialize(self):
        self.add_output_variable(list(self.get_attr("out_shape")))


class TesseraLUT(Layer):
    """Elementwise lookup table indexed by the input's integer code (table from the compiler)."""

    _expected_attributes = [Attribute("n_in"), Attribute("n_table"), Attribute("table_lo"), Attribute("in_width"),
                            Attribute("in_signed"), WeightAttribute("table"), TypeAttribute("table")]

    def initialize(self):
        self.add_output_variable(list(self.get_input_variable().shape))
        self.add_weights_variable(name="table", var_name="t{index}", data="table")


class _TesseraRecurrent(Layer):
    """A recurrent cell over a whole sequence; integer-code kernel in hls_templates/rnn.
    ``body`` holds the rendered per-cell types and constants (lowering.rnn)."""

    WEIGHTS: tuple[str, ...] = ()

    def initialize(self):
        self.add_output_variable(list(self.get_attr("out_shape")))
        for name in self.WEIGHTS:
            self.add_weights_variable(name=name, var_name=f"{name}{{index}}", data=name)


def _recurrent_attributes(weights: tuple[str, ...], extra: tuple[str, ...]) -> list:
    return [*(Attribute(k) for k in ("n_steps", "n_in", "n_hidden", "n_out")),
            *(Attribute(k, value_type=bool) for k in ("reverse", "return_sequences", *extra)),
            Attribute("wkind", value_type=str), Attribute("body", value_type=str),
            *(WeightAttribute(w) for w in weights), *(TypeAttribute(w) for w in weights)]


class TesseraLSTM(_TesseraRecurrent):
    WEIGHTS = ("wx", "wh", "b", "gate_table", "cell_table")
    _expected_attributes = _recurrent_attributes(WEIGHTS, ("cifg",))


class TesseraGRU(_TesseraRecurrent):
    WEIGHTS = ("wx", "wh", "bx", "bh", "gate_table")
    _expected_attributes = _recurrent_attributes(WEIGHTS, ())


class TesseraConvLSTM(_TesseraRecurrent):
    """ConvLSTM encoder over a frame sequence (channels-last frames)."""

    WEIGHTS = ("enc_wx", "enc_wh", "enc_b", "enc_gate_table", "enc_cell_table")
    _expected_attributes = [*(Attribute(k) for k in ("n_steps", "n_in", "n_hidden", "height", "width", "kernel",
                                                     "steps_out")),
                            Attribute("body", value_type=str), *(WeightAttribute(w) for w in WEIGHTS),
                            *(TypeAttribute(w) for w in WEIGHTS)]


class TesseraConvLSTMForecaster(TesseraConvLSTM):
    """ConvLSTM encoder, then a forecaster cell without input from the encoder's states."""

    WEIGHTS = TesseraConvLSTM.WEIGHTS + ("fc_wh", "fc_b", "fc_gate_table", "fc_cell_table")
    _expected_attributes = [*(Attribute(k) for k in ("n_steps", "n_in", "n_hidden", "height", "width", "kernel",
                                                     "steps_out")),
                            Attribute("body", value_type=str), *(WeightAttribute(w) for w in WEIGHTS),
                            *(TypeAttribute(w) for w in WEIGHTS)]


def _weight_types(names: tuple[str, ...]):
    return lambda node: {f"{n}_t": node.get_weights(n).type.name for n in names}


def _conv_types(node) -> dict:
    return {"accum_t": node.get_attr("accum_t").name, "weight_t": node.get_weights("weight").type.name,
            "bias_t": node.get_weights("bias").type.name}


@dataclass(frozen=True)
class Extension:
    layer: type
    folder: str  # in hls_templates/
    header: str
    config_keys: tuple[str, ...]
    weights: tuple[tuple[str, str], ...] = ()  # (function-template key, hls4ml weight name)
    prefix: str = ""  # glue templates are <prefix>config.tpl and <prefix>function.tpl
    n_inputs: int = 1
    config_types: Callable[[Any], dict] | None = None


EXTENSIONS: dict[str, Extension] = {
    "TesseraConv3D": Extension(
        TesseraConv3D, "conv3d", "nnet_tessera_conv3d.h",
        tuple(f"{p}_{d}" for p in ("in", "out", "filt", "stride") for d in DIMS)
        + ("n_chan", "n_filt", "pad_front", "pad_top", "pad_left"),
        (("w", "weight"), ("b", "bias")),
        config_types=_conv_types,
    ),
    "TesseraConvTranspose3D": Extension(
        TesseraConvTranspose3D, "convtranspose3d", "nnet_tessera_convtranspose3d.h",
        tuple(f"{p}_{d}" for p in ("in", "out", "filt", "stride") for d in DIMS)
        + ("n_chan", "n_filt", "pad_front", "pad_top", "pad_left"),
        (("w", "weight"), ("b", "bias")),
        config_types=_conv_types,
    ),
    "TesseraMaxPool3D": Extension(
        TesseraMaxPool3D, "pool3d", "nnet_tessera_pool3d.h",
        tuple(f"{p}_{d}" for p in ("in", "out", "pool", "stride") for d in DIMS) + ("n_filt",),
    ),
    "TesseraAvgPool3D": Extension(
        TesseraAvgPool3D, "avgpool", "nnet_tessera_avgpool.h",
        tuple(f"{p}_{d}" for p in ("in", "out", "pool", "stride") for d in DIMS)
        + ("n_filt", "pad_front", "pad_top", "pad_left", "count_include_pad", "num_shift", "den_shift", "rounding",
           "qmin", "qmax", "sum_bits", "out_bits"),
        config_types=lambda n: {"accum_t": n.get_attr("accum_t").name},
    ),
    "TesseraUpsample3D": Extension(
        TesseraUpsample3D, "upsample", "nnet_tessera_upsample.h",
        tuple(f"{p}_{d}" for p in ("in", "factor") for d in DIMS) + ("n_chan",),
    ),
    "TesseraCrop3D": Extension(
        TesseraCrop3D, "crop", "nnet_tessera_crop3d.h",
        tuple(f"{p}_{d}" for p in ("in", "start", "out") for d in DIMS) + ("n_chan",),
    ),
    "TesseraConcat": Extension(TesseraConcat, "merge", "nnet_tessera_merge.h", ("n_pos", "n_chan1", "n_chan2"),
                               prefix="concat_", n_inputs=2),
    "TesseraAdd": Extension(TesseraAdd, "merge", "nnet_tessera_merge.h", ("n_elem", "n_chan"), prefix="add_", n_inputs=2),
    "TesseraLUT": Extension(TesseraLUT, "lut", "nnet_tessera_lut.h", ("n_in", "n_table", "table_lo", "in_width", "in_signed"),
                            (("table", "table"),), config_types=lambda n: {"table_t": n.get_weights("table").type.name}),
    "TesseraLSTM": Extension(
        TesseraLSTM, "rnn", "nnet_tessera_rnn.h",
        ("n_steps", "n_in", "n_hidden", "n_out", "reverse", "return_sequences", "cifg", "wkind", "body"),
        tuple((w, w) for w in TesseraLSTM.WEIGHTS), prefix="lstm_", config_types=_weight_types(TesseraLSTM.WEIGHTS)),
    "TesseraGRU": Extension(
        TesseraGRU, "rnn", "nnet_tessera_rnn.h",
        ("n_steps", "n_in", "n_hidden", "n_out", "reverse", "return_sequences", "wkind", "body"),
        tuple((w, w) for w in TesseraGRU.WEIGHTS), prefix="gru_", config_types=_weight_types(TesseraGRU.WEIGHTS)),
    "TesseraConvLSTM": Extension(
        TesseraConvLSTM, "rnn", "nnet_tessera_rnn.h",
        ("n_steps", "n_in", "n_hidden", "height", "width", "kernel", "steps_out", "body"),
        tuple((w, w) for w in TesseraConvLSTM.WEIGHTS), prefix="convlstm_",
        config_types=_weight_types(TesseraConvLSTM.WEIGHTS)),
    "TesseraConvLSTMForecaster": Extension(
        TesseraConvLSTMForecaster, "rnn", "nnet_tessera_rnn.h",
        ("n_steps", "n_in", "n_hidden", "height", "width", "kernel", "steps_out", "body"),
        tuple((w, w) for w in TesseraConvLSTMForecaster.WEIGHTS), prefix="convlstm_fc_",
        config_types=_weight_types(TesseraConvLSTMForecaster.WEIGHTS)),
}


def _config_template(name: str, ext: Extension):
    class ConfigTemplate(LayerConfigTemplate):
        def __init__(self):
            super().__init__(ext.layer)

        def format(self, node):
            params = {k: node.get_attr(k) for k in ext.config_keys}
            params = {k: str(v).lower() if isinstance(v, bool) else v for k, v in params.items()}
            params.update(index=node.index, reuse=node.get_attr("reuse_factor", 1))
            if ext.config_types is not None:
                params.update(ext.config_types(node))
            return render(f"{ext.folder}/{ext.prefix}config.tpl", **params)

    ConfigTemplate.__name__ = f"{name}ConfigTemplate"
    return ConfigTemplate


def _function_template(name: str, ext: Extension):
    class FunctionTemplate(FunctionCallTemplate):
        def __init__(self):
            super().__init__(ext.layer, include_header=[f"nnet_utils/{ext.header}"])

        def format(self, node):
            params = self._default_function_params(node)
            io = node.model.config.get_config_value("IOType")
            params["form"] = "stream" if io == "io_stream" else "cl"
            for key, weight in ext.weights:
                params[key] = node.get_weights(weight).name
            keys = ["form", "output_t", "config", "output"] + [key for key, _ in ext.weights]
            if ext.n_inputs == 1:
                keys += ["input_t", "input"]
            else:
                for i, name in enumerate(node.inputs, start=1):
                    var = node.get_input_variable(name)
                    params[f"input{i}"], params[f"input{i}_t"] = var.name, var.type.name
                    keys += [f"input{i}", f"input{i}_t"]
            return render(f"{ext.folder}/{ext.prefix}function.tpl", **{k: params[k] for k in keys}).strip()

    FunctionTemplate.__name__ = f"{name}FunctionTemplate"
    return FunctionTemplate


_registered = False


def register() -> None:
    global _registered
    if _registered:
        return
    common = template_path("common/nnet_tessera_stream.h")
    for backend_name in BACKENDS:
        backend = get_backend(backend_name)
        if f"nnet_utils/{common.name}" not in backend.get_custom_source():
            backend.register_source(common)
    for name, ext in EXTENSIONS.items():
        register_layer(name, ext.layer)
        for backend_name in BACKENDS:
            backend = get_backend(backend_name)
            backend.register_template(_config_template(name, ext))
            backend.register_template(_function_template(name, ext))
            source = template_path(f"{ext.folder}/{ext.header}")
            if f"nnet_utils/{source.name}" not in backend.get_custom_source():
                backend.register_source(source)
    _registered = True
