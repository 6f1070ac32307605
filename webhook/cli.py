"""The ``placement-webhook`` command line: a thin dispatcher over ``webhook.commands``."""
from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from webhook import __version__, commands
from webhook.exitcodes import Exit


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="placement-webhook",
        description="Kubernetes mutating admission webhook that adds placement to workloads.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in commands.NAMES:
        module = importlib.import_module(f"webhook.commands.{name.replace('-', '_')}")  # label-nodes
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.configure(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help(sys.stderr)
        return Exit.USAGE
    try:
        return int(args._run(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `placement-webhook mutate ... | head` must not print a traceback.
        return Exit.OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
