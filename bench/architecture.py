"""Draw the package's layers from the code: docs/architecture.png (+ docs/results/architecture.json).

Reads the import graph with the architecture test's own reader (tests/test_architecture.py:
``LAYERS``, ``imports``, the rules), so the picture is the code's, not a drawing: one box per
compiler layer (bottom up, as ``LAYERS`` ranks them) with its modules counted, an arrow per
pair of layers one imports from, its width the number of import statements; the CLI, models
and training above.  The path of a new ONNX construct (a handler, an op module, a kernel
folder, tests, one registry line) is drawn beside the layers it touches, and the
architecture rules' counts are written into the JSON.

    python bench/architecture.py
"""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _rules_module():
    spec = importlib.util.spec_from_file_location("architecture_rules", ROOT / "tests" / "test_architecture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _group(module: str, layers: dict[str, int]) -> str | None:
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "compiler" and parts[2] in layers:
        return parts[2]
    if len(parts) > 1 and parts[1] in ("cli", "models", "training"):
        return parts[1]
    return None


def collect(rules) -> dict:
    layers = rules.LAYERS
    modules = Counter(g for m in rules.FILES if (g := _group(m, layers)))
    edges = Counter()
    for a, b, _, _ in rules.imports():
        ga, gb = _group(a, layers), _group(b, layers)
        if ga and gb and ga != gb:
            edges[(ga, gb)] += 1
    handlers = sorted(p.stem for p in (ROOT / "compiler" / "frontend" / "handlers").glob("*.py") if p.stem != "__init__")
    return {"layers": layers, "modules": dict(modules), "edges": [[a, b, n] for (a, b), n in sorted(edges.items())],
            "handler_modules": handlers,
            "rules": {name: len(fn()) for name, fn in rules.RULES.items()}}


def draw(data: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    layers = data["layers"]
    ranks = sorted(set(layers.values()))
    rows = {r: sorted(n for n, v in layers.items() if v == r) for r in ranks}
    pos = {}
    for r, names in rows.items():
        shift = 0.9 * (1 if r % 2 else -1) if len(names) == 1 else 0.0  # a zigzag keeps the arrows apart
        for i, name in enumerate(names):
            pos[name] = (2.2 * (i - (len(names) - 1) / 2) + shift, r)
    top = max(ranks) + 1.6
    for i, name in enumerate(("training", "cli", "models")):
        pos[name] = (2.6 * (i - 1), top)
    fig, ax = plt.subplots(figsize=(13, 12))
    for (a, b, n) in data["edges"]:
        if a in pos and b in pos:
            upward = a in layers and b in layers and layers[b] > layers[a]
            ax.add_patch(FancyArrowPatch(pos[a], pos[b], arrowstyle="-|>", mutation_scale=9,
                                         color="red" if upward else "0.6", lw=0.4 + 0.25 * n ** 0.5, alpha=0.55,
                                         shrinkA=14, shrinkB=14, connectionstyle="arc3,rad=0.08"))
    touched = {"frontend": "1 handler in frontend/handlers/<concern>.py\n  (+ its attribute rules)",
               "ops": "2 compiler/ops/<op>.py (if the IR op is new)\n  + 1 line in ops/__init__.py OPS",
               "lower": "3 hls_templates/<op>/ (if hls4ml has no kernel):\n  registered from the op's Extension"}
    for name, (x, y) in pos.items():
        new = name in touched
        ax.add_patch(FancyBboxPatch((x - 0.95, y - 0.28), 1.9, 0.56, boxstyle="round,pad=0.02",
                                    fc="#ffe9b3" if new else ("#dde8f5" if name in layers else "#e6f2e1"),
                                    ec="#c77c00" if new else "0.3", lw=1.6 if new else 0.8))
        label = name + ".py" if name in ("pipeline", "samples", "independent", "project", "writer", "verify", "api",
                                        "errors") else name + "/"
        ax.text(x, y + 0.06, label, ha="center", va="center", fontsize=10, weight="bold")
        ax.text(x, y - 0.16, f"{data['modules'].get(name, 0)} modules", ha="center", va="center", fontsize=7, color="0.3")
    right = max(x for x, _ in pos.values()) + 1.5
    for name, text in touched.items():
        x, y = pos[name]
        ax.annotate(text, xy=(x + 0.95, y), xytext=(right, y), fontsize=8.5, va="center", color="#8a5200",
                    arrowprops={"arrowstyle": "->", "color": "#c77c00", "lw": 0.8})
    ax.text(right, min(ranks) - 0.2, "4 tests: tests/frontend/test_handlers.py reaches every handler;\n"
            "  tests/ops/ (== onnxruntime, == the file), tests/csim/ (== C-simulation)",
            fontsize=8.5, color="#8a5200", va="center")
    ax.text(right, min(ranks) + 0.7, "handler modules: " + ", ".join(data["handler_modules"]), fontsize=8, color="0.25")
    for r in ranks:
        ax.text(-7.8, r, f"layer {r}", fontsize=8, color="0.45", va="center")
    items = [f"{k}: {v}" for k, v in data["rules"].items()]
    rules = "\n".join(", ".join(items[i:i + 4]) for i in range(0, len(items), 4))
    ax.set_title("Tessera's layers, read from the code: each arrow an import (width: how many), bottom layers know nothing "
                 "above them\n" + rules, fontsize=9)
    ax.set_xlim(-8.2, right + 5.5)
    ax.set_ylim(min(ranks) - 0.8, top + 0.7)
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    data = collect(_rules_module())
    draw(data, ROOT / "docs" / "architecture.png")
    results = ROOT / "docs" / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "architecture.json").write_text(json.dumps(data, indent=1) + "\n")
    print("rules:", data["rules"])
    print("wrote docs/architecture.png and docs/results/architecture.json")


if __name__ == "__main__":
    main()
