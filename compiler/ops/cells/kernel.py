"""The recurrent kernels' template fields (``hls_templates/rnn``): one frozen dataclass per
template, its field names the template's placeholders (:class:`tessera.hls_templates.Fields`).

The lowering of a cell renders its gates (:class:`LstmGateStruct`, :class:`CifgGateStruct`,
:class:`GruGateStruct`) into its body (:class:`LstmCellBody`, :class:`GruCellBody`), the body
(a ConvLSTM's cells, :class:`ConvLstmCellStruct`) into the hls4ml layer's ``cell`` /
``cells`` attribute, and hls4ml renders the layer's config (:class:`LstmConfig`, ...) and
function call (:class:`LstmCall`, ...) from its attributes (``lower/extensions.py``).  Names
of intermediates (``ax``: ``W_x x``, ``ah``: ``W_h h``, ``fc``: ``f * c``, ``ig``: ``i * g``,
``acc``, ``q``, ``act``) are those of the cells' step (``ops/lstm.py``, ``ops/gru.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ....hls_templates import Fields
from ...exact.rounding import Rounding
from ..base.extension import KernelCall, LayerConfig, MergeCall, computed, layer_reuse
from ..base.weights import Codebook
from ..quant import Attrs as QuantAttrs
from . import program as cp
from .hardware import cell_limit, cint


@dataclass(frozen=True)
class Requant:
    """One requantization onto a quantizer in a kernel: ``clamp(R((x * mult + add) >> shift))``
    with ``mult`` 1 and ``add`` 0 for a rounding shift, else the proven multiply-shift of a
    float-scale step (its rounding inside ``add``: mode FLOOR); or, ``by_thresholds``, the
    count of the quantizer's thresholds (at ``thresholds_at`` of the kernel's array) below x."""

    shift: int
    mode: Rounding
    mult: int
    add: int
    requant_t: str  # the C++ type of x * mult + add
    by_thresholds: bool = False
    thresholds_at: int = 0


def requant(A: cp.IntervalArith, name: str, q: QuantAttrs, thresholds: list[int] | None = None) -> Requant:
    """The requantization of the intermediate ``name`` onto ``q``; where no multiply-shift
    fits, its thresholds are appended to ``thresholds`` (the kernel's array)."""
    form = A.forms.get(name)
    if form is None:
        return Requant(A.types[name].frac - q.out.frac, q.rounding, 1, 0, cint(A.types[name]))
    if form.mult is None:
        if thresholds is None:
            raise ValueError(f"{name}: a threshold requantization in a kernel without a threshold array")
        at = len(thresholds)
        thresholds.extend(int(v) for v in form.thr[0])
        return Requant(0, Rounding.FLOOR, 1, 0, cint(A.types[name]), by_thresholds=True, thresholds_at=at)
    return Requant(form.shift, Rounding.FLOOR, form.mult, form.adds[0], cint(A.types[f"{name}_ms"]))


# -- the cells' bodies ----------------------------------------------------------------------


@dataclass(frozen=True)
class LstmGateStruct(Fields):
    """One gate of an LSTM-gated cell: ``acc = ax * ax_factor << ax_shift + ah * ah_factor <<
    ah_shift + b << bias_shift`` requantized; ``scaled``: a float-scale step whose per-row adds
    (the bias folded in) are the bias array."""

    template: ClassVar[str] = "rnn/lstm_gate.tpl"
    name: str
    ax_t: str
    ah_t: str
    acc_t: str
    requant_t: str
    q_t: str
    act_t: str
    ax_shift: int
    ah_shift: int
    bias_shift: int
    ax_factor: int
    ah_factor: int
    scaled: bool
    requant_mult: int
    requant_shift: int
    requant_mode: Rounding
    qmin: int
    qmax: int
    table_offset: int


@dataclass(frozen=True)
class CifgGateStruct(Fields):
    """The coupled forget gate ``1 - i`` (no weights, no table)."""

    template: ClassVar[str] = "rnn/cifg_gate.tpl"
    name: str
    act_t: str


@dataclass(frozen=True)
class LstmCellBody(Fields):
    """Types and constants of one LSTM-gated cell (an LSTM, or a ConvLSTM's cell): the
    products ``fc`` and ``ig`` onto the cell state, their sum onto it (``cell_*``), the
    product of ``o`` and the cell state's tanh onto the hidden state (``hidden_*``;
    ``hidden_rounding``: the hidden state quantizer's own mode), and the gates."""

    template: ClassVar[str] = "rnn/lstm_body.tpl"
    table_entries: int
    h_t: str
    c_t: str
    fc_t: str
    ig_t: str
    fc_q_t: str
    ig_q_t: str
    c_sum_t: str
    c_tanh_t: str
    h_prod_t: str
    fc_requant_t: str
    ig_requant_t: str
    hidden_requant_t: str
    cifg_one: int
    fc_shift: int
    fc_mode: Rounding
    fc_mult: int
    fc_add: int
    ig_shift: int
    ig_mode: Rounding
    ig_mult: int
    ig_add: int
    sum_fc_shift: int
    sum_ig_shift: int
    cell_shift: int
    cell_mode: Rounding
    cell_min: int
    cell_max: int
    hidden_shift: int
    hidden_rounding: Rounding
    hidden_mode: Rounding
    hidden_mult: int
    hidden_add: int
    hidden_min: int
    hidden_max: int
    gates: str


@dataclass(frozen=True)
class GruGateStruct(Fields):
    """One GRU gate: ``gi = W_x x + b_x``, ``gh = W_h h + b_h`` (the n gate's ``gh`` times r),
    their aligned sum requantized (``requant_*``), through the gate's table."""

    template: ClassVar[str] = "rnn/gru_gate.tpl"
    name: str
    ax_t: str
    ah_t: str
    gi_t: str
    gh_t: str
    acc_t: str
    requant_t: str
    q_t: str
    act_t: str
    ax_shift: int
    bx_shift: int
    ah_shift: int
    bh_shift: int
    gi_shift: int
    gh_shift: int
    ax_factor: int
    bx_factor: int
    ah_factor: int
    bh_factor: int
    gi_factor: int
    gh_factor: int
    requant_mult: int
    requant_add: int
    requant_shift: int
    requant_mode: Rounding
    requant_by_thresholds: bool
    requant_thresholds_at: int
    qmin: int
    qmax: int
    table_offset: int


@dataclass(frozen=True)
class GruCellBody(Fields):
    """Types and constants of a GRU: ``h' = (1 - z) * n + z * h`` (``one_minus_z = z_one -
    z * z_factor``) requantized onto the hidden state (``hidden_*``), and the gates."""

    template: ClassVar[str] = "rnn/gru_body.tpl"
    table_entries: int
    thr_entries: int
    h_t: str
    n_rgh_t: str
    z_h_t: str
    one_minus_z_t: str
    zn_t: str
    h_sum_t: str
    hidden_requant_t: str
    z_one: int
    z_factor: int
    sum_zn_shift: int
    sum_zh_shift: int
    sum_zn_factor: int
    sum_zh_factor: int
    hidden_mult: int
    hidden_add: int
    hidden_shift: int
    hidden_mode: Rounding
    hidden_by_thresholds: bool
    hidden_thresholds_at: int
    hidden_min: int
    hidden_max: int
    gates: str


@dataclass(frozen=True)
class ConvLstmCellStruct(Fields):
    """A ConvLSTM cell (``enc``, ``fc``: the encoder, the forecaster) nested in its config."""

    template: ClassVar[str] = "rnn/convlstm_cell.tpl"
    name: str
    has_input: bool
    weight_kind: Codebook
    wx_t: str
    cell: str


# -- the hls4ml layers' configs and calls ---------------------------------------------------


@dataclass(frozen=True)
class SequenceConfig(LayerConfig):
    """What the LSTM's and the GRU's configs share; ``cell``: the rendered body."""

    n_steps: int
    n_in: int
    n_hidden: int
    n_out: int
    reverse: bool
    return_sequences: bool
    weight_kind: str  # nnet::tessera_wkind's enumerator
    reuse_factor: int = computed(layer_reuse)
    multiplier_limit: int = computed(cell_limit("weight_products"))
    wx_t: str
    wh_t: str
    gate_table_t: str
    input_code_type: str
    cell: str


@dataclass(frozen=True)
class LstmConfig(SequenceConfig):
    template: ClassVar[str] = "rnn/lstm_config.tpl"
    cifg: bool
    b_t: str
    cell_table_t: str


@dataclass(frozen=True)
class GruConfig(SequenceConfig):
    template: ClassVar[str] = "rnn/gru_config.tpl"
    bx_t: str
    bh_t: str
    thr_t: str


@dataclass(frozen=True)
class ConvLstmConfig(LayerConfig):
    """The ConvLSTM encoder's config; ``cells``: its rendered cell struct."""

    template: ClassVar[str] = "rnn/convlstm_config.tpl"
    n_steps: int
    n_in: int
    n_hidden: int
    height: int
    width: int
    kernel: int
    steps_out: int
    reuse_factor: int = computed(layer_reuse)
    enc_multiplier_limit: int = computed(cell_limit("enc_products"))
    enc_wx_t: str
    enc_wh_t: str
    enc_b_t: str
    enc_gate_table_t: str
    enc_cell_table_t: str
    input_code_type: str
    cells: str


@dataclass(frozen=True)
class ConvLstmForecasterConfig(ConvLstmConfig):
    """The encoder and forecaster's config: the encoder's last states reach the forecaster's
    quantizers through a shift (``handover_*``)."""

    template: ClassVar[str] = "rnn/convlstm_fc_config.tpl"
    fc_multiplier_limit: int = computed(cell_limit("fc_products"))
    fc_wh_t: str
    fc_b_t: str
    fc_gate_table_t: str
    fc_cell_table_t: str
    handover_hidden_shift: int
    handover_cell_shift: int


@dataclass(frozen=True)
class LstmArrays(Fields):
    """The LSTM kernel's arrays, arguments of each of its function templates."""

    wx: str
    wh: str
    b: str
    gate_table: str
    cell_table: str


@dataclass(frozen=True)
class LstmCall(LstmArrays, KernelCall):
    template: ClassVar[str] = "rnn/lstm_function.tpl"


@dataclass(frozen=True)
class LstmH0Call(LstmArrays, MergeCall):
    """An LSTM whose initial hidden state is its second input (``input2``)."""

    template: ClassVar[str] = "rnn/lstm_h0_function.tpl"


@dataclass(frozen=True)
class LstmStatesCall(LstmH0Call):
    """An LSTM whose initial hidden and cell states are its second and third inputs."""

    template: ClassVar[str] = "rnn/lstm_states_function.tpl"
    input3_t: str
    input3: str


@dataclass(frozen=True)
class GruCall(KernelCall):
    template: ClassVar[str] = "rnn/gru_function.tpl"
    wx: str
    wh: str
    bx: str
    bh: str
    gate_table: str
    thr: str


@dataclass(frozen=True)
class ConvLstmCall(KernelCall):
    template: ClassVar[str] = "rnn/convlstm_function.tpl"
    enc_wx: str
    enc_wh: str
    enc_b: str
    enc_gate_table: str
    enc_cell_table: str


@dataclass(frozen=True)
class ConvLstmForecasterCall(ConvLstmCall):
    template: ClassVar[str] = "rnn/convlstm_fc_function.tpl"
    fc_wh: str
    fc_b: str
    fc_gate_table: str
    fc_cell_table: str


__all__ = ["CifgGateStruct", "ConvLstmCall", "ConvLstmCellStruct", "ConvLstmConfig", "ConvLstmForecasterCall",
           "ConvLstmForecasterConfig", "GruCall", "GruCellBody", "GruConfig", "GruGateStruct", "LstmCall",
           "LstmCellBody", "LstmH0Call", "LstmStatesCall", "LstmConfig", "LstmGateStruct", "Requant", "SequenceConfig", "requant"]
