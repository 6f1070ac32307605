"""What several commands share: error lines, the ``--kinds-config`` flag."""
from __future__ import annotations

import argparse
import sys

from webhook.kube import kinds


def error(command: str, message: str) -> None:
    """``placement-webhook COMMAND: message`` on standard error."""
    print(f"placement-webhook {command}: {message}", file=sys.stderr)


def add_kinds_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kinds-config", metavar="FILE", help="configuration file declaring extra workload kinds")


def targets(args: argparse.Namespace, command: str) -> kinds.Targets | None:
    """The built-in kinds plus ``--kinds-config``'s; None (after an error line) when it is broken."""
    if not getattr(args, "kinds_config", None):
        return kinds.BUILTIN
    try:
        return kinds.load_kinds_config(args.kinds_config)
    except kinds.KindConfigError as exc:
        error(command, str(exc))
        return None
