"""Fixtures of the runtime tests: the fake API server, a PKI and a policy folder, as the cluster
and server tests make them (the runtime runs both kinds of component)."""
from __future__ import annotations

from tests.cluster.conftest import server, until_fixture  # noqa: F401 - the fixtures
from tests.server.conftest import pki, policy_dir  # noqa: F401 - the fixtures
