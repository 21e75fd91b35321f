"""Text that no store can hold (issue 10, 3): a lone surrogate in model-written code or in what the
sandbox prints must not wedge a turn, its events or its trace. (A request carrying one is refused
`400 invalid_request` before anything is stored, as before.)"""

from __future__ import annotations

from sleuth.models.scripted import ScriptItem, code, final_call
from tests.api.query_support import SCRIPTED, answer, scripted_server
from tests.api.support import ServerFactory


def test_surrogates_in_model_code_and_output_end_the_turn_cleanly(make_server: ServerFactory) -> None:
    replies: list[ScriptItem] = [code("kept = 'x\ud800y'\nprint(kept)"), final_call(), "It printed x\udfffy."]
    server = scripted_server(make_server, replies)
    response = server.client.post(
        "/api/query", json={"ask": "print it", "scope": ["acme"], "model": SCRIPTED}
    )
    assert response.status_code == 200, response.text
    query = response.json()
    assert query["status"] == "completed", query["error"]
    assert query["steps"][0]["output"] == "x\ufffdy\n"
    assert answer(query) == "It printed x\ufffdy."
    events = server.client.get(f"/api/queries/{query['id']}/events")
    assert events.status_code == 200 and "x\ufffdy" in events.text
    trace = server.client.get(f"/api/queries/{query['id']}/trace")
    assert trace.status_code == 200
