"""``tessera synth``: an RTL project synthesized by Yosys for an ECP5 or Xilinx part, placed
and routed by nextpnr on ECP5 (docs/synth.md); the stages as status lines, then one summary."""

from __future__ import annotations

from pathlib import Path

import click

from ..compiler.report import write_report
from ..compiler.synth.run import CLOCK_MHZ, MAX_MINUTES, SynthOptions, synthesize
from ..compiler.synth.targets import TARGETS
from .app import ConsoleObserver, handle_errors, main, out


@main.command("synth")
@click.argument("project", type=click.Path(path_type=Path))
@click.option("--target", type=click.Choice(list(TARGETS)), required=True,
              help="The part: an ECP5 (25k, 45k, 85k; CABGA381) or Xilinx UltraScale+ (xcup: XCU250) / 7 series "
                   "(xc7: XC7A100T).")
@click.option("--clock", "clock_mhz", type=click.FloatRange(min=1, max=1000), default=CLOCK_MHZ, show_default=True,
              help="The clock nextpnr aims at, MHz (ECP5).")
@click.option("--max-minutes", type=click.FloatRange(min=0, min_open=True), default=MAX_MINUTES, show_default=True,
              help="Refuse a run predicted to take longer; stop one that does.")
@click.option("--no-place", is_flag=True, help="Skip place and route (ECP5).")
@handle_errors
def synth_cmd(project, target, clock_mhz, max_minutes, no_place):
    """Synthesize PROJECT (from `tessera compile --backend rtl`) with Yosys for --target and,
    on ECP5, place and route it with nextpnr; print one summary line and keep the result in
    PROJECT/synth.json (and PROJECT/report.html)."""
    result = synthesize(project, SynthOptions(target, clock_mhz, max_minutes, not no_place), ConsoleObserver())
    write_report(project)  # PROJECT/report.html, with the result beside the estimate
    out.print(result.line(), highlight=False, markup=False, soft_wrap=True)
