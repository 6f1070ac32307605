"""A model of the kube-scheduler's default profile over plain API dicts.

Filters (in the profile's order): NodeUnschedulable, NodeName, TaintToleration, NodeAffinity,
NodePorts, NodeResourcesFit, PodTopologySpread, InterPodAffinity. Scores (weights 3, 2, 1, 2,
2, 1): TaintToleration, NodeAffinity, NodeResourcesFit (LeastAllocated),
PodTopologySpread, InterPodAffinity, NodeResourcesBalancedAllocation. PostFilter:
DefaultPreemption. Not modelled: ImageLocality, the volume plugins, DynamicResources,
nominated pods, extenders, percentageOfNodesToScore.

    cluster = Cluster.from_objects(nodes, pods, namespaces={"prod": {"team": "a"}})
    result = schedule(pod, cluster)
    result.chosen, result.message, result.failures["node-3"], result.breakdown("node-1")
    placement = place(pod, cluster)           # placement.cluster has the pod bound
"""
from webhook.scheduler.cluster import Cluster
from webhook.scheduler.framework import (
    Placement,
    PluginScore,
    Result,
    place,
    prioritize,
    schedule,
)
from webhook.scheduler.nodeinfo import NodeInfo
from webhook.scheduler.plan import DEFAULT_WEIGHTS, Options
from webhook.scheduler.podinfo import PodInfo
from webhook.scheduler.preemption import Candidate, Preemption
from webhook.scheduler.status import UNRESOLVABLE, UNSCHEDULABLE, Failure, Reason

__all__ = [
    "DEFAULT_WEIGHTS",
    "UNRESOLVABLE",
    "UNSCHEDULABLE",
    "Candidate",
    "Cluster",
    "Failure",
    "NodeInfo",
    "Options",
    "Placement",
    "PluginScore",
    "PodInfo",
    "Preemption",
    "Reason",
    "Result",
    "place",
    "prioritize",
    "schedule",
]
