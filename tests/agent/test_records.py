"""The pydantic records of a turn and the store's typed documents of them (`store.records.rows`) name the
same fields: `query_document` casts one to the other, and only this test keeps that cast honest."""

from __future__ import annotations

from typing import get_type_hints

import pytest
from pydantic import BaseModel

from sleuth.agent.records import (
    Citation,
    Query,
    QueryStep,
    Rollup,
    StepCost,
    Strategy,
    Synthesis,
    TraceCall,
    Usage,
    query_document,
)
from sleuth.store.records.rows import (
    CitationDocument,
    QueryDocument,
    RollupDocument,
    StepCostDocument,
    StepDocument,
    StrategyDocument,
    SynthesisDocument,
    TraceCallDocument,
    UsageDocument,
)

PAIRS: list[tuple[type[BaseModel], type]] = [
    (Query, QueryDocument),
    (QueryStep, StepDocument),
    (TraceCall, TraceCallDocument),
    (Strategy, StrategyDocument),
    (StepCost, StepCostDocument),
    (Rollup, RollupDocument),
    (Synthesis, SynthesisDocument),
    (Citation, CitationDocument),
    (Usage, UsageDocument),
]


@pytest.mark.parametrize(("model", "document"), PAIRS, ids=[model.__name__ for model, _ in PAIRS])
def test_each_record_and_its_document_name_the_same_fields(model: type[BaseModel], document: type) -> None:
    assert set(model.model_fields) == set(get_type_hints(document))


def test_a_query_document_is_the_querys_json_unchanged() -> None:
    query = Query(id="qry_1", session_id="ses_1", created=1764460800)
    document = query_document(query)
    assert document == query.model_dump(mode="json")
    assert list(document) == list(Query.model_fields)  # the order the API has always served
