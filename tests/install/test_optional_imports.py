"""Every module imports as a user installs Sleuth: the core package, no extras (issue 39, item 1).

`make test` installs every extra, so a module that imports an optional package at its top would pass
every other test and still crash `sleuth serve` after `make demo`. Here each module is imported in a
fresh interpreter in which the optional packages cannot be found."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# What `pyproject.toml`'s extras (and the dev tools) add; none may be imported when a module loads.
OPTIONAL = (
    "procrastinate",
    "psycopg",
    "psycopg_pool",
    "boto3",
    "botocore",
    "usearch",
    "trafilatura",
    "openai",
    "anthropic",
    "moto",
    "fpdf",
    "playwright",
    "bm25s",
    "schemathesis",
    "hypothesis",
)

_PROBE = """
import importlib, importlib.abc, json, pathlib, sys, traceback

hidden = set(json.loads(sys.argv[1]))

class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in hidden:
            raise ModuleNotFoundError(f"No module named {name!r} (hidden: not core)", name=name)
        return None

sys.meta_path.insert(0, Hide())
import sleuth

root = pathlib.Path(sleuth.__file__).parent
names = sorted(
    ".".join(("sleuth", *path.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
    for path in root.rglob("*.py")
)
failed = {}
for name in names:
    if name == "sleuth.__main__":  # runs the CLI
        continue
    try:
        importlib.import_module(name)
    except BaseException as exc:
        failed[name] = "".join(traceback.format_exception_only(exc)).strip()
print(json.dumps(failed))
"""


def _import_all(hidden: tuple[str, ...]) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(hidden)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parent,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    failed: dict[str, str] = json.loads(done.stdout.splitlines()[-1])
    return failed


def test_every_module_imports_without_the_extras() -> None:
    assert _import_all(OPTIONAL) == {}


def test_the_probe_sees_a_module_level_import() -> None:
    """The check itself: hiding a core dependency that one module imports (cryptography, sealed secrets)
    fails that module and what imports it, and names the package."""
    failed = _import_all(("cryptography",))
    assert (
        "sleuth.store.records.secrets" in failed and "cryptography" in failed["sleuth.store.records.secrets"]
    )
