"""nextpnr-ecp5 (YoWASP) on Yosys's ECP5 netlist: place and route for a part and package at a
target clock, and the routed design's figures from nextpnr's ``--report`` JSON.

nextpnr exits 1 when the routed design misses the target clock ("Max frequency ... FAIL")
although routing finished: ``--timing-allow-fail`` lets it write the report, and the
achieved figure is read from it.  Without a pin constraint file nextpnr places the IOs
itself (the design's timing then includes pin-to-register paths no board fixes).

The router: nextpnr's default router1 where the part is lightly used (UNSW-NB15 on an
85F: 97.8 MHz against router2's 83.5 MHz, router1 212 s against 118 s), router2 once the
design is predicted to fill :data:`ROUTER2_FROM` of the part's LUT4s (the jet tagger at 67 %:
router1 still had 91 % of its 159,039 arcs to route after 5 minutes and slowed down, router2
brings the overuse down every iteration; docs/synth.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SimulationError
from .targets import Target
from .yosys import NEXTPNR_ECP5, RunFiles, ToolTime, find_tool, run_tool

#: The predicted share of the part's LUT4s (after packing) from which router2 routes.
ROUTER2_FROM = 0.5
ROUTER1, ROUTER2 = "router1", "router2"


def router_for(share: float) -> str:
    """nextpnr's router for a design predicted to use ``share`` of the part's LUT4s."""
    return ROUTER2 if share >= ROUTER2_FROM else ROUTER1


@dataclass(frozen=True)
class PlaceResult:
    """A routed design: the worst clock's achieved Fmax at the target clock (MHz), the bels
    used out of those available by type (nextpnr's utilization), nextpnr's time and router."""

    fmax_mhz: float
    clock_mhz: float
    utilization: dict[str, tuple[int, int]] = field(default_factory=dict)
    time: ToolTime = ToolTime(0.0, 0.0)
    router: str = ROUTER1

    @property
    def met(self) -> bool:
        return self.fmax_mhz >= self.clock_mhz

    def line(self) -> str:
        router = f" ({self.router})" if self.router != ROUTER1 else ""
        return f"routed Fmax {self.fmax_mhz:.1f} MHz at a {self.clock_mhz:g} MHz target{router}"

    def to_json(self) -> dict:
        return {"fmax_mhz": self.fmax_mhz, "clock_mhz": self.clock_mhz, "time": self.time.to_json(),
                "router": self.router, "utilization": {k: list(v) for k, v in self.utilization.items()}}

    @classmethod
    def from_json(cls, d: dict) -> "PlaceResult":
        return cls(float(d["fmax_mhz"]), float(d["clock_mhz"]),
                   {str(k): (int(v[0]), int(v[1])) for k, v in d["utilization"].items()}, ToolTime.from_json(d["time"]),
                   str(d["router"]))


def read_report(path: Path, clock_mhz: float, took: ToolTime, router: str = ROUTER1) -> PlaceResult:
    """nextpnr's ``--report`` JSON -> the worst clock's Fmax and the utilization, or one line."""
    try:
        rep = json.loads(path.read_text())
        fmax = [float(c["achieved"]) for c in rep["fmax"].values()]
        used = {str(k): (int(v["used"]), int(v["available"])) for k, v in rep["utilization"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SimulationError(f"nextpnr's report {path} is unreadable ({type(exc).__name__}: {exc})") from None
    if not fmax:
        raise SimulationError(f"nextpnr's report {path} names no clock (is the design's clk connected?)")
    return PlaceResult(min(fmax), clock_mhz, used, took, router)


def run_nextpnr(rtl: Path, target: Target, files: RunFiles, clock_mhz: float, router: str, timeout_s: float,
                budget_line: str) -> PlaceResult:
    """Place and route ``files.netlist`` for ``target`` at ``clock_mhz`` with ``router`` (cwd ``rtl``)."""
    exe = find_tool(NEXTPNR_ECP5)
    cmd = [exe, target.device_flag, "--package", target.package, "--json", files.netlist, "--freq", f"{clock_mhz:g}",
           "--timing-allow-fail", "--router", router, "--report", files.report, "-l", files.nextpnr_log, "-q"]
    took = run_tool(cmd, rtl, "nextpnr", files.nextpnr_log, timeout_s, budget_line)
    return read_report(rtl / files.report, clock_mhz, took, router)


__all__ = ["PlaceResult", "ROUTER1", "ROUTER2", "ROUTER2_FROM", "read_report", "router_for", "run_nextpnr"]
