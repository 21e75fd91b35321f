"""query_db is read-only at the connection: every write path is refused, whatever the SQL says."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sleuth.sdk.errors import QueryError
from sleuth.sdk.sql import ReadOnlyDatabase


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    path = tmp_path / "tables.sqlite"
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE product (_row_id INTEGER PRIMARY KEY, sku TEXT, price REAL);
        INSERT INTO product (sku, price) VALUES ('AX-220', 1249.0), ('TX-9', 689.0), ('BX-5', 2150.0);
        CREATE VIRTUAL TABLE notes USING fts5(body);
        INSERT INTO notes VALUES ('pressure sensor calibration'), ('temperature probe');
        """
    )
    db.execute("PRAGMA journal_mode=DELETE")
    db.commit()
    db.close()
    return path


@pytest.fixture
def ro(db_path: Path) -> ReadOnlyDatabase:
    return ReadOnlyDatabase(db_path)


def test_selects_ctes_and_fts_work(ro: ReadOnlyDatabase) -> None:
    cols, rows, truncated = ro.execute(
        "SELECT sku, price FROM product WHERE price > ? ORDER BY price", [1000]
    )
    assert cols == ["sku", "price"] and rows == [("AX-220", 1249.0), ("BX-5", 2150.0)] and not truncated
    _, rows, _ = ro.execute(
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 5) SELECT sum(x) FROM n"
    )
    assert rows == [(15,)]
    _, rows, _ = ro.execute("SELECT body FROM notes WHERE notes MATCH 'sensor' ORDER BY bm25(notes)")
    assert rows == [("pressure sensor calibration",)]
    _, rows, _ = ro.execute("PRAGMA table_info(product)")
    assert [r[1] for r in rows] == ["_row_id", "sku", "price"]
    assert ro.schema()["product"] == [("_row_id", "INTEGER"), ("sku", "TEXT"), ("price", "REAL")]


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO product (sku) VALUES ('X')",
        "UPDATE product SET price = 0",
        "DELETE FROM product",
        "DROP TABLE product",
        "CREATE TABLE t (a)",
        "CREATE TEMP TABLE t (a)",
        "CREATE INDEX i ON product(sku)",
        "ALTER TABLE product ADD COLUMN x",
        "ATTACH DATABASE ':memory:' AS other",
        "ATTACH DATABASE '/tmp/sleuth-evil.db' AS other",
        "VACUUM INTO '/tmp/sleuth-copy.db'",
        "PRAGMA query_only = 0",
        "PRAGMA writable_schema = 1",
        "PRAGMA journal_mode = WAL",
        "PRAGMA user_version = 7",
        "SELECT load_extension('/tmp/evil.so')",
        "UPDATE sqlite_master SET sql = 'x'",
        "INSERT INTO notes(notes) VALUES ('delete-all')",
        "SELECT 1; DROP TABLE product",
        "REINDEX",
        "ANALYZE",
        "BEGIN IMMEDIATE",
        "SAVEPOINT s",
    ],
)
def test_writes_and_escapes_are_refused(sql: str, ro: ReadOnlyDatabase, db_path: Path) -> None:
    before = db_path.read_bytes()
    with pytest.raises(QueryError):
        ro.execute(sql)
    assert db_path.read_bytes() == before
    assert not Path("/tmp/sleuth-evil.db").exists() and not Path("/tmp/sleuth-copy.db").exists()
    assert ro.execute("SELECT count(*) FROM product")[1] == [(3,)]  # still usable


def test_runaway_query_is_stopped_at_the_deadline(ro: ReadOnlyDatabase) -> None:
    with pytest.raises(QueryError, match=r"exceeded 0\.3 s"):
        ro.execute(
            "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n",
            time_limit=0.3,
        )
    assert ro.execute("SELECT 1")[1] == [(1,)]


def test_row_cap_reports_truncation(ro: ReadOnlyDatabase) -> None:
    cols, rows, truncated = ro.execute(
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 5000) SELECT x FROM n"
    )
    assert len(rows) == 1000 and truncated and cols == ["x"]


def test_other_contexts_are_attached_read_only(db_path: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    db = sqlite3.connect(other)
    db.executescript(
        "CREATE TABLE product (sku TEXT, price REAL); INSERT INTO product VALUES ('AX-220', 1199);"
    )
    db.commit()
    db.close()
    ro = ReadOnlyDatabase(db_path, attach={"emea_catalog": other})
    _, rows, _ = ro.execute(
        "SELECT a.sku, a.price, b.price FROM product a JOIN emea_catalog.product b USING (sku)"
    )
    assert rows == [("AX-220", 1249.0, 1199.0)]
    with pytest.raises(QueryError):
        ro.execute("DELETE FROM emea_catalog.product")
    with pytest.raises(QueryError):
        ro.execute("ATTACH DATABASE ':memory:' AS third")
