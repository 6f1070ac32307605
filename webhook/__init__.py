"""placement-webhook: a Kubernetes mutating admission webhook that adds placement to workloads."""

__version__ = "0.1.0"

API_GROUP = "placement.novasphere.dev"
API_VERSION = f"{API_GROUP}/v1alpha1"
POLICY_KIND = "PlacementPolicy"
TEST_KIND = "PlacementTest"
PREFIX = f"{API_GROUP}/"
ANNOTATION_APPLIED = f"{PREFIX}applied"
ANNOTATION_SKIP = f"{PREFIX}skip"
# "false" keeps a running pod where it is: the rebalancer never evicts it.
ANNOTATION_REBALANCE = f"{PREFIX}rebalance"
LABEL_GROUP = f"{PREFIX}group"


__all__ = [
    "ANNOTATION_APPLIED",
    "ANNOTATION_REBALANCE",
    "ANNOTATION_SKIP",
    "API_GROUP",
    "API_VERSION",
    "LABEL_GROUP",
    "POLICY_KIND",
    "PREFIX",
    "TEST_KIND",
    "__version__",
]
