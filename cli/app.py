"""The ``tessera`` command group and what every command shares: the consoles, the one-line
error handling (exit codes: docs/cli.md and ``compiler/errors.py``), progress bars and
option parsers.

The group loads a command's module when the command runs (:data:`COMMANDS`): ``tessera
--help`` imports none of them, and a command imports only its own (``emulate`` never loads
onnx, qonnx or hls4ml)."""

from __future__ import annotations

import functools
import importlib
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

from ..compiler.errors import TesseraError, ToolchainError, first_line
from ..compiler.files import write_atomically

console = Console(stderr=True)
out = Console(width=None if sys.stdout.isatty() else 200)

EXIT_MISMATCH = 1
EXIT_INTERNAL = 10

#: What only the ``[train]`` extra installs (pyproject.toml): a command that needs one of them
#: without it (train, models, demo, calibrate, plan) stops in one line naming the extra (exit 5).
TRAIN_EXTRA = ("torch", "brevitas", "onnxoptimizer", "nibabel", "camb")


def handle_errors(fn):
    """Run a command: a TesseraError is one line and its exit code, a package of the
    ``[train]`` extra that is not installed a ToolchainError naming the extra, Ctrl-C is 130,
    anything else an internal error in one line (``--debug``: the traceback)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        ctx = click.get_current_context()
        debug = ctx.find_root().params.get("debug", False)
        try:
            try:
                return fn(*args, **kwargs)
            except ModuleNotFoundError as exc:
                package = (exc.name or "").partition(".")[0]
                if package not in TRAIN_EXTRA:
                    raise
                raise ToolchainError(f"{ctx.command_path} needs {package}, which is not installed: "
                                     f"pip install 'tessera[train]'") from exc
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
            raise  # usage errors: the group prints them in one line (exit 2)
        except KeyboardInterrupt:
            console.print("[bold red]interrupted[/]")
            sys.exit(130)
        except Exception as exc:  # anything else is our bug: say so in one line
            if debug:
                raise
            console.print(f"[bold red]internal error:[/] {escape(first_line(exc))} (rerun with --debug for a traceback)",
                          highlight=False, soft_wrap=True)
            sys.exit(EXIT_INTERNAL)

    return wrapper


def progress_bar():
    """A rich progress bar on stderr: description, bar, done/total, items per second (the
    task's ``unit`` field, default samples), elapsed and remaining time.  rich.progress is
    imported here: commands that draw no bar (and ``--help``) never load it."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task) -> Text:
            speed = task.finished_speed or task.speed
            unit = task.fields.get("unit", "samples")
            return Text(f"{speed:,.1f} {unit}/s" if speed else "", style="progress.data.speed")

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), RateColumn(),
                    TimeElapsedColumn(), TimeRemainingColumn(), console=console, transient=True,
                    disable=not console.is_terminal)


class ConsoleObserver:
    """The compiler's :class:`~tessera.compiler.observer.Observer` on the terminal: a status
    line per stage, notices on stdout, a progress bar per loop."""

    def stage(self, text: str):
        return console.status(text)

    def notice(self, line: str) -> None:
        out.print(line, markup=False, highlight=False, soft_wrap=True)

    @contextmanager
    def progress(self, text: str, total: int, unit: str = "samples"):
        with progress_bar() as bar:
            task = bar.add_task(text, total=total, unit=unit)
            yield lambda done: bar.advance(task, done)


def check_output_path(path: Path, option: str, folder: bool = False) -> None:
    """A file (or with ``folder`` a folder) a command will write, checked before any work: a
    usage error (exit 2) naming ``option`` when it cannot be written there."""
    if not folder and path.is_dir():
        raise click.BadParameter(f"{path} is a directory, not a file", param_hint=option)
    parent = next((p for p in path.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise click.BadParameter(f"{parent} is a file, not a folder", param_hint=option)




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


@dataclass(frozen=True)
class CommandEntry:
    """A command of ``tessera``: the module of this package that defines it, and its line in
    ``tessera --help``."""

    module: str
    summary: str


#: Every command, in the order ``tessera --help`` lists them.
COMMANDS: dict[str, CommandEntry] = {
    "compile": CommandEntry("compile", "Compile a QONNX/QCDQ model into a complete Vitis HLS project."),
    "emulate": CommandEntry("compile", "Run a project's g++ C-simulation on an input array."),
    "verify": CommandEntry("compile", "Check a project bit for bit: its exact reference, the model itself."),
    "check": CommandEntry("check", "Check a project for what Vitis HLS or the FPGA would reject."),
    "synth": CommandEntry("synth", "Synthesize an RTL project with Yosys (and place and route it for ECP5)."),
    "report": CommandEntry("report", "Write a project's report: one self-contained HTML page."),
    "inspect": CommandEntry("compile", "Show a model's ops, types, accumulator widths and MACs."),
    "estimate": CommandEntry("estimate", "Estimate a model's resources, II and latency on an FPGA part."),
    "models": CommandEntry("train", "List the model zoo."),
    "train": CommandEntry("train", "Quantization-aware training, exported to QONNX."),
    "demo": CommandEntry("train", "Train, compile, emulate and verify a small default model."),
    "calibrate": CommandEntry("plan", "Measure this machine for the training performance model."),
    "plan": CommandEntry("plan", "Predict the step time and memory of distributed training."),
}


class CommandGroup(click.Group):
    """``tessera``: loads a command's module when the command is asked for, lists the
    commands from :data:`COMMANDS`, and reports a usage error in one line (exit 2)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in COMMANDS:
            importlib.import_module(f"{__package__}.{COMMANDS[name].module}")
        return self.commands.get(name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, entry.summary) for name, entry in COMMANDS.items()])

    def main(self, *args, standalone_mode: bool = True, **kwargs):
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            return super().main(*args, standalone_mode=False, **kwargs)
        except click.UsageError as exc:  # one line: what is wrong, and where the help is
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
            console.print(f"[bold red]error:[/] {escape(exc.format_message())}{escape(hint)}", highlight=False,
                          soft_wrap=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.Abort:
            console.print("[bold red]interrupted[/]")
            sys.exit(130)


@click.group(cls=CommandGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.version_option(package_name="tessera")
def main(debug: bool) -> None:
    """Tessera: quantized neural networks to FPGAs through hls4ml, verified bit for bit."""
    import warnings

    if not debug:  # third-party chatter (brevitas, hls4ml) would bury our one-line messages
        warnings.filterwarnings("ignore", category=UserWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)


__all__ = ["COMMANDS", "CommandEntry", "CommandGroup", "ConsoleObserver", "EXIT_INTERNAL", "EXIT_MISMATCH",
           "TRAIN_EXTRA", "check_output_path", "console", "handle_errors", "main", "out", "parse_bytes", "parse_reuse",
           "progress_bar", "write_atomically"]
