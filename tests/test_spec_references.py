"""The specification the code cites is in the repository (`docs/spec/`), and every `spec/<file>.md §N`
reference in the code names a file there and a section that file has."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "docs" / "spec"
REFERENCE = re.compile(r"spec/([a-z-]+)\.md §\s?(\d+(?:\.\d+)*)")


def _sections(path: Path) -> set[str]:
    """`8`, `8.1`, … of the file's numbered headings (`## 8. Queries`, `### 8.1 Request`)."""
    found = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        match = re.match(r"#{2,4}\s+(\d+(?:\.\d+)*)\.?\s", line)
        if match:
            found.add(match.group(1))
    return found


def test_every_spec_reference_resolves() -> None:
    sections = {path.stem: _sections(path) for path in SPEC.glob("*.md")}
    missing: list[str] = []
    count = 0
    for source in sorted((ROOT / "src").rglob("*.py")):
        for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), start=1):
            for name, section in REFERENCE.findall(line):
                count += 1
                top = section.split(".")[0]
                if name not in sections or (section not in sections[name] and top not in sections[name]):
                    missing.append(f"{source.relative_to(ROOT)}:{number}: spec/{name}.md §{section}")
    assert count > 100  # the code cites the spec throughout
    assert missing == []


def test_no_reference_leaves_the_repository() -> None:
    outside = [
        str(path.relative_to(ROOT))
        for path in [*(ROOT / "src").rglob("*.py"), *(ROOT / "docs").glob("*.md"), ROOT / "README.md"]
        if "shared/spec" in path.read_text(encoding="utf-8")
    ]
    assert outside == []
