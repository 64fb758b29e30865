"""``tessera synth``: an RTL project synthesized by Yosys for a target (and, on ECP5, placed and
routed by nextpnr), its resources and Fmax as a typed :class:`SynthResult`, kept in
``PRJ/synth.json`` (one result per target, :class:`SynthReport`).

Before anything runs, the design is refused in one line (nothing written) when da4ml's
estimate says it cannot fit the part, or when the time model predicts a run longer than the
budget; a run that goes past the budget anyway is stopped.  A design whose ports exceed an
ECP5 package's IOs is synthesized behind the serial wrapper (``wrapper.py``)."""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from ..files import write_atomically
from ..errors import ProjectError, UnsupportedModelError
from ..observer import SILENT, Observer
from ..project import Manifest
from ..rtl.design import RtlDesign
from .place import PlaceResult, router_for, run_nextpnr
from .stats import CellCounts
from .targets import ECP5_PACKED, TARGETS, Family, Target
from .wrapper import CONTROL_PINS, WRAPPER, SerialPlan
from .yosys import RunFiles, ToolTime, run_yosys

#: The synthesis results' file in a project folder (not the manifest).
SYNTH_JSON = "synth.json"
#: Its format number.
SYNTH_FORMAT = 1
#: The run's files, under the project's rtl/ (YoWASP's tools reach only relative paths there).
RUN_FOLDER = "synth"
#: Defaults of the command.
CLOCK_MHZ, MAX_MINUTES = 100.0, 30.0


@dataclass(frozen=True)
class SynthOptions:
    """What ``synth`` is asked: the target (a key of :data:`TARGETS`), the clock nextpnr aims
    at (MHz), the run's time budget (minutes) and whether an ECP5 design is placed and routed."""

    target: str
    clock_mhz: float = CLOCK_MHZ
    max_minutes: float = MAX_MINUTES
    place: bool = True

    @property
    def spec(self) -> Target:
        if self.target not in TARGETS:
            raise UnsupportedModelError(f"no synthesis target '{self.target}'; the targets are: {', '.join(TARGETS)}")
        return TARGETS[self.target]


@dataclass(frozen=True)
class WrapperCost:
    """What the serial wrapper of a wrapped design costs: its register bits, its pins, and the
    bare top's port bits it replaced."""

    register_bits: int
    pins: int
    bare_ios: int

    def to_json(self) -> dict:
        return {"register_bits": self.register_bits, "pins": self.pins, "bare_ios": self.bare_ios}

    @classmethod
    def from_json(cls, d: dict) -> "WrapperCost":
        return cls(int(d["register_bits"]), int(d["pins"]), int(d["bare_ios"]))


@dataclass(frozen=True)
class Prediction:
    """The time model's seconds for Yosys and nextpnr (0: not run)."""

    yosys_s: float
    place_s: float

    @property
    def seconds(self) -> float:
        return self.yosys_s + self.place_s


@dataclass(frozen=True)
class SynthResult:
    """One synthesis of a project: the target and part, the module synthesized (the top or
    the serial wrapper), Yosys's counts, da4ml's estimate, the wrapper's cost, the routed
    design (ECP5 with place and route), Yosys's time, the whole run's seconds and the time
    model's prediction (CPU seconds of the tools)."""

    target: str
    part: str
    top: str
    counts: CellCounts
    lut_estimate: int
    register_bits: int
    wrapper: WrapperCost | None
    place: PlaceResult | None
    yosys: ToolTime
    seconds: float
    predicted_seconds: float

    @property
    def lut_ratio(self) -> float:
        """The part's LUT slots used per da4ml-estimated LUT."""
        return self.counts.lut_slots / max(1, self.lut_estimate)

    def line(self) -> str:
        """The summary line (``synth TARGET: ...``)."""
        c = self.counts
        spec = TARGETS[self.target]
        srl = f" + {c.srls:,} SRL" if c.srls else ""
        head = (f"synth {self.target}: {c.luts:,} LUT, {c.ffs:,} FF{srl}, {c.carries:,} carry, {c.dsps:,} DSP, "
                f"{c.brams:,} BRAM, {c.ios:,} IO")
        if self.wrapper is not None:
            w = self.wrapper
            head += f" (serial wrapper for {w.bare_ios:,} port bits: {w.register_bits:,} register bits)"
        used = c.lut_slots / spec.part.luts
        share = f"{'< 0.1' if used < 0.001 else f'{100 * used:.1f}'} % of the {spec.part.name}"
        if spec.family is Family.ECP5:
            est = (f" (da4ml estimated {self.lut_estimate:,} LUT; {c.lut_slots:,} LUT4 slots with the carries, "
                   f"{self.lut_ratio:.2f} each, {share})")
        else:
            off = 100 * (c.luts / max(1, self.lut_estimate) - 1)
            est = f" (da4ml estimated {self.lut_estimate:,} LUT: {off:+.1f} %; {share})"
        routed = f", {self.place.line()}" if self.place is not None else ""
        cpu = self.yosys.cpu_seconds + (self.place.time.cpu_seconds if self.place is not None else 0.0)
        return f"{head}{est}{routed} in {self.seconds:.0f} s ({cpu:.0f} s of CPU)"

    def to_json(self) -> dict:
        return {"target": self.target, "part": self.part, "top": self.top, "counts": self.counts.to_json(),
                "lut_slots": self.counts.lut_slots, "lut_estimate": self.lut_estimate,
                "register_bits": self.register_bits,
                "wrapper": None if self.wrapper is None else self.wrapper.to_json(),
                "place": None if self.place is None else self.place.to_json(), "yosys": self.yosys.to_json(),
                "seconds": self.seconds, "predicted_seconds": self.predicted_seconds, "line": self.line()}

    @classmethod
    def from_json(cls, d: dict) -> "SynthResult":
        return cls(str(d["target"]), str(d["part"]), str(d["top"]), CellCounts.from_json(d["counts"]),
                   int(d["lut_estimate"]), int(d["register_bits"]),
                   None if d["wrapper"] is None else WrapperCost.from_json(d["wrapper"]),
                   None if d["place"] is None else PlaceResult.from_json(d["place"]), ToolTime.from_json(d["yosys"]),
                   float(d["seconds"]), float(d["predicted_seconds"]))


