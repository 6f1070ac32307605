"""How a suite run is shown: one line per case, a diff per failure, a summary, JUnit XML."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from webhook.suites import run as suite_run


def case_line(result: suite_run.CaseResult) -> str:
    """``PASS file:line: suite: case`` (``FAIL`` / ``UPDATED``), then each failure indented."""
    status = "FAIL" if not result.passed else ("UPDATED" if result.updated else "PASS")
    lines = [f"{status} {result.file}:{result.line}: {result.suite}: {result.case}"]
    for failure in result.failures:
        lines += ["    " + line for line in failure.render().splitlines()]
    return "\n".join(lines)


def summary(report: suite_run.Report) -> str:
    return f"{report.passed} passed, {report.failed} failed"


# ---- JUnit XML -----------------------------------------------------------------------------


def junit_tree(report: suite_run.Report) -> ET.ElementTree:
    """JUnit XML (testsuites/testsuite/testcase/failure) as CI systems read it.

    A suite file that cannot run becomes a testsuite with one ``<error>`` testcase, so CI
    shows it instead of silently running fewer tests.
    """
    root = ET.Element("testsuites", name="placement-webhook test")
    groups: dict[tuple[str, str], list[suite_run.CaseResult]] = {}
    for result in report.results:
        groups.setdefault((result.file, result.suite), []).append(result)
    for (file, name), results in groups.items():
        _testsuite(root, file=file, name=name, results=results)
    for file, problem in zip(report.broken_files, report.broken):
        _broken_suite(root, file=file, problem=problem)
    _count(root, root.findall("testsuite"))
    ET.indent(root)
    return ET.ElementTree(root)


def _testsuite(root: ET.Element, *, file: str, name: str, results: list[suite_run.CaseResult]) -> None:
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


def _broken_suite(root: ET.Element, *, file: str, problem: suite_run.SuiteError) -> None:
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


def write_junit(report: suite_run.Report, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    junit_tree(report).write(path, encoding="utf-8", xml_declaration=True)
