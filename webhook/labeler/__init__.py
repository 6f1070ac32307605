"""The node labeler (`placement-webhook label-nodes`): keeps the resource labels of resource-aware placement
true on every node, from the cluster view, with leader election and rate-limited writes."""
