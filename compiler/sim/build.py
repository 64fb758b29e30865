"""The C-simulation build: a project's firmware compiled by g++ into the library that
``emulate`` and ``verify`` load, and into the project's testbench.

It compiles the same sources as hls4ml's ``build_lib.sh`` (which stays in the project, for
hls4ml's own ``compile()``), faster:

- **units**: the top function (``firmware/<project>.cpp`` as written, hls4ml's generated
  straight-line ``nnet_code_gen.h`` at ``-Og``: :data:`CODEGEN_OPT`), the bridge
  (``<project>_bridge.cpp``), the packed entry point (``tessera_ports.cpp``: one sample's
  ports side by side, split into the bridge's arguments), Tessera's runtime (``hls_templates/sim/tessera_csim_rt.cpp``:
  the weights folder found at run time, the batch entry point) and the testbench's
  ``tessera_tb.cpp``, compiled in parallel, one g++ per core;
- **a precompiled header** of ap_types and the static hls4ml / Tessera headers the project
  includes, shared by every project whose headers are the same; the first build that needs
  one compiles it in the background at the lowest CPU priority, for the builds after it;
- **an object store** (:mod:`.objcache`): each object is keyed by the compiler, the flags
  and the unit's preprocessed text.  hls4ml's C-simulation reads the weights from
  ``firmware/weights/*.txt`` at run time and the weights folder is found at run time, so
  a retrained model with the same layers and types, or the same model compiled into
  another folder, links the objects already built and compiles nothing;
- **the project stamp**: the library records the hash of the sources it was built from
  (:func:`source_hash`); an unchanged project is not rebuilt, a changed one always is;
- **ap_types without the volatile bottleneck** (:mod:`.aptypes`): the units see a view of
  the project's ``etc/ap_private.h`` in which non-volatile values normalise their bits
  without going through memory; the same arithmetic, several times faster per sample.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import ClassVar

from ...hls_templates import Fields, path as template_path, render
from ..errors import ProjectError, SimulationError, ToolchainError
from ..project import PORTS, Manifest
from .aptypes import REWRITE_ID, VIEW_DIR, VIEW_FLAG, ViewStatus, derive_view
from .objcache import ObjectCache
from .shard import TopFunction, assign, parse_top, render_shards, shard_count

#: The kernels' and hls4ml's code: optimised for the emulation's speed.
OPT = "-O2"
#: hls4ml's generated nnet_code_gen.h (io_parallel convolutions' fill_buffer, one
#: statement per buffered element): -O2 spends most of a CNN's build on it, -Og runs as
#: fast (docs/results/emulation.md).
CODEGEN_OPT = "g"
#: hls4ml's weight loaders (``nnet::load_*_from_txt``, run once per process): their text
#: parsing inlined at -O2 is a large part of a small model's top unit (:func:`loader_declarations`).
LOADER_OPT = "g"
#: A weight loader's definition in the project's nnet_helpers.h: its template head and signature.
_LOADER = re.compile(r"^(template\s*<[^>{};]*>)\s*void\s+(load_\w+_from_txt)\s*(\([^)]*\))\s*\{", re.M)
#: The most units a top function is compiled in (:mod:`.shard`): each parses the headers anew.
MAX_SHARDS = 8
#: Every unit's flags but the optimisation level.
BASE_FLAGS = ("-std=c++17", "-fPIC", "-fno-gnu-unique", "-w", "-DWEIGHTS_DIR=tessera_weights_dir()",
              "-I.", "-Ifirmware", "-Ifirmware/ap_types")
#: Where the build's generated units live inside the project.
BUILD_DIR = ".csim"
#: Beside the library: the hash of the sources it was built from (:func:`source_hash`).
BUILD_HASH = ".tessera-build.sha256"
#: The testbench executable, in the project folder.
TESTBENCH = "tessera_tb"
#: Shell prefix of every standalone testbench run: io_parallel designs keep whole feature
#: maps on the stack (build_tessera_tb.sh sets the same limit).
STACK_LIMIT = "ulimit -s unlimited 2>/dev/null || ulimit -s 1048576 2>/dev/null; exec "
#: nnet_utils headers that are the project's own (generated), never precompiled.
GENERATED_HEADERS = ("nnet_code_gen.h",)


def require_gxx() -> str:
    gxx = shutil.which(os.environ.get("CXX", "g++"))
    if gxx is None:
        raise ToolchainError("g++ not found on PATH: install a C++ compiler (e.g. apt-get install g++) for C-simulation")
    return gxx


def last_error_line(text: str) -> str:
    """The first line of a tool's output that names an error (else its first line), shortened."""
    lines = [ln for ln in text.splitlines() if "error" in ln.lower()] or text.strip().splitlines() or ["(no output)"]
    return lines[0].strip()[:300]


