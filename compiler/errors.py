"""Errors the compiler reports to users, each with a documented exit code.

Every error a user can cause is a :class:`TesseraError` subclass; the CLI prints its
message on one line and exits with its ``exit_code`` (see docs/cli.md).
"""

from __future__ import annotations

#: Characters of a third-party message kept in a one-line report.
FIRST_LINE_CHARS = 200


def first_line(exc: BaseException) -> str:
    """``exc`` as one line for a report: its type and the first line of its message (at most
    :data:`FIRST_LINE_CHARS` characters), or its type alone."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:FIRST_LINE_CHARS]}" if text else type(exc).__name__


class TesseraError(Exception):
    """Base class: a failure with a one-line message and a process exit code."""

    exit_code = 10


class ModelLoadError(TesseraError):
    """The model file is missing, truncated or not ONNX."""

    exit_code = 3


class UnsupportedModelError(TesseraError):
    """The model uses an op, attribute or quantization the compiler cannot make exact."""

    exit_code = 4


class ToolchainError(TesseraError):
    """A required system tool (g++) is missing."""

    exit_code = 5


class ProjectError(TesseraError):
    """An output/project folder is unusable (exists, incomplete, wrong model)."""

    exit_code = 6


class SimulationError(TesseraError):
    """The C-simulation failed to build or run."""

    exit_code = 7


class InputDataError(TesseraError):
    """An input array for emulate/verify has the wrong shape or cannot be read."""

    exit_code = 8


class DataError(TesseraError):
    """A data set could not be fetched or read."""

    exit_code = 9


__all__ = ["DataError", "FIRST_LINE_CHARS", "InputDataError", "ModelLoadError", "ProjectError", "SimulationError",
           "TesseraError", "ToolchainError", "UnsupportedModelError", "first_line"]
