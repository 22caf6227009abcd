"""The graph's state is typed (ADR 0071): the turn's id stays a UUID through the checkpoint,
the triage record is a TypedDict, and the nodes' manifest sections are merged by the state's
reducer."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from fastapi import FastAPI
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from app.conversation.checkpoints.checkpointer import CURRENT_TENANT
from app.conversation.pipeline.state import add_sections, new_triage, public_triage
from app.conversation.turn.manifest import BudgetSection, Manifest, RetrievalSection
from app.conversation.turn.manifest_records import Classification, TriageRecord
from tests.chat_helpers import ask
from tests.factories import make_chatter


def test_the_checkpoint_serializer_round_trips_uuids_as_uuids() -> None:
    """LangGraph's serializer stores a UUID natively (no class to import back), in a field,
    a list and a TypedDict alike."""
    serde = JsonPlusSerializer()
    ids = {"turn_id": uuid.uuid4(), "attachments": [uuid.uuid4()], "faq": {"id": uuid.uuid4()}}
    back = serde.loads_typed(serde.dumps_typed(ids))
    assert back == ids
    assert isinstance(back["turn_id"], uuid.UUID)
    assert isinstance(back["attachments"][0], uuid.UUID)


@pytest.mark.committed
async def test_a_turns_id_comes_back_from_its_checkpoint_as_a_uuid(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant, _user, chat, owner = await make_chatter(client, db)
    response = await ask(client, owner, chat, "Hello, what can you tell me?")
    assert response.status_code == 200, response.text
    graph = app.state.resources.runner.graph
    config: RunnableConfig = {"configurable": {"thread_id": str(chat.id)}}
    CURRENT_TENANT.set(str(tenant.id))
    try:
        for _ in range(100):  # the final checkpoint is written just after the answer
            snapshot = await graph.aget_state(config)
            if snapshot.values.get("status") == "complete":
                break
            await asyncio.sleep(0.05)
    finally:
        CURRENT_TENANT.set(None)
    values = snapshot.values
    # Who and where are the thread's (its id is the session's) and the turn's row's, not
    # stored again (ADR 0086); the checkpoint names its turn, as a UUID.
    assert not {"tenant_id", "user_id", "session_id"} & set(values), sorted(values)
    assert str(values["turn_id"]) == response.json()["turn_id"]
    assert isinstance(values["turn_id"], uuid.UUID)
    assert values["triage"]["route"] in ("llm", "smalltalk")  # the TypedDict, as stored


def test_the_reducer_merges_typed_sections_field_by_field() -> None:
    merged = add_sections({}, RetrievalSection(classification=Classification(reason="kb")))
    merged = add_sections(merged, BudgetSection(token_budget=800, quality_score=0.5))
    merged = add_sections(merged, BudgetSection(quality_score=0.75))  # replaces that field
    assert merged == {
        "classification": {"reason": "kb"},
        "token_budget": 800,
        "quality_score": 0.75,
    }
    assert Manifest.read(merged).token_budget == 800


def test_a_section_of_the_wrong_type_fails_where_the_node_builds_it() -> None:
    with pytest.raises(ValidationError):
        BudgetSection.model_validate({"token_budget": "a lot"})


def test_the_public_triage_record_leaves_out_the_early_answer() -> None:
    triage = new_triage()
    triage.update({"route": "smalltalk", "skip_llm": True, "answer": "Hi!", "intent": "hello"})
    record = public_triage(triage)
    assert isinstance(record, TriageRecord)
    assert record.dump() == {"route": "smalltalk", "skip_llm": True, "log": [], "intent": "hello"}


# A tool-calling turn's manifest as the release before typed sections stored it (version 1:
# no `manifest_version`), with every tools field the agent and tools nodes wrote.
OLD_TOOL_MANIFEST = {
    "token_budget": 900,
    "truncated": [
        {"kind": "question", "tokens_before": 1200, "reason": "over budget"},
        {
            "round": 1,
            "kind": "tool_result",
            "tool": "search_knowledge_base",
            "tokens_before": 600,
            "tokens_after": 120,
            "reason": "over budget",
        },
    ],
    "tools": {
        "rounds": 1,
        "loop_guard": False,
        "result_tokens": 120,
        "calls": [
            {
                "round": 1,
                "tool": "search_knowledge_base",
                "args": {"query": "refund window"},
                "result_ids": ["c1", "c2"],
            },
            {"round": 1, "tool": "nope", "args": {}, "error": "unknown_tool"},
        ],
        "truncated": [
            {
                "round": 1,
                "kind": "tool_result",
                "tool": "search_knowledge_base",
                "tokens_before": 600,
                "tokens_after": 120,
                "reason": "over budget",
            }
        ],
    },
    "relatedness": {"cue": True, "correction": False, "overlap": 0.25, "score": 0.6},
    "retrieval": {
        "queries": [{"name": "question", "text": "refund?", "weight": 1.0}],
        "contributions": {"c1": ["question"]},
    },
    "some_key_of_another_release": {"kept": True},
}


def test_an_old_tool_manifest_reads_typed_and_writes_back_unchanged() -> None:
    manifest = Manifest.read(OLD_TOOL_MANIFEST, None)
    assert manifest.dump() == OLD_TOOL_MANIFEST
    assert manifest.tools is not None and manifest.tools.loop_guard is False
    assert [c.tool for c in manifest.tools.calls] == ["search_knowledge_base", "nope"]
    assert manifest.tools.truncated[0].tool == "search_knowledge_base"
