"""The repository is all a user has: nothing in it cites a document that is not in it."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A section of the product specification cited by number ("SPEC" then "section 7", "6" or
# "sections 3.5 and 8"): the specification is not shipped, so the rule must be said instead.
SPEC_CITATION = re.compile(r"\bSPEC (sections? )?\d")


def _tracked_text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / name for name in listed if Path(name).suffix in {".py", ".md", ".yaml", ".yml", ".tpl", ".txt", ".sh", ""}
            and (ROOT / name).is_file()]


def test_no_file_cites_the_unshipped_specification() -> None:
    citing = []
    for path in _tracked_text_files():
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if SPEC_CITATION.search(line):
                citing.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not citing, "say the rule instead of citing the specification:\n" + "\n".join(citing)


def test_the_pattern_finds_citations_and_not_pod_spec_names() -> None:
    spec = "SPEC"  # written apart, or this very file would cite it
    assert SPEC_CITATION.search(f"keeps the labels true ({spec} section 8)")
    assert SPEC_CITATION.search(f"150,000 pods ({spec} 6)")
    assert not SPEC_CITATION.search("POD_SPEC_WRITES = (1, 2)")
    assert not SPEC_CITATION.search("_SPEC_FIELDS = ('holderIdentity',)")
