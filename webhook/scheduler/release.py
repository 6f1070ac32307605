"""Which kube-scheduler release the model speaks for, and the releases its wording changed in.

The scheduler's messages are part of what ``explain`` predicts (``kubectl describe pod`` shows
them), and they have changed over the releases. ``Release`` is the version the model words its
messages for; ``Options.release`` carries it, None standing for the newest release. A release
read as MAJOR.MINOR without its patch is taken as that minor's newest patch, the wording of
which is the one a cluster kept up to date shows.

The releases where a message (or what the message counts) changed, each checked against the
release's own source:

==========  =======================================================================
``V1_21``   NodeAffinity's reason names the selector too (kubernetes#97521); NodeName's says
            "node name", not "hostname" (kubernetes#97454)
``V1_22``   InterPodAffinity drops the generic "node(s) didn't match pod affinity/anti-affinity"
            it reported beside the precise reason (kubernetes#102518)
``V1_24``   NodeAffinity's PreFilter narrows the nodes to those ``matchFields metadata.name``
            names (kubernetes#108648); the FitError message gets the ``preemption: ...`` part
            (kubernetes#107775)
``V1_25``   TaintToleration says "untolerated taint {KEY: VALUE}" (kubernetes#109119, merged
            after the 1.24 code freeze); a PreFilter rejection is said once, not counted per
            node (kubernetes#110894)
``V1_30``   the ``preemption: ...`` part is no longer followed by a second full stop
``GENERIC_TAINT``  TaintToleration no longer names the taint: "untolerated taint(s)"
            (kubernetes#134740, in v1.35.0 and, picked into release-1.34, in v1.34.2)
==========  =======================================================================
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["GENERIC_TAINT", "NEWEST_PATCH", "V1_21", "V1_22", "V1_24", "V1_25", "V1_30", "Release", "parse_release",
           "since"]

NEWEST_PATCH = 1 << 30  # a release given without its patch: its minor's newest patch


@dataclass(frozen=True, order=True, slots=True)
class Release:
    """A Kubernetes release, ordered as versions are: (major, minor, patch)."""

    major: int
    minor: int
    patch: int = NEWEST_PATCH

    def __str__(self) -> str:
        text = f"v{self.major}.{self.minor}"
        return text if self.patch == NEWEST_PATCH else f"{text}.{self.patch}"


V1_21 = Release(1, 21, 0)
V1_22 = Release(1, 22, 0)
V1_24 = Release(1, 24, 0)
V1_25 = Release(1, 25, 0)
V1_30 = Release(1, 30, 0)
GENERIC_TAINT = Release(1, 34, 2)  # and every later release: v1.35.0 is past v1.34.2

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_release(text: str) -> Release | None:
    """``1.20``, ``v1.20.2`` or a ``gitVersion`` such as ``v1.31.2-eks-7f9249a`` (anything after
    the patch is a build's suffix); None when the text does not start with MAJOR.MINOR."""
    found = _VERSION.match(text.strip())
    if found is None:
        return None
    patch = found.group(3)
    return Release(int(found.group(1)), int(found.group(2)), NEWEST_PATCH if patch is None else int(patch))


def since(release: Release | None, first: Release) -> bool:
    """Whether ``release`` (None: the newest) is ``first`` or later."""
    return release is None or release >= first
