"""A longer fuzzing campaign than CI's: mutated real exports through the frontend, the exact
reference, the independent executor of the mutated file and, for many compiled mutants,
``tessera compile`` + g++ C-simulation ``tessera verify``; and random graphs of the supported
ops with random (modelled and unmodelled) attributes, each refused in one line or equal to
the user's file run in float64.  Runs the same tests as CI
(tests/reliability/test_fuzz_frontend.py, tests/reliability/test_oracle_property.py) with
more cases and writes docs/results/fuzz.{json,md}.

    python bench/fuzz.py                      # 1500 + 2000 cases, 12 + 12 C-simulated
    python bench/fuzz.py --cases 5000 --csim 40 --graphs 10000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=1500)
    ap.add_argument("--csim", type=int, default=12)
    ap.add_argument("--graphs", type=int, default=2000, help="random graphs for the oracle property")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results")
    ap.add_argument("--render-only", action="store_true", help="rewrite fuzz.md from an existing fuzz.json")
    args = ap.parse_args()
    if args.render_only:
        if not (args.out / "fuzz.json").is_file():
            sys.exit(f"error: --render-only needs {args.out / 'fuzz.json'} from an earlier run")
        data = json.loads((args.out / "fuzz.json").read_text())
        render(data, args.out)
        return data["pytest_exit_status"]
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "fuzz.json"
        env = {**os.environ, "TESSERA_FUZZ_CASES": str(args.cases), "TESSERA_FUZZ_CSIM": str(args.csim),
               "TESSERA_ORACLE_CASES": str(args.graphs), "TESSERA_ORACLE_CSIM": str(args.csim),
               "TESSERA_FUZZ_REPORT": str(report)}
        t0 = time.perf_counter()
        res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              str(ROOT / "tests" / "reliability" / "test_fuzz_frontend.py"),
                              str(ROOT / "tests" / "reliability" / "test_oracle_property.py")], env=env, cwd=ROOT)
        data = json.loads(report.read_text()) if report.is_file() else {}
    data["pytest_exit_status"] = res.returncode
    data["settings"] = {"cases": args.cases, "csim": args.csim, "graphs": args.graphs,
                        "seconds": round(time.perf_counter() - t0, 1)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "fuzz.json").write_text(json.dumps(data, indent=1) + "\n")
    render(data, args.out)
    return res.returncode


def render(data: dict, out: Path) -> None:
    """docs/results/fuzz.md from the campaign's JSON."""
    rc, st = data["pytest_exit_status"], data["settings"]
    # the tests assert every equality below: after a failing run the count is not known to be 0
    zero = "0" if rc == 0 else f"some (pytest exit status {rc}: see its output)"
    lines = ["# Fuzzing campaign (`python bench/fuzz.py`)", "",
             f"Settings: {st['cases']} feed-forward cases (seeds: a QONNX MLP and a Brevitas Conv3d/MaxPool3d/Linear/Tanh "
             f"export), {max(30, st['cases'] // 3)} recurrent cases (LSTM, GRU, ConvLSTM exports); the first "
             f"{st['csim']} distinct compiled feed-forward mutants through compile + C-simulation verify. "
             f"pytest exit status {rc} (0: no unhandled exception, hang, crash or mismatch).", "",
             "| campaign | cases | compiled (reference == integer semantics) | refused (one-line error) | seconds |",
             "|---|---|---|---|---|"]
    for name in ("feedforward", "recurrent"):
        d = data.get(name)
        if d:
            lines.append(f"| {name} | {d['cases']} | {d['compiled']} | {d['refused']} "
                         f"({', '.join(f'{k} {v}' for k, v in sorted(d['refusals_by_error'].items()))}) | {d['seconds']} |")
    c = data.get("feedforward_csim")
    if c:
        lines += ["", f"C-simulated mutants: {c['verified']} verified with {zero} mismatches (200 samples each), "
                      f"{c['refused_by_compile']} refused by `tessera compile` in one line; {c['seconds']} s.", "",
                  "*user model*: the mutated export itself run by qonnx/onnxruntime in float on the same inputs, "
                  "outputs that differ from the exact reference (a report: float execution may round).", "",
                  "| mutation | outcome | user model |", "|---|---|---|"]
        for x in c["cases"]:
            u = x.get("user_model")
            um = ("-" if u is None else f"{u['differing_outputs']}/{u['outputs']} differ" if u["execution"] == "ran" else
                  u["reason"])
            lines.append(f"| {x['mutation']} | {x.get('line') or x.get('message')} | {um} |")
    for name in ("feedforward", "recurrent"):
        d = data.get(name)
        if d:
            lines += ["", f"Mutation kinds ({name}): " + ", ".join(f"{k} {v}" for k, v in sorted(d["mutations"].items()))]
    f = data.get("feedforward")
    if f:
        lines += ["", f"Independent executor (the mutated file itself, ONNX reference evaluator in float64): "
                      f"{f['independent_equal_outputs']} outputs of the compiled feed-forward mutants equal the exact "
                      f"reference, {f['independent_undecidable_outputs']} undecidable (a Quant input within 2^-40 of a "
                      f"rounding boundary), {zero} differ."]
    o = data.get("oracle_property")
    if o:
        several = (f"; {o['several_inputs']} of the compiled graphs have two inputs, {o['several_outputs']} two "
                   "outputs" if "several_inputs" in o else "")
        lines += ["", f"Oracle property ({o['cases']} random graphs of Quant, Conv, MaxPool, AveragePool, Relu, "
                      "LeakyRelu, Resize (nearest and linear; cubic, refused; integer, fractional and below-1 "
                      "scales), GlobalAveragePool, BatchNormalization on codes, tabulated nonlinearities (Sigmoid, "
                      "Tanh, HardSigmoid, HardSwish, Elu, Selu, Softsign, Softplus, ThresholdedRelu) on codes and on "
                      "a float-scaled accumulator (staircases), two branches joined by Max / Min / Sub / Add, "
                      "Slice, Split, ReduceMean, a second input joined with the first, a second output, with random "
                      f"attributes, opset 13 and 19): {o['refused']} "
                      f"refused in one line ({', '.join(f'{k} {v}' for k, v in sorted(o['refusals'].items()))}), "
                      f"{o['compiled']} compiled, {o['equal']} of {o['outputs']} outputs equal the user's file run by "
                      f"the independent executor, {o['undecidable']} undecidable (a Quant input within 2^-40 of a "
                      "rounding boundary, which float64 cannot place), "
                      f"{o['outputs'] - o['equal'] - o['undecidable']} differ{several}; {o['seconds']} s."]
    oc = data.get("oracle_property_csim")
    if oc:
        lines += ["", f"Random graphs through compile + C-simulation verify: {oc['verified']} verified, "
                      f"{oc['outputs']} outputs, {zero} mismatches, {oc['refused_by_compile']} refused by `compile` in one "
                      f"line; {oc['seconds']} s."]
    (out / "fuzz.md").write_text("\n".join(lines) + "\n")
    print((out / "fuzz.md").read_text())


if __name__ == "__main__":
    sys.exit(main())