@dataclass(frozen=True)
class SynthReport:
    """``PRJ/synth.json``: the latest result of each target synthesized."""

    results: dict[str, SynthResult]
    format: int = SYNTH_FORMAT

    def to_json(self) -> dict:
        return {"format": self.format, "results": {k: r.to_json() for k, r in self.results.items()}}

    @classmethod
    def from_json(cls, d: dict) -> "SynthReport":
        if int(d["format"]) != SYNTH_FORMAT:
            raise ValueError(f"format {d['format']}, this tessera reads {SYNTH_FORMAT}")
        return cls({str(k): SynthResult.from_json(r) for k, r in d["results"].items()})

    @classmethod
    def read(cls, prj: str | Path) -> "SynthReport":
        """The project's results; none when there is no file (or one of another format, or
        unreadable: the next run replaces it)."""
        path = Path(prj) / SYNTH_JSON
        try:
            return cls.from_json(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return cls({})

    def with_result(self, result: SynthResult) -> "SynthReport":
        return SynthReport({**self.results, result.target: result})

    def write(self, prj: str | Path) -> Path:
        """Write through a temporary sibling renamed at the end."""
        return write_atomically(Path(prj) / SYNTH_JSON, json.dumps(self.to_json(), indent=1))


def rtl_design(prj: Path) -> RtlDesign:
    """The project's RTL design with every source present, or one line."""
    design = Manifest.read(prj).rtl
    if design is None:
        raise ProjectError(f"{prj} is not an RTL project (compile it with --backend rtl)")
    missing = [s for s in (*design.sources, *design.tables) if not (prj / "rtl" / s).is_file()]
    if missing:
        raise ProjectError(f"{prj} is incomplete: rtl/{missing[0]} is missing (recompile it)")
    return design


def serial_plan(design: RtlDesign, target: Target) -> SerialPlan | None:
    """The serial wrapper when the design's ports exceed the target package's user IOs."""
    ios = target.part.ios
    if ios is None or design.in_bits + design.out_bits + CONTROL_PINS <= ios:
        return None
    plan = SerialPlan.of(design)
    if plan.pins > ios:
        raise UnsupportedModelError(f"even serial, the design needs {plan.pins} pins ({design.in_width}-bit input "
                                    f"elements, {plan.out_word_bits}-bit output words): the {target.part.name} has "
                                    f"{ios} user IOs")
    return plan


def _needs(design: RtlDesign, target: Target, wrapper: SerialPlan | None) -> tuple[float, int]:
    """The LUTs (at the family's measured ratio) and flip-flops the design needs on ``target``."""
    return (design.lut_estimate * target.luts_per_estimate,
            design.register_bits + (wrapper.register_bits if wrapper else 0))


def _may_fit(design: RtlDesign, target: Target) -> bool:
    try:
        luts, ffs = _needs(design, target, serial_plan(design, target))
    except UnsupportedModelError:  # not even serial ports fit its package
        return False
    return luts <= target.part.luts and ffs <= target.part.ffs


def fit_refusal(design: RtlDesign, target: Target, wrapper: SerialPlan | None) -> str | None:
    """Why ``design`` cannot fit ``target`` by da4ml's estimate (LUTs at the family's measured
    ratio, register bits plus the wrapper's against flip-flops), or None."""
    part = target.part
    luts, ffs = _needs(design, target, wrapper)
    if luts <= part.luts and ffs <= part.ffs:
        return None
    bigger = [t for t in TARGETS.values() if t.family is target.family and t.part.luts > part.luts
              and _may_fit(design, t)]
    hint = f"; {min(bigger, key=lambda t: t.part.luts).key} may fit" if bigger else ""
    if luts > part.luts:
        unit = "LUT4 slots" if target.family is Family.ECP5 else "LUT"
        return (f"the design does not fit {target.key} ({part.name}): da4ml estimates {design.lut_estimate:,} LUT, "
                f"about {luts:,.0f} {unit} at {target.luts_per_estimate:g} per estimated LUT (measured), the part has "
                f"{part.luts:,}{hint}")
    return (f"the design does not fit {target.key} ({part.name}): {ffs:,} register bits"
            f"{' with the serial wrapper' if wrapper else ''}, the part has {part.ffs:,} flip-flops{hint}")


def predict(design: RtlDesign, target: Target, place: bool) -> Prediction:
    """The time model's seconds for this design on this target."""
    places = place and target.family.places
    return Prediction(target.time.yosys(design.lut_estimate),
                      target.time.place(design.lut_estimate) if places else 0.0)


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def synthesize(prj: str | Path, options: SynthOptions, observer: Observer = SILENT) -> SynthResult:
    """Synthesize project ``prj`` for ``options.target``; the result, also kept in ``synth.json``."""
    prj = Path(prj)
    target = options.spec
    design = rtl_design(prj)
    wrapper = serial_plan(design, target)
    why = fit_refusal(design, target, wrapper)
    if why:
        raise UnsupportedModelError(why)
    predicted = predict(design, target, options.place)
    budget = options.max_minutes * 60
    if predicted.seconds > budget:
        raise UnsupportedModelError(
            f"synthesis for {target.key} is predicted to take {_minutes(predicted.seconds)} (Yosys "
            f"{_minutes(predicted.yosys_s)}{f', nextpnr {_minutes(predicted.place_s)}' if predicted.place_s else ''} "
            f"for da4ml's {design.lut_estimate:,} estimated LUT), more than --max-minutes {options.max_minutes:g}: "
            f"raise it{' or add --no-place' if predicted.place_s else ''}")
    budget_line = f"past --max-minutes {options.max_minutes:g} (predicted {_minutes(predicted.seconds)})"

    t0 = time.perf_counter()
    rtl = prj / "rtl"
    files = RunFiles(f"{RUN_FOLDER}/{target.key}")
    if (rtl / files.folder).exists():
        shutil.rmtree(rtl / files.folder)
    (rtl / files.folder).mkdir(parents=True)
    sources, top = list(design.sources), design.top
    if wrapper is not None:
        observer.notice(f"the ports ({design.in_bits + design.out_bits + CONTROL_PINS:,} bits) exceed the "
                        f"{target.part.name}'s {target.part.ios} user IOs: {wrapper.line()}")
        (rtl / files.folder / f"{WRAPPER}.v").write_text(wrapper.verilog())
        sources.append(f"{files.folder}/{WRAPPER}.v")
        top = WRAPPER
    share = design.lut_estimate * target.luts_per_estimate * ECP5_PACKED / target.part.luts
    if target.family is Family.ECP5 and share > 1:
        observer.notice(f"da4ml's estimate puts the design at about {share:.0%} of the {target.part.name}'s LUT4s "
                        f"once nextpnr packs it: it may not place")
    with observer.stage(f"synthesizing for {target.key} with Yosys (predicted {_minutes(predicted.yosys_s)})"):
        yosys = run_yosys(rtl, target, sources, top, files, budget, budget_line)
    counts = CellCounts.read(rtl / files.stats, top)
    if counts.unknown():
        observer.notice(f"cells not counted: {', '.join(counts.unknown())}")
    placed = None
    if options.place and target.family.places:
        left = budget - (time.perf_counter() - t0)
        router = router_for(share)
        with observer.stage(f"placing and routing on the {target.part.name} with nextpnr ({router}) at "
                            f"{options.clock_mhz:g} MHz (predicted {_minutes(predicted.place_s)})"):
            placed = run_nextpnr(rtl, target, files, options.clock_mhz, router, left, budget_line)
    cost = None if wrapper is None else WrapperCost(wrapper.register_bits, wrapper.pins,
                                                    design.in_bits + design.out_bits + CONTROL_PINS)
    result = SynthResult(target.key, target.part.name, top, counts, design.lut_estimate, design.register_bits, cost,
                         placed, yosys, time.perf_counter() - t0, predicted.seconds)
    SynthReport.read(prj).with_result(result).write(prj)
    return result


__all__ = ["CLOCK_MHZ", "MAX_MINUTES", "Prediction", "RUN_FOLDER", "SYNTH_FORMAT", "SYNTH_JSON", "SynthOptions",
           "SynthReport", "SynthResult", "WrapperCost", "fit_refusal", "predict", "rtl_design", "serial_plan",
           "synthesize"]
