"""Every loading rule (and the Kubernetes rules behind it) is reported with its file, line
and field path. Each case's spec body starts on line 6 of the file."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from webhook.policy import loader

NODE_TERM = """\
placement:
  nodeAffinity:
    required:
    - matchExpressions:
      - key: zone
"""  # lines 6-10; the expression's own fields follow from line 11


def _expr(*lines: str) -> str:
    return NODE_TERM + "".join(f"        {line}\n" for line in lines)


CASES = [
    # (id, spec body, line, field, message fragment)
    ("unknown-field", "placment: {}", 6, "spec.placment", 'did you mean "placement"?'),
    ("in-needs-values", _expr("operator: In"), 10,
     "spec.placement.nodeAffinity.required[0].matchExpressions[0].values", "needs at least one value"),
    ("notin-empty-values", _expr("operator: NotIn", "values: []"), 12,
     "spec.placement.nodeAffinity.required[0].matchExpressions[0].values", "needs at least one value"),
    ("exists-takes-no-values", _expr("operator: Exists", "values: [a]"), 12,
     "spec.placement.nodeAffinity.required[0].matchExpressions[0].values", "takes no values"),
    ("doesnotexist-takes-no-values", _expr("operator: DoesNotExist", "values: []"), 12,
     "spec.placement.nodeAffinity.required[0].matchExpressions[0].values", "takes no values"),
    ("gt-needs-one-value", _expr("operator: Gt", "values: ['1', '2']"), 12,
     "spec.placement.nodeAffinity.required[0].matchExpressions[0].values", "exactly one value"),
    ("lt-needs-an-integer", _expr("operator: Lt", "values:", "- ten"), 13,
     "spec.placement.nodeAffinity.required[0].matchExpressions[0].values[0]", "'ten' is not one"),
    # Gt/Lt values as the scheduler reads them (strconv.ParseInt of a label value), so a value
    # that passes here also matches nodes there.
    ("gt-value-with-an-underscore", _expr("operator: Gt", "values:", "- '1_0'"), 13,
     "spec.placement.nodeAffinity.required[0].matchExpressions[0].values[0]", "'1_0' is not one"),
    ("gt-value-beyond-int64", _expr("operator: Gt", "values:", "- '9223372036854775808'"), 13,
     "spec.placement.nodeAffinity.required[0].matchExpressions[0].values[0]", "is not one (digits only"),
    ("lt-value-with-a-sign", _expr("operator: Lt", "values:", "- '+5'"), 13,
     "spec.placement.nodeAffinity.required[0].matchExpressions[0].values[0]", "not a valid label value"),
    ("lt-negative-value", _expr("operator: Lt", "values:", "- '-1'"), 13,
     "spec.placement.nodeAffinity.required[0].matchExpressions[0].values[0]", "not a valid label value"),
    ("anti-gt-value-with-spaces", NODE_TERM.replace("nodeAffinity", "nodeAntiAffinity") + "        operator: Gt\n        values: [' 5']\n", 12,
     "spec.placement.nodeAntiAffinity.required[0].matchExpressions[0].values[0]", "not a valid label value"),
    ("spread-match-label-keys-repeat-the-selector",
     "placement:\n  podAntiAffinity:\n    spread: required\n    labelSelector: {matchLabels: {app: web}}\n"
     "    matchLabelKeys: [app]", 10, "spec.placement.podAntiAffinity.matchLabelKeys",
     "'app' is in both matchLabelKeys and labelSelector"),
    ("unknown-operator", _expr("operator: Contains", "values: [a]"), 11,
     "spec.placement.nodeAffinity.required[0].matchExpressions[0].operator", "must be one of"),
    ("yaml-boolean-value", _expr("operator: In", "values: [true]"), 12,
     "spec.placement.nodeAffinity.required[0].matchExpressions[0].values[0]", 'quote it ("true")'),
    ("invalid-label-key", _expr("operator: Exists").replace("key: zone", "key: -zone"), 10,
     "spec.placement.nodeAffinity.required[0].matchExpressions[0].key", "name part must be"),
    ("invalid-label-value", _expr("operator: In", "values: ['has space']"), 12,
     "spec.placement.nodeAffinity.required[0].matchExpressions[0].values[0]", "not a valid label value"),
    ("matchfields-key", ("placement:\n  nodeAffinity:\n    required:\n    - matchFields:\n"
     "      - {key: metadata.labels, operator: In, values: [n1]}"), 10,
     "spec.placement.nodeAffinity.required[0].matchFields[0].key", "only key 'metadata.name'"),
    ("matchfields-operator", ("placement:\n  nodeAffinity:\n    required:\n    - matchFields:\n"
     "      - key: metadata.name\n        operator: Exists"), 11,
     "spec.placement.nodeAffinity.required[0].matchFields[0].operator", "only operators In and NotIn"),
    ("matchfields-one-value", ("placement:\n  nodeAffinity:\n    required:\n    - matchFields:\n"
     "      - key: metadata.name\n        operator: In\n        values: [a, b]"), 12,
     "spec.placement.nodeAffinity.required[0].matchFields[0].values", "exactly one value"),
    ("empty-term", "placement:\n  nodeAffinity:\n    required:\n    - {}", 9,
     "spec.placement.nodeAffinity.required[0]", "an empty term matches no node"),
    ("weight-too-low", ("placement:\n  nodeAffinity:\n    preferred:\n    - weight: 0\n"
     "      preference: {matchExpressions: [{key: a, operator: Exists}]}"), 9,
     "spec.placement.nodeAffinity.preferred[0].weight", "must be at least 1"),
    ("weight-too-high", "placement:\n  podAntiAffinity:\n    spread: preferred\n    weight: 101", 9,
     "spec.placement.podAntiAffinity.weight", "must be at most 100"),
    ("weight-not-an-integer", "placement:\n  capacity:\n    prefer: spot\n    weight: '50'", 9,
     "spec.placement.capacity.weight", "must be an integer"),
    ("topology-key-empty", "placement:\n  podAntiAffinity:\n    spread: required\n    topologyKey: ''", 9,
     "spec.placement.podAntiAffinity.topologyKey", "must not be empty"),
    ("topology-key-invalid", "placement:\n  podAntiAffinity:\n    spread: required\n    topologyKey: a/b/c", 9,
     "spec.placement.podAntiAffinity.topologyKey", "prefix part"),
    ("pod-affinity-topology-key-missing", ("placement:\n  podAffinity:\n    required:\n"
     "    - labelSelector: {matchLabels: {app: db}}"), 9,
     "spec.placement.podAffinity.required[0].topologyKey", "required field is missing"),
    ("node-selector-key", "placement:\n  nodeSelector:\n    'bad key': x", 8,
     "spec.placement.nodeSelector[bad key]", "key 'bad key'"),
    ("node-selector-boolean", "placement:\n  nodeSelector:\n    gpu: yes", 8,
     "spec.placement.nodeSelector.gpu", "quote it"),
    ("anti-affinity-preferred-single-expression", ("placement:\n  nodeAntiAffinity:\n    preferred:\n"
     "    - weight: 10\n      preference:\n        matchExpressions:\n        - {key: a, operator: Exists}\n"
     "        - {key: b, operator: Exists}"), 10,
     "spec.placement.nodeAntiAffinity.preferred[0].preference", "NOT A OR NOT B"),
    ("rollout-both-zero", "rollout:\n  mode: explicit\n  maxSurge: 0\n  maxUnavailable: 0%", 9,
     "spec.rollout.maxUnavailable", "may not both be zero"),
    ("rollout-negative", "rollout:\n  mode: explicit\n  maxSurge: -1", 8,
     "spec.rollout.maxSurge", "greater than or equal to 0"),
    ("rollout-not-a-percentage", "rollout:\n  mode: explicit\n  maxUnavailable: '1'", 8,
     "spec.rollout.maxUnavailable", "percentage like '25%'"),
    ("rollout-over-100-percent", "rollout:\n  mode: explicit\n  maxUnavailable: 150%", 8,
     "spec.rollout.maxUnavailable", "more than 100%"),
    ("rollout-safe-both-zero", "rollout:\n  mode: safe\n  maxSurge: 0\n  maxUnavailable: 0", 9,
     "spec.rollout.maxUnavailable", "may not both be zero"),
    ("unknown-kind", "match:\n  kinds: [Deployment, Deploymnet]", 7,
     "spec.match.kinds[1]", 'unknown kind \'Deploymnet\'; did you mean "Deployment"?'),
    ("unknown-group-kind", "match:\n  kinds:\n  - apps/v1/Deployment\n  - kubevirt.io/v1/VirtualMachin", 9,
     "spec.match.kinds[1]", 'did you mean "kubevirt.io/v1/VirtualMachine"?'),
    ("priority-class-name", "scheduling:\n  priorityClassName: High_Priority", 7,
     "spec.scheduling.priorityClassName", "not a valid DNS subdomain"),
    ("scheduler-name", "scheduling:\n  schedulerName: My Scheduler", 7,
     "spec.scheduling.schedulerName", "not a valid DNS subdomain"),
    ("preemption-policy", "scheduling:\n  preemptionPolicy: Always", 7,
     "spec.scheduling.preemptionPolicy", "must be one of 'Never' or 'PreemptLowerPriority'"),
    ("toleration-exists-with-value", ("placement:\n  tolerations:\n  - key: a\n    operator: Exists\n"
     "    value: b"), 10, "spec.placement.tolerations[0].value", "takes no value"),
    ("toleration-effect", "placement:\n  tolerations:\n  - {key: a, operator: Exists, effect: Never}", 8,
     "spec.placement.tolerations[0].effect", "must be one of"),
    ("toleration-seconds-needs-noexecute", ("placement:\n  tolerations:\n  - key: a\n    operator: Exists\n"
     "    tolerationSeconds: 30"), 10, "spec.placement.tolerations[0].tolerationSeconds", "NoExecute"),
    ("toleration-without-key", "placement:\n  tolerations:\n  - value: x", 8,
     "spec.placement.tolerations[0].operator", "must use operator Exists"),
    ("capacity-needs-prefer-or-require", "placement:\n  capacity:\n    provider: aks", 7,
     "spec.placement.capacity", "set 'prefer' or 'require'"),
    ("capacity-contradiction", "placement:\n  capacity:\n    prefer: spot\n    require: on-demand", 8,
     "spec.placement.capacity.prefer", "contradicts"),
    ("capacity-provider", "placement:\n  capacity:\n    prefer: spot\n    provider: azure", 9,
     "spec.placement.capacity.provider", "must be one of 'generic'"),
    ("threshold-range", "placement:\n  resources:\n    preferredCPU: {weight: 80, threshold: 170%}", 8,
     "spec.placement.resources.preferredCPU.threshold", "from '0%' to '100%'"),
    ("resource-type", ("placement:\n  resources:\n    requiredResources:\n    - resourceType: disk\n"
     "      minAvailable: '1'"), 9, "spec.placement.resources.requiredResources[0].resourceType", "must be one of"),
    ("quantity", ("placement:\n  resources:\n    requiredResources:\n    - resourceType: memory\n"
     "      minAvailable: 4GB"), 10, "spec.placement.resources.requiredResources[0].minAvailable",
     "not a valid quantity"),
    ("whole-gpus", ("placement:\n  resources:\n    requiredResources:\n    - resourceType: gpu\n"
     "      minAvailable: 500m"), 10, "spec.placement.resources.requiredResources[0].minAvailable", "whole devices"),
    ("enforcement", "enforcement: enforce", 6, "spec.enforcement", "must be one of 'patch' or 'audit'"),
    ("on-conflict", "onConflict: overwrite", 6, "spec.onConflict", "must be one of 'merge', 'keep' or 'replace'"),
    ("order-integer", "order: '10'", 6, "spec.order", "must be an integer"),
    ("empty-exclude", "exclude: {}", 6, "spec.exclude", "would exclude every object"),
    ("selector-operator", "match:\n  selector:\n    matchExpressions:\n    - {key: a, operator: Gt, values: ['1']}", 9,
     "spec.match.selector.matchExpressions[0].operator", "must be one of"),
    ("operations", "match:\n  operations: [CREATE, PATCH]", 7, "spec.match.operations[1]", "must be one of"),
    ("spread-weight-with-required", "placement:\n  podAntiAffinity:\n    spread: required\n    weight: 50", 9,
     "spec.placement.podAntiAffinity.weight", "only to spread: preferred"),
    ("match-label-keys-in-both", ("placement:\n  podAffinity:\n    required:\n    - topologyKey: zone\n"
     "      labelSelector: {matchLabels: {app: a}}\n      matchLabelKeys: [rev]\n      mismatchLabelKeys: [rev]"), 12,
     "spec.placement.podAffinity.required[0].mismatchLabelKeys", "in both matchLabelKeys and mismatchLabelKeys"),
    ("vm-eviction-strategy", "vm:\n  evictionStrategy: Migrate", 7, "spec.vm.evictionStrategy", "must be one of"),
]


@pytest.mark.parametrize(("spec", "line", "field", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_rule_is_reported_with_its_file_line_and_field(
    policy_file: Callable[..., Path], spec: str, line: int, field: str, fragment: str
) -> None:
    path = policy_file(spec)
    with pytest.raises(loader.PolicyLoadError) as info:
        loader.load([path])
    [error] = info.value.errors
    assert (error.file, error.line, error.field) == (str(path), line, field)
    assert fragment in error.message
    assert str(error) == f"{path}:{line}: {field}: {error.message}"


@pytest.mark.parametrize(
    ("metadata", "line", "field", "fragment"),
    [
        ("metadata: {name: Bad_Name}", 3, "metadata.name", "not a valid DNS subdomain"),
        ("metadata: {}", 3, "metadata.name", "required field is missing"),
        ("metadata: {name: a, namespace: b}", 3, "metadata.namespace", "unknown field"),
    ],
)
def test_metadata_errors_point_at_metadata(
    write: Callable[[str, str], Path], metadata: str, line: int, field: str, fragment: str
) -> None:
    text = f"apiVersion: placement.novasphere.dev/v1alpha1\nkind: PlacementPolicy\n{metadata}\nspec: {{}}\n"
    path = write("p.yaml", text)
    with pytest.raises(loader.PolicyLoadError) as info:
        loader.load([path])
    [error] = info.value.errors
    assert (error.line, error.field) == (line, field)
    assert fragment in error.message
