"""The ``placement-webhook`` command line: a thin dispatcher over the library.

Each command lives in the module that owns its work; that module provides a
``configure_<cmd>(parser)`` and a ``run_<cmd>(args) -> int``; modules that need heavy
dependencies (aiohttp, the kubernetes client) import them inside ``run_<cmd>``.

Exit codes: 0 success, 1 findings or failures, 2 usage errors.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from webhook import __version__

# command -> (module, function suffix, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "serve": ("webhook.commands.serve", "serve", "run the admission server"),
    "mutate": ("webhook.commands.mutate", "mutate", "dry-run: show what admission does to manifests"),
    "lint": ("webhook.commands.lint", "lint", "validate policy files"),
    "schema": ("webhook.commands.lint", "schema", "print the JSON Schema of PlacementPolicy"),
    "test": ("webhook.suites.run", "test", "run policy test suites (*.suite.yaml)"),
    "certs": ("webhook.server.certs", "certs", "make a CA and a serving certificate"),
}

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="placement-webhook",
        description="Kubernetes mutating admission webhook that adds placement to workloads.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, suffix, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        module = importlib.import_module(module_name)
        getattr(module, f"configure_{suffix}")(p)
        p.set_defaults(_run=(module_name, suffix))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    module_name, suffix = args._run
    run = getattr(importlib.import_module(module_name), f"run_{suffix}")
    try:
        return int(run(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `placement-webhook mutate ... | head` must not print a traceback.
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
