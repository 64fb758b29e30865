"""Template fields: every ``.tpl`` of hls_templates is rendered from one frozen dataclass whose
field names are its placeholders; rendering fails naming the template and the keys on a
placeholder without a field or a field no placeholder uses."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import ClassVar

import pytest

from tessera.compiler.exact.rounding import Rounding
from tessera.compiler.hlscheck.synth import SynthesisView
from tessera.compiler.lower.extensions import extensions
from tessera.compiler.ops.base.extension import Source
from tessera.compiler.ops.base.weights import Codebook
from tessera.compiler.ops.cells import kernel
from tessera.compiler.report.page import ReportPage, ReportSection
from tessera.compiler.rtl.design import TopModule
from tessera.compiler.sim.build import Prelude, TopUnit
from tessera.compiler.sim.shard import ShardUnit
from tessera.compiler.synth.wrapper import SerialFields
from tessera.compiler.synth.yosys import Ecp5Script, XilinxScript
from tessera.compiler.writer import ExactTestbench, PackedEntry
from tessera.hls_templates import ROOT, Fields, TemplateFieldsError, render

#: The templates rendered outside hls4ml's extension layers, by their fields.
OTHER_FIELDS: tuple[type[Fields], ...] = (
    kernel.LstmGateStruct, kernel.CifgGateStruct, kernel.LstmCellBody, kernel.GruGateStruct, kernel.GruCellBody,
    kernel.ConvLstmCellStruct, ExactTestbench, PackedEntry, Prelude, TopUnit, ShardUnit, SynthesisView, TopModule,
    Ecp5Script, XilinxScript, SerialFields, ReportPage, ReportSection)

#: A value of each field type, to render a template with.
SAMPLE = {int: 7, bool: True, str: "text", Rounding: Rounding.HALF_EVEN, Codebook: Codebook.TERNARY}


def every_fields() -> list[type[Fields]]:
    """The field dataclasses of every registered extension layer and every other template."""
    return [cls for ext in extensions().values() for cls in (ext.config, ext.call)] + list(OTHER_FIELDS)


def sample(cls: type[Fields]) -> Fields:
    hints = typing.get_type_hints(cls)
    return cls(**{f.name: SAMPLE[hints[f.name]] for f in dataclasses.fields(cls)})


@dataclass(frozen=True)
class CallWithoutOutput(Fields):
    """crop/function.tpl's fields less ``output``, plus one it has no placeholder for."""

    template: ClassVar[str] = "crop/function.tpl"
    form: str
    input_t: str
    output_t: str
    config: str
    input: str
    stride: int


def test_render_names_the_template_a_missing_and_an_unused_key():
    with pytest.raises(TemplateFieldsError) as e:
        render(CallWithoutOutput("cl", "in_t", "out_t", "config3", "x", 2))
    message = str(e.value)
    assert "crop/function.tpl" in message and "CallWithoutOutput" in message
    assert "placeholders without a field: output" in message
    assert "fields no placeholder uses: stride" in message


def test_build_names_the_keys_that_match_no_field():
    values = {"form": "cl", "input_t": "in_t", "output_t": "out_t", "config": "config3", "input": "x", "output": "y"}
    with pytest.raises(TemplateFieldsError, match="fields without a value: stride; values no field takes: output"):
        CallWithoutOutput.build(values)


def test_values_render_as_cpp():
    fields = kernel.ConvLstmCellStruct(name="enc", has_input=False, weight_kind=Codebook.BINARY, wx_t="ap_int<2>",
                                       cell="    // the cell")
    text = render(fields)
    assert "static const bool has_input = false;" in text
    assert f"static const int weight_kind = nnet::{Codebook.BINARY.cpp};" in text
    assert "struct enc {" in text and "typedef ap_int<2> wx_t;" in text
    with pytest.raises(TypeError, match="float"):
        render(dataclasses.replace(fields, name=0.5))


@pytest.mark.parametrize("cls", every_fields(), ids=lambda cls: f"{cls.__name__}:{cls.template}")
def test_every_template_renders_from_its_fields(cls):
    text = render(sample(cls))
    assert "${" not in text and text.strip()


def test_every_template_has_its_fields():
    """Each .tpl file in hls_templates is the template of a field dataclass (no template is
    rendered from loose keys)."""
    on_disk = {str(p.relative_to(ROOT)) for p in ROOT.rglob("*.tpl")}
    assert on_disk and {cls.template for cls in every_fields()} == on_disk


def test_config_fields_come_from_one_declaration():
    """A convolution's config: its index, reuse factor and multiplier limit computed, its
    weights' and accumulator's type names, every other field a layer attribute hls4ml checks."""
    ext = extensions()["TesseraConv3D"]
    sources = {f.name: ext.source(f) for f in dataclasses.fields(ext.config)}
    assert {k for k, s in sources.items() if s is Source.COMPUTED} == {"index", "reuse_factor", "n_zeros",
                                                                       "multiplier_limit"}
    assert {k for k, s in sources.items() if s is Source.WEIGHT_TYPE} == {"weight_t", "bias_t"}
    assert ext.precisions() == ["accum"]
    assert ("in_depth", int) in ext.config_attributes() and "pad_back" in ext.attributes
