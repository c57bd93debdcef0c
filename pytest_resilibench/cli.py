"""The `resilibench` command line: one subcommand per job, each a thin shell over a library
function. Subcommands import what they need when they run, so `resilibench tools` stays fast
and works without the optional extras.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence

__all__ = ["main"]

Handler = Callable[[argparse.Namespace], int]


def _cmd_tools(args: argparse.Namespace) -> int:
    from pytest_resilibench.registry import default_registry

    registry = default_registry()
    exports = {"openai": registry.to_openai, "mcp": registry.to_mcp, "json": registry.to_json}
    json.dump(exports[args.format](), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def _add_tools(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tools", help="print the tool registry as JSON")
    p.add_argument("--format", choices=("openai", "mcp", "json"), default="json",
                   help="OpenAI function-calling tools, MCP tool definitions, or everything")
    p.set_defaults(handler=_cmd_tools)


# Each entry adds one subcommand's parser (with `handler` set) to the subparsers.
_SUBCOMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [
    _add_tools,
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


def main(argv: Sequence[str] | None = None) -> int:
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


if __name__ == "__main__":
    sys.exit(main())
