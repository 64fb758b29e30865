"""What ``verify`` is asked and what it found, as typed values: :class:`VerifyOptions`, the
result of each check (the C-simulation's mismatches, the testbench, the user's own float32
tool, the training framework's outputs, the independent check) and :class:`VerifyReport`,
whose last line is the verdict: ``verified: ...`` only when every check passed, else
``FAILED:`` and each failing check with its count.

Nothing here runs a model (no onnx, no qonnx): the command line reads these types without
loading the executors.  :mod:`.verify` and :mod:`.independent` fill them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    import numpy as np


class Execution(StrEnum):
    """Whether an executor of the user's model ran on the verified samples."""

    RAN = "ran"
    #: no executor runs the model (e.g. a recurrent cell): the report's ``reason`` says why
    NO_EXECUTOR = "no executor"
    #: the executor could not run the user's file: the report's ``reason`` says how it failed
    FAILED_TO_RUN = "failed to run"


@dataclass(frozen=True)
class Difference:
    """One output on which the executor and the exact reference differ (real values)."""

    sample: int
    output: int
    exact: float
    independent: float


@dataclass(frozen=True)
class NodeDifference:
    """The first ONNX node whose output differs from the exact value of the IR value it
    became, on one sample: an element of it (its exact and independent values, and for a
    Quant its pre-rounding value and mode), or the shapes when they differ."""

    node: str
    element: int | None = None
    exact: float | None = None
    independent: float | None = None
    pre_rounding: float | None = None
    rounding_mode: str | None = None
    #: the node's output shape differs: 'shape [..] in the user's model, [..] compiled'
    shape_mismatch: str | None = None

    def describe(self) -> str:
        if self.shape_mismatch is not None:
            return f"'{self.node}' ({self.shape_mismatch})"
        if self.element is not None:
            return (f"'{self.node}' (element {self.element}: exact {self.exact:.9g}, user's model "
                    f"{self.independent:.9g})")
        return f"'{self.node}'"


@dataclass(frozen=True)
class UndecidableSample:
    """A sample whose differing outputs are all a rounding float64 cannot decide."""

    sample: int
    outputs: int
    at: NodeDifference


@dataclass
class IndependentReport:
    """The independent check of one verify run."""

    executor: str | None
    execution: Execution = Execution.RAN
    #: why the executor did not run (``execution`` other than RAN)
    reason: str | None = None
    samples: int = 0
    outputs: int = 0
    equal: int = 0
    #: outputs that differ at a rounding float64 cannot decide (listed in ``undecidable``)
    undecidable_outputs: int = 0
    #: outputs that differ for any other reason: these fail verify
    differing_outputs: int = 0
    first_differences: list[Difference] = field(default_factory=list)
    undecidable: list[UndecidableSample] = field(default_factory=list)
    #: the first ONNX node whose output differs (node by node), on the first failing sample
    first_differing_node: str | None = None
    #: verified samples the executor did not see (random inputs of a recurrent model checked
    #: against the framework's outputs on --data), and why
    unchecked_samples: int = 0
    unchecked_reason: str | None = None

    @property
    def passed(self) -> bool:
        return self.execution is Execution.RAN and self.differing_outputs == 0

    def to_dict(self) -> dict:
        """JSON-ready (enums as their values)."""
        return asdict(self)

    def line(self) -> str:
        """verify's line of the independent check (its second-to-last)."""
        if self.execution is Execution.NO_EXECUTOR:
            return f"independent check: none ({self.reason})"
        if self.execution is Execution.FAILED_TO_RUN:
            return f"independent check: FAILED, the user's model could not be run: {self.reason}"
        if self.differing_outputs:
            where = f"; first differing node: {self.first_differing_node}" if self.first_differing_node else ""
            line = (f"independent check: FAILED, {self.differing_outputs} of {self.outputs} outputs differ from "
                    f"{self.executor}{where}")
        else:
            tail = f"; {self.undecidable_outputs} differ at roundings float64 cannot decide (listed in the report)" \
                if self.undecidable_outputs else ""
            line = f"independent check: {self.equal}/{self.outputs} outputs equal {self.executor}{tail}"
        if self.unchecked_samples:
            line += f"; {self.unchecked_samples} random samples without one ({self.unchecked_reason})"
        return line

    def failure(self) -> str:
        """The check as verify's verdict names it when it fails (or has no executor and one is required)."""
        if self.execution is Execution.NO_EXECUTOR:
            return f"independent check: none ({self.reason})"
        if self.execution is Execution.FAILED_TO_RUN:
            return f"independent check: the user's model could not be run ({self.reason})"
        return f"independent check: {self.differing_outputs} of {self.outputs} outputs differ"


