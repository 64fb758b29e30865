"""The report of the demo's project, seen in headless Chromium: docs/report.png.

Builds what ``tessera demo`` builds -- ``digits_cnn_w8a8`` trained on the real MNIST digits
(reused when ``WORK/model/model.onnx`` exists), compiled to an HLS project, verified on
``--samples`` full-range samples plus the held-out test digits -- which writes the project's
``report.html``; or, with ``--project``, takes a compiled project as it is and rewrites its
report.  Then opens the report in headless Chromium at a laptop's width (no request may leave
the file, no console error may appear) and writes a PNG of the whole page.

    python bench/report_screenshot.py [--work runs/report_demo] [--out docs/report.png]
    python bench/report_screenshot.py --project runs/demo/hls_project
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = "digits_cnn_w8a8"


def demo_project(work: Path, samples: int) -> Path:
    """The demo's model (trained here unless already there), compiled and verified."""
    from tessera.compiler import api

    model_dir = work / "model"
    if not (model_dir / "model.onnx").is_file():
        from tessera.models.train import train_model

        print(f"training {MODEL} into {model_dir} (a few minutes on CPU)")
        train_model(MODEL, model_dir, progress=sys.stderr.isatty())
    model = model_dir / "model.onnx"
    t0 = time.perf_counter()
    prj = api.compile_model(model, work / "hls_project", api.CompileOptions(force=True)).project
    print(f"compiled {model} -> {prj} in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    report = api.verify_project(model, prj, api.VerifyOptions(samples=samples, data=model_dir / "test_inputs.npy"))
    print(f"{report.verdict()} ({time.perf_counter() - t0:.1f} s)")
    if not report.passed:
        raise SystemExit("the demo's project did not verify: no screenshot")
    return prj


def screenshot(prj: Path, out: Path, width: int) -> Path:
    """The report of ``prj`` rendered, checked to fetch nothing and log no error, as a PNG."""
    from tessera.compiler.report import write_report
    from tessera.compiler.report.browser import Chromium

    page_path = write_report(prj)
    with Chromium() as browser:
        page = browser.page()
        page.open(page_path, width=width)
        outside = [url for url in page.requests if url != page.url]
        if outside or page.console:
            raise SystemExit(f"the report is not self-contained: requests {outside}, console {page.console}")
        out.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(out)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=ROOT / "runs" / "report_demo", help="where the demo's files go")
    ap.add_argument("--project", type=Path, help="a compiled project to take as it is (no training, no compile)")
    ap.add_argument("--samples", type=int, default=1000, help="full-range samples verify adds to the test digits")
    ap.add_argument("--width", type=int, default=1440, help="the browser's width in CSS pixels")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "report.png")
    args = ap.parse_args()
    prj = args.project if args.project is not None else demo_project(args.work, args.samples)
    print(f"screenshot of {prj / 'report.html'} -> {screenshot(prj, args.out, args.width)}")


if __name__ == "__main__":
    main()
