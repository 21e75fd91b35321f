"""A scripted curator for the extraction tests: answers each extraction call from what its prompt
asks for, the way a careful model would (test doubles are allowed for the LLM only). The same answers
go through `CuratorModel` (the models seam) and through the provider wire-format servers."""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any

from sleuth.models.base import CompletionParams, Message, ModelConfig, ModelError, Reply, TokenUsage, ToolSpec

MSA = (
    "# Master Services Agreement\n\n"
    "This Master Services Agreement is made between Acme Corp and Globex Inc.\n\n"
    "Acme Corp is a supplier of industrial pumps.\n\n"
    "## Payment\n\n"
    "Globex Inc. shall pay Acme Corp 12,500 USD by 2024-03-31.\n"
)
MEMO = (
    "# Globex memo\n\n"
    "Globex Inc. renewed its contract with ACME Corporation on 2024-01-15.\n\n"
    "ACME Corporation is a vendor of spare parts, the memo says.\n\n"
    "Globex Inc. shall pay Acme Corp 13,000 USD by 2024-06-30.\n"
)
NOTES = "Meeting notes.\n\nOnly the weather was discussed at length today, nothing else at all.\n"
CORPUS = {"acme-msa.md": MSA, "globex-memo.md": MEMO, "notes.md": NOTES}

MANIFEST: dict[str, Any] = {
    "curate": {
        "artifacts": {
            "artifact_types": [
                {"name": "Agreement", "kind": "summary", "scope": "document", "description": "What it says."},
                {"name": "Company", "kind": "entity", "scope": "corpus", "description": "Companies named."},
                {
                    "name": "Payment",
                    "kind": "event",
                    "format": "sqlite",
                    "columns": [{"name": "payer"}, {"name": "amount", "type": "REAL"}, {"name": "due"}],
                    "natural_key": ["payer"],
                },
            ],
            "edge_types": [{"name": "party_to", "from": "Company", "to": "Agreement"}],
        }
    }
}


def write_corpus(root: Path) -> Path:
    """The three sources, the memo modified last (its values win a natural-key merge)."""
    folder = root / "corpus"
    folder.mkdir(parents=True, exist_ok=True)
    for offset, (name, text) in enumerate(CORPUS.items()):
        path = folder / name
        path.write_text(text, encoding="utf-8")
        os.utime(path, (1_700_000_000 + offset * 100, 1_700_000_000 + offset * 100))
    os.utime(folder / "globex-memo.md", (1_800_000_000, 1_800_000_000))
    (root / "manifest.json").write_text(json.dumps(MANIFEST), encoding="utf-8")
    return folder


def _document(user: str) -> str:
    match = re.search(r"^Document: .*?([\w-]+\.md)$", user, re.MULTILINE)
    return match.group(1) if match else ""


def _first_paragraph(user: str) -> str:
    """The paragraph after the title of the text the call sent (what the curator quotes)."""
    match = re.search(r"<text>\n(.*?)\n</text>", user, re.DOTALL)
    parts = match.group(1).split("\n\n") if match else []
    return parts[1] if len(parts) > 1 else ""


