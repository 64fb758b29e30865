"""The serial wrapper (``hls_templates/rtl/tessera_serial.v.tpl``): a design whose ports exceed
a package's user IOs is synthesized behind shift registers, one input element and one output
word per clock on the pins.

Element-serial in: the input register is the sample itself (``in_bits`` flip-flops that shift
by one element); out: the output register is loaded from the core and shifts by one word,
``ceil(n_out / n_in)`` elements wide, so a sample's output words never outnumber its input
elements and an output never overtakes the previous one.  What it costs is its register bits
(:attr:`SerialPlan.register_bits`): about one flip-flop per port bit, plus two counters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...hls_templates import Fields, render
from ..rtl.design import RtlDesign

#: The wrapper's module (and file stem).
WRAPPER = "tessera_serial"
#: Pins besides the data: clk, rst, in_valid, out_valid.
CONTROL_PINS = 4


@dataclass(frozen=True)
class SerialFields(Fields):
    """The wrapper's fields (``hls_templates/rtl/tessera_serial.v.tpl``); the expressions whose
    form depends on the sizes (a one-element sample, an unpadded output) are rendered here."""

    template: ClassVar[str] = "rtl/tessera_serial.v.tpl"
    wrapper: str
    top: str
    n_in: int
    in_width: int
    in_bits: int
    in_count_bits: int
    in_last: str
    in_shifted: str
    out_bits: int
    out_word_bits: int
    out_words: int
    out_shift_bits: int
    out_count_bits: int
    out_loaded: str
    out_shifted: str
    out_first: str


@dataclass(frozen=True)
class SerialPlan:
    """The wrapper of a design: input elements of ``in_width`` bits, ``out_words`` output words
    of ``out_word_bits`` bits, and the counters' widths."""

    top: str
    n_in: int
    in_width: int
    out_bits: int
    out_word_bits: int
    out_words: int

    @classmethod
    def of(cls, design: RtlDesign) -> "SerialPlan":
        per_word = -(-design.n_out // design.n_in)  # output elements a word: never more words than input elements
        return cls(design.top, design.n_in, design.in_width, design.out_bits, per_word * design.out_width,
                   -(-design.n_out // per_word))

    @property
    def in_bits(self) -> int:
        return self.n_in * self.in_width

    @property
    def in_count_bits(self) -> int:
        return max(1, (self.n_in - 1).bit_length())

    @property
    def out_shift_bits(self) -> int:
        return self.out_words * self.out_word_bits

    @property
    def out_count_bits(self) -> int:
        return self.out_words.bit_length()

    @property
    def pins(self) -> int:
        """The wrapper's port bits."""
        return self.in_width + self.out_word_bits + CONTROL_PINS

    @property
    def register_bits(self) -> int:
        """Its flip-flops: the input and output shift registers, the counters, the sample pulse."""
        return self.in_bits + self.in_count_bits + 1 + self.out_shift_bits + self.out_count_bits

    def fields(self) -> SerialFields:
        pad = self.out_shift_bits - self.out_bits
        in_shifted = "in_word" if self.n_in == 1 else f"{{in_word, in_shift[{self.in_bits - 1}:{self.in_width}]}}"
        out_shifted = ("out_shift" if self.out_words == 1 else
                       f"{{{self.out_word_bits}'d0, out_shift[{self.out_shift_bits - 1}:{self.out_word_bits}]}}")
        return SerialFields(WRAPPER, self.top, self.n_in, self.in_width, self.in_bits, self.in_count_bits,
                            f"{self.in_count_bits}'d{self.n_in - 1}", in_shifted, self.out_bits, self.out_word_bits,
                            self.out_words, self.out_shift_bits, self.out_count_bits,
                            "core_out" if pad == 0 else f"{{{pad}'d0, core_out}}", out_shifted,
                            f"{self.out_count_bits}'d{self.out_words}")

    def verilog(self) -> str:
        return render(self.fields())

    def line(self) -> str:
        return (f"serial wrapper: {self.in_width} + {self.out_word_bits} data pins ({self.n_in} clocks a sample), "
                f"{self.register_bits:,} register bits")


__all__ = ["CONTROL_PINS", "SerialFields", "SerialPlan", "WRAPPER"]
