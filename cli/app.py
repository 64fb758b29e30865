"""The ``tessera`` command group and what every command shares: the consoles, the one-line
error handling (exit codes: docs/cli.md and ``compiler/errors.py``), progress bars and
option parsers."""

from __future__ import annotations

import functools
import os
import sys

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)
from rich.text import Text

from ..compiler.errors import TesseraError

console = Console(stderr=True)
out = Console(width=None if sys.stdout.isatty() else 200)

EXIT_MISMATCH = 1
EXIT_INTERNAL = 10


def handle_errors(fn):
    """Run a command: a TesseraError is one line and its exit code, Ctrl-C is 130, anything
    else an internal error in one line (``--debug``: the traceback)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        debug = click.get_current_context().find_root().params.get("debug", False)
        try:
            return fn(*args, **kwargs)
        except TesseraError as exc:
            if debug:
                raise
            console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            if getattr(exc, "hard_exit", False):
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(exc.exit_code)
            sys.exit(exc.exit_code)
        except click.exceptions.ClickException:
            raise  # usage errors: click prints them and exits 2
        except KeyboardInterrupt:
            console.print("[bold red]interrupted[/]")
            sys.exit(130)
        except Exception as exc:  # anything else is our bug: say so in one line
            if debug:
                raise
            first = str(exc).splitlines()[0] if str(exc) else ""
            console.print(f"[bold red]internal error:[/] {type(exc).__name__}: {escape(first)} (rerun with --debug for a traceback)",
                          highlight=False, soft_wrap=True)
            sys.exit(EXIT_INTERNAL)

    return wrapper


class RateColumn(ProgressColumn):
    """Items per second (the task's ``unit`` field, default samples)."""

    def render(self, task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.1f} {task.fields.get('unit', 'samples')}/s" if speed else "", style="progress.data.speed")


def progress_bar() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), RateColumn(),
                    TimeElapsedColumn(), TimeRemainingColumn(), console=console, transient=True,
                    disable=not console.is_terminal)


def build_simulation(sim) -> None:
    """Build a project's C-simulation under a status line, then say what the build did."""
    with console.status("building the C-simulation (g++)"):
        sim.build()
    report = getattr(sim, "last_build", None)
    if report is not None:
        console.print(report.line(), highlight=False)


def parse_bytes(text: str) -> int:
    """'4MiB', '512 KiB', '2GB', '1e6' -> bytes."""
    import re

    m = re.fullmatch(r"\s*([0-9.eE+]+)\s*([KMGT]?)(i?)B?\s*", text or "")
    if not m:
        raise click.UsageError(f"cannot read '{text}' as a number of bytes (e.g. 4MiB, 512KiB, 1e6)")
    base = 1024 if m.group(3) or not m.group(2) else 1000
    return int(float(m.group(1)) * base ** "_KMGT".index(m.group(2) or "_"))


def parse_reuse(ctx, param, value):
    """``--reuse`` of ``tessera compile``: a reuse factor >= 1, or ``auto``."""
    if str(value).strip().lower() == "auto":
        return "auto"
    try:
        r = int(value)
    except (TypeError, ValueError):
        raise click.BadParameter(f"'{value}' is neither a positive integer nor 'auto'") from None
    if r < 1:
        raise click.BadParameter(f"{r} is not >= 1")
    return r


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.version_option(package_name="tessera")
def main(debug: bool) -> None:
    """Tessera: quantized neural networks to FPGAs through hls4ml, verified bit for bit."""
    import warnings

    if not debug:  # third-party chatter (brevitas, hls4ml) would bury our one-line messages
        warnings.filterwarnings("ignore", category=UserWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)


__all__ = ["EXIT_INTERNAL", "EXIT_MISMATCH", "console", "handle_errors", "main", "out", "parse_bytes", "parse_reuse",
           "build_simulation", "progress_bar"]
