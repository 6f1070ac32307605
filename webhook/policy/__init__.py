"""The policy language: models, loading with file:line errors, the policy set, lint findings."""
