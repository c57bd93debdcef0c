"""The screenshot of docs/OTEL.md: one episode's trace in Arize Phoenix's trace view, taken in a
real browser (Debian's /usr/bin/chromium driven by Playwright).

Starts Phoenix on loopback in a temporary folder (tests/plugin/otel_receiver.py, as the tests
do; its `phoenix` from RESILIBENCH_PHOENIX or PATH), runs a small suite with `--resili-otel`
(builtin:adaptive, one task per cell, the realistic fault profile), picks the episode with
the most failed tool calls among those that still ended in full success (recovered faults:
red tool spans and a green root, a tree that fits the page), opens its trace through Phoenix's
`/redirects/traces/{trace_id}`, selects a failed tool span, shows its attributes and saves
the page as PNG (default: docs/img/otel_phoenix_trace.png).

    RESILIBENCH_PHOENIX=/path/to/phoenix python bench/otel_screenshot.py [OUT.png]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PROJECT = "resilibench-demo"
RUN = ["-q", "-p", "no:cacheprovider", "-n", "0", "--resili-model=builtin:adaptive",
       "--resili-sample=1", "--resili-variants=baseline,flawed",
       "--resili-flaws=missing_step,parameter_error", "--resili-faults=realistic",
       "--resili-resume=off", "--resili-otel"]


def _chosen(episodes: list[dict[str, Any]]) -> dict[str, Any]:
    """A full success that met the most faults, at most 10 turns (the tree fits the page)."""
    fits = [e for e in episodes if e["outcome"] == "full" and e["turns"] <= 10]
    return max(fits, key=lambda e: (e["errors_met"], e["turns"], e["id"]))


def main() -> int:
    from playwright.sync_api import sync_playwright

    from tests.plugin.otel_receiver import phoenix_executable, running_phoenix

    out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs/img/otel_phoenix_trace.png")
    if phoenix_executable() is None:
        raise SystemExit("Arize Phoenix not found: set RESILIBENCH_PHOENIX to its `phoenix`")
    with tempfile.TemporaryDirectory() as tmp, running_phoenix(Path(tmp) / "phoenix") as phoenix:
        report = Path(tmp) / "run.json"
        env = {**os.environ, **phoenix.otlp_env, "OTEL_SERVICE_NAME": "resilibench",
               "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={PROJECT}",
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        subprocess.run([sys.executable, "-m", "pytest", "suites", *RUN,
                        f"--resili-report={report}"], cwd=ROOT, env=env, check=False,
                       stdout=subprocess.DEVNULL)
        episodes = json.loads(report.read_text())["episodes"]
        episode = _chosen(episodes)
        spans = phoenix.wait_for_spans(
            sum(1 + e["tool_calls"] + e["turns"] for e in episodes), PROJECT)
        (root,) = [s for s in spans if s["parent_id"] is None
                   and s["attributes"].get("resilibench.id") == episode["id"]]
        trace_id = root["context"]["trace_id"]
        print(f"episode {episode['id']}: {episode['turns']} turns, "
              f"{episode['errors_met']} faults met; trace {trace_id}")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.goto(f"{phoenix.base_url}/redirects/traces/{trace_id}")
            page.get_by_text(f"invoke_agent {root['attributes']['gen_ai.agent.name']}"
                             ).first.wait_for()
            failed = page.get_by_text("execute_tool ").filter(
                has_text=next(s["name"].removeprefix("execute_tool ") for s in spans
                              if s["context"]["trace_id"] == trace_id
                              and s["status_code"] == "ERROR"))
            failed.first.click()
            page.get_by_role("tab", name="Attributes").click()
            page.wait_for_timeout(1500)  # the attributes panel draws
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out))
            browser.close()
    print(f"{out}: {out.stat().st_size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
