"""Kind references as policies write them in ``match.kinds``, and the built-in kinds."""
from __future__ import annotations

import pytest

from webhook.kube.kinds import BUILTIN, refers_to

VM = BUILTIN.lookup("kubevirt.io", "VirtualMachine")
POD = BUILTIN.lookup("", "Pod")


@pytest.mark.parametrize(
    ("ref", "expected"),
    [("VirtualMachine", True), ("kubevirt.io/VirtualMachine", True), ("kubevirt.io/v1alpha3/VirtualMachine", True),
     ("v1/VirtualMachine", False), ("pool.kubevirt.io/VirtualMachine", False), ("a/b/c/VirtualMachine", False)],
)
def test_kind_references_name_a_group_and_kind_in_any_version(ref: str, expected: bool) -> None:
    assert VM is not None
    assert refers_to(ref, VM) is expected


@pytest.mark.parametrize(("ref", "expected"), [("v1/Pod", True), ("Pod", True), ("apps/Pod", False), ("v2/Pod", True)])
def test_a_version_before_the_kind_names_the_core_group(ref: str, expected: bool) -> None:
    assert POD is not None
    assert refers_to(ref, POD) is expected


def test_resolving_a_reference_finds_every_kind_it_names_and_nothing_else() -> None:
    assert [t.kind for t in BUILTIN.resolve("Deployment")] == ["Deployment"]
    assert BUILTIN.resolve("kubevirt.io/v1/VirtualMachine") == (VM,)
    assert BUILTIN.resolve("apps/Pod") == ()
