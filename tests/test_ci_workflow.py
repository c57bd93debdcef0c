"""docs/ci/github-actions.yml and docs/ci/baseline.sh, run as GitHub would run them.

Each case runs the workflow's job in a simulated runner: the YAML is read, each step's `if:` and
`${{ }}` expressions are evaluated, each `run:` goes to `bash -eo pipefail` in a temporary git
repository (a clone of a bare "origin" holding the release tags) with the variables GitHub sets
(GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, GITHUB_REF..., one output and summary file per step), and
the actions are played by the runner (checkout, setup-python and cache do nothing here;
upload-artifact stores the files). `gh` is a stub on PATH that serves a fake GitHub (runs,
artifacts, expired ones, a token that is refused) with gh's own error messages; `pip` is a stub
too. The Benchmark step runs the REAL plugin of this tree, with a small sample and a `py:` agent
of the repository (so it needs the workflow's PYTHONPATH line). A finished job becomes a run of
the fake GitHub, with its conclusion and artifacts, so a later job can pick it as its baseline.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML (the [dev] extra) is not installed")

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "docs" / "ci" / "github-actions.yml"
BASELINE_SH = ROOT / "docs" / "ci" / "baseline.sh"
REPO = "acme/agent"
WORKFLOW_FILE = "resilibench.yml"
# Where the workflow's header comment says to copy the files.
WORKFLOW_PATH = f".github/workflows/{WORKFLOW_FILE}"
SCRIPT_PATH = ".github/scripts/resilibench-baseline.sh"
AGENT = "py:release_agent:make_agent"
# The job's settings for a small run (the workflow's own: 10 tasks a cell, 4 processes).
SMALL = {"MODEL": AGENT, "NEEDS_API_KEY": "false", "SAMPLE": "1", "WORKERS": "0"}

# The plugin appends its verdicts to $GITHUB_STEP_SUMMARY (issue 45, the lead's gate rewrite):
# set this to True once it does, and `check_plugin_summary` checks what it wrote.

pytestmark = pytest.mark.xdist_group("ci-workflow")


# --- the workflow ------------------------------------------------------------------------------
def load_workflow() -> dict[Any, Any]:
    data: dict[Any, Any] = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    return data


def the_job(data: dict[Any, Any]) -> dict[str, Any]:
    (job,) = data["jobs"].values()
    assert isinstance(job, dict)
    return job


# --- GitHub's expressions (the subset a workflow uses) -----------------------------------------
_TOKEN = re.compile(r"""\s*(?:
    (?P<str>'(?:[^']|'')*')
  | (?P<num>\d+(?:\.\d+)?)
  | (?P<op>==|!=|<=|>=|&&|\|\||[!<>(),])
  | (?P<name>[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_*][A-Za-z0-9_-]*)*)
)""", re.VERBOSE)
_STATUS_FUNCTIONS = ("success", "failure", "always", "cancelled")


def _falsy(value: Any) -> bool:
    return value in (None, False, "", 0)


def evaluate(expression: str, context: dict[str, Any], *, job_failed: bool = False) -> Any:
    """Evaluate a GitHub expression: context paths (`steps.x.outputs.y`, a missing one is
    null), string and number literals, == != < > && || ! and parentheses, and the functions
    success(), failure(), always(), cancelled(), startsWith(), endsWith(), contains()."""
    text = expression.strip()
    if text.startswith("${{") and text.endswith("}}"):
        text = text[3:-2]
    python: list[str] = []
    pos = 0
    while pos < len(text.rstrip()):
        match = _TOKEN.match(text, pos)
        assert match, f"cannot read the expression {expression!r} at {text[pos:]!r}"
        pos = match.end()
        if match["str"] is not None:
            python.append(repr(match["str"][1:-1].replace("''", "'")))
        elif match["num"] is not None:
            python.append(match["num"])
        elif match["op"] is not None:
            python.append({"&&": " and ", "||": " or ", "!": " not "}.get(match["op"],
                                                                        match["op"]))
        elif match["name"] in ("true", "false", "null"):
            python.append({"true": "True", "false": "False", "null": "None"}[match["name"]])
        elif text[pos:].lstrip().startswith("("):
            python.append(f"_fn_{match['name']}")
        else:
            python.append(f"_path({match['name']!r})")

    def path(dotted: str) -> Any:
        value: Any = context
        for part in dotted.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return value

    def text_of(value: Any) -> str:
        return "" if value is None else str(value).lower()

    functions: dict[str, Callable[..., Any]] = {
        "_path": path,
        "_fn_success": lambda: not job_failed,
        "_fn_failure": lambda: job_failed,
        "_fn_always": lambda: True,
        "_fn_cancelled": lambda: False,
        "_fn_startsWith": lambda a, b: text_of(a).startswith(text_of(b)),
        "_fn_endsWith": lambda a, b: text_of(a).endswith(text_of(b)),
        "_fn_contains": lambda a, b: text_of(b) in text_of(a),
    }
    return eval("".join(python), {"__builtins__": {}}, functions)  # our own YAML only


def step_runs(condition: str | None, context: dict[str, Any], job_failed: bool) -> bool:
    """A step's `if:`, with GitHub's implicit success() when it names no status function."""
    if condition is None:
        return not job_failed
    text = str(condition)
    if not any(re.search(rf"\b{name}\s*\(", text) for name in _STATUS_FUNCTIONS):
        text = f"success() && ({text.strip().removeprefix('${{').removesuffix('}}')})"
    return not _falsy(evaluate(text, context, job_failed=job_failed))


def substitute(value: Any, context: dict[str, Any]) -> str:
    """A value with each `${{ expression }}` replaced by its value, as GitHub writes it."""
    def one(match: re.Match[str]) -> str:
        result = evaluate(match[1], context)
        if isinstance(result, bool):
            return "true" if result else "false"
        return "" if result is None else str(result)

    return re.sub(r"\$\{\{(.*?)\}\}", one, str(value))


# --- the fake GitHub and its gh ----------------------------------------------------------------
GH_STUB = r'''
"""gh, as far as the workflow uses it, serving $FAKE_GITHUB/state.json; gh's own messages."""
import json, os, shutil, subprocess, sys
from pathlib import Path