@dataclass(frozen=True)
class Oracle:
    """A caller's executor of the user's model (e.g. brevitas' forward of the trained module,
    for recurrent cells no ONNX executor runs): real inputs ``(N, *shape)`` -> real outputs."""

    name: str
    run: Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class VerifyOptions:
    """What :func:`.verify.verify` checks: ``samples`` random full-range inputs (drawn with ``seed``)
    and the real inputs of ``data``; the training framework's outputs on them (``expected``);
    the user's own float32 tool on the first ``user_samples``; whether a model no independent
    executor runs fails (``require_independent``); a caller's ``oracle`` as that executor."""

    samples: int = 1000
    seed: int = 0
    data: Path | None = None
    expected: Path | None = None
    user_samples: int = 100
    require_independent: bool = False
    oracle: Oracle | None = None


@dataclass(frozen=True)
class Mismatch:
    """A C-simulation output code that differs from the exact reference's."""

    sample: int
    output: int
    expected: int
    got: int


@dataclass(frozen=True)
class Testbench:
    """The project's own g++ testbench on its reference samples."""

    passed: bool
    line: str

    def __str__(self) -> str:
        return f"{'passed' if self.passed else 'FAILED'}: {self.line}"


class Comparison(StrEnum):
    """How the user's float32 tool's outputs are compared with the exact reference."""

    #: the tool's float32 values against the exact reference's values rounded to float32
    FLOAT32 = "float32"
    #: the tool's values read on the output's code grid against the reference's codes (an
    #: accumulator no Quant rounds, whose exact values float32 may not hold)
    CODE_GRID = "code grid"

    def describe(self) -> str:
        return ("the exact reference rounded to float32" if self is Comparison.FLOAT32 else
                "the exact reference's codes (read on the output's code grid)")


@dataclass(frozen=True)
class UserModelReport:
    """How often the user's own float32 tool (qonnx ``execute_onnx``, onnxruntime) agrees with
    the exact reference: a report, not a verdict."""

    execution: Execution
    tool: str | None = None
    #: why the tool did not run (``execution`` other than RAN)
    reason: str | None = None
    comparison: Comparison | None = None
    samples: int = 0
    outputs: int = 0
    differing_outputs: int = 0
    max_abs_difference: float = 0.0

    def line(self) -> str:
        if self.execution is Execution.NO_EXECUTOR:
            return f"user model: not run ({self.reason})"
        if self.execution is Execution.FAILED_TO_RUN:
            return f"user model: not compared ({self.reason})"
        return (f"user model ({self.tool}, float32): {self.outputs - self.differing_outputs}/{self.outputs} outputs "
                f"equal {self.comparison.describe()}")


@dataclass(frozen=True)
class FrameworkReport:
    """The training framework's outputs on the real inputs (``--expected``) against the exact reference."""

    outputs: int
    differing_outputs: int
    max_abs_difference: float

    def line(self) -> str:
        diff = f" (max |difference| {self.max_abs_difference:.3g})" if self.differing_outputs else ""
        return (f"framework outputs (--expected): {self.outputs - self.differing_outputs}/{self.outputs} equal the "
                f"exact reference{diff}")


