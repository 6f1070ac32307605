"""The kube-scheduler extender for spot and on-demand capacity (SPEC section 9, first part)."""
