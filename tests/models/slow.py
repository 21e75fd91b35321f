"""A slow model for the many-process tests: the one double (an OpenAI-compatible server on 127.0.0.1,
`tests.models.wire`) that keeps a turn or a curate running for as long as a fault test needs, by
waiting instead of computing.

A curate of new text used to do the waiting: its embeddings were in no cache, so it ran for a while —
on every core, for minutes of the suite, and for as long as the machine's speed decided. A curate of a
few short notes whose model takes `extraction_s` per call lasts as long as the test says on any machine.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from typing import Any

from tests.compile.curator import answer
from tests.models.wire import Canned, openai_completion

USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}

#: One model-built summary per note: one extraction call per source, besides the sample questions and
#: the corpus summary.
NOTES_MANIFEST: dict[str, Any] = {
    "curate": {
        "artifacts": {
            "artifact_types": [
                {"name": "Agreement", "kind": "summary", "scope": "document", "description": "What it says."}
            ]
        }
    }
}


@dataclass
class SlowModel:
    """Answers by what a request asks: a loop step (tools offered) runs code that sleeps `step_s`; an
    extraction call (JSON mode) is answered as a careful curator would, after `extraction_s` (which a
    test may change between calls); anything else (synthesis) in words."""

    step_s: float
    extraction_s: float

    def __call__(self, body: dict[str, Any]) -> Canned:
        if body.get("tools"):
            # Each step its own code (the messages so far number it): a turn does not run code it
            # already ran (issue 46), and these turns must last.
            code = f"import time\ntime.sleep({self.step_s})\nprint('waited', {len(body['messages'])})"
            call = {
                "id": f"call_{time.monotonic_ns()}",
                "type": "function",
                "function": {
                    "name": "run_python",
                    "arguments": json.dumps({"code": code, "commentary": "Wait"}),
                },
            }
            return Canned(200, openai_completion(None, [call], "tool_calls", USAGE, "slow"))
        if body.get("response_format"):
            system, user = (m["content"] for m in body["messages"][:2])
            extracted = json.dumps(answer(system, user))
            return Canned(
                200, openai_completion(extracted, None, "stop", USAGE, "slow"), delay_s=self.extraction_s
            )
        return Canned(200, openai_completion("Nothing was found.", None, "stop", USAGE, "slow"))


def catalog_entry(url: str, model_id: str = "test/slow") -> str:
    """The `config.toml` entry that names the slow model served at `url` (a `wire_server`'s)."""
    return (
        f'[models."{model_id}"]\nprovider = "openai-compatible"\nmodel = "slow"\nbase_url = "{url}"\n'
        'api_key = "sk-test-not-a-real-key"\ntool_protocol = "native"\n'
    )


def notes(count: int, seed: int) -> dict[str, str]:
    """`count` short notes of new text (a seed per test, so no cache holds their summaries)."""
    rng = random.Random(seed)
    words = [f"{rng.choice('bcdfgklmnprstvz')}{rng.choice('aeiou')}{i}" for i in range(400)]
    return {
        f"note-{n:02d}.md": f"# Note {n}\n\n" + " ".join(rng.choice(words) for _ in range(40)) + ".\n"
        for n in range(count)
    }
