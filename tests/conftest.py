"""Shared fixtures: a private `$SLEUTH_HOME` per test, small corpora written on the fly, and the
bundled sample corpus compiled once per session."""

from __future__ import annotations

import fcntl
import os
import pickle
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from sleuth.compile.pipeline import CompileReport, compile_context
from sleuth.settings import current
from sleuth.store.contexts.home import Home
from tests.postgres import Postgres, throwaway_postgres
from tests.s3 import S3Server, moto_s3
from tests.support import SAMPLE_CORPUS, SAMPLE_MANIFEST, make_pdf


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """A throwaway PostgreSQL cluster for the session (each xdist worker starts its own)."""
    with throwaway_postgres() as server:
        yield server


@pytest.fixture(params=["sqlite", "postgresql"])
def database_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where a store of the server's state lives, once per backend: the conformance suite's parameter."""
    if request.param == "sqlite":
        yield str(tmp_path / "server.sqlite")
        return
    server: Postgres = request.getfixturevalue("postgres")
    url = server.create_database()
    yield url
    from sleuth.store.database import forget_database

    forget_database(url)
    server.drop_database(url)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    root = tmp_path / "home"
    monkeypatch.setenv("SLEUTH_HOME", str(root))
    return Home(root)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A small mixed corpus the pipeline tests change, break and delete files in."""
    root = tmp_path / "corpus"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "alpha.md").write_text(
        "# Alpha Handbook\n\nAlpha covers onboarding.\n\n## Laptops\n\nEvery hire receives a "
        "laptop on day one. Support tickets use the code HW-1107.\n\n## Badges\n\nBadges are "
        "issued by Facilities within two days.\n",
        encoding="utf-8",
    )
    (root / "notes" / "beta.txt").write_text(
        "Beta release notes.\nVersion 2.4 fixes the sync crash reported as BUG-88.\n", encoding="utf-8"
    )
    (root / "web.html").write_text(
        "<html><head><title>Gamma Guide</title><script>var x = 'tracking';</script></head>"
        "<body><nav>Home | About</nav><main><h1>Gamma Guide</h1><p>Gamma explains the "
        "refund process.</p><h2>Refunds</h2><p>Refunds are paid within 14 days.</p></main>"
        "<footer>Copyright</footer></body></html>",
        encoding="utf-8",
    )
    make_pdf(
        root / "report.pdf",
        [
            "1. Summary\nRevenue grew to 10 million dollars.",
            "2. Outlook\nThe outlook for next year is stable.",
        ],
        title="Delta Report",
    )
    return root


@pytest.fixture(scope="session")
def sample_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Home, CompileReport]]:
    """The bundled sample corpus compiled once with its manifest: once for the whole run, under a file
    lock that the xdist workers share, and copied into each worker's own home (a compiled home holds no
    absolute path), so no worker's tests see another's changes."""
    run = tmp_path_factory.getbasetemp()  # under xdist, each worker's folder in the run's
    compiled = _compiled_sample(run.parent if os.environ.get("PYTEST_XDIST_WORKER") else run)
    root = tmp_path_factory.mktemp("sample") / "home"
    shutil.copytree(compiled / "home", root)
    report = pickle.loads((compiled / "report.pickle").read_bytes())
    mp = pytest.MonkeyPatch()
    mp.setenv("SLEUTH_HOME", str(root))
    yield Home(root), report
    mp.undo()
    shutil.rmtree(root, ignore_errors=True)


def _compiled_sample(shared: Path) -> Path:
    """`shared/sample-compiled`, compiled by whichever worker comes first."""
    folder = shared / "sample-compiled"
    with open(shared / "sample-compiled.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "report.pickle").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            home = Home(folder / "home")
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("SLEUTH_HOME", str(home.root))
                report = compile_context(
                    "acme", [SAMPLE_CORPUS], SAMPLE_MANIFEST, home=home, settings=current()
                )
            (folder / "report.pickle").write_bytes(pickle.dumps(report))
    return folder


@pytest.fixture(scope="session")
def sample_version(sample_home: tuple[Home, CompileReport]) -> Path:
    """The live version directory of the compiled sample corpus."""
    home, _ = sample_home
    live = home.find("acme").live_version()
    assert live is not None
    return home.find("acme").version_dir(live)


@pytest.fixture
def filings(tmp_path: Path) -> Path:
    """Three one-company annual reports: two years of Alder, one of Birch (document resolution)."""
    root = tmp_path / "filings"
    for name, company, year, revenue in (
        ("alder-2023", "Alder Pumps, Inc.", 2023, "$12.5 million"),
        ("alder-2022", "Alder Pumps, Inc.", 2022, "$11.0 million"),
        ("birch-2023", "Birch Valves Corporation", 2023, "$48.0 million"),
    ):
        cover = f"FORM 10-K\nAnnual report for the fiscal year ended December 31, {year}\n{company}"
        body = (
            f"Results of operations\nRevenue for the year was {revenue}, driven by sales of pumps and valves."
        )
        make_pdf(root / f"{name}.pdf", [cover, body])
    return root


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """moto's S3 server on loopback for the session (the only S3-compatible server that installs here)."""
    with moto_s3() as server:
        yield server
