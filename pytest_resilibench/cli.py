"""The `resilibench` command line: one subcommand per job, each a thin shell over a library
function. Subcommands import what they need when they run, so `resilibench tools` stays fast
and works without the optional extras.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from pytest_resilibench.base.names import FAULT_PROFILES, SEVERITIES, TOOL_MODES, VARIANT_KINDS
from pytest_resilibench.integration.options import GATE_OPTIONS, argparse_help

if TYPE_CHECKING:
    from pytest_resilibench.integration.gate_policy import GatePolicy

__all__ = ["main"]

Handler = Callable[[argparse.Namespace], int]


def _int_in(lo: int, hi: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in [lo, hi] (a wrong one is argparse's one-line error)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < lo or (hi is not None and value > hi):
            span = f"in [{lo}, {hi}]" if hi is not None else f"at least {lo}"
            raise argparse.ArgumentTypeError(f"{value} is not {span}")
        return value

    parse.__name__ = "integer"
    return parse


def _float_in(lo: float, hi: float | None = None, *, lo_open: bool = False,
              hi_open: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number in [lo, hi] ((lo, ... / ..., hi) when open)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        low_ok = value > lo if lo_open else value >= lo
        high_ok = hi is None or (value < hi if hi_open else value <= hi)
        if not (math.isfinite(value) and low_ok and high_ok):
            span = (("(" if lo_open else "[") + f"{lo:g}, "
                    + (f"{hi:g}" + (")" if hi_open else "]") if hi is not None else "inf)"))
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number in {span}")
        return value

    parse.__name__ = "number"
    return parse


def _argparse_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """A plugin option's parser as an argparse type: its message, not argparse's "invalid
    value", on a bad one."""
    def wrapped(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    wrapped.__name__ = getattr(parse, "__name__", "value")
    return wrapped


_Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
_PORT = _int_in(0, 65535)
_SEED = _int_in(0)
_RATE = _float_in(0.0, 1.0, lo_open=True)  # a base success probability
_SECONDS = _float_in(0.0)


def _cmd_tools(args: argparse.Namespace) -> int:
    from pytest_resilibench.core.registry import default_registry

    registry = default_registry()
    exports = {"openai": registry.to_openai, "mcp": registry.to_mcp, "json": registry.to_json}
    json.dump(exports[args.format](), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def _add_tools(sub: _Subparsers) -> None:
    p = sub.add_parser("tools", help="print the tool registry as JSON")
    p.add_argument("--format", choices=("openai", "mcp", "json"), default="json",
                   help="OpenAI function-calling tools, MCP tool definitions, or everything")
    p.set_defaults(handler=_cmd_tools)


def _cmd_solve(args: argparse.Namespace) -> int:
    from pathlib import Path

    from pytest_resilibench.core.tasks import FIXTURES_DIR, load_tasks
    from pytest_resilibench.solver.solve import solve_all

    if args.updates < 1 or not 0.0 < args.base_success <= 1.0 or args.max_turns < 1:
        raise ValueError("need --updates >= 1, 0 < --base-success <= 1, --max-turns >= 1")
    fixtures = Path(args.fixtures) if args.fixtures else _local_fixtures(FIXTURES_DIR)
    out = _writable_fixtures(Path(args.out) if args.out else LOCAL_FIXTURES, force=args.force)
    tasks = list(load_tasks(fixtures, require_workflows=False))
    config = None
    if not args.exact:
        from pytest_resilibench.base.extras import require

        require("solver", "torch", "PPO training (`resilibench solve` without --exact)")
        from pytest_resilibench.solver.ppo import PpoConfig
        config = PpoConfig(updates=args.updates, seed=args.seed, threads=args.threads,
                           precision=args.precision, checkpoint_dir=args.checkpoint_dir)
    report = solve_all(tasks, out,
                       base_success=args.base_success, max_turns=args.max_turns, ppo=config,
                       progress=not args.no_progress,
                       log=lambda line: print(line, file=sys.stderr))
    keys = ("dp_mean", "naive_mean", "share_optimal_differs_from_naive",
            "mean_gain_over_naive", "ppo_to_dp_ratio", "timings", "peak_memory_mb")
    json.dump({k: report[k] for k in keys}, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def _add_solve(sub: _Subparsers) -> None:
    p = sub.add_parser("solve", help="optimal workflows and bounds for every task (DP, PPO)")
    p.add_argument("--exact", action="store_true",
                   help="exact dynamic programming only (no torch, seconds)")
    p.add_argument("--fixtures", help="directory of tasks.jsonl.gz (default: ./fixtures when "
                                      "it holds tasks, else the package's)")
    p.add_argument("--out", help="where to write workflows.jsonl.gz and solver_report.json "
                                 "(default: ./fixtures)")
    p.add_argument("--force", action="store_true",
                   help="allow writing over the package's own fixtures")
    p.add_argument("--base-success", type=_RATE, default=0.8)
    p.add_argument("--max-turns", type=_int_in(1), default=10)
    p.add_argument("--updates", type=_int_in(1), default=60, help="PPO updates (2048 steps each)")
    p.add_argument("--seed", type=_SEED, default=0)
    p.add_argument("--threads", type=_int_in(1), default=None, help="torch CPU threads")
    p.add_argument("--precision", choices=("auto", "fp32", "bf16", "fp16"), default="auto")
    p.add_argument("--checkpoint-dir", help="save PPO checkpoints here")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(handler=_cmd_solve)


def _add_listen_options(p: argparse.ArgumentParser, *, applies: str = "") -> None:
    """--host, --api-key and --insecure: where a server listens and who may use it."""
    p.add_argument("--host", default="127.0.0.1",
                   help=f"bind address{applies} (default 127.0.0.1); any but a loopback one "
                        "(127.0.0.0/8, ::1, localhost) needs --api-key or --insecure")
    p.add_argument("--api-key", default=None,
                   help=f"accept only requests bearing this key{applies} (others get 401)")
    p.add_argument("--insecure", action="store_true",
                   help="serve on a non-loopback --host without --api-key: anyone who can "
                        "reach it may use it")


def _refuse_unguarded(args: argparse.Namespace) -> None:
    """Before anything is bound: a server others can reach needs a key, or --insecure."""
    from pytest_resilibench.servers.loopback import is_loopback

    if not (args.api_key or args.insecure or is_loopback(args.host)):
        raise ValueError(f"refusing to serve on {args.host} without --api-key, since anyone "
                         "who can reach it could use it (pass --api-key KEY, or --insecure "
                         "to serve it anyway)")


def _mcp_transport_checked(args: argparse.Namespace, command: str) -> None:
    """The checks every MCP-serving command makes of its transport options, and its extra."""
    from pytest_resilibench.base.extras import require

    if args.transport == "stdio" and (args.host != "127.0.0.1" or args.api_key is not None
                                      or args.insecure):
        raise ValueError("--host, --api-key and --insecure are for --transport http")
    _refuse_unguarded(args)
    require("mcp", "mcp", f"`resilibench {command}`")


def _cmd_serve_mcp(args: argparse.Namespace) -> int:
    _mcp_transport_checked(args, "serve-mcp")
    from pytest_resilibench.core.tasks import find_task
    from pytest_resilibench.servers import mcp_server

    default = None
    if args.task is not None:
        default = mcp_server.task_simulator(
            find_task(args.task, args.fixtures), seed=args.seed, repeat=args.repeat,
            base_success=args.base_success, faults=args.faults)
    return _served(args, mcp_server.build_server(default), mcp_server.serve_stdio,
                   mcp_server.serve_http)


def _served(args: argparse.Namespace, server: Any, stdio: Callable[[Any], None],
            http: Callable[..., None]) -> int:
    """Serve `server` on the transport the options name (an MCP command's last step)."""
    if args.transport == "stdio":
        if sys.stdin is None or sys.stdout is None:  # `<&-`: Python leaves them None
            raise ValueError("stdin or stdout is closed: the stdio transport serves on both "
                             "(or pass --transport http)")
        stdio(server)
    else:
        http(server, port=args.port, host=args.host, api_key=args.api_key)
    return 0


def _add_serve_mcp(sub: _Subparsers) -> None:
    from pytest_resilibench.core.tasks import FIXTURES_DIR

    p = sub.add_parser("serve-mcp", help="serve the simulated tools as an MCP server")
    p.add_argument("--task", help="task id, e.g. t0421: the episode of calls that name none "
                                  "(without it every call names its episode in _meta, "
                                  "see pytest_resilibench/servers/mcp_server.py)")
    p.add_argument("--seed", type=_SEED, default=0,
                   help="run seed of the --task episode (default 0)")
    p.add_argument("--repeat", type=_int_in(0), default=0,
                   help="repeat index of the --task episode")
    p.add_argument("--base-success", type=_RATE, default=0.8,
                   help="base success probability of the --task episode")
    p.add_argument("--faults", choices=FAULT_PROFILES, default="paper",
                   help="fault profile of the --task episode (docs/FAULTS.md)")
    p.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    p.add_argument("--port", type=_PORT, default=8000,
                   help="HTTP port (0: a free one; the URL goes to stderr)")
    _add_listen_options(p, applies=" (http transport)")
    p.add_argument("--fixtures", default=str(FIXTURES_DIR), help="task fixtures directory")
    p.set_defaults(handler=_cmd_serve_mcp)


def _cmd_proxy_mcp(args: argparse.Namespace) -> int:
    _mcp_transport_checked(args, "proxy-mcp")
    from pytest_resilibench.core.tool_faults import DEFAULT_RATE, FaultConfig
    from pytest_resilibench.servers import mcp_proxy

    target = mcp_proxy.upstream_target(args.upstream, args.upstream_url)
    rates = {name: mcp_proxy.parse_rate(value) for name, value in
             mcp_proxy.parse_overrides(args.tool_rate, what="--tool-rate").items()}
    config = FaultConfig(
        profile=args.faults, rate=DEFAULT_RATE if args.rate is None else args.rate,
        seed=args.seed, rates=rates,
        remote=None if not args.remote else frozenset(args.remote),
        auth_tool=args.auth_tool, spare=frozenset(args.spare),
        categories=mcp_proxy.parse_overrides(args.category, what="--category"))
    proxy = mcp_proxy.FaultProxy(target, config, session=args.session,
                                 trace_dir=Path(args.trace_dir) if args.trace_dir else None)
    return _served(args, proxy, mcp_proxy.serve_proxy_stdio, mcp_proxy.serve_proxy_http)


def _add_proxy_mcp(sub: _Subparsers) -> None:
    p = sub.add_parser("proxy-mcp", help="serve another MCP server's tools with injected "
                                         "faults (docs/CHAOS.md)")
    p.add_argument("--upstream", metavar="\"CMD ARGS\"",
                   help="the upstream server's command line (stdio)")
    p.add_argument("--upstream-url", metavar="URL", help="the upstream server's streamable "
                                                        "HTTP URL")
    p.add_argument("--faults", choices=FAULT_PROFILES, default="paper",
                   help="fault profile (docs/CHAOS.md, docs/FAULTS.md)")
    p.add_argument("--rate", type=_float_in(0.0, 1.0), default=None,
                   help="probability of a random error per call (default 0.2)")
    p.add_argument("--tool-rate", action="append", default=[], metavar="TOOL=RATE",
                   help="a tool's own random error rate (repeatable)")
    p.add_argument("--seed", type=_SEED, default=0, help="fault seed (default 0)")
    p.add_argument("--session", default="0",
                   help="the fault session of calls that name none in "
                        "_meta['resilibench/session'] (default 0)")
    p.add_argument("--remote", action="append", default=[], metavar="TOOL",
                   help="a tool that counts as remote (credential expiry, rate limits; "
                        "repeatable; default: every tool)")
    p.add_argument("--auth-tool", metavar="TOOL",
                   help="the tool whose success renews expired credentials (without it no "
                        "credentials expire)")
    p.add_argument("--spare", action="append", default=[], metavar="TOOL",
                   help="a tool no fault touches (repeatable)")
    p.add_argument("--category", action="append", default=[], metavar="TOOL=CATEGORY",
                   help="the catalog category whose error codes a tool's errors use")
    p.add_argument("--trace-dir", help="write one JSONL trace per session here")
    p.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    p.add_argument("--port", type=_PORT, default=8000,
                   help="HTTP port (0: a free one; the URL goes to stderr)")
    _add_listen_options(p, applies=" (http transport)")
    p.set_defaults(handler=_cmd_proxy_mcp)


def _cmd_serve_live(args: argparse.Namespace) -> int:
    _refuse_unguarded(args)
    from pytest_resilibench.servers.live.server import serve_live

    serve_live(seed=args.seed, port=args.port, hang_s=args.hang_s, host=args.host,
               api_key=args.api_key)
    return 0


def _add_serve_live(sub: _Subparsers) -> None:
    p = sub.add_parser("serve-live", help="serve the 23 live HTTP API services on 127.0.0.1")
    p.add_argument("--port", type=_PORT, default=8765, help="port (0: a free one)")
    _add_listen_options(p)
    p.add_argument("--seed", type=_SEED, default=0, help="seed of the services' misbehaviour")
    p.add_argument("--hang-s", type=_SECONDS, default=3.0,
                   help="how long a service hangs when it times out (seconds)")
    p.set_defaults(handler=_cmd_serve_live)


def _cmd_match(args: argparse.Namespace) -> int:
    from pytest_resilibench.core.matcher import ToolMatcher

    ranked = ToolMatcher.default().rank(args.phrase, top=args.top)
    json.dump([{"tool": tool, "score": score} for tool, score in ranked], sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def _add_match(sub: _Subparsers) -> None:
    p = sub.add_parser("match", help="rank the tools matching an operation phrase (BM25), as JSON")
    p.add_argument("phrase", help='an operation phrase, e.g. "parse the raw records"')
    p.add_argument("--top", type=int, default=5, help="how many tools to list (default 5)")
    p.set_defaults(handler=_cmd_match)


def _cmd_generate(args: argparse.Namespace) -> int:
    from pytest_resilibench.solver.generate import generate

    grammar = "templates" if args.set == "paper" else "flows"
    manifest = generate(_writable_fixtures(args.out, force=args.force), seed=args.seed,
                        per_cell=args.per_cell, grammar=grammar, solve=not args.no_solve,
                        log=lambda line: print(line, file=sys.stderr))
    sha = manifest["files"]["tasks.jsonl.gz"]["sha256"]
    solved = ("" if args.no_solve else " with their reference workflows (exact DP) and "
              "realistic plans, verified")
    print(f"wrote {manifest['total']} tasks to {args.out}{solved} "
          f"(generator {manifest['generator_hash'][:12]}, tasks.jsonl.gz sha256 {sha[:12]}); "
          f"run them with --resili-tasks={args.out}")
    return 0


def _add_generate(sub: _Subparsers) -> None:
    p = sub.add_parser("generate", help="generate a task set: tasks and reference workflows "
                                        "(deterministic from --seed)")
    p.add_argument("--out", type=Path, default=LOCAL_FIXTURES,
                   help="fixtures directory to write (default: ./fixtures)")
    p.add_argument("--force", action="store_true",
                   help="allow writing over the package's own fixtures")
    p.add_argument("--seed", type=_SEED, default=None,
                   help="generator seed (default 2026, the shipped sets'); another seed draws "
                        "new structures and values: a private held-out set")
    p.add_argument("--set", choices=("default", "paper"), default="default",
                   help="default: the grammar of data flows; paper: the paper's templates "
                        "(with the default seed, the frozen paper set byte for byte)")
    p.add_argument("--per-cell", type=_int_in(1), default=336,
                   help="tasks per type x difficulty (default 336: 5040 tasks)")
    p.add_argument("--no-solve", action="store_true",
                   help="write the tasks only (`resilibench solve` adds the workflows)")
    p.set_defaults(handler=_cmd_generate)


def _cmd_tasks(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from pytest_resilibench.core.tasks import DIFFICULTIES, TASK_TYPES, load_tasks

    tasks = load_tasks(args.dir).select(
        types=[args.type] if args.type else None,
        difficulties=[args.difficulty] if args.difficulty else None,
    )
    if args.stats:
        rows = []
        for task_type in TASK_TYPES:
            counts = [sum(1 for t in tasks if t.type == task_type and t.difficulty == d)
                      for d in DIFFICULTIES]
            tools = [len(t.required_tools) for t in tasks if t.type == task_type]
            mean = f"{sum(tools) / len(tools):.2f}" if tools else "-"
            rows.append([task_type, *counts, sum(counts), mean])
        totals = [sum(1 for t in tasks if t.difficulty == d) for d in DIFFICULTIES]
        rows.append(["total", *totals, len(tasks), ""])
        print(tabulate(rows, headers=["type", *DIFFICULTIES, "total", "mean tools"]))
        return 0
    for task in tasks:
        print(f"{task.id}  {task.type:<21} {task.difficulty:<6} {' -> '.join(task.required_tools)}")
    return 0


def _add_tasks(sub: _Subparsers) -> None:
    from pytest_resilibench.core.tasks import DIFFICULTIES, FIXTURES_DIR, TASK_TYPES

    p = sub.add_parser("tasks", help="list the tasks, or count them with --stats")
    p.add_argument("--stats", action="store_true", help="counts per type x difficulty")
    p.add_argument("--type", choices=TASK_TYPES, help="only tasks of this type")
    p.add_argument("--difficulty", choices=DIFFICULTIES, help="only tasks of this difficulty")
    p.add_argument("--dir", type=Path, default=FIXTURES_DIR, help="fixtures directory")
    p.set_defaults(handler=_cmd_tasks)


def _cmd_prompt(args: argparse.Namespace) -> int:
    from pytest_resilibench.core.prompts import Variant, render_prompt
    from pytest_resilibench.core.tasks import TASK_SETS, load_tasks

    severity = args.severity if args.variant == "flawed" else None
    variant = Variant(args.variant, args.flaw, severity)
    folder = args.dir if args.dir is not None else TASK_SETS[args.task_set]
    task = load_tasks(folder).by_id.get(args.task_id)
    if task is None:
        raise ValueError(f"no task {args.task_id!r} in {folder} (ids look like t0421)")
    # What a run with the same --resili-faults and --resili-max-turns shows (under
    # `realistic` the profile's own budget, whatever --max-turns says).
    prompt = render_prompt(task, variant, tool_mode=args.tool_mode, faults=args.faults,
                           max_turns=args.max_turns)
    if args.json:
        json.dump({"messages": prompt.messages, "tools": prompt.tools,
                   "plan": prompt.plan.to_json() if prompt.plan else None,
                   "flaw_record": prompt.flaw_record}, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    for message in prompt.messages:
        print(f"--- {message['role']} ---\n{message['content']}\n")
    if prompt.tools is not None:
        print(f"--- tools: {len(prompt.tools)} OpenAI function schemas (see --json) ---")
    return 0


def _add_prompt(sub: _Subparsers) -> None:
    from pytest_resilibench.core.tasks import TASK_SETS

    p = sub.add_parser("prompt", help="print the messages a model sees for a task and variant")
    p.add_argument("task_id", metavar="TASK_ID", help="task id, e.g. t0421")
    p.add_argument("--variant", choices=VARIANT_KINDS,
                   default="optimal", help="prompt variant (default optimal)")
    p.add_argument("--flaw", help="flaw injected into a flawed variant's plan, e.g. "
                   "missing_step (see `pytest_resilibench.core.flaws.FLAWS`)")
    p.add_argument("--severity", choices=SEVERITIES, default="medium",
                   help="flaw severity (default medium)")
    p.add_argument("--tool-mode", choices=TOOL_MODES, default="text",
                   help="tools described in the prompt, or passed as OpenAI `tools`")
    p.add_argument("--faults", choices=FAULT_PROFILES, default="paper",
                   help="fault profile, as --resili-faults (realistic: its turn budget, "
                        "stand-ins and contingencies; docs/FAULTS.md)")
    p.add_argument("--max-turns", type=_int_in(1), default=10,
                   help="turn budget the task states, as --resili-max-turns (default 10)")
    p.add_argument("--task-set", choices=tuple(TASK_SETS), default="default",
                   help="shipped task set, as --resili-task-set (default: default)")
    p.add_argument("--json", action="store_true",
                   help="print messages, tools, plan and flaw record as JSON")
    p.add_argument("--dir", type=Path, default=None,
                   help="a task set's folder (`resilibench generate --out`), as --resili-tasks; "
                        "overrides --task-set")
    p.set_defaults(handler=_cmd_prompt)


def _cmd_serve_openai(args: argparse.Namespace) -> int:
    _refuse_unguarded(args)
    from pytest_resilibench.servers.testserver import FAULT_KINDS, FaultConfig, OpenAITestServer

    kinds = tuple(k.strip() for k in args.faults.split(",") if k.strip())
    kinds = FAULT_KINDS if kinds == ("all",) else kinds
    faults = FaultConfig(rate=args.fault_rate, kinds=kinds, retry_after_s=args.retry_after_s,
                         hold_s=args.hold_s)
    from pytest_resilibench.runtime.agents import Agent, agent_shape, make_agent

    served: dict[str, Agent] = {}
    for item in args.model:  # NAME=builtin:AGENT: a real model's name played by a built-in
        name, _, spec = item.partition("=")
        agent = make_agent(spec.strip() or "builtin:adaptive")
        if agent_shape(agent) != "turn":  # an endpoint answers turns: a loop has none to give
            raise ValueError(f"{spec.strip()} is a loop-level agent: only turn-level agents "
                             "(async complete) can answer as a model")
        served[name.strip()] = cast(Agent, agent)
    server = OpenAITestServer(served, seed=args.seed, latency_ms=args.latency_ms,
                              latency_sd_ms=args.latency_sd_ms,
                              faults=faults, host=args.host, port=args.port,
                              strict=args.strict, api_key=args.api_key,
                              max_in_flight=args.max_in_flight,
                              limit_retry_after_s=args.limit_retry_after_s,
                              rpm=args.rpm).start()
    # The first line names the bound port (port 0 picks a free one); scripts read it.
    models = ", ".join(["builtin:NAME", *served])
    strict = ", strict" if args.strict else ""
    limit = ("" if args.max_in_flight is None else
             f"; at most {args.max_in_flight} in flight, 429 beyond")
    print(f"serving {server.base_url} (models {models}{strict}; latency {args.latency_ms:g} ms, "
          f"faults {args.fault_rate:g} of {','.join(kinds)}, seed {args.seed}{limit})",
          flush=True)
    try:
        server.serve_forever()
    finally:
        print(f"served: {json.dumps(server.stats.to_json())}", flush=True)
    return 0


def _add_serve_openai(sub: _Subparsers) -> None:
    p = sub.add_parser("serve-openai",
                       help="serve the built-in agents over an OpenAI-compatible HTTP API "
                            "on loopback, with injected latency and faults")
    p.add_argument("--port", type=_PORT, default=0, help="port (0: any free one, printed)")
    _add_listen_options(p)
    p.add_argument("--latency-ms", type=_SECONDS, default=0.0, help="delay of every reply")
    p.add_argument("--latency-sd-ms", type=_SECONDS, default=0.0,
                   help="with it, each reply's delay is lognormal of mean --latency-ms and "
                        "this standard deviation (seeded by --seed and the request)")
    p.add_argument("--fault-rate", type=_float_in(0.0, 1.0), default=0.0,
                   help="share of requests answered with a fault, in [0, 1]")
    p.add_argument("--faults", default="all",
                   help="comma-separated fault kinds to draw from: 429, 500, 503, timeout, "
                        "reset, malformed, truncated (default all)")
    p.add_argument("--retry-after-s", type=_SECONDS, default=0.05, help="Retry-After of a 429")
    p.add_argument("--hold-s", type=_SECONDS, default=65.0,
                   help="how long a `timeout` fault holds the request (beyond client timeouts)")
    p.add_argument("--seed", type=_SEED, default=0, help="seed of the fault draws")
    p.add_argument("--model", action="append", default=[], metavar="NAME=builtin:AGENT",
                   help="serve model NAME (e.g. o3) with a built-in agent (repeatable)")
    p.add_argument("--strict", action="store_true",
                   help="refuse what OpenAI refuses (unknown fields, what the model family "
                        "does not take), as the real API does")
    p.add_argument("--max-in-flight", type=_int_in(1), default=None, metavar="N",
                   help="a provider's concurrency limit: requests beyond N in flight get 429 "
                        "with Retry-After (default: no limit)")
    p.add_argument("--limit-retry-after-s", type=_SECONDS, default=1.0,
                   help="Retry-After of a 429 from --max-in-flight (default 1 s)")
    p.add_argument("--rpm", type=_float_in(0.0, lo_open=True), default=None, metavar="N",
                   help="a provider's requests-per-minute limit, enforced as OpenAI does over "
                        "seconds: a bucket of N/60 requests refilled evenly; a request past it "
                        "gets 429 with retry-after-ms (default: no limit)")
    p.set_defaults(handler=_cmd_serve_openai)


def _gate_policy(args: argparse.Namespace, run: dict[str, object]) -> GatePolicy:
    """The run's recorded thresholds (`config.gate_policy`), each overridden by the option of
    the same name when given; the defaults where the report records none."""
    from dataclasses import replace

    from pytest_resilibench.integration.gate_policy import GatePolicy

    config = run.get("config")
    recorded = config.get("gate_policy") if isinstance(config, dict) else None
    policy = GatePolicy.from_json(recorded) if isinstance(recorded, dict) else GatePolicy()
    given = {"max_drop_pp": args.max_drop, "confidence": args.confidence,
             "fail_under": args.fail_under, "inconclusive": args.inconclusive,
             "max_infra_errors": args.max_infra_errors}
    return replace(policy, **{k: v for k, v in given.items() if v is not None})


def _cmd_report(args: argparse.Namespace) -> int:
    from pytest_resilibench.base.atomic import atomic_write
    from pytest_resilibench.base.outputs import default_path, prepare
    from pytest_resilibench.base.safe_text import LINE_LIMIT, for_terminal
    from pytest_resilibench.integration.gate import (
        GateResult,
        compare_with_baseline,
        exit_status,
        fail_under,
        infra_errors,
        judge_chaos,
    )
    from pytest_resilibench.reporting import headline, summarize, tables
    from pytest_resilibench.reporting.chaos_summary import compare as compare_chaos
    from pytest_resilibench.reporting.chaos_summary import section_runs
    from pytest_resilibench.reporting.comparison import identify
    from pytest_resilibench.reporting.report import load_report

    run = load_report(args.run)
    summary = summarize.summary(run["episodes"])
    labels = summarize.model_labels(run["config"])  # as the run named its models
    comparison = other = runs = None
    gate_lines = run["environment"].get("gate") or []  # what the run's own gate said
    results: list[GateResult] = []
    if args.compare:
        other = load_report(args.compare)
        policy = _gate_policy(args, run)
        # RUN is the candidate, OTHER the reference: the drop is OTHER -> RUN. The checks and
        # their order are the run's (session.finish), so the lines match the run's byte for byte.
        if policy.fail_under is not None:
            results += fail_under(run["episodes"], policy.fail_under, labels)
        alone = not run["episodes"] and section_runs(run, args.run)  # no benchmark in it
        if not alone and (other["episodes"] or not section_runs(other, args.compare)):
            comparison, judged = compare_with_baseline(other["episodes"], run["episodes"],
                                                       policy, labels)
            results += judged
        elif not alone:  # a baseline of resili_faults tests alone, as the run says it
            results.append(GateResult(
                False, "not judged", f"baseline: {args.compare} holds no benchmark episode "
                "(its resili_faults tests alone): the episodes are not judged"))
        if chaos_runs := section_runs(run, args.run):  # each test seed for seed (docs/CHAOS.md)
            tests = sorted({str(r["test"]) for r in chaos_runs})
            results += judge_chaos(compare_chaos(
                chaos_runs, section_runs(other, args.compare), max_drop_pp=policy.max_drop_pp,
                alpha=1 - policy.confidence), policy, tests=tests)
        if (infra := infra_errors(run["episodes"], policy)) is not None:
            results.append(infra)
        gate_lines = [r.line for r in results]
        runs = {"old": identify(args.compare, other), "new": identify(args.run, run)}
    # Every output names each model as the run's terminal did (its agent's `name`); the JSON
    # keeps the specs, which pair episodes. The HTML's episodes are renamed too, so that its
    # tables' links (episode filters by model) still find them.
    shown = summarize.relabel_models(summary, labels)
    shown_comparison = summarize.relabel_models(comparison, labels)
    shown_run = {**run, "episodes": summarize.relabel_models(run["episodes"], labels)}
    head = headline.build(shown, episodes=shown_run["episodes"], gate=gate_lines,
                          comparison=shown_comparison,
                          chaos=(run.get("chaos") or {}).get("summary"))
    # The tables, the comparison, and the headline last: in a terminal the end stays in view.
    terminal = tables.render_terminal(shown, head=head)
    if shown_comparison is not None:
        body, _, last = terminal.rpartition("\n\nResiliBench: ")
        terminal = (f"{body}\n\n{tables.render_compare(shown_comparison, runs=runs)}\n"
                    f"ResiliBench: {last}")
    # The tables' cells and the headline's lines are shown as data already; the whole once
    # more, so that nothing a report holds reaches the terminal raw (base/safe_text.py).
    sys.stdout.write(for_terminal(terminal, limit=8 * LINE_LIMIT, block=True))
    stem = Path(args.run).stem
    page: Path | None = None
    if args.html is not None:
        from pytest_resilibench.reporting.report_html import write_html

        page = write_html(args.html or default_path(f"{stem}.html"), shown_run, summary=shown,
                          comparison=shown_comparison, other=other, runs=runs, gate=gate_lines)
    if args.markdown is not None:
        md = prepare(args.markdown or default_path(f"{stem}.md"))
        link = None if page is None else os.path.relpath(page.resolve(), md.resolve().parent)
        text = tables.render_markdown(shown, head=head, comparison=shown_comparison,
                                      runs=runs, html_link=link)
        atomic_write(md, text.encode("utf-8"))
        print(f"markdown report: {md}")
    if page is not None:
        print(f"HTML report: {page} ({_mib(page.stat().st_size)}, open it in a browser)")
    if args.png is not None:
        try:
            from pytest_resilibench.reporting.report_png import write_pngs

            written = write_pngs(summary, args.png or default_path(f"{stem}-plots"))
        except ImportError as exc:
            print(f"resilibench report: error: {exc}", file=sys.stderr)
            return 2
        print(f"PNG plots: {', '.join(str(p) for p in written) or 'none (no data to plot)'}")
    if not args.compare:
        return 0
    # The headline printed the gate's lines as the run does; the rule that sets the exit
    # status comes last.
    status, line = exit_status(int(any(r.failed for r in results)), failed_items=0,
                               infra_items=0, results=results, incomplete=False)
    print(for_terminal(line))
    return status


def _mib(size: int) -> str:
    """A file size in MiB, the one unit the CLI and the docs use."""
    return f"{size / 2**20:.2f} MiB"


def _add_report(sub: _Subparsers) -> None:
    p = sub.add_parser("report", help="tables, plots and trajectories of a run's JSON report "
                                      "(`report merge`: join a run's shards)",
                       description="Print a run's tables and headline; write them as HTML "
                       "(charts and trajectories, one offline file), markdown or PNG plots; "
                       "with --compare, a paired verdict of RUN against OTHER per model (exit 1 "
                       "on a regression).")
    p.add_argument("run", metavar="RUN.json", help="a resilibench.report/1 file")
    # Without a path, outputs go to .resilibench/ (outputs.py), which git ignores.
    p.add_argument("--html", metavar="OUT.html", nargs="?", const="",
                   help="write the self-contained HTML report (default: "
                        ".resilibench/RUN.html)")
    p.add_argument("--markdown", metavar="OUT.md", nargs="?", const="",
                   help="write the tables as markdown (default: .resilibench/RUN.md)")
    p.add_argument("--png", metavar="DIR", nargs="?", const="",
                   help="write the plots as PNG files, drawn with matplotlib (the [report] "
                        "extra; default: .resilibench/RUN-plots/)")
    p.add_argument("--compare", metavar="OTHER.json",
                   help="reference run: pair each model's episodes with its partner's on the "
                        "same tool luck and judge the drop (exit 1 when any model regressed)")
    # The run's gate options under the same names, parsers and help (options.GATE_OPTIONS);
    # unset, each takes the value the run recorded, else the run's default.
    for name, (parse, default, text) in GATE_OPTIONS.items():
        p.add_argument(f"--{name}", type=_argparse_type(parse), default=None,
                       help=argparse_help(f"with --compare: {text} (default: the run's, "
                                          f"else {default or 'none'})"))
    p.set_defaults(handler=_cmd_report)


def _cmd_merge(args: argparse.Namespace) -> int:
    """`resilibench report merge`: the shards' reports as the whole run's (reporting/merge.py),
    its gate lines made as the run makes them (session.finish, without a baseline)."""
    from pytest_resilibench.base.safe_text import for_terminal
    from pytest_resilibench.integration.gate import exit_status, fail_under, infra_errors
    from pytest_resilibench.integration.gate_policy import GatePolicy
    from pytest_resilibench.reporting import summarize
    from pytest_resilibench.reporting.merge import check_shards, merged_head, merged_providers
    from pytest_resilibench.reporting.report import load_report, write_report

    reports = [(Path(path), load_report(path)) for path in args.shards]
    check_shards(reports)
    episodes = sorted((e for _, report in reports for e in report["episodes"]),
                      key=lambda e: str(e["id"]))
    summary = summarize.summary(episodes)
    if providers := merged_providers(reports):
        summary["providers"] = providers
    head = merged_head(reports, summary, rootdir=Path.cwd())
    recorded = head["config"].get("gate_policy")
    policy = GatePolicy.from_json(recorded) if isinstance(recorded, dict) else GatePolicy()
    labels = summarize.model_labels(head["config"])
    results = fail_under(episodes, policy.fail_under, labels) \
        if policy.fail_under is not None else []
    if (infra := infra_errors(episodes, policy)) is not None:
        results.append(infra)
    head["environment"]["gate"] = [r.line for r in results]
    write_report(args.out, head, (json.dumps(e, sort_keys=True) for e in episodes))
    print(f"merged {len(reports)} shards, {len(episodes)} episodes: {args.out}")
    for result in results:
        print(for_terminal(f"resilibench gate: {result.line}"))
    status, line = exit_status(int(any(r.failed for r in results)), failed_items=0,
                               infra_items=0, results=results,
                               incomplete=not head["complete"])
    print(for_terminal(line))
    return status


def _merge_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="resilibench report merge",
        description="Join the reports of a run's shards (--resili-shard=K/N) into the whole "
                    "run's report: the same episodes, summary and verdicts as one unsharded "
                    "run. Refused unless the reports are every shard of one run (same config, "
                    "fixture hash and seed; each shard once).")
    p.add_argument("shards", metavar="SHARD.json", nargs="+", help="each shard's JSON report")
    p.add_argument("-o", "--out", metavar="RUN.json", type=Path, required=True,
                   help="where to write the merged report")
    p.set_defaults(handler=_cmd_merge, command="report merge")
    return p


# Each entry adds one subcommand's parser (with `handler` set) to the subparsers.
_SCHEMA_NAMES = ("report", "episode", "tasks", "workflows", "realistic-workflows", "manifest",
                 "solver-report")


def _cmd_schema(args: argparse.Namespace) -> int:
    from pytest_resilibench.core.task_set_schemas import TASK_SET_SCHEMAS
    from pytest_resilibench.reporting.schemas import SCHEMAS

    json.dump({**SCHEMAS, **TASK_SET_SCHEMAS}[args.what](), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def _add_schema(sub: _Subparsers) -> None:
    p = sub.add_parser("schema", help="print the JSON Schema of the report, an episode, or a "
                                      "task set's file")
    p.add_argument("what", choices=_SCHEMA_NAMES,
                   help="which document: the run's report or one episode; a task set's "
                        "tasks.jsonl.gz line (tasks), workflows.jsonl.gz line (workflows), "
                        "realistic_workflows.jsonl.gz line (realistic-workflows), "
                        "manifest.json or solver_report.json")
    p.set_defaults(handler=_cmd_schema)


_SUBCOMMANDS: list[Callable[[_Subparsers], None]] = [
    _add_tools,
    _add_match,
    _add_generate,
    _add_tasks,
    _add_prompt,
    _add_serve_openai,
    _add_serve_mcp,
    _add_proxy_mcp,
    _add_serve_live,
    _add_report,
    _add_solve,
    _add_schema,
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="resilibench",
        description="ResiliBench: agent workflows under random tool failures and flawed plans.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in _SUBCOMMANDS:
        add(sub)
    return parser


LOCAL_FIXTURES = Path("fixtures")  # `generate` and `solve` write here unless told


def _local_fixtures(shipped: Path) -> Path:
    """Where `solve` reads tasks by default: ./fixtures once `generate` wrote there."""
    return LOCAL_FIXTURES if (LOCAL_FIXTURES / "tasks.jsonl.gz").exists() else shipped


def _writable_fixtures(directory: Path, *, force: bool) -> Path:
    """A directory `generate`/`solve` may write: never the installed package's fixtures
    (every run's prompts come from them) unless `--force` says so."""
    from pytest_resilibench.core.tasks import FIXTURES_DIR

    if directory.resolve() == FIXTURES_DIR.resolve() and not force:
        raise ValueError(f"{directory} holds the package's own fixtures, which every run "
                         "reads; write elsewhere with --out DIR, or pass --force to replace them")
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"{directory} is not a directory")
    return directory


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["report", "merge"]:  # `report RUN.json` takes a file: merge parsed apart
        args = _merge_parser().parse_args(argv[2:])
    else:
        args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `resilibench tools | head`
        sys.stderr.close()
        return 0
    except (FileNotFoundError, ValueError, KeyError) as exc:
        # Bad input (an unknown task id, a missing fixture): a message, not a traceback.
        print(f"resilibench {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a busy port, a host that does not resolve, a read-only --out
        if exc.filename:
            where = f" {exc.filename}:"
        elif hasattr(args, "port"):  # the servers: what could not be listened on
            where = f" cannot listen on {getattr(args, 'host', '127.0.0.1')}:{args.port}:"
        else:
            where = ""
        print(f"resilibench {args.command}: error:{where} {exc.strerror or exc}",
              file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
