"""What ``tessera estimate`` prints and writes: a per-layer table, a JSON document and a plot,
every one labelled as an estimate."""

from __future__ import annotations

import json
from pathlib import Path

from rich.table import Table

from .model import Design

LABEL = "ESTIMATE (analytical model, docs/estimate.md; not a synthesis result)"


def _grid(d: Design) -> str:
    return "x".join(map(str, d.grid)) if d.grid else "none"


def layer_table(d: Design, title: str) -> Table:
    table = Table(title=f"{title}\n{LABEL}")
    cols = ("node", "op", "reuse", "blocks", "MACs", "mults/R", "kind", "DSP", "LUT", "FF", "BRAM18", "II cycles",
            "latency")
    for c in cols:
        table.add_column(c, justify="left" if c in ("node", "op", "kind") else "right")
    for x in d.layers:
        table.add_row(x.node, x.op, str(x.reuse), str(x.blocks), f"{x.macs:,}", f"{x.mults:,}/{x.reuse}={x.multipliers:,}"
                      if x.mults else "-", x.mult_kind, f"{x.dsp:,}", f"{x.lut:,}", f"{x.ff:,}", f"{x.bram18:,}",
                      f"{x.ii:,}", f"{x.latency:,}")
    return table


def summary_lines(d: Design) -> list[str]:
    t, u, cap, roof = d.totals, d.utilization, d.part.capacity(), d.roofline()
    mhz = 1000.0 / d.clock_ns
    res = ", ".join(f"{k.upper()} {t[k]:,}/{cap[k]:,} ({100 * u[k]:.1f} %)" for k in t)
    return [
        f"estimate for {d.part.key} ({d.part.device}, {d.part.name}; counts: {d.part.source})",
        f"design: {d.io_type}, {d.strategy} strategy, block grid {_grid(d)} ({d.n_blocks} blocks, "
        f"{100 * d.redundant_fraction:.1f} % redundant MACs), clock {d.clock_ns:g} ns",
        f"II {d.ii:,} cycles = {d.samples_per_s:,.1f} samples/s at {mhz:.0f} MHz; latency {d.latency:,} cycles "
        f"({d.latency * d.clock_ns / 1000:,.2f} us)",
        f"resources: {res}",
        f"fits the part (every resource <= {100 * d.utilization_limit:.0f} %): {'yes' if d.fits else 'NO'}",
        f"compute roofline: {roof['percent']:.2f} % ({roof['achieved_macs_per_cycle']:,.1f} of "
        f"{roof['peak_macs_per_cycle']:,.1f} MACs/cycle for this mix of multipliers); "
        f"MACs/sample {d.macs:,} (executed with halos {d.executed_macs:,})",
    ]


def write_json(d: Design, path: Path, model: str, sweep: list[Design] | None = None) -> None:
    doc = {"model": model, "label": LABEL, **d.to_dict()}
    if sweep:
        doc["reuse_sweep"] = [{"max_reuse": max(s.to_dict()["reuse"].values(), default=1), "ii_cycles": s.ii,
                               "latency_cycles": s.latency, "totals": s.totals, "fits": s.fits} for s in sweep]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, default=float))


def plot(d: Design, sweep: list[Design], path: Path, model: str) -> None:
    """Left: per-layer II of the chosen design (log) with each layer's reuse factor.  Right:
    the reuse trade-off (one factor for every layer) -- II against DSP and LUT use, the
    part's limits and the chosen design marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 4.8))
    layers = [x for x in d.layers if x.ii > 0]
    xs = range(len(layers))
    a.bar(xs, [x.ii for x in layers], color=["tab:blue" if x.mults else "tab:gray" for x in layers])
    for i, x in enumerate(layers):
        if x.mults:
            a.text(i, x.ii, f"R{x.reuse}", ha="center", va="bottom", fontsize=6)
    a.set_yscale("log")
    a.set_xticks(list(xs), [f"{x.op}" for x in layers], rotation=70, fontsize=6)
    a.set_ylabel("cycles per sample (II)")
    a.set_title(f"chosen design: {d.io_type}, grid {_grid(d)}", fontsize=9)
    cap = d.part.capacity()
    for key, color in (("dsp", "tab:red"), ("lut", "tab:green")):
        b.plot([s.ii for s in sweep], [100 * s.totals[key] / cap[key] if cap[key] else 0 for s in sweep], "o-",
               color=color, label=key.upper())
        b.plot([d.ii], [100 * d.totals[key] / cap[key] if cap[key] else 0], "*", color=color, markersize=14)
    b.axhline(100 * d.utilization_limit, color="k", ls="--", lw=0.8, label="utilization limit")
    b.set_xscale("log")
    b.set_yscale("symlog", linthresh=1)
    b.set_ylim(bottom=0)
    b.set_xlabel("II (cycles per sample); one reuse factor for all layers, star: chosen per-layer design")
    b.set_ylabel(f"% of {d.part.key}")
    b.legend(fontsize=8)
    b.set_title("reuse trade-off", fontsize=9)
    fig.suptitle(f"{model} on {d.part.device}: {LABEL}", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


__all__ = ["LABEL", "layer_table", "plot", "summary_lines", "write_json"]