root = Path(os.environ["FAKE_GITHUB"])
state = json.loads((root / "state.json").read_text())
args = sys.argv[1:]
with open(root / "gh.log", "a") as log:
    log.write(json.dumps(args) + "\n")


def fail(message, code=1):
    sys.stderr.write(message + "\n")
    sys.exit(code)


if not (os.environ.get("GH_TOKEN") or os.environ.get("GITHUB_TOKEN")):
    fail("gh: To use GitHub CLI in a GitHub Actions workflow, set the GH_TOKEN environment "
         "variable. Example:\n  env:\n    GH_TOKEN: ${{ github.token }}", 4)
VALUED = {"-R": "repo", "--repo": "repo", "-w": "workflow", "--workflow": "workflow",
          "-b": "branch", "--branch": "branch", "-e": "event", "--event": "event",
          "-s": "status", "--status": "status", "-L": "limit", "--limit": "limit",
          "--json": "json", "-q": "jq", "--jq": "jq", "-n": "name", "--name": "name",
          "-D": "dir", "--dir": "dir"}
words, options = [], {}
rest = iter(args)
for arg in rest:
    flag, eq, value = arg.partition("=")
    if flag in VALUED:
        options[VALUED[flag]] = value if eq else next(rest)
    elif arg.startswith("-"):
        fail(f"unknown flag: {arg}")
    else:
        words.append(arg)
repo = options.get("repo", state["repo"])
api = f"https://api.github.com/repos/{repo}"
if words[:2] == ["run", "list"]:
    workflow = options.get("workflow")
    if state.get("deny"):
        fail(f"HTTP 403: Resource not accessible by integration ({api}/actions/workflows/"
             f"{workflow})")
    if workflow is not None and workflow not in state["workflows"]:
        fail(f"could not find any workflows named {workflow}")
    runs = [run for run in state["runs"]
            if (workflow is None or run["workflow"] == workflow)
            and options.get("branch") in (None, run["headBranch"])
            and options.get("event") in (None, run["event"])
            and options.get("status") in (None, run["status"], run["conclusion"])]
    runs.sort(key=lambda run: -run["databaseId"])
    runs = runs[:int(options.get("limit", 20))]
    if "json" not in options:
        fail("the gh stub answers `run list` with --json only", 2)
    rows = [{key: run[key] for key in options["json"].split(",")} for run in runs]
    expression = options.get("jq")
    if expression is None:
        print(json.dumps(rows, indent=2))
    elif expression.startswith(".[]."):
        for row in rows:
            print(row[expression[4:]])
    elif shutil.which("jq"):
        sys.exit(subprocess.run(["jq", "-r", expression], input=json.dumps(rows),
                                text=True).returncode)
    else:
        fail(f"the gh stub cannot run --jq {expression!r} without jq", 2)
elif words[:2] == ["run", "download"] and len(words) == 3:
    run_id = int(words[2])
    where = f"{api}/actions/runs/{run_id}/artifacts?per_page=100"
    if state.get("deny"):
        fail(f"error fetching artifacts: HTTP 403: Resource not accessible by integration "
             f"({where})")
    if not any(run["databaseId"] == run_id for run in state["runs"]):
        fail(f"error fetching artifacts: HTTP 404: Not Found ({where})")
    valid = [a for a in state["artifacts"] if a["run"] == run_id and not a["expired"]]
    if not valid:
        fail("no valid artifacts found to download")
    wanted = [a for a in valid if a["name"] == options["name"]]
    if not wanted:
        fail("no artifact matches any of the names or patterns provided")
    target = Path(options.get("dir", "."))
    source = root / "artifacts" / str(wanted[0]["id"])
    shutil.copytree(source, target, dirs_exist_ok=True)
