"""The kube-scheduler extender for spot and on-demand capacity (docs/extender.md)."""
