"""How a suite run is shown: one line per case, a diff per failure, a summary, JUnit XML.

The summary ``N passed, M failed`` stands alone on the last line of standard output so
scripts can read it; problems that stop a suite from running go to standard error as
``file:line: field: message``.
"""
from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from webhook.suites import run as suites


def case_line(result: suites.CaseResult) -> str:
    """``PASS file:line: suite: case`` (``FAIL`` / ``UPDATED``), then each failure indented."""
    status = "FAIL" if not result.passed else ("UPDATED" if result.updated else "PASS")
    lines = [f"{status} {result.file}:{result.line}: {result.suite}: {result.case}"]
    for failure in result.failures:
        lines += ["    " + line for line in failure.render().splitlines()]
    return "\n".join(lines)


def summary(report: suites.Report) -> str:
    return f"{report.passed} passed, {report.failed} failed"


def main(*, paths: Sequence[str], junit: str | None, update: bool, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    """Run the suites under ``paths`` and print as the ``test`` command does; returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        files = suites.discover(paths)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=err)
        return suites.EXIT_BROKEN
    if not files:
        print(f"error: no *.suite.yaml files under {', '.join(paths)}", file=err)
        return suites.EXIT_BROKEN
    report = suites.run(files, update=update, on_case=lambda r: print(case_line(r), file=out, flush=True))
    for problem in report.broken:
        print(str(problem), file=err)
    updated = sum(r.updated for r in report.results)
    if updated:
        print(f"updated the expected object of {updated} case(s); review the change with git diff", file=err)
    if junit:
        write_junit(report, Path(junit))
    print(summary(report), file=out)
    return report.exit_code


# ---- JUnit XML -----------------------------------------------------------------------------


def junit_tree(report: suites.Report) -> ET.ElementTree:
    """JUnit XML (testsuites/testsuite/testcase/failure) as CI systems read it.

    A suite file that cannot run becomes a testsuite with one ``<error>`` testcase, so CI
    shows it instead of silently running fewer tests.
    """
    root = ET.Element("testsuites", name="placement-webhook test")
    groups: dict[tuple[str, str], list[suites.CaseResult]] = {}
    for result in report.results:
        groups.setdefault((result.file, result.suite), []).append(result)
    for (file, name), results in groups.items():
        _testsuite(root, file=file, name=name, results=results)
    for file, problem in zip(report.broken_files, report.broken):
        _broken_suite(root, file=file, problem=problem)
    _count(root, root.findall("testsuite"))
    ET.indent(root)
    return ET.ElementTree(root)


def _testsuite(root: ET.Element, *, file: str, name: str, results: list[suites.CaseResult]) -> None:
    element = ET.SubElement(root, "testsuite", name=name, file=file)
    for result in results:
        case = ET.SubElement(
            element, "testcase", name=result.case, classname=name, file=file,
            line=str(result.line), time=f"{result.seconds:.3f}",
        )
        if result.failures:
            failure = ET.SubElement(case, "failure", message="; ".join(f"{f.expectation}: {f.message}" for f in result.failures), type="AssertionError")
            failure.text = "\n".join(f.render() for f in result.failures)
    _count(element, [element])


def _broken_suite(root: ET.Element, *, file: str, problem: suites.SuiteError) -> None:
    element = ET.SubElement(root, "testsuite", name=file, file=file)
    case = ET.SubElement(element, "testcase", name="load suite", classname=file, file=file, time="0.000")
    error = ET.SubElement(case, "error", message=str(problem.errors[0]) if problem.errors else "broken suite", type="SuiteError")
    error.text = str(problem)
    _count(element, [element])


def _count(element: ET.Element, testsuites: list[ET.Element]) -> None:
    cases = [c for s in testsuites for c in s.findall("testcase")]
    element.set("tests", str(len(cases)))
    element.set("failures", str(sum(c.find("failure") is not None for c in cases)))
    element.set("errors", str(sum(c.find("error") is not None for c in cases)))
    element.set("skipped", "0")
    element.set("time", f"{sum(float(c.get('time', '0')) for c in cases):.3f}")


def write_junit(report: suites.Report, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    junit_tree(report).write(path, encoding="utf-8", xml_declaration=True)
