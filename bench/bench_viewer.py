"""The HTML report of the default run in a browser: its size and how long its viewer takes to
decompress the episodes and to draw a filtered table, as the page itself measures them
(`report_viewer.js`: `performance.now()` around the decompression and around each drawing).

The default run (`pytest suites`, 1500 episodes of builtin:adaptive) with trajectories, its
`resilibench report --html`, then headless Chromium (Debian's /usr/bin/chromium, driven by
Playwright) opens the page `--loads` times, each a fresh page, and reads the timings the
episode view prints. The README's figures come from here.

    python bench/bench_viewer.py [--loads 5] [--report RUN.json]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TIMING = re.compile(r"selected and drawn in (\d+) ms \(episodes decompressed in (\d+) ms\)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--report", type=Path, help="an existing report (default: run one)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        report = args.report or Path(tmp) / "run.json"
        if args.report is None:
            subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "suites"), "-q",
                            "-p", "no:cacheprovider", "--resili-trajectories",
                            f"--resili-report={report}"], check=True, cwd=tmp,
                           stdout=subprocess.DEVNULL)
        page_path = Path(tmp) / "run.html"
        out = subprocess.run([sys.executable, "-m", "pytest_resilibench.cli", "report",
                              str(report), "--html", str(page_path)], check=True, cwd=tmp,
                             capture_output=True, text=True).stdout
        print(out.strip().splitlines()[-1])
        size = page_path.stat().st_size
        print(f"file: {size:,} bytes = {size / 2**20:.2f} MiB")
        decompress, draw = [], []
        with sync_playwright() as p:
            context = p.chromium.launch_persistent_context(
                str(Path(tmp) / "profile"), executable_path="/usr/bin/chromium", args=ARGS,
                headless=True)
            for _ in range(args.loads):
                page = context.new_page()
                page.goto(page_path.as_uri() + "#view=episodes&variant=optimal")
                page.wait_for_selector(".pager .timing")
                found = TIMING.search(page.locator(".pager").inner_text())
                assert found is not None
                draw.append(int(found.group(1)))
                decompress.append(int(found.group(2)))
                page.close()
            context.close()
    print(f"decompress ms over {args.loads} loads: {decompress} "
          f"(median {statistics.median(decompress):.0f})")
    print(f"filter + draw ms: {draw} (median {statistics.median(draw):.0f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
