"""What the engine may know about the cluster (node, namespace and PriorityClass facts)."""