else:
    fail(f"the gh stub does not serve `gh {' '.join(args)}`", 2)
'''


class FakeGitHub:
    """The repository's runs and artifacts, in a folder the gh stub reads."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "artifacts").mkdir(parents=True)
        self.state: dict[str, Any] = {"repo": REPO, "workflows": [WORKFLOW_FILE],
                                      "deny": False, "runs": [], "artifacts": []}
        self.next_id = 1000
        self.save()

    def save(self) -> None:
        (self.root / "state.json").write_text(json.dumps(self.state, indent=1))

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def add_run(self, run_id: int, head: str, event: str, conclusion: str) -> None:
        self.state["runs"].append({"databaseId": run_id, "workflow": WORKFLOW_FILE,
                                   "headBranch": head, "event": event, "status": "completed",
                                   "conclusion": conclusion})
        self.save()

    def add_artifact(self, run_id: int, name: str, files: dict[str, bytes],
                     artifact_id: int | None = None) -> int:
        assert not self.artifacts(run_id, name), f"run {run_id} uploaded {name} twice (409)"
        artifact_id = artifact_id or self.new_id()
        for rel, data in files.items():
            target = self.root / "artifacts" / str(artifact_id) / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        self.state["artifacts"].append({"id": artifact_id, "run": run_id, "name": name,
                                        "expired": False, "files": sorted(files)})
        self.save()
        return artifact_id

    def artifacts(self, run_id: int, name: str | None = None) -> list[dict[str, Any]]:
        return [a for a in self.state["artifacts"]
                if a["run"] == run_id and name in (None, a["name"])]

    def artifact_file(self, artifact: dict[str, Any], rel: str) -> bytes:
        return (self.root / "artifacts" / str(artifact["id"]) / rel).read_bytes()

    def release(self, tag: str, conclusion: str, report: bytes | None) -> int:
        """An earlier run of the workflow on a release tag, with its baseline artifact."""
        run_id = self.new_id()
        self.add_run(run_id, tag, "push", conclusion)
        if report is not None:
            self.add_artifact(run_id, "resilibench-baseline", {"report.json": report})
        return run_id

    def expire(self, run_id: int) -> None:
        for artifact in self.artifacts(run_id):
            artifact["expired"] = True
        self.save()

    def calls(self) -> list[list[str]]:
        log = self.root / "gh.log"
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines()]


# --- the repository ----------------------------------------------------------------------------
AGENT_MODULE = '''\
"""The agent under test: a py:MODULE:FACTORY agent of the repository."""
from pytest_resilibench import make_agent as _make


def make_agent():
    return _make("builtin:adaptive")
