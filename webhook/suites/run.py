"""Running policy test suites: each case's object through ``admission.admit`` -- the very
function the server calls -- and its outcome against the case's expectations."""
from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webhook.engine import admission, review
from webhook.exitcodes import Exit
from webhook.suites.checks import Failure, check
from webhook.suites.load import ClusterPolicies, LoadedCase, LoadedSuite, SuiteError, SuiteLoader, discover
from webhook.suites.placement import check_placement


@dataclass
class CaseResult:
    """What happened to one case."""

    suite: str
    case: str
    file: str
    line: int
    failures: list[Failure] = field(default_factory=list)
    updated: bool = False
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.failures


@dataclass
class Report:
    """Results of a whole run: per-case results and the suite files that could not run."""

    results: list[CaseResult] = field(default_factory=list)
    broken: list[SuiteError] = field(default_factory=list)
    broken_files: list[str] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def failed(self) -> int:
        return len(self.results) - self.passed

    @property
    def exit_code(self) -> int:
        if self.broken:
            return Exit.USAGE
        return Exit.FINDINGS if self.failed else Exit.OK


# ---- running -------------------------------------------------------------------------------


def run_case(suite: LoadedSuite, case: LoadedCase) -> tuple[CaseResult, dict[str, Any] | None]:
    """Run one case through admission; returns its result and the object admission produced."""
    started = time.perf_counter()
    request = review.request_for_object(
        copy.deepcopy(case.object),
        operation=case.operation,
        namespace=case.namespace,
        old_object=copy.deepcopy(case.old_object),
    )
    outcome = admission.admit(request, policies=suite.policies, cluster=case.cluster)
    failures = check(case.expect, outcome, expected_object=case.expected_object)
    if case.expect.placement is not None:
        failures += check_placement(case.expect.placement, outcome, targets=suite.policies.targets, state=case.state,
                                    namespace=case.namespace)
    result = CaseResult(suite.name, case.name, suite.file, case.line, failures, seconds=time.perf_counter() - started)
    return result, outcome.object


Listener = Callable[[CaseResult], None]


def run(paths: Iterable[str | Path], *, update: bool = False, on_case: Listener | None = None,
        cluster: ClusterPolicies | None = None) -> Report:
    """Discover, load and run suites; with ``update``, rewrite expected objects that differ;
    with ``cluster``, against the cluster's policies (``ClusterPolicies``)."""
    from webhook.suites import update as suite_update  # only --update needs the rewriting machinery

    report = Report()
    suite_loader = SuiteLoader(update=update, cluster=cluster)
    for file in discover(paths):
        try:
            suites = suite_loader.load(file)
        except SuiteError as exc:
            report.broken.append(exc)
            report.broken_files.append(str(file))
            continue
        edits = suite_update.Edits(file)
        for suite in suites:
            for case in suite.cases:
                result, produced = run_case(suite, case)
                if update:
                    _record_update(edits, suite, case, result, produced)
                report.results.append(result)
                if on_case:
                    on_case(result)
        edits.apply()
    return report


def _record_update(edits: Any, suite: LoadedSuite, case: LoadedCase, result: CaseResult, produced: Any) -> None:
    """Turn a failed (or missing) object expectation into a rewrite of the suite or object file."""
    wants_object = case.expect.object is not None or case.expected_file is not None
    stale = any(f.expectation == "object" for f in result.failures) or (
        case.expected_file is not None and case.expected_object is None
    )
    if not (wants_object and stale and isinstance(produced, dict)):
        return
    if case.expected_file is not None:
        edits.object_file(case.expected_file, produced)
    else:
        path = ("cases", case.index, "expect", "object")
        edits.inline(path, suite.document.line_of(path), produced)
    result.failures = [f for f in result.failures if f.expectation != "object"]
    result.updated = True
