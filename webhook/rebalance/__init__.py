"""Bringing running pods back where their policies prefer once there is room: candidates found
on the cluster view, each move simulated with the scheduler model on the live snapshot, and made
only through the Eviction API, one pod per owner, never below a PodDisruptionBudget."""
