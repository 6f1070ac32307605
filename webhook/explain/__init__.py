"""Scheduling diagnosis over the scheduler model: where a workload lands, whether its
rollout finishes, and which verified change would make it (``suggest``)."""
