"""``placement-webhook schema``: the JSON Schema of PlacementPolicy, for editors and CI."""
from __future__ import annotations

import argparse
import json

from webhook.exitcodes import Exit
from webhook.policy import model

HELP = "print the JSON Schema of PlacementPolicy"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = "Print the JSON Schema of PlacementPolicy (for editors and CI)."


def run(args: argparse.Namespace) -> int:
    print(json.dumps(model.schema(), indent=2))
    return Exit.OK
