"""What admission writes and what explain simulates select the same nodes.

A policy's nodeAffinity and nodeAntiAffinity reach a Deployment as node affinity
(``engine.fragments``: anti terms negated) and a Wukong VM natively (anti terms as written,
which ``explain`` reads by negating them). Either way the scheduler model's node-affinity
filter must admit the same nodes and score them alike, and over nodes whose Gt/Lt labels are
integers (or absent) those are exactly the nodes the policy means.
"""
from __future__ import annotations

from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.kit.engine import apply
from tests.kit.policies import policy as make_policy
from tests.kit.workloads import deployment, pod_spec_of
from webhook.engine import fragments
from webhook.explain.workloads import wukong_pod_spec
from webhook.kube.nodes import label_int
from webhook.scheduler.nodeaffinity import PreferredTerms, RequiredNodeAffinity, node_identity, terms_match

PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
KEYS = ("zone", "load")
# The edges of what a node label can hold as an integer: Gt 2^63-1 and Lt 0 match no node.
BOUNDS = ("0", "1", "5", str(2**63 - 2), str(2**63 - 1))
WORDS = ("a", "b", "5")

requirement = st.one_of(
    st.builds(lambda k, op, vs: {"key": k, "operator": op, "values": sorted(set(vs))},
              st.sampled_from(KEYS), st.sampled_from(["In", "NotIn"]), st.lists(st.sampled_from(WORDS), min_size=1)),
    st.builds(lambda k, op: {"key": k, "operator": op}, st.sampled_from(KEYS),
              st.sampled_from(["Exists", "DoesNotExist"])),
    st.builds(lambda k, op, v: {"key": k, "operator": op, "values": [v]},
              st.sampled_from(KEYS), st.sampled_from(["Gt", "Lt"]), st.sampled_from(BOUNDS)),
)
terms = st.lists(st.builds(lambda exprs: {"matchExpressions": exprs}, st.lists(requirement, min_size=1, max_size=2)),
                 min_size=1, max_size=2)
# A preferred anti term holds one requirement (the loader's rule: its negation must be one AND).
single = st.builds(lambda e: {"matchExpressions": [e]}, requirement)
weighted = st.builds(lambda w, t: {"weight": w, "preference": t}, st.integers(1, 100), single)
preferred = st.lists(weighted, min_size=1, max_size=2)


def _either(required: Any, preferred_terms: Any) -> Any:
    return st.one_of(st.none(), st.builds(lambda r, p: {k: v for k, v in (("required", r), ("preferred", p)) if v},
                                          required, preferred_terms).filter(bool))


placements = st.builds(lambda a, n: {k: v for k, v in (("nodeAffinity", a), ("nodeAntiAffinity", n)) if v},
                       _either(st.one_of(st.none(), terms), st.one_of(st.none(), preferred)),
                       _either(st.one_of(st.none(), terms), st.one_of(st.none(), preferred))).filter(bool)
label_values = st.sampled_from((*WORDS, *BOUNDS, "x"))
nodes = st.lists(st.dictionaries(st.sampled_from(KEYS), label_values), min_size=1, max_size=5).map(
    lambda labels: [{"metadata": {"name": f"n{i}", "labels": dict(ls)}} for i, ls in enumerate(labels)])


def _deployment_spec(placement: dict[str, Any]) -> dict[str, Any]:
    obj = deployment()
    apply(obj, make_policy(placement=placement))
    return pod_spec_of(obj)


def _wukong_spec(placement: dict[str, Any]) -> dict[str, Any]:
    vm = {"apiVersion": "vm.novasphere.dev/v1alpha1", "kind": "Wukong", "metadata": {"name": "vm"},
          "spec": {"cpu": 2}}
    apply(vm, make_policy(placement=placement))
    return wukong_pod_spec(vm, [])


def _reading(spec: dict[str, Any], node: dict[str, Any]) -> tuple[bool, int]:
    """The NodeAffinity filter's verdict and the node's raw NodeAffinity score."""
    identity = node_identity(node)
    prefs = PreferredTerms(((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(PREFERRED) or [])
    return RequiredNodeAffinity.of(spec).matches(*identity), prefs.score(*identity)


def _meant(placement: dict[str, Any], node: dict[str, Any]) -> bool:
    """What the policy means: a node the affinity admits and no anti term matches."""
    required = (placement.get("nodeAffinity") or {}).get("required")
    avoided = (placement.get("nodeAntiAffinity") or {}).get("required") or ()
    return (not required or terms_match(required, node)) and not any(terms_match([t], node) for t in avoided)


def _integers_or_absent(node: dict[str, Any]) -> bool:
    # A non-integer label satisfies neither Gt nor Lt, and no requirement says "not an integer".
    return all(label_int(v) is not None for v in node["metadata"]["labels"].values())


@settings(max_examples=400, deadline=None)
@given(placement=placements, cluster=nodes)
def test_admission_and_explain_select_and_score_the_same_nodes(placement: dict[str, Any],
                                                              cluster: list[dict[str, Any]]) -> None:
    assume(fragments.compiled(make_policy(placement=placement)).error is None)
    written, simulated = _deployment_spec(placement), _wukong_spec(placement)
    for node in cluster:
        assert _reading(written, node) == _reading(simulated, node), node
        if _integers_or_absent(node):
            assert _reading(written, node)[0] is _meant(placement, node), node
