"""Facts about Kubernetes, each rule implemented once: workload kinds and where they keep their
pod spec, names and label syntax, quantities, label selectors, node predicates, JSON pointers,
object helpers and the limits of admission warnings. Pure: no I/O, nothing of this project's
policy language."""
