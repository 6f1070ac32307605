"""``placement-webhook schema``: the JSON Schema of PlacementPolicy, for editors and CI; with
``--crd``, the PlacementPolicy CustomResourceDefinition the chart installs."""
from __future__ import annotations

import argparse
import json

from webhook.exitcodes import Exit
from webhook.policy import crd, model

HELP = "print the JSON Schema of PlacementPolicy, or its CustomResourceDefinition"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Print the JSON Schema of PlacementPolicy (for editors and CI), or with --crd its "
        "CustomResourceDefinition as YAML (the chart's crds/placementpolicies.yaml)."
    )
    parser.add_argument(
        "--crd", action="store_true",
        help="print the CustomResourceDefinition placementpolicies.placement.novasphere.dev instead",
    )


def run(args: argparse.Namespace) -> int:
    if args.crd:
        print(crd.manifest(), end="")
    else:
        print(json.dumps(model.schema(), indent=2))
    return Exit.OK