@dataclass(frozen=True)
class ValueRange:
    """The codes one IR value took on the verified samples (the integer semantics): the
    smallest and the largest."""

    value: str
    lo: int
    hi: int


@dataclass(frozen=True)
class VerifySeconds:
    """Wall-clock seconds of each step of :func:`verify`."""

    frontend: float
    reference: float
    integer_semantics: float
    csim_build: float
    csim_run: float
    testbench: float
    user_model: float
    independent: float


@dataclass
class VerifyReport:
    """Every check of one verify run; :attr:`passed` and :meth:`verdict` read them all."""

    model: str
    project: str
    samples: int
    outputs: int
    mismatches: int
    first_mismatches: list[Mismatch]
    random_samples: int
    data_samples: int
    reference_vs_integer_semantics_mismatches: int
    testbench: Testbench
    #: the exact reference against the user's file run by the independent executor
    independent: IndependentReport
    #: whether a model without an independent executor fails (``require_independent``)
    independent_required: bool
    seconds: VerifySeconds
    #: None when not asked for (``user_samples`` 0)
    user_model: UserModelReport | None = None
    #: the training framework's outputs on the real inputs (``expected``); None without them
    framework: FrameworkReport | None = None
    #: what ran the project: an HLS project's g++ C-simulation, or an RTL project's Verilator
    simulator: str = "C-simulation"
    #: what built the project's testbench
    testbench_tool: str = "g++"
    #: each design input's and layer output's smallest and largest code on the samples
    value_ranges: list[ValueRange] = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-ready: every field, enums as their values."""
        return asdict(self)

    @property
    def independent_passed(self) -> bool:
        if self.independent.execution is Execution.NO_EXECUTOR:
            return not self.independent_required
        return self.independent.passed

    def failures(self) -> list[str]:
        """Each failing check with its count."""
        found = []
        if self.mismatches:
            found.append(f"{self.simulator}: {self.mismatches} of {self.outputs} outputs differ from the exact reference")
        if not self.testbench.passed:
            found.append(f"testbench: {self.testbench.line}")
        if self.reference_vs_integer_semantics_mismatches:
            found.append(f"integer semantics: {self.reference_vs_integer_semantics_mismatches} of {self.outputs} "
                         "outputs differ from the exact reference")
        if not self.independent_passed:
            found.append(self.independent.failure() + (" -- required (--require-independent)"
                                                        if self.independent.execution is Execution.NO_EXECUTOR else ""))
        return found

    @property
    def passed(self) -> bool:
        """Every check: the simulation == reference == integer semantics, the testbench, and
        the independent check."""
        return not self.failures()

    def verdict(self) -> str:
        """The report's last line: ``verified: ...`` only when every check passed, else
        ``FAILED: `` and each failing check."""
        failures = self.failures()
        if failures:
            return f"FAILED: {'; '.join(failures)} ({self.samples} samples)"
        return f"verified: {self.samples} samples, {self.outputs} outputs, 0 mismatches"

    def lines(self) -> list[str]:
        """What ``tessera verify`` prints: the first mismatches, each check, the verdict last."""
        found = [f"mismatch: sample {m.sample} output {m.output}: expected {m.expected} got {m.got}"
                 for m in self.first_mismatches]
        found.append(f"testbench ({self.testbench_tool}): {self.testbench}")
        found += [r.line() for r in (self.user_model, self.framework) if r is not None]
        if self.reference_vs_integer_semantics_mismatches:
            found.append(f"reference vs integer semantics: {self.reference_vs_integer_semantics_mismatches} mismatches")
        return [*found, self.independent.line(), self.verdict()]


__all__ = ["Comparison", "Difference", "Execution", "FrameworkReport", "IndependentReport", "Mismatch", "NodeDifference",
           "Oracle", "Testbench", "UndecidableSample", "UserModelReport", "ValueRange", "VerifyOptions", "VerifyReport",
           "VerifySeconds"]
