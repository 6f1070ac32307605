"""placement-webhook: a Kubernetes mutating admission webhook that adds placement to workloads."""

__version__ = "0.1.0"

API_GROUP = "placement.novasphere.dev"
API_VERSION = f"{API_GROUP}/v1alpha1"
POLICY_KIND = "PlacementPolicy"
TEST_KIND = "PlacementTest"
PREFIX = f"{API_GROUP}/"
ANNOTATION_APPLIED = f"{PREFIX}applied"
ANNOTATION_SKIP = f"{PREFIX}skip"
LABEL_GROUP = f"{PREFIX}group"


def compiled_build() -> bool:
    """Whether the review path runs compiled by mypyc (``setup.py``) or from its sources."""
    import importlib.machinery

    from webhook.engine import placement as engine

    return (engine.__file__ or "").endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


__all__ = [
    "ANNOTATION_APPLIED",
    "ANNOTATION_SKIP",
    "API_GROUP",
    "API_VERSION",
    "LABEL_GROUP",
    "POLICY_KIND",
    "PREFIX",
    "TEST_KIND",
    "__version__",
    "compiled_build",
]
