"""`sleuth compile x.tar.gz` reads an archive as the API's import does (issue 41: one archive reader, in
`compile/archives.py`): a compression bomb is refused from the ratio of what it has read, and a
member's bytes are counted as read, not taken from what the archive declares."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from sleuth.compile.archives import ArchiveRefused, SourceLimits
from sleuth.compile.sources import import_sources
from sleuth.settings import DEFAULTS

LIMITS = SourceLimits.of_settings(DEFAULTS)


def test_a_tar_bomb_is_refused_while_it_is_read(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.tar.gz"
    zeros = 64 * 1024 * 1024  # 64 MiB of zeros: about 64 KiB of gzip, a ratio of 1,000
    with tarfile.open(bomb, "w:gz") as tar:
        info = tarfile.TarInfo("zeros.txt")
        info.size = zeros
        tar.addfile(info, io.BytesIO(bytes(zeros)))
    assert bomb.stat().st_size < 200_000
    with pytest.raises(ArchiveRefused, match="compression bomb"):
        import_sources(tmp_path / "sources", [bomb], LIMITS)
    assert not list((tmp_path / "sources").rglob("zeros.txt"))


def test_an_honest_zip_lands_and_unsafe_members_are_skipped(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle.zip"
    with zipfile.ZipFile(bundle, "w") as zf:
        zf.writestr("guide/intro.md", "# Intro\n\nHello.\n")
        zf.writestr("../escape.md", "# Out\n")
        zf.writestr("hid\u200bden.md", "# Hidden\n")
    report = import_sources(tmp_path / "sources", [bundle], LIMITS)
    assert report.copied == ["uploads/bundle/guide/intro.md"]
    assert {reason.split(":")[0] for _name, reason in report.skipped} == {
        "unsafe path '../escape.md'",
        "unsafe path 'hid\\u200bden.md'",
    }
    assert (
        (tmp_path / "sources" / "uploads" / "bundle" / "guide" / "intro.md").read_text().startswith("# Intro")
    )