def answer(system: str, user: str) -> dict[str, Any]:
    """The JSON a careful curator returns for one extraction call."""
    doc = _document(user)
    if "Summarise the document" in system:
        if doc == "notes.md":
            return {"name": "Notes", "body": "Sunny weather.", "quotes": ["The weather was sunny and warm."]}
        if "samebody" in system:  # two sources, one word-for-word summary
            first = _first_paragraph(user)
            return {"name": f"About {doc}", "body": "Acme Corp and Globex Inc. deal.", "quotes": [first]}
        if "copycat" in system:  # a small model that copies the shape instead of filling it in
            first = _first_paragraph(user)
            return {"name": "<a short title>", "body": "Markdown", "quotes": [first]}
        first = _first_paragraph(user)
        return {"name": f"About {doc}", "body": f"{first}\n", "fields": {}, "quotes": [first]}
    if "Gather every" in system:  # document scope of a topic, entity or event type
        first = _first_paragraph(user)
        if doc == "notes.md":
            return {"name": "Nothing", "body": "", "quotes": []}
        return {"name": f"Companies in {doc}", "body": f"- {first}\n", "quotes": [first]}
    if user.startswith("Summaries:"):  # a corpus summary, reduced from the per-source ones
        return {
            "name": "The deals corpus",
            "body": "An agreement between Acme Corp and Globex Inc., and a memo.",
        }
    if "List every entity" in system:
        if doc == "acme-msa.md":
            return {
                "mentions": [
                    {
                        "subject": "Acme Corp",
                        "aliases": ["ACME Corporation"],
                        "text": "A supplier of industrial pumps.",
                        "quotes": ["Acme Corp is a supplier of industrial pumps."],
                        "fields": {"category": "supplier"},
                    },
                    {
                        "subject": "Globex Inc.",
                        "text": "The customer.",
                        "quotes": ["made between Acme Corp and Globex Inc."],
                    },
                ],
                "edges": [
                    {
                        "type": "party_to",
                        "from": "Acme Corp",
                        "to": "this document",
                        "quote": "This Master Services Agreement is made between Acme Corp and Globex Inc.",
                    },
                    {
                        "type": "party_to",
                        "from": "Initech",
                        "to": "this document",
                        "quote": "made between Acme Corp",
                    },
                ],
            }
        if doc == "globex-memo.md":
            return {
                "mentions": [
                    {
                        "subject": "ACME Corporation",
                        "text": "A vendor of spare parts.",
                        "quotes": ["ACME  Corporation is a vendor of spare parts"],  # spacing differs
                        "fields": {"category": "vendor"},
                    },
                    {
                        "subject": "Globex Inc",
                        "text": "Renewed.",
                        "quotes": ["Globex Inc. renewed its contract"],
                    },
                    {"subject": "Hooli", "text": "Invented.", "quotes": ["Hooli bought everything."]},
                ]
            }
        return {"mentions": []}
    if "Write one artifact about the subject" in system:
        subject = re.search(r"^Subject: (.*)$", user, re.MULTILINE)
        name = subject.group(1) if subject else "?"
        return {"name": name, "body": f"{name} is named in the sources.", "fields": {}}
    if "You fill the table" in system:
        rows = {
            "acme-msa.md": (
                "12,500",
                "2024-03-31",
                "Globex Inc. shall pay Acme Corp 12,500 USD by 2024-03-31.",
            ),
            "globex-memo.md": (
                "13,000",
                "2024-06-30",
                "Globex Inc. shall pay Acme Corp 13,000 USD by 2024-06-30.",
            ),
        }
        if doc not in rows:
            return {"rows": []}
        amount, due, quote = rows[doc]
        return {"rows": [{"values": {"payer": "Globex Inc.", "amount": amount, "due": due}, "quote": quote}]}
    if "questions a user could ask" in system:
        return {
            "queries": [
                "Which companies are party to the Master Services Agreement?",
                "What does Globex pay?",
            ]
        }
    raise AssertionError(f"unexpected extraction call: {system[:80]}")


class CuratorModel:
    """`Model` over `answer`. `broken` maps a document name to how its calls fail: `"json"` (never
    valid), `"once"` (invalid, then valid after the repair prompt), `"down"` (a 503), `"refused"` (a 400),
    `"busy"` (a 429 with `Retry-After: 0` the first time each prompt is sent) or `"made_up"` (table rows
    whose values are invented, each beside its real quote)."""

    def __init__(
        self, model_id: str = "scripted/curator", broken: dict[str, str] | None = None, served: str = ""
    ) -> None:
        self.config = ModelConfig(id=model_id, provider="scripted", model=served or model_id)
        self.broken = dict(broken or {})
        self.calls: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def complete(self, messages: list[Message], tools: list[ToolSpec], params: CompletionParams) -> Reply:
        system, user = messages[0].content, messages[1].content
        with self._lock:
            self.calls.append((system, user))
        mode = self.broken.get(_document(user))
        repaired = len(messages) > 2
        if mode == "down":
            raise ModelError("provider is down", retryable=False, status=503)
        if mode == "refused":
            raise ModelError("prompt too long for the context window", retryable=False, status=400)
        if mode == "busy" and (system, user) not in self.calls[:-1]:
            raise ModelError("rate limited", retryable=True, status=429, retry_after=0.0)
        if mode == "json" or (mode == "once" and not repaired):
            text = "Sure! Here is what I found: nothing in JSON."
        else:
            reply = answer(system, user)
            if mode == "made_up":
                for row in reply.get("rows", []):
                    row["values"] = {**row["values"], "amount": "99,999", "due": "2025-01-01"}
            text = "```json\n" + json.dumps(reply) + "\n```"
        tokens = TokenUsage(input_tokens=(len(system) + len(user)) // 4, output_tokens=len(text) // 4)
        return Reply(text=text, usage=tokens, model=self.config.id, finish_reason="stop")

    def kinds(self) -> list[str]:
        """The call kind of every call made, in order (`document`, `map`, `reduce`, `rows`, `queries`)."""
        names = {
            "Summarise the document": "document",
            "List every entity": "map",
            "Write one artifact": "reduce",
            "You fill the table": "rows",
            "questions a user could ask": "queries",
        }
        return [next(v for k, v in names.items() if k in system) for system, _ in self.calls]
