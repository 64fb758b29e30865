"""The package's shape, read with ``ast`` (docs/architecture.md): layers point one way, no
import cycles, no private names across modules, op properties asked of the op (no op-name
strings kept by consumers), the project manifest read only through its typed module, files
of a readable size.

Each rule is a function returning its findings, so a failing test lists every offender.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("compiler", "models", "training", "cli", "hls_templates")
MAX_LINES = 600


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(["tessera", *parts])


def package_files() -> dict[str, Path]:
    """Module name -> file, for every Python file of the installed package."""
    files = {"tessera": ROOT / "__init__.py"}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            files[_module_name(path)] = path
    return files


FILES = package_files()
TREES = {name: ast.parse(path.read_text(), filename=str(path)) for name, path in FILES.items()}


def _is_package(name: str) -> bool:
    return FILES[name].name == "__init__.py"


def _resolve(module: str, node: ast.ImportFrom | ast.Import) -> list[tuple[str, list[str]]]:
    """(imported module, names imported from it) for one import statement; only tessera's."""
    if isinstance(node, ast.Import):
        return [(a.name, []) for a in node.names if a.name.startswith("tessera")]
    if node.level:
        base = module.split(".") if _is_package(module) else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if not target.startswith("tessera"):
        return []
    out = []
    plain = []
    for a in node.names:
        sub = f"{target}.{a.name}"
        if sub in FILES:
            out.append((sub, []))
        else:
            plain.append(a.name)
    if plain:
        out.append((target, plain))
    return out


def imports() -> list[tuple[str, str, list[str], int]]:
    """Every tessera import anywhere in a module (function-level ones too):
    (importer, imported module, names, line)."""
    found = []
    for name, tree in TREES.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target, names in _resolve(name, node):
                    found.append((name, target, names, node.lineno))
    return found


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def upward_imports() -> list[str]:
    """The compiler importing models, training or the CLI."""
    return [f"{a}:{line} imports {b}" for a, b, _, line in imports()
            if _layer(a) == "compiler" and _layer(b) in ("models", "training", "cli")]


def cli_importers() -> list[str]:
    """Nothing but the CLI imports the CLI."""
    return [f"{a}:{line} imports {b}" for a, b, _, line in imports() if _layer(b) == "cli" and _layer(a) != "cli"]


#: What training/ may take from the compiler: the halo arithmetic and the errors.
TRAINING_MAY_IMPORT = ("tessera.compiler.partition.regions", "tessera.compiler.errors")


def training_compiler_imports() -> list[str]:
    return [f"{a}:{line} imports {b}" for a, b, _, line in imports()
            if _layer(a) == "training" and _layer(b) == "compiler" and b not in TRAINING_MAY_IMPORT]


#: The compiler's layers, bottom up (docs/architecture.md): a module imports only modules of
#: its own layer or of lower ones.  Exact arithmetic knows nothing above it; the IR knows no op.
LAYERS: dict[str, int] = {
    "errors": 0, "files": 0, "observer": 0, "verdict": 0, "exact": 1, "ir": 2, "ops": 3, "frontend": 4, "passes": 5, "pipeline": 6, "samples": 6,
    "reference": 7, "lower": 7, "rtl": 7, "independent": 7, "project": 8, "writer": 8, "partition": 9, "sim": 10,
    "estimate": 11, "hlscheck": 11, "synth": 11, "verify": 12, "report": 13, "api": 14,
}


def _compiler_layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "compiler" else None


def layer_order() -> list[str]:
    """Imports from a lower compiler layer to a higher one (and modules of no known layer)."""
    found = []
    for name in FILES:
        layer = _compiler_layer(name)
        if layer is not None and layer not in LAYERS:
            found.append(f"{name} belongs to no layer of LAYERS")
    for a, b, _, line in imports():
        la, lb = _compiler_layer(a), _compiler_layer(b)
        if la in LAYERS and lb in LAYERS and LAYERS[lb] > LAYERS[la]:
            found.append(f"{a}:{line} ({la}) imports {b} ({lb})")
    return found


def import_cycles() -> list[list[str]]:
    """Strongly connected components of more than one module in the import graph."""
    graph = defaultdict(set)
    for a, b, _, _ in imports():
        if a != b and b in FILES:
            graph[a].add(b)
    index, low, stack, on, sccs = {}, {}, [], set(), []
    counter = [0]

    def visit(v):  # Tarjan, iterative enough for a few hundred modules
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    for v in sorted(FILES):
        if v not in index:
            visit(v)
    return sccs


def private_imports() -> list[str]:
    """A module taking another module's private name (``from x import _y`` or ``x._y``)."""
    found = []
    for a, b, names, line in imports():
        if a == b:
            continue
        for n in names:
            if n.startswith("_") and not (n.startswith("__") and n.endswith("__")):
                found.append(f"{a}:{line} imports {b}.{n}")
    for name, tree in TREES.items():
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target, names in _resolve(name, node):
                    if not names:  # a module bound to a name
                        for a in node.names:
                            aliases[a.asname or a.name.split(".")[-1]] = target
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                if node.attr.startswith("_") and not node.attr.startswith("__") and aliases[node.value.id] != name:
                    found.append(f"{name}:{node.lineno} uses {aliases[node.value.id]}.{node.attr}")
    return found


def op_names() -> set[str]:
    from tessera.compiler.ops import OPS

    return set(OPS)


