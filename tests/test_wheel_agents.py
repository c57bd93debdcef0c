"""From the built wheel alone (no path of this checkout on `sys.path`), the docs' agents run:
the two shapes' examples and each framework adapter's example, importing public names only,
against a scripted model behind the loopback test server, reach the optimal plan's success:
the verdict of `builtin:follower` on every episode of the `optimal` variant."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

from pytest_resilibench.servers.testserver import OpenAITestServer

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"
VERDICT = ("outcome", "conditions", "turns", "tool_calls", "stop_reason")
# Each example and the extra it needs (None: the base install).
AGENTS = {"turn_agent": None, "planner_agent": None, "agents_sdk_agent": "agents",
          "langgraph_agent": "langgraph"}


def test_the_docs_agents_run_from_the_wheel(wheel_site: Path, tmp_path: Path) -> None:
    missing = [extra for extra in AGENTS.values() if extra and find_spec(extra) is None]
    if missing:
        pytest.skip(f"the adapters' extras are not installed ({', '.join(missing)}): "
                    'pip install -e ".[agents-sdk,langgraph]"')
    examples = tmp_path / "examples"
    shutil.copytree(EXAMPLES, examples)
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(wheel_site), str(examples)]),
           "OPENAI_API_KEY": "sk-test", "AGENT_MODEL": "builtin:follower"}
    where = subprocess.run(
        [sys.executable, "-c", "import pytest_resilibench.adapters.langgraph as m; "
         "print(m.__file__)"], cwd=empty, env=env, capture_output=True, text=True, check=True)
    assert where.stdout.startswith(str(wheel_site))
    specs = [f"py:{name}:make_agent" for name in AGENTS]
    report = tmp_path / "run.json"
    with OpenAITestServer() as server:
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
             f"--resili-model={','.join([*specs, 'builtin:follower'])}",
             "--resili-variants=optimal", "--resili-sample=1", f"--resili-report={report}"],
            cwd=empty, env={**env, "OPENAI_BASE_URL": server.base_url},
            capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    episodes = json.loads(report.read_text())["episodes"]
    verdicts: dict[str, dict[str, tuple[object, ...]]] = {}
    for ep in episodes:
        verdicts.setdefault(ep["model"], {})[ep["task_id"]] = tuple(ep[k] for k in VERDICT)
    follower = verdicts["builtin:follower"]
    assert len(follower) == 15
    assert sum(v[0] == "full" for v in follower.values()) >= 12  # the optimal plan works
    for spec in specs:
        assert verdicts[spec] == follower, spec
