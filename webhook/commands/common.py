"""What several commands share: error lines, the ``--kinds-config`` flag."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from webhook.kube import kinds


def error(command: str, message: str) -> None:
    """``placement-webhook COMMAND: message`` on standard error."""
    print(f"placement-webhook {command}: {message}", file=sys.stderr)


def positive(text: str) -> float:
    """An argparse type: a number greater than zero (seconds, rates)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text}")
    return value


def whole(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``minimum`` (counts, steps)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}: {text}")
        return value

    return parse


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