def _strings(node) -> list[str] | None:
    """The strings of a str constant or of a literal collection of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        vals = [_strings(e) for e in node.elts]
        return None if any(v is None for v in vals) else [s for v in vals for s in v]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("frozenset", "set", "tuple") \
            and len(node.args) == 1:
        return _strings(node.args[0])
    return None


def _is_op_ref(node) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "op") or (isinstance(node, ast.Name) and node.id == "op")


def op_name_strings() -> list[str]:
    """Op properties kept by consumers instead of the op: in the compiler outside
    ``compiler/ops/`` (the IR's op names; models' cell kinds are their own words), a
    comparison of a node's op with op names, a
    literal collection (set, tuple, dict keys) of
    two or more op names, or an op name written into a ``Node(...)``."""
    names = op_names()
    found = []
    for mod, tree in TREES.items():
        if not mod.startswith("tessera.compiler.") or mod.startswith("tessera.compiler.ops"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(_is_op_ref(s) for s in sides):
                    for s in sides:
                        strs = _strings(s)
                        if strs and set(strs) & names:
                            found.append(f"{mod}:{node.lineno} compares an op with {sorted(set(strs) & names)}")
                            break
            elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                strs = _strings(node)
                if strs and len(strs) >= 2 and set(strs) <= names:
                    found.append(f"{mod}:{node.lineno} lists ops {sorted(strs)}")
            elif isinstance(node, ast.Dict):
                keys = [_strings(k) if k is not None else None for k in node.keys]
                if keys and all(k is not None for k in keys):
                    flat = {s for k in keys for s in k}
                    if len(flat) >= 2 and flat <= names:
                        found.append(f"{mod}:{node.lineno} keys a table by ops {sorted(flat)}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Node":
                if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value in names:
                    found.append(f"{mod}:{node.lineno} builds a Node with the op name '{node.args[1].value}'")
    return found


def long_files() -> list[str]:
    """Python files (package, tests, bench) and kernel headers over MAX_LINES lines."""
    paths = [p for pkg in (*PACKAGES, "tests", "bench") for p in (ROOT / pkg).rglob("*") if p.suffix in (".py", ".h")]
    out = []
    for p in sorted(paths):
        n = len(p.read_text().splitlines())
        if n > MAX_LINES:
            out.append(f"{p.relative_to(ROOT)}: {n} lines")
    return out


#: The project manifest (tessera.json) read by its JSON keys: a manifest indexed or asked
#: ``.get`` with a key (the structure report's pattern), the untyped reader it replaced, the
#: file's JSON indexed.  Only its module reads the keys; training's data manifest is another file.
MANIFEST_KEY_READS = (
    re.compile(r"manifest(?:\[[\"']|\.get\()"),
    re.compile(r"read_manifest\("),
    re.compile(r"json\.loads\(.*(?:tessera\.json|MANIFEST).*\)\s*\["),
)
MANIFEST_MODULE = ROOT / "compiler" / "project.py"


def manifest_key_reads() -> list[str]:
    """Lines of the compiler, the CLI, the benchmarks and the tests that read the project
    manifest by its keys outside :data:`MANIFEST_MODULE` (its typed ``Manifest``)."""
    paths = [p for folder in ("compiler", "cli", "bench", "tests") for p in sorted((ROOT / folder).rglob("*.py"))]
    return [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in paths if p != MANIFEST_MODULE
            for i, line in enumerate(p.read_text().splitlines(), 1) if any(r.search(line) for r in MANIFEST_KEY_READS)]


RULES = {
    "compiler imports models/training/cli": upward_imports,
    "compiler layers point one way": layer_order,
    "modules outside cli import cli": cli_importers,
    "training imports compiler beyond regions/errors": training_compiler_imports,
    "import cycles": import_cycles,
    "private names across modules": private_imports,
    "op-name strings outside ops/": op_name_strings,
    "manifest read by keys outside compiler/project.py": manifest_key_reads,
    f"files over {MAX_LINES} lines": long_files,
}


@pytest.mark.parametrize("rule", list(RULES))
def test_architecture(rule):
    findings = RULES[rule]()
    assert findings == [], f"{rule}: {len(findings)}\n" + "\n".join(map(str, findings))


def test_every_package_folder_is_installed():
    """pyproject's explicit package list names every folder with an ``__init__.py`` (a folder
    left out imports in an editable install and is missing from a wheel)."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    skipped = {".venv", "tests", "bench", "build", "runs", "out", "docs"}
    folders = {".".join(("tessera", *p.parent.relative_to(ROOT).parts)) for p in ROOT.rglob("__init__.py")
               if not skipped & set(p.relative_to(ROOT).parts) and "egg-info" not in str(p)}
    assert folders == listed, (sorted(folders - listed), sorted(listed - folders))


def test_rules_see_the_package():
    """The guard reads the real tree (a rule that finds no files could never fail)."""
    assert len(FILES) > 80 and "tessera.compiler.ops.dense" in FILES and "tessera.cli" in FILES
    assert len(imports()) > 200
    assert {"dense", "conv", "requant"} <= op_names()
    reads = ["manifest" + '["input"]', "sim.manifest" + ".get('partition')", "read_manifest" + "(prj)",
             "json.loads((prj / 'tessera.json').read_text())" + '["notices"]']
    assert [any(r.search(line) for r in MANIFEST_KEY_READS) for line in reads] == [True] * len(reads)
    assert not any(r.search("Manifest.read(prj).input") for r in MANIFEST_KEY_READS) and MANIFEST_MODULE.is_file()


if __name__ == "__main__":  # a summary of the counts, as the closing notes quote them
    for rule, fn in RULES.items():
        found = fn()
        print(f"{rule}: {len(found)}")
        for f in found:
            print(f"    {f}")
