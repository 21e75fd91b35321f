"""The built-in manifest templates (spec/context.md §9): data a client chooses from, explore proposes
from, and a model adapts (`compile.explore_model`)."""

from __future__ import annotations

from typing import Any

from sleuth.compile.extraction.choose import type_needs_model
from sleuth.compile.manifest import Manifest


def _type(name: str, kind: str, description: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "kind": kind, "description": description, **fields}


def _edge(name: str, source: str, target: str, description: str, *attributes: str) -> dict[str, Any]:
    edge: dict[str, Any] = {"name": name, "from": source, "to": target, "description": description}
    if attributes:
        edge["attributes"] = list(attributes)
    return edge


def _manifest(types: list[dict[str, Any]], edges: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    artifacts: dict[str, Any] = {"enabled": True, "artifact_types": types}
    if edges:
        artifacts["edge_types"] = edges
    return {"curate": {"artifacts": artifacts}}


_DOCUMENT = _type("Document", "doc", "One card per source: title, outline and lead text.")
_DEFINED_TERMS = _type(
    "Defined Terms",
    "glossary",
    "Terms defined in glossary and definitions sections, with their definitions.",
    sections=["Definitions", "Glossary", "Defined Terms"],
)

TEMPLATES: list[dict[str, Any]] = [
    {
        "id": "general",
        "label": "General documents",
        "description": "Chunks, indexes and one card per document. Works for any mix of files.",
        "when_to_use": "Corpora with no dominant structure, or when you are not sure yet.",
        "default": True,
        "needs_model": False,
        "sample_questions": [
            "What does the onboarding guide say about laptops?",
            "Which documents mention the refund policy?",
            "Summarize the main points of the release notes.",
        ],
        "manifest": _manifest([_DOCUMENT]),
    },
    {
        "id": "paged-documents",
        "label": "Paged documents",
        "description": "A card per document and a card per page, for long PDFs read page by page.",
        "when_to_use": "Reports, manuals and scans where answers cite a page.",
        "default": False,
        "needs_model": False,
        "sample_questions": [
            "On which page is the warranty described?",
            "What does page 12 of the annual report cover?",
            "Which pages discuss safety procedures?",
        ],
        "manifest": _manifest(
            [_DOCUMENT, _type("Page", "page", "One card per page, for page-level browsing.")]
        ),
    },
    {
        "id": "glossary",
        "label": "Glossary",
        "description": "Document cards plus the terms defined in Definitions or Glossary sections.",
        "when_to_use": "Policies, standards and specifications that define their own vocabulary.",
        "default": False,
        "needs_model": False,
        "sample_questions": [
            "How is 'Confidential Information' defined?",
            "Which terms does the policy define?",
            "Where is 'Service Level' defined and what does it mean?",
        ],
        "manifest": _manifest([_DOCUMENT, _DEFINED_TERMS]),
    },
    {
        "id": "knowledge-base",
        "label": "Knowledge base",
        "description": "Notes, the concepts they discuss and the entities they mention, linked as a graph.",
        "when_to_use": "Wikis, meeting notes and internal documentation.",
        "default": False,
        "needs_model": True,
        "sample_questions": [
            "Which notes mention the billing service?",
            "What concepts relate to data retention?",
            "Who is involved in the migration project?",
            "Summarize what the notes say about on-call.",
        ],
        "manifest": _manifest(
            [
                _DOCUMENT,
                _type(
                    "Note",
                    "summary",
                    "A short summary of one note or page of documentation.",
                    scope="document",
                ),
                _type("Concept", "topic", "An idea, practice or topic discussed across several notes."),
                _type("Entity", "entity", "A named person, team, system or organisation."),
            ],
            [
                _edge("mentions", "Note", "Entity", "The note names the entity."),
                _edge(
                    "relates_to",
                    "Entity",
                    "Concept",
                    "The entity is discussed in connection with the concept.",
                ),
            ],
        ),
    },
    {
        "id": "contracts",
        "label": "Contracts",
        "description": "Agreements, their parties, obligations, key dates and defined terms.",
        "when_to_use": "Contracts, statements of work, leases and other legal agreements.",
        "default": False,
        "needs_model": True,
        "sample_questions": [
            "Which agreements is Acme a party to?",
            "What are the supplier's obligations and their deadlines?",
            "When does the master services agreement take effect?",
            "How is 'Confidential Information' defined?",
        ],
        "manifest": _manifest(
            [
                _type(
                    "Agreement",
                    "summary",
                    "One summary per agreement: type, parties, term.",
                    scope="document",
                ),
                _type("Party", "entity", "A person or organisation that is party to an agreement."),
                _type(
                    "Obligation",
                    "topic",
                    "A duty one party owes under an agreement.",
                    coverage=["obligor", "obligation", "deadline", "remedy"],
                ),
                _type("Key Date", "event", "A date that matters: effective, renewal, termination, deadline."),
                _DEFINED_TERMS,
            ],
            [
                _edge("party_to", "Party", "Agreement", "The party signed the agreement.", "role"),
                _edge("owed_by", "Obligation", "Party", "The party that must perform the obligation."),
                _edge("effective_on", "Agreement", "Key Date", "A date on which the agreement acts.", "type"),
            ],
        ),
    },
    {
        "id": "financial-filings",
        "label": "Financial filings",
        "description": "Filings, the figures they report (as a SQL table) and the segments they cover.",
        "when_to_use": "Annual and quarterly reports, 10-K/10-Q filings, financial statements.",
        "default": False,
        "needs_model": True,
        "sample_questions": [
            "What revenue did the company report for 2025?",
            "How did operating margin change between the last two periods?",
            "Which segments does the annual report cover?",
        ],
        "manifest": _manifest(
            [
                _type("Filing", "doc", "One card per filing: issuer, period and outline."),
                _type(
                    "Reported Figure",
                    "event",
                    "A number a filing reports for a company, period and metric.",
                    format="sqlite",
                    columns=[
                        {"name": "company", "type": "TEXT"},
                        {
                            "name": "period",
                            "type": "TEXT",
                            "description": "Fiscal period, e.g. FY2025 or Q3 2025",
                        },
                        {"name": "metric", "type": "TEXT"},
                        {"name": "value", "type": "REAL"},
                        {
                            "name": "unit",
                            "type": "TEXT",
                            "description": "Currency or unit, e.g. USD millions",
                        },
                        {"name": "statement", "type": "TEXT", "description": "Where it is reported"},
                    ],
                    natural_key=["company", "period", "metric"],
                ),
                _type("Segment", "entity", "A business or geographic segment a filing reports on."),
            ],
            [_edge("reports_on", "Filing", "Segment", "The filing reports results for the segment.")],
        ),
    },
    {
        "id": "research-papers",
        "label": "Research papers",
        "description": "Paper summaries, the papers themselves as entities, and the methods they use.",
        "when_to_use": "Academic papers, preprints and technical reports.",
        "default": False,
        "needs_model": True,
        "sample_questions": [
            "Which papers use contrastive learning?",
            "What does the 2024 survey conclude?",
            "Which papers cite the original transformer paper?",
        ],
        "manifest": _manifest(
            [
                _type(
                    "Paper Summary",
                    "summary",
                    "Problem, method, results and limits of one paper.",
                    scope="document",
                ),
                _type("Paper", "entity", "A paper, by title, whether in the corpus or cited by it."),
                _type("Method", "topic", "A technique, model or experimental method."),
            ],
            [
                _edge("uses_method", "Paper", "Method", "The paper applies or proposes the method."),
                _edge("cites", "Paper", "Paper", "The paper cites the other paper.", "context"),
            ],
        ),
    },
    {
        "id": "codebase",
        "label": "Codebase",
        "description": "Components, the API endpoints they expose and the patterns they implement.",
        "when_to_use": "Source code, design documents and API references of a software system.",
        "default": False,
        "needs_model": True,
        "sample_questions": [
            "Which components depend on the auth service?",
            "What endpoints does the billing component expose?",
            "Where is the retry pattern implemented?",
        ],
        "manifest": _manifest(
            [
                _type("Component", "entity", "A module, service or library of the system."),
                _type("API Endpoint", "entity", "An HTTP or RPC endpoint, by method and path."),
                _type("Pattern", "topic", "A design or architectural pattern the code follows."),
            ],
            [
                _edge("depends_on", "Component", "Component", "The component uses the other one.", "type"),
                _edge("exposes_endpoint", "Component", "API Endpoint", "The component serves it.", "method"),
                _edge("implements_pattern", "Component", "Pattern", "The component follows the pattern."),
            ],
        ),
    },
]


def without_model(template: dict[str, Any]) -> dict[str, list[str]]:
    """Which of a template's types a curate builds with no model, and which it skips, so a person
    without one knows what a template gives them before choosing it."""
    types = Manifest.model_validate(template["manifest"]).curate.artifacts.artifact_types
    return {
        "built": [t.name for t in types if not type_needs_model(t)],
        "skipped": [t.name for t in types if type_needs_model(t)],
        # SQL tables a curate creates with no rows until a model fills them (`_cells` has the figures)
        "empty_tables": [t.name for t in types if type_needs_model(t) and t.format == "sqlite"],
    }


def empty_without_model(found: dict[str, list[str]]) -> str | None:
    """The reason a person reads before choosing a template whose SQL tables stay empty offline."""
    empty = found.get("empty_tables") or []
    if not empty:
        return None
    names = " and ".join(f"'{name}'" for name in empty)
    return (
        f"without a model, the {names} table{'s stay' if len(empty) > 1 else ' stays'} empty: every table "
        "cell the pages hold is in _cells (the Tables view, or query_db) until a curate with a model"
    )