'''

GIT_ENV = {"GIT_AUTHOR_NAME": "ci", "GIT_AUTHOR_EMAIL": "ci@example.com",
           "GIT_COMMITTER_NAME": "ci", "GIT_COMMITTER_EMAIL": "ci@example.com",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, text=True,
                          capture_output=True).stdout


def make_origin(root: Path, tags: list[str]) -> Path:
    """A bare origin whose main holds the workflow, the baseline script and the agent, and a
    commit per tag (an annotated tag for every other one: both kinds are releases)."""
    source = root / "source"
    (source / ".github" / "workflows").mkdir(parents=True)
    (source / ".github" / "scripts").mkdir()
    shutil.copy(WORKFLOW, source / WORKFLOW_PATH)
    shutil.copy(BASELINE_SH, source / SCRIPT_PATH)
    (source / "release_agent.py").write_text(AGENT_MODULE)
    git(source, "init", "-q", "-b", "main")
    git(source, "add", ".")
    git(source, "commit", "-q", "-m", "the agent")
    for number, tag in enumerate(tags):
        git(source, "commit", "-q", "--allow-empty", "-m", f"release {tag}")
        if number % 2:
            git(source, "tag", "-a", tag, "-m", tag)
        else:
            git(source, "tag", tag)
    origin = root / "origin.git"
    git(root, "init", "-q", "--bare", "-b", "main", str(origin))
    git(source, "push", "-q", str(origin), "main", "--tags")
    return origin


# --- the runner --------------------------------------------------------------------------------
@dataclass
class Step:
    name: str
    outcome: str  # success, failure or skipped
    outputs: dict[str, str] = field(default_factory=dict)
    log: str = ""
    summary: str = ""


@dataclass
class Job:
    run_id: int
    conclusion: str
    steps: dict[str, Step]
    summary: str
    annotations: list[tuple[str, str]]  # (notice / warning / error, the whole line)
    workspace: Path

    def notices(self) -> list[str]:
        return [line for kind, line in self.annotations if kind == "notice"]

    def step(self, name_or_id: str) -> Step:
        return self.steps[name_or_id]


@dataclass
class Event:
    """What triggered the job: a pushed tag, or a pull request (from a fork or not)."""

    name: str  # push or pull_request
    tag: str | None = None
    fork: str | None = None  # the fork's owner/name

    def github(self) -> dict[str, Any]:
        if self.name == "push":
            assert self.tag
            return {"event_name": "push", "ref": f"refs/tags/{self.tag}", "ref_name": self.tag,
                    "ref_type": "tag", "head_ref": "", "base_ref": "", "event": {}}
        head = self.fork or REPO
        return {"event_name": "pull_request", "ref": "refs/pull/7/merge",
                "ref_name": "7/merge", "ref_type": "branch", "head_ref": "feature",
                "base_ref": "main",
                "event": {"number": 7, "pull_request": {"head": {
                    "ref": "feature", "repo": {"full_name": head, "fork": bool(self.fork)}}}}}


def parse_outputs(path: Path) -> dict[str, str]:
    """GITHUB_OUTPUT's two forms: name=value, and name<<DELIMITER ... DELIMITER."""
    outputs: dict[str, str] = {}
    lines = iter(path.read_text().splitlines()) if path.exists() else iter(())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            body = []
            for more in lines:
                if more == delimiter:
                    break
                body.append(more)
            outputs[name] = "\n".join(body)
        elif "=" in line:
            name, value = line.split("=", 1)
            outputs[name] = value
    return outputs


def run_job(tmp: Path, origin: Path, hub: FakeGitHub, event: Event, *,
            settings: dict[str, str], secrets: dict[str, str] | None = None,
            deny_token: bool = False) -> Job:
    """Run the workflow's job for `event` on a fresh checkout of `origin`; record the run (its
    conclusion, its artifacts) in `hub`."""
    tmp.mkdir(parents=True)
    workspace = tmp / "workspace"
    git(tmp, "clone", "-q", str(origin), str(workspace))
    if event.tag:
        git(workspace, "checkout", "-q", event.tag)
    runner_temp = tmp / "runner"
    stubs = tmp / "stubs"
    runner_temp.mkdir()
    stubs.mkdir()
    (stubs / "gh").write_text(f"#!{sys.executable}\n{GH_STUB}")
    (stubs / "pip").write_text(f'#!/bin/sh\necho "pip $*" >> "{tmp}/pip.log"\n')
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    hub.state["deny"] = deny_token
    hub.save()

    run_id = hub.new_id()
    data = load_workflow()
    job = the_job(data)
    github = {**event.github(), "repository": REPO, "sha": git(workspace, "rev-parse", "HEAD")
              .strip(), "token": "ghs_read_only" if event.fork else "ghs_token",
              "workflow": data["name"], "run_id": str(run_id), "workspace": str(workspace),
              "server_url": "https://github.com"}
    context: dict[str, Any] = {"github": github, "secrets": secrets or {}, "vars": {},
                               "steps": {}, "env": {}}
    job_env = {name: substitute(value, context) for name, value in job["env"].items()}
    job_env.update(settings)
    context["env"] = job_env
    event_path = runner_temp / "event.json"
    event_path.write_text(json.dumps(github["event"]))
    base_env = {
        "PATH": os.pathsep.join([str(stubs), str(Path(sys.executable).parent),
                                 os.environ.get("PATH", "/usr/bin:/bin")]),
        "HOME": str(tmp / "home"), "LANG": "C.UTF-8", **GIT_ENV,
        # What `pip install pytest-resilibench` would have installed: this tree.
        "PYTHONPATH": str(ROOT),
        "CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": REPO,
        "GITHUB_EVENT_NAME": github["event_name"], "GITHUB_EVENT_PATH": str(event_path),
        "GITHUB_REF": github["ref"], "GITHUB_REF_NAME": github["ref_name"],
        "GITHUB_REF_TYPE": github["ref_type"], "GITHUB_HEAD_REF": github["head_ref"],
        "GITHUB_BASE_REF": github["base_ref"], "GITHUB_SHA": github["sha"],
        "GITHUB_WORKSPACE": str(workspace), "GITHUB_RUN_ID": str(run_id),
        "GITHUB_SERVER_URL": github["server_url"], "GITHUB_WORKFLOW": data["name"],
        "GITHUB_WORKFLOW_REF": f"{REPO}/{WORKFLOW_PATH}@{github['ref']}",
        "RUNNER_TEMP": str(runner_temp), "FAKE_GITHUB": str(hub.root),
    }
    (tmp / "home").mkdir()

    steps: dict[str, Step] = {}
    annotations: list[tuple[str, str]] = []
    failed = False
    uploads: list[tuple[int, str, dict[str, bytes]]] = []
    for number, spec in enumerate(job["steps"]):
        name = spec.get("name") or spec["uses"]
        key = spec.get("id") or name
        if not step_runs(spec.get("if"), context, failed):
            steps[key] = Step(name, "skipped")
            context["steps"][key] = {"outcome": "skipped", "conclusion": "skipped",
                                     "outputs": {}}
            continue
        files = runner_temp / f"step{number}"
        files.mkdir()
        env = {**base_env, **job_env,
               **{k: substitute(v, context) for k, v in spec.get("env", {}).items()},
               "GITHUB_OUTPUT": str(files / "output"),
               "GITHUB_STEP_SUMMARY": str(files / "summary"), "GITHUB_ENV": str(files / "env")}
        if "run" in spec:
            script = files / "script.sh"
            script.write_text(substitute(spec["run"], context))
            done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail",
                                   str(script)], cwd=workspace, env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  timeout=300)
            ok, log, outputs = done.returncode == 0, done.stdout, parse_outputs(files / "output")
        else:
            inputs = {k: substitute(v, context) for k, v in spec.get("with", {}).items()}
            ok, log, outputs, upload = run_action(spec["uses"], inputs, workspace, hub, run_id)
            if upload is not None:
                uploads.append(upload)
        annotations += [(m[1], m[0]) for m in
                        re.finditer(r"^::(notice|warning|error)[^\n]*", log, re.MULTILINE)]
        summary_file = files / "summary"
        summary = summary_file.read_text() if summary_file.exists() else ""
        outcome = "success" if ok else "failure"
        steps[key] = Step(name, outcome, outputs, log, summary)
        context["steps"][key] = {"outcome": outcome, "conclusion": outcome, "outputs": outputs}
        failed = failed or not ok
    conclusion = "failure" if failed else "success"
    head = event.tag if event.tag else github["head_ref"]
    hub.add_run(run_id, head, event.name, conclusion)
    for artifact_id, artifact_name, artifact_files in uploads:
        hub.add_artifact(run_id, artifact_name, artifact_files, artifact_id)
    return Job(run_id, conclusion, steps, "".join(step.summary for step in steps.values()),
               annotations, workspace)


def run_action(uses: str, inputs: dict[str, str], workspace: Path, hub: FakeGitHub,
               run_id: int) -> tuple[bool, str, dict[str, str],
                                     tuple[int, str, dict[str, bytes]] | None]:
    """The actions the workflow uses: (ok, log, outputs, the artifact it uploads)."""
    action = uses.split("@")[0]
    if action in ("actions/checkout", "actions/setup-python", "actions/cache"):
        return True, f"{uses}: played by the test runner\n", {}, None
    assert action == "actions/upload-artifact", f"the test runner cannot play {uses}"
    files: dict[str, bytes] = {}
    for pattern in inputs["path"].split("\n"):
        for path in sorted(workspace.glob(pattern.strip())) if pattern.strip() else []:
            if path.is_file():
                files[path.relative_to(workspace).as_posix()] = path.read_bytes()
    if not files:
        behaviour = inputs.get("if-no-files-found", "warn")
        if behaviour == "error":
            return False, f"::error::No files were found with the provided path: " \
                          f"{inputs['path']}. No artifacts will be uploaded.\n", {}, None
        return True, "no files: nothing uploaded\n", {}, None
    artifact_id = hub.new_id()
    url = f"https://github.com/{REPO}/actions/runs/{run_id}/artifacts/{artifact_id}"
    name = inputs.get("name", "artifact")
    return (True, f"uploaded {name}: {sorted(files)}\n",
            {"artifact-id": str(artifact_id), "artifact-url": url}, (artifact_id, name, files))


# --- checks ------------------------------------------------------------------------------------
def check_links_resolve(job: Job, hub: FakeGitHub) -> None:
    """Every artifact link of the summary is an artifact this run uploaded, under the name the
    link shows, holding each file its line names; nothing links a file outside an artifact
    (the old summary linked a report.html that was nowhere)."""
    uploaded = {a["id"]: a for a in hub.artifacts(job.run_id)}
    links = 0
    for line in job.summary.splitlines():
        for name, run, artifact in re.findall(
                r"\[([^\]]+)\]\(https://github\.com/" + REPO + r"/actions/runs/(\d+)"
                r"/artifacts/(\d+)\)", line):
            links += 1
            assert int(run) == job.run_id and int(artifact) in uploaded, (line, uploaded)
            assert uploaded[int(artifact)]["name"] == name, line
            named = re.findall(r"\b[\w-]+\.(?:html|json|xml)\b", line)
            assert set(named) <= set(uploaded[int(artifact)]["files"]), line
    for target in re.findall(r"\]\(([^)]*)\)", job.summary):
        assert re.fullmatch(r"https://github\.com/" + REPO + r"/actions/runs/\d+"
                            r"(/artifacts/\d+)?", target), target
    if job.step("Links in the job summary").outcome == "success":
        assert links >= 1, job.summary


def gate_lines(job: Job) -> list[str]:
    report = json.loads((job.workspace / "report.json").read_text())
    lines: list[str] = report["environment"]["gate"]
    return lines


def compared_with_baseline(job: Job) -> bool:
    return any("baseline" in line.lower() for line in gate_lines(job))


def workflow_summary(job: Job) -> str:
    """What the workflow's own steps wrote to the summary (the Benchmark step's is the
    plugin's)."""
    return "".join(step.summary for key, step in job.steps.items() if key != "benchmark")


def check_workflow_writes_no_results(job: Job) -> None:
    """The verdicts and tables are the plugin's to write; the workflow writes the baseline
    used and the links only."""
    own = workflow_summary(job)
    assert "|---" not in own and "full success" not in own.lower(), own
    assert set(re.findall(r"^\*\*([^*]+)\*\*", own, re.MULTILINE)) <= {
        "Baseline", "Reports", "Next baseline", "Not a baseline", "resilibench skipped"}, own


def check_plugin_summary(job: Job, *, gate_failed: bool, baseline: bool) -> None:
    """What the plugin writes to $GITHUB_STEP_SUMMARY (integration/job_summary.py): its
    headline, every gate verdict marked, the line naming the rule that set the exit status,
    and a link to the run's artifacts."""
    written = job.step("benchmark").summary
    assert written.strip(), "the plugin wrote no job summary"
    assert "**ResiliBench: " in written, written
    assert "fail-under" in written, written
    if baseline:
        assert "baseline " in written, written
    assert ("❌ **FAILED**" in written) == gate_failed, written
    assert f"**resilibench: exit {int(gate_failed)}: " in written, written
    assert f"/actions/runs/{job.run_id})" in written, written


def check_reports_uploaded(job: Job, hub: FakeGitHub) -> None:
    (reports,) = hub.artifacts(job.run_id, "resilibench-report")
    assert set(reports["files"]) == {"report.json", "report.html", "junit.xml"}
    assert hub.artifact_file(reports, "report.html").lstrip().lower().startswith(b"<!doctype")


# --- the cases ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def first_release(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Job, FakeGitHub]]:
    """v1.0.0, the first release: nothing to compare with."""
    root = tmp_path_factory.mktemp("first-release")
    hub = FakeGitHub(root / "github")
    origin = make_origin(root, ["v1.0.0"])
    yield run_job(root / "job", origin, hub, Event("push", tag="v1.0.0"), settings=SMALL), hub


@pytest.fixture(scope="module")
def release_report(first_release: tuple[Job, FakeGitHub]) -> bytes:
    """A passing release's report, the baseline artifact the other cases' releases hold."""
    job, hub = first_release
    (artifact,) = hub.artifacts(job.run_id, "resilibench-baseline")
    return hub.artifact_file(artifact, "report.json")


def test_first_release_gates_on_fail_under_and_becomes_the_baseline(
        first_release: tuple[Job, FakeGitHub]) -> None:
    job, hub = first_release
    assert job.conclusion == "success", {k: (s.outcome, s.log[-2000:]) for k, s in
                                         job.steps.items()}
    assert job.step("baseline").outputs["report"] == ""
    (notice,) = [n for n in job.notices() if "no baseline" in n]
    assert "no release tag (v*) before v1.0.0" in notice and "--resili-fail-under" in notice
    assert "**Baseline**: none: no release tag (v*) before v1.0.0" in job.summary
    assert not compared_with_baseline(job)
    assert any("fail-under" in line for line in gate_lines(job))
    check_reports_uploaded(job, hub)
    (baseline,) = hub.artifacts(job.run_id, "resilibench-baseline")
    assert baseline["files"] == ["report.json"]
    assert hub.artifact_file(baseline, "report.json") == (job.workspace / "report.json")\
        .read_bytes()
    assert "**Next baseline**: release v1.0.0 passed its gate" in job.summary
    check_links_resolve(job, hub)
    check_workflow_writes_no_results(job)
    check_plugin_summary(job, gate_failed=False, baseline=False)
    # Only what the workflow needs from gh: no GitHub Release is ever asked for.
    assert not any(call[0] == "release" for call in hub.calls())


def test_a_plain_tag_is_a_release_and_tags_order_by_version(
        tmp_path: Path, release_report: bytes) -> None:
    """v1.11.0 (a fix after v2.0.0) is pushed; every release is a plain git tag, no GitHub
    Release, and each passed. Its baseline is v1.10.0: the newest version below it (by
    version: 'v1.9.0' > 'v1.10.0' as text), neither v2.0.0 above it nor itself (an earlier
    run of v1.11.0 passed too, and is no baseline of a re-run)."""
    hub = FakeGitHub(tmp_path / "github")
    origin = make_origin(tmp_path, ["v1.9.0", "v1.10.0", "v2.0.0", "v1.11.0"])
    hub.release("v1.9.0", "success", release_report)
    chosen = hub.release("v1.10.0", "success", release_report)
    hub.release("v2.0.0", "success", release_report)
    hub.release("v1.11.0", "success", release_report)
    job = run_job(tmp_path / "job", origin, hub, Event("push", tag="v1.11.0"), settings=SMALL)
    assert job.conclusion == "success", job.step("benchmark").log[-3000:]
    outputs = job.step("baseline").outputs
    assert outputs == {"report": "baseline/report.json", "tag": "v1.10.0",
                       "run-id": str(chosen)}
    assert f"release v1.10.0 (run {chosen})" in " ".join(job.notices())
    assert (f"**Baseline**: release v1.10.0, the report of [run {chosen}]"
            f"(https://github.com/{REPO}/actions/runs/{chosen})") in job.summary
    assert compared_with_baseline(job)
    assert hub.artifacts(job.run_id, "resilibench-baseline")
    check_reports_uploaded(job, hub)
    check_links_resolve(job, hub)
    check_workflow_writes_no_results(job)
    check_plugin_summary(job, gate_failed=False, baseline=True)
    listed = [call for call in hub.calls() if call[:2] == ["run", "list"]]
    assert [call[call.index("--branch") + 1] for call in listed] == ["v1.10.0"]
    assert all("--status" in call and call[call.index("--status") + 1] == "success"
               and call[call.index("--workflow") + 1] == WORKFLOW_FILE for call in listed)
    assert not any(call[0] == "release" for call in hub.calls())


@pytest.mark.parametrize(("artifact", "gh_says"), [
    # gh's own words: a run whose artifacts all expired (90 days by default) ...
    ("expired", "no valid artifacts found to download"),
    # ... and a passing run without the baseline artifact (one of the earlier workflow's).
    ("missing", "no artifact matches any of the names or patterns provided"),
])
def test_an_expired_or_missing_baseline_is_a_notice_and_the_run_gates_on_fail_under(
        tmp_path: Path, release_report: bytes, artifact: str, gh_says: str) -> None:
    hub = FakeGitHub(tmp_path / "github")
    origin = make_origin(tmp_path, ["v1.0.0"])
    if artifact == "expired":
        run = hub.release("v1.0.0", "success", release_report)
        hub.expire(run)
    else:
        run = hub.release("v1.0.0", "success", None)
        hub.add_artifact(run, "resilibench-report", {"report.json": release_report})
    job = run_job(tmp_path / "job", origin, hub, Event("pull_request"), settings=SMALL)
    assert job.conclusion == "success", job.step("benchmark").log[-3000:]
    assert job.step("baseline").outcome == "success"
    assert job.step("baseline").outputs["report"] == ""
    (notice,) = [n for n in job.notices() if "no baseline" in n]
    assert f"the report of release v1.0.0 (run {run}) could not be downloaded (gh: {gh_says}" \
           "); artifacts expire" in notice and "--resili-fail-under only" in notice
    assert "**Baseline**: none: the report of release v1.0.0" in job.summary
    assert job.step("benchmark").outcome == "success" and not compared_with_baseline(job)
    assert job.step("next-baseline").outcome == "skipped"  # a pull request is no release
    assert not hub.artifacts(job.run_id, "resilibench-baseline")
    check_reports_uploaded(job, hub)
    check_links_resolve(job, hub)
    check_workflow_writes_no_results(job)
    check_plugin_summary(job, gate_failed=False, baseline=False)


def test_a_fork_pull_request_runs_without_secrets_or_baseline_access(
        tmp_path: Path, release_report: bytes) -> None:
    """No secrets and a read-only token that may not read the runs: the benchmark of an agent
    that needs no key still runs and gates; the baseline is a notice."""
    hub = FakeGitHub(tmp_path / "github")
    origin = make_origin(tmp_path, ["v1.0.0"])
    hub.release("v1.0.0", "success", release_report)
    job = run_job(tmp_path / "job", origin, hub, Event("pull_request", fork="someone/agent"),
                  settings=SMALL, secrets={}, deny_token=True)
    assert job.conclusion == "success", job.step("benchmark").log[-3000:]
    (notice,) = [n for n in job.notices() if "no baseline" in n]
    assert "the runs of release v1.0.0 could not be listed (gh: HTTP 403: Resource not " \
           "accessible by integration" in notice and "fork" in notice
    assert job.step("benchmark").outcome == "success" and not compared_with_baseline(job)
    assert not hub.artifacts(job.run_id, "resilibench-baseline")
    check_reports_uploaded(job, hub)
    check_links_resolve(job, hub)
    check_workflow_writes_no_results(job)
    check_plugin_summary(job, gate_failed=False, baseline=False)


def test_a_fork_pull_request_skips_a_model_that_needs_the_key(tmp_path: Path) -> None:
    hub = FakeGitHub(tmp_path / "github")
    origin = make_origin(tmp_path, ["v1.0.0"])
    job = run_job(tmp_path / "job", origin, hub, Event("pull_request", fork="someone/agent"),
                  settings={**SMALL, "NEEDS_API_KEY": "true"}, secrets={})
    assert job.conclusion == "success"
    assert job.step("key").outputs == {"skip": "true"}
    (notice,) = job.notices()
    assert "resilibench skipped" in notice and "fork (someone/agent) gets no secrets" in notice
    assert job.summary.startswith("**resilibench skipped**")
    ran = {key for key, step in job.steps.items() if step.outcome != "skipped"}
    assert ran == {"actions/checkout@v4", "key"}
    assert hub.calls() == [] and not hub.artifacts(job.run_id)


def test_a_release_without_the_key_fails(tmp_path: Path) -> None:
    """Outside a fork's pull request a missing secret is a configuration error."""
    hub = FakeGitHub(tmp_path / "github")
    origin = make_origin(tmp_path, ["v1.0.0"])
    job = run_job(tmp_path / "job", origin, hub, Event("push", tag="v1.0.0"),
                  settings={**SMALL, "NEEDS_API_KEY": "true"}, secrets={})
    assert job.conclusion == "failure" and job.step("key").outcome == "failure"
    assert [kind for kind, _ in job.annotations] == ["error"]
    assert job.step("benchmark").outcome == "skipped"
    assert not hub.artifacts(job.run_id, "resilibench-baseline")


def test_a_failed_release_gate_never_becomes_a_baseline(
        tmp_path: Path, release_report: bytes) -> None:
    """v1.1.0 fails its gate: no baseline artifact, a failed run, a summary that says so; the
    next pull request compares with v1.0.0 and says v1.1.0 was passed over."""
    hub = FakeGitHub(tmp_path / "github")
    origin = make_origin(tmp_path, ["v1.0.0", "v1.1.0"])
    good = hub.release("v1.0.0", "success", release_report)
    failed = run_job(tmp_path / "release", origin, hub, Event("push", tag="v1.1.0"),
                     settings={**SMALL, "FAIL_UNDER": "99%"})
    assert failed.conclusion == "failure"
    assert failed.step("baseline").outputs["tag"] == "v1.0.0"
    assert failed.step("benchmark").outcome == "failure"
    assert any("fail-under" in line for line in gate_lines(failed))
    assert failed.step("next-baseline").outcome == "skipped"
    assert not hub.artifacts(failed.run_id, "resilibench-baseline")
    assert "**Not a baseline**: release v1.1.0 did not pass its gate (benchmark: failure)" \
        in failed.summary
    check_reports_uploaded(failed, hub)  # the failed release's reports are still there
    check_links_resolve(failed, hub)
    check_workflow_writes_no_results(failed)
    check_plugin_summary(failed, gate_failed=True, baseline=True)

    pull = run_job(tmp_path / "pull", origin, hub, Event("pull_request"), settings=SMALL)
    assert pull.conclusion == "success", pull.step("benchmark").log[-3000:]
    assert pull.step("baseline").outputs == {"report": "baseline/report.json", "tag": "v1.0.0",
                                             "run-id": str(good)}
    assert "passed over, no run of this workflow that passed: v1.1.0" in pull.summary
    assert compared_with_baseline(pull)
    check_plugin_summary(pull, gate_failed=False, baseline=True)


# --- the workflow as written -------------------------------------------------------------------
def test_the_workflow_reads_as_github_reads_it() -> None:
    data = load_workflow()
    triggers = data["on"] if "on" in data else data[True]  # YAML 1.1 reads `on` as True
    assert triggers["push"] == {"tags": ["v*"]} and "pull_request" in triggers
    assert data["permissions"] == {"contents": "read", "actions": "read"}
    job = the_job(data)
    assert job["env"]["BASELINE_SCRIPT"] == SCRIPT_PATH
    header = WORKFLOW.read_text(encoding="utf-8").split("\nname:")[0]
    assert "docs/ci/baseline.sh" in header and SCRIPT_PATH in header
    for step in job["steps"]:
        if "run" in step:
            subprocess.run(["bash", "-n"], input=step["run"], text=True, check=True)
        assert "${{" not in step.get("run", ""), "a run: reads env, never ${{ }} (injection)"
    subprocess.run(["bash", "-n", str(BASELINE_SH)], check=True)


def test_the_gate_is_fixed_and_a_py_agent_is_on_the_path() -> None:
    steps = {step.get("id"): step for step in the_job(load_workflow())["steps"]}
    command = steps["benchmark"]["run"]
    assert "--resili-gate=fixed" in command and "sequential" not in command
    assert '--resili-fail-under="$FAIL_UNDER"' in command
    assert 'export PYTHONPATH="$GITHUB_WORKSPACE' in command and "pythonpath" in command
    assert steps["baseline"]["run"].strip().startswith('bash "$BASELINE_SCRIPT"')
