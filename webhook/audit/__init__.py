"""The running cluster held against the policies: every workload's verdict (what the policies
would change, what opted out, whether its replicas are placed and its next rollout would finish),
and the same verdicts as ``wgpolicyk8s.io/v1alpha2`` PolicyReports, in the shape Kyverno writes."""
