"""Fuzz every operation of the OpenAPI schema against a real server (schemathesis, bounded).

The server is the one `sleuth serve` builds, over its own copy of the compiled sample corpus, so
whatever the fuzzer creates, curates or deletes stays here. The property: no request, however
malformed, gets a 5xx other than the two the API documents for a running system (503 when the
sandbox cannot start, 504 when a turn passes its cap), and every error body is the documented
envelope. Generated cases per operation: `SLEUTH_FUZZ_EXAMPLES` (default 8, enough for CI).
"""

from __future__ import annotations

import os
import shutil
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import Case, Response

from sleuth.api.app import openapi_document
from sleuth.compile.pipeline import CompileReport
from sleuth.sandbox import SandboxHost
from sleuth.store.contexts.home import Home
from tests.api.support import LiveServer, launch

EXAMPLES = int(os.environ.get("SLEUTH_FUZZ_EXAMPLES", "8"))
# Fields that, fuzzed, stop a turn before it starts (another session, an unknown model, a full group).
SESSION_FIELDS = (
    "max_tool_output_chars",
    "previous_query_id",
    "session_id",
    "model",
    "models",
    "comparison_group",
)
DOCUMENTED_5XX = {503: {"sandbox_unavailable"}, 504: {"query_timeout"}}


@pytest.fixture(scope="module")
def fuzz_server(
    sample_home: tuple[Home, CompileReport], api_host: SandboxHost, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    scratch = tmp_path_factory.mktemp("fuzz")
    source, _ = sample_home
    shutil.copytree(source.root, scratch / "home")
    server, stop = launch(Home(scratch / "home"), api_host, scratch)
    yield server
    stop()


schema = schemathesis.openapi.from_dict(openapi_document())


def _envelope_and_no_server_error(response: Response) -> None:
    status = response.status_code
    body: Any = None
    if status >= 400 and response.headers.get("content-type", [""])[0].startswith("application/json"):
        body = response.json()
    if status >= 500:
        code = body.get("code") if isinstance(body, dict) else None
        assert code in DOCUMENTED_5XX.get(status, set()), f"server error {status}: {response.text[:500]}"
    if 400 <= status < 500:
        assert isinstance(body, dict), f"{status} without a JSON error body: {response.text[:200]}"
        assert isinstance(body.get("message"), str) and isinstance(body.get("code"), str), body


@dataclass(frozen=True)
class Known:
    """Ids that exist on the fuzzed server, so that cases get past the 404 and into the handlers."""

    slug: str
    query_id: str
    session_id: str
    task_id: str


@pytest.fixture(scope="module")
def known(fuzz_server: LiveServer) -> Known:
    client = fuzz_server.client
    query = client.post("/api/query", json={"ask": "What does ERR-4012 mean?", "scope": ["acme"]}).json()
    task = client.post("/api/contexts/acme/curate", json={}).json()
    return Known("acme", query["id"], query["session_id"], task["task_id"])


def _aim(case: Case[Any], known: Known) -> None:
    """Point about half of the cases at things that exist (a deterministic coin per case). Deletes are
    left random, so the context every other case relies on is not removed half-way through."""
    if (
        case.method.upper() == "DELETE"
        or zlib.crc32(repr((case.path_parameters, case.query, case.body)).encode()) % 2
    ):
        return
    targets = {"slug": known.slug, "query_id": known.query_id, "session_id": known.session_id}
    targets["task_id"] = known.task_id
    for name, value in targets.items():
        if case.path_parameters and name in case.path_parameters:
            case.path_parameters[name] = value
    if case.method.upper() == "PUT" and isinstance(case.body, dict):
        case.body.pop("slug", None)  # a rename would move the context from under the other cases
    if case.path == "/api/query" and isinstance(case.body, dict):
        # Start a session over the real context, so the fuzzed options reach the runtime.
        for name in SESSION_FIELDS:
            case.body.pop(name, None)
        case.body["scope"] = [known.slug]


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_no_request_gets_a_server_error(case: Case[Any], fuzz_server: LiveServer, known: Known) -> None:
    _aim(case, known)
    if case.path == "/api/query" and isinstance(case.body, dict):
        # Keep fuzzed turns short: the property is about the HTTP layer, not about long turns.
        case.body.pop("timeout_seconds", None)
        case.body.setdefault("max_steps", 2)
    response = case.call(base_url=fuzz_server.url, timeout=60)
    _envelope_and_no_server_error(response)


def test_the_fuzzed_schema_is_the_served_one(fuzz_server: LiveServer) -> None:
    """The schema fuzzed is what the server serves, and it covers the whole API."""
    served = fuzz_server.client.get("/api/openapi.json").json()
    assert served == openapi_document()
    operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
    assert len(operations) >= 40
    assert {"/api/query", "/api/contexts/{slug}/import/upload"} <= {op.path for op in operations}
    assert "HTTPValidationError" not in served["components"]["schemas"]
    assert all("422" not in op["responses"] for item in served["paths"].values() for op in item.values())
