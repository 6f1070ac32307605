"""The node labeler (SPEC section 8): keeps the resource labels of resource-aware placement
true on every node, from the cluster view, with leader election and rate-limited writes."""