@lru_cache(maxsize=4)
def objcopy_for(gxx: str) -> str | None:
    """binutils' objcopy beside the compiler's (``g++ -print-prog-name``), else on PATH."""
    named = subprocess.run([gxx, "-print-prog-name=objcopy"], capture_output=True, text=True).stdout.strip()
    return shutil.which(named) if named else shutil.which("objcopy")


@lru_cache(maxsize=4)
def compiler_id(gxx: str) -> str:
    """The compiler's identity for cache keys: its path, size, time and version line."""
    real = Path(gxx).resolve()
    st = real.stat()
    version = subprocess.run([gxx, "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    return f"{real}\0{st.st_size}\0{st.st_mtime_ns}\0{''.join(version)}"


def source_hash(prj: Path, flags: tuple[str, ...]) -> str:
    """sha256 of everything a project's C-simulation is built from: ``firmware/`` (the top
    function, the kernels, the weights, ap_types), the bridge, the testbench and the build
    script, and the build's flags (``flags``: the optimisation levels and the ap_types
    view's flag and rewrite, :attr:`Builder.stamp_flags`).  A library whose
    recorded hash differs is stale and is rebuilt."""
    files = [p for p in (prj / "firmware").rglob("*") if p.is_file() and p.suffix != ".so" and p.name != BUILD_HASH]
    files += [*prj.glob("*_bridge.cpp"), prj / "build_lib.sh", prj / "tessera_tb.cpp", prj / PORTS]
    h = hashlib.sha256()
    for p in sorted(f for f in files if f.is_file()):
        data = p.read_bytes()
        h.update(f"{p.relative_to(prj).as_posix()}\0{len(data)}\0".encode())
        h.update(data)
    for rel in ("sim/tessera_csim_rt.cpp", "sim/tessera_csim_pch.h.tpl", "sim/tessera_csim_top.cpp.tpl",
                "sim/tessera_csim_shard.cpp.tpl"):
        h.update(template_path(rel).read_bytes())
    h.update("\0".join(BASE_FLAGS + tuple(flags)).encode())
    return h.hexdigest()


@dataclass(frozen=True)
class Prelude(Fields):
    """The C-simulation prelude: the static headers' includes and hls4ml's weight loaders
    declared again at their own optimisation level."""

    template: ClassVar[str] = "sim/tessera_csim_pch.h.tpl"
    includes: str
    loader_opt: str
    loaders: str


@dataclass(frozen=True)
class TopUnit(Fields):
    """The top function's translation unit (one unit: no shards)."""

    template: ClassVar[str] = "sim/tessera_csim_top.cpp.tpl"
    project: str
    codegen_opt: str


@dataclass(frozen=True)
class Unit:
    """One translation unit: its source (relative to the project), whether it takes the
    precompiled prelude, and whether its object's global definitions are made weak (a
    shard's copies of what shard 0 defines: :mod:`.shard`)."""

    name: str
    source: str
    prelude: bool = True
    weak: bool = False


@dataclass
class UnitResult:
    unit: str
    cached: bool
    seconds: float
    object: Path


@dataclass
class BuildReport:
    """What a build did: per unit, compiled or taken from the store, and its seconds."""

    project: Path
    library: Path
    testbench: Path | None = None
    rebuilt: bool = True
    units: list[UnitResult] = field(default_factory=list)
    precompiled_header: str = "none"  # "reused", "building" (in the background; the units parsed its text) or "none"
    aptypes: ViewStatus = ViewStatus.AS_SHIPPED
    seconds: float = 0.0
    shards: int = 1  # units the top function was compiled in (.shard)
    shard_error: str | None = None  # why a sharded build failed and the file was compiled as written

    @property
    def compiled(self) -> int:
        return sum(not u.cached for u in self.units)

    @property
    def reused(self) -> int:
        return sum(u.cached for u in self.units)

    def line(self) -> str:
        if not self.rebuilt:
            return f"C-simulation library up to date ({self.library.name})"
        split = f" (the top function in {self.shards})" if self.shards > 1 else ""
        failed = f"; split top function failed, built as written: {self.shard_error}" if self.shard_error else ""
        return (f"C-simulation built in {self.seconds:.1f} s: {self.compiled} units compiled{split}, {self.reused} reused, "
                f"precompiled header {self.precompiled_header}{failed}")


def _project_name(prj: Path) -> str:
    return Manifest.read(prj).options.project_name


def _prelude_includes(prj: Path) -> list[str]:
    """The static nnet_utils headers the project's parameters.h includes, in its order; in place
    of a generated header, the static ones it includes (nnet_code_gen.h brings nnet_common.h,
    whose macros the headers after it use: hls4ml's nnet_transpose_stream.h its
    PRAGMA_DATA_PACK, in a design whose first layer is a Transpose)."""
    text = (prj / "firmware" / "parameters.h").read_text()
    found = []
    for header in re.findall(r'^\s*#include\s+"(nnet_utils/[A-Za-z0-9_]+\.h)"', text, flags=re.M):
        generated = prj / "firmware" / header
        if Path(header).name in GENERATED_HEADERS and generated.is_file():
            found += [f"nnet_utils/{h}" for h in re.findall(r'^\s*#include\s+"([A-Za-z0-9_]+\.h)"',
                                                            generated.read_text(), flags=re.M)
                      if (generated.parent / h).is_file()]
        found.append(header)
    return [h for h in dict.fromkeys(found) if Path(h).name not in GENERATED_HEADERS]


def loader_declarations(prj: Path, level: str = LOADER_OPT) -> str:
    """Declarations of hls4ml's weight loaders with ``optimize("O<level>")``, copied from the
    project's own ``nnet_helpers.h`` (template head and signature as written, so the
    declarations are of the same templates; a header without them gives none: the loaders
    then keep the build's level)."""
    helpers = prj / "firmware" / "nnet_utils" / "nnet_helpers.h"
    text = helpers.read_text(errors="replace") if helpers.is_file() else ""
    return "\n".join(f'{head} __attribute__((optimize("O{level}"))) void {name}{args};'
                     for head, name, args in _LOADER.findall(text))


def _prelude_key(prj: Path, gxx: str, flags: tuple[str, ...], text: str) -> str:
    """Key of the precompiled prelude: compiler, flags, its text and every header it may read
    (the ap_types view's included)."""
    h = hashlib.sha256(f"{compiler_id(gxx)}\0{' '.join(flags)}\0{text}".encode())
    fw = prj / "firmware"
    for p in sorted([*(fw / "ap_types").rglob("*"), *(fw / "nnet_utils").rglob("*"), *(prj / VIEW_DIR).rglob("*")]):
        if p.is_file() and p.name not in GENERATED_HEADERS:
            data = p.read_bytes()
            h.update(f"{p.relative_to(prj).as_posix()}\0{len(data)}\0".encode())
            h.update(data)
    return h.hexdigest()


class Builder:
    """Builds projects' C-simulation libraries and testbenches (:func:`build_project`)."""

    def __init__(self, jobs: int | None = None, cache: ObjectCache | None = None, opt: str = OPT,
                 codegen_opt: str = CODEGEN_OPT, aptypes_view: bool = True, loader_opt: str = LOADER_OPT,
                 shards: int | None = None):
        """``shards``: at most this many units for the top function (:mod:`.shard`; default:
        one per usable core, at most :data:`MAX_SHARDS`, as the design allows: on a machine the
        same sources always give the same units, whatever ``jobs`` or the load, so a second
        project reuses the first one's objects); ``opt``, ``codegen_opt``,
        ``loader_opt``: the optimisation levels; ``aptypes_view``: compile
        against :mod:`.aptypes`' view (the defaults are measured in
        docs/results/emulation.md; the others only for that measurement)."""
        self.gxx = require_gxx()
        self.jobs = max(1, jobs or usable_cores())
        self.cache = cache if cache is not None else ObjectCache.default()
        self.opt, self.codegen_opt, self.aptypes_view, self.loader_opt = opt, codegen_opt, aptypes_view, loader_opt
        self.shards = shards
        self.flags = (opt, *((VIEW_FLAG,) if aptypes_view else ()), *BASE_FLAGS)
        #: what the project stamp records besides the sources
        self.stamp_flags = (opt, codegen_opt, f"loaders-O{loader_opt}", *((VIEW_FLAG, REWRITE_ID) if aptypes_view else ()))

    # ---------------------------------------------------------------- prelude (PCH)

    def _prelude(self, prj: Path, scratch: Path, background: bool = True) -> tuple[Path, str]:
        """The prelude header every unit includes first, and how its precompiled form stands:
        ``reused`` from the store; else ``building``: compiled by a background g++ at the
        lowest CPU priority (idle cores only: the units, which parse the text header meanwhile,
        and the emulation that follows go first), stored when done, for the next builds;
        ``none`` without a store.  ``background=False`` compiles it first (``built``)."""
        includes = "\n".join(f'#include "{h}"' for h in _prelude_includes(prj))
        text = render(Prelude(includes=includes, loader_opt=self.loader_opt,
                              loaders=loader_declarations(prj, self.loader_opt)))
        if not self.cache.enabled:
            header = scratch / "tessera_csim_pch.h"
            header.write_text(text)
            return header, "none"
        key = _prelude_key(prj, self.gxx, self.flags, text)
        header = self.cache.path(key, ".h")
        if self.cache.get(key, ".h") is not None and self.cache.get(key, ".h.gch") is not None:  # both marked in use
            return header, "reused"
        header.parent.mkdir(parents=True, exist_ok=True)
        if self.cache.get(key, ".h") is None:
            tmp = header.with_name(f".{header.name}.{os.getpid()}-{threading.get_ident()}")
            tmp.write_text(text)
            os.replace(tmp, header)
        gch = self.cache.path(key, ".h.gch")
        compile_cmd = [self.gxx, *self.flags, "-x", "c++-header", str(header), "-o"]
        if not background:
            out = scratch / "tessera_csim_pch.h.gch"
            if subprocess.run([*compile_cmd, str(out)], cwd=prj, capture_output=True).returncode != 0:
                return header, "none"  # the units parse the text header; their own errors say what is wrong
            self.cache.put(key, ".h.gch", out)
            return header, "built"
        marker = gch.with_name(gch.name + ".building")
        try:  # one background build per header set at a time (a marker older than 10 min is a dead one's)
            if marker.exists() and time.time() - marker.stat().st_mtime > 600:
                marker.unlink(missing_ok=True)
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return header, "building"
        tmp = gch.with_name(f".{gch.name}.{os.getpid()}")
        script = 'nice -n 19 "$@" "$TMP" >/dev/null 2>&1 && mv -f "$TMP" "$GCH"; rm -f "$TMP" "$MARK"'
        # its own process group (Ctrl-C of this command leaves it running) but this session, whose
        # scheduling group its nice value is relative to
        subprocess.Popen(["sh", "-c", script, "sh", *compile_cmd], cwd=prj, process_group=0,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env=dict(os.environ, TMP=str(tmp), GCH=str(gch), MARK=str(marker)))
        return header, "building"

    def precompile(self, prj: str | Path) -> str:
        """Compile the project's precompiled prelude now, in the foreground, unless stored:
        ``reused``, ``built`` or ``none``."""
        prj = Path(prj).resolve()
        if self.aptypes_view:
            derive_view(prj)  # part of the prelude's key
        with tempfile.TemporaryDirectory(prefix="tessera-csim-") as tmp:
            return self._prelude(prj, Path(tmp), background=False)[1]

    # ---------------------------------------------------------------- units

    def _unit_key(self, prj: Path, unit: Unit, header: Path) -> tuple[str, bytes]:
        """sha256 of compiler, flags and the unit's preprocessed text (no line markers; paths
        in it are relative to the project, so the same sources elsewhere give the same key),
        and that text."""
        cmd = [self.gxx, *self.flags, "-E", "-P", *(["-include", str(header)] if unit.prelude else []), unit.source]
        res = subprocess.run(cmd, cwd=prj, capture_output=True)
        if res.returncode != 0:
            raise SimulationError(f"C-simulation build failed in {prj}: {last_error_line(res.stderr.decode(errors='replace'))}")
        h = hashlib.sha256(f"{compiler_id(self.gxx)}\0{' '.join(self.flags)}\0{unit.prelude}\0{unit.weak}\0".encode())
        h.update(res.stdout)
        return h.hexdigest(), res.stdout

    def _compile(self, prj: Path, unit: Unit, header: Path, scratch: Path, store: bool = True,
                 preprocessed: bool = False) -> UnitResult:
        """The unit's object: from the store, or compiled (and stored, with ``store``).
        ``preprocessed``: compile the text the key was computed from (no precompiled header
        to use: the unit is not preprocessed twice)."""
        t0 = time.perf_counter()
        key, text = self._unit_key(prj, unit, header)
        hit = self.cache.get(key, ".o") if store else None
        if hit is not None:
            return UnitResult(unit.name, True, time.perf_counter() - t0, hit)
        out = scratch / f"{unit.name}.o"
        cmd = [self.gxx, *self.flags, *(["-include", str(header)] if unit.prelude else []), "-c", unit.source, "-o",
               str(out)]
        if preprocessed:
            ii = scratch / f"{Path(unit.source).name}.ii"
            ii.write_bytes(text)
            res = subprocess.run([self.gxx, *self.flags, "-x", "c++-cpp-output", "-c", str(ii), "-o", str(out)],
                                 cwd=prj, capture_output=True, text=True)
        if not preprocessed or res.returncode != 0:  # (an error is reported from the sources, with their lines)
            res = subprocess.run(cmd, cwd=prj, capture_output=True, text=True)
        if res.returncode == 0 and unit.weak:
            res = subprocess.run([objcopy_for(self.gxx), "--weaken", str(out)], capture_output=True, text=True)
        if res.returncode != 0:
            raise SimulationError(f"C-simulation build failed in {prj}: {last_error_line(res.stderr + res.stdout)}")
        return UnitResult(unit.name, False, time.perf_counter() - t0, self.cache.put(key, ".o", out) if store else out)

    def _link(self, prj: Path, objects: list[Path], out: Path, shared: bool) -> None:
        tmp = out.with_name(f".{out.name}.{os.getpid()}-{threading.get_ident()}.tmp")  # concurrent builds
        cmd = [self.gxx, *(["-shared"] if shared else []), *map(str, objects), "-o", str(tmp), "-ldl"]
        res = subprocess.run(cmd, cwd=prj, capture_output=True, text=True)
        if res.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise SimulationError(f"C-simulation link failed in {prj}: {last_error_line(res.stderr + res.stdout)}")
        os.replace(tmp, out)

    # ---------------------------------------------------------------- projects

    def build(self, prj: str | Path, rebuild: bool = False, testbench: bool = False) -> BuildReport:
        """The project's library (and with ``testbench`` its testbench): rebuilt when missing,
        when ``rebuild``, or when any source changed since (never a stale one)."""
        prj = Path(prj).resolve()
        t0 = time.perf_counter()
        name = _project_name(prj)
        missing = [f for f in (f"firmware/{name}.cpp", "firmware/parameters.h") if not (prj / f).is_file()]
        if missing:  # a folder copied or deleted in part: one line, not a build error
            raise ProjectError(f"{prj} is incomplete: no {missing[0]} (was the compile interrupted? compile it again)")
        current = source_hash(prj, self.stamp_flags)
        stamp = prj / "firmware" / BUILD_HASH
        lib = library_path(prj, name)
        tb = prj / TESTBENCH
        fresh = (not rebuild and lib is not None and stamp.read_text().strip() == current
                 and (not testbench or tb.is_file()))
        if fresh:
            return BuildReport(prj, lib, tb if tb.is_file() else None, rebuilt=False, seconds=time.perf_counter() - t0)
        for old in (prj / "firmware").glob(f"{name}-*.so"):
            old.unlink()
        stamp.unlink(missing_ok=True)
        tb.unlink(missing_ok=True)  # never a testbench of older sources beside a new library
        report = self._build_units(prj, name, current, testbench)
        stamp.write_text(current + "\n")
        report.seconds = time.perf_counter() - t0
        return report

    def _build_units(self, prj: Path, name: str, current: str, testbench: bool) -> BuildReport:
        gen = prj / BUILD_DIR
        gen.mkdir(exist_ok=True)
        view = derive_view(prj) if self.aptypes_view else ViewStatus.AS_SHIPPED
        top = parse_top((prj / "firmware" / f"{name}.cpp").read_text(errors="replace"), name)
        shards = shard_count(top, self.shards or min(usable_cores(), MAX_SHARDS)) if objcopy_for(self.gxx) else 1
        try:
            return self._build_sharded(prj, name, current, testbench, top, shards, view)
        except SimulationError as exc:
            if shards == 1:
                raise
            report = self._build_sharded(prj, name, current, testbench, None, 1, view)  # the file as written
            report.shard_error = str(exc)
            return report

    def _units(self, prj: Path, name: str, testbench: bool, top: TopFunction | None, shards: int) -> dict[str, Unit]:
        """The build's units, their generated sources written into the project's ``.csim``:
        the top function (``top``; with ``shards`` > 1 shard 0, and shard 1 is ``bridge``),
        the bridge, the packed entry point (``ports``: what the runtime and the testbench
        call), further shards, the runtime and, with ``testbench``, the testbench's main
        (linked with the bridge's object)."""
        gen = prj / BUILD_DIR
        for old in gen.glob("shard*.cpp"):
            old.unlink()
        shutil.copyfile(template_path("sim/tessera_csim_rt.cpp"), gen / "rt.cpp")
        units = {"top": Unit("top", f"{BUILD_DIR}/top.cpp"), "bridge": Unit("bridge", f"{name}_bridge.cpp"),
                 "ports": Unit("ports", PORTS, prelude=False)}
        if shards == 1:
            (gen / "top.cpp").write_text(render(TopUnit(project=name, codegen_opt=self.codegen_opt)))
        else:
            texts = render_shards(top, assign(top, shards), shards, f"{name}_bridge.cpp", self.codegen_opt)
            for s, text in enumerate(texts):
                (gen / f"shard{s}.cpp").write_text(text + "\n")
                key = {0: "top", 1: "bridge"}.get(s, f"shard{s}")
                units[key] = Unit(key, f"{BUILD_DIR}/shard{s}.cpp", weak=s > 0)
        units["rt"] = Unit("rt", f"{BUILD_DIR}/rt.cpp", prelude=False)
        if testbench:
            (gen / "tb.cpp").write_text('#define TESSERA_TB_EXTERN_BRIDGE\n#include "tessera_tb.cpp"\n')
            units["tb"] = Unit("tb", f"{BUILD_DIR}/tb.cpp", prelude=False)
        return units

    def _build_sharded(self, prj: Path, name: str, current: str, testbench: bool, top: TopFunction | None,
                       shards: int, view: ViewStatus) -> BuildReport:
        units = self._units(prj, name, testbench, top, shards)
        lib = prj / "firmware" / f"{name}-{current[:8]}.so"
        tb = prj / TESTBENCH if testbench else None
        with tempfile.TemporaryDirectory(prefix="tessera-csim-") as tmp, ThreadPoolExecutor(self.jobs) as pool:
            scratch = Path(tmp)
            header, pch = self._prelude(prj, scratch)
            futures = {k: pool.submit(self._compile, prj, u, header, scratch, preprocessed=pch != "reused")
                       for k, u in units.items()}  # the top function first
            results = {k: f.result() for k, f in futures.items()}
            code = [k for k in units if k not in ("rt", "tb")]
            links = [(lib, [*code, "rt"], True)] + ([(tb, [*code, "tb", "rt"], False)] if testbench else [])
            for out, names, shared in links:
                try:
                    self._link(prj, [results[k].object for k in names], out, shared)
                except SimulationError:
                    stored = [k for k in names if results[k].cached]
                    if not stored:
                        raise
                    # a stored object the linker refuses (truncated, another machine's): drop it, compile afresh
                    for k in stored:
                        results[k].object.unlink(missing_ok=True)
                        results[k] = self._compile(prj, units[k], header, scratch, store=False)
                    self._link(prj, [results[k].object for k in names], out, shared)
        return BuildReport(prj, lib, tb, True, list(results.values()), pch, view, shards=shards)


def usable_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def library_path(prj: Path, name: str | None = None) -> Path | None:
    """The project's C-simulation library as this build last made it (hls4ml's own
    ``build_lib.sh`` may leave another ``<name>-*.so`` beside it), if there is one."""
    prj = Path(prj)
    stamp = prj / "firmware" / BUILD_HASH
    if not stamp.is_file():
        return None
    lib = prj / "firmware" / f"{name or _project_name(prj)}-{stamp.read_text().strip()[:8]}.so"
    return lib if lib.is_file() else None


def build_project(prj: str | Path, rebuild: bool = False, testbench: bool = False, jobs: int | None = None) -> BuildReport:
    """Build one project's C-simulation (see the module's docstring)."""
    return Builder(jobs).build(prj, rebuild, testbench)


__all__ = ["BASE_FLAGS", "BUILD_DIR", "BUILD_HASH", "BuildReport", "Builder", "CODEGEN_OPT", "LOADER_OPT", "OPT", "Prelude",
           "TESTBENCH", "TopUnit",
           "build_project", "loader_declarations", "objcopy_for",
           "compiler_id", "last_error_line", "library_path", "require_gxx", "source_hash", "usable_cores"]
