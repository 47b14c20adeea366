"""mode=semantic|hybrid on GET /api/v1/transcripts/search and the MCP search tool: the hits'
shape, paging, tenancy, and the 400 while search by meaning is off (docs/api/search.md)."""

from __future__ import annotations

import pytest

from apps.recordings.models import SegmentEmbedding
from tests import factories
from tests.mcp.test_tools import call, ok
from tests.recordings.semantic_set import embed_everything, needs_extra, semantic_on  # noqa: F401

SEARCH = "/api/v1/transcripts/search"
BUDGET = ["Let's look at the offsite.", "Finance said we can't spend more than forty thousand this quarter.",
          "Priya will call the hotel."]  # fmt: skip
OTHER = ["The new office has a bigger kitchen.", "Standing desks for everyone.", "Parking is limited."]
KEYWORD_HIT_KEYS = {"transcriptId", "revisionKind", "session", "id", "label", "status", "startedAt", "endedAt",
                    "createdAt", "snippet", "sequence", "timestampStart"}  # fmt: skip


def get(api, key, **params):
    response = api.get(SEARCH, key, **params)
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_off_the_meaning_modes_are_a_400_that_says_how_to_turn_them_on(api, acme, alice_key, settings, mode):
    settings.CONNECT_SEMANTIC_SEARCH = False
    factories.session(acme, committed=BUDGET)
    response = api.get(SEARCH, alice_key, query="budget", mode=mode)
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "invalid_request"
    assert body["detail"].startswith("mode: ") and "CONNECT_SEMANTIC_SEARCH=1" in body["detail"]
    assert "requirements/semantic.txt" in body["detail"]
    result = call(alice_key, "search_transcripts", {"query": "budget", "mode": mode})
    assert result["isError"] is True and "CONNECT_SEMANTIC_SEARCH=1" in result["content"][0]["text"]
    # Keyword search is as it was, and nothing was embedded.
    assert get(api, alice_key, query="forty", mode="keyword") == get(api, alice_key, query="forty")
    assert not SegmentEmbedding.objects.exists()


def test_an_unknown_mode_is_a_400(api, acme, alice_key):
    response = api.get(SEARCH, alice_key, query="budget", mode="fuzzy")
    assert response.status_code == 400
    assert response.json()["detail"] == "mode: must be one of keyword, semantic, hybrid"


@needs_extra
def test_semantic_finds_the_segment_a_question_means(api, acme, alice_key, semantic_on):
    budget = factories.session(acme, label="Budget review", committed=BUDGET)
    factories.session(acme, label="Office move", committed=OTHER)
    embed_everything()
    question = "What did we decide about the budget?"
    # Keyword search needs every word in one segment: nothing.
    assert get(api, alice_key, query=question)["items"] == []
    body = get(api, alice_key, query=question, mode="semantic")
    first = body["items"][0]
    assert set(first) == KEYWORD_HIT_KEYS | {"score"}
    assert first["session"]["id"] == budget.id and first["sequence"] == 1
    assert first["timestampStart"] == 2000 and "forty thousand" in first["snippet"]
    assert [item["score"] for item in body["items"]] == sorted((item["score"] for item in body["items"]), reverse=True)
    assert -1.0 <= body["items"][-1]["score"] <= first["score"] <= 1.0
    hybrid = get(api, alice_key, query=question, mode="hybrid")
    assert hybrid["items"][0]["session"]["id"] == budget.id
    # The same on the MCP tool.
    tool = ok(call(alice_key, "search_transcripts", {"query": question, "mode": "semantic"}))
    assert tool["items"][0]["session"]["id"] == budget.id and tool["items"][0]["sequence"] == 1
    assert tool["items"][0]["score"] == pytest.approx(first["score"])
    tool = ok(call(alice_key, "search_transcripts", {"query": question, "mode": "hybrid"}))
    assert tool["items"][0]["session"]["id"] == budget.id


@needs_extra
def test_hybrid_shows_a_keyword_hit_with_its_snippet_and_revision_kind_filters(api, acme, alice_key, semantic_on):
    session = factories.session(acme, committed=BUDGET, final=["Final: the cap is forty thousand for the offsite."])
    embed_everything()
    body = get(api, alice_key, query="forty thousand", mode="hybrid")
    assert {(i["session"]["id"], i["revisionKind"]) for i in body["items"]} == {(session.id, "committed"),
                                                                                (session.id, "final")}  # fmt: skip
    final = get(api, alice_key, query="forty thousand", mode="hybrid", revisionKind="final")
    assert [i["revisionKind"] for i in final["items"]] == ["final"]
    semantic = get(api, alice_key, query="spending cap", mode="semantic", revisionKind="committed")
    assert {i["revisionKind"] for i in semantic["items"]} == {"committed"}


@needs_extra
@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_pages_follow_cursors_through_the_whole_list(api, acme, alice_key, semantic_on, mode):
    for n in range(5):
        factories.session(acme, label=f"s{n}", committed=[f"Meeting {n}: we talked about the budget and the hotel."])
    embed_everything()
    whole = get(api, alice_key, query="hotel budget", mode=mode, limit=100)
    assert len(whole["items"]) == 5 and whole["nextCursor"] is None
    seen, cursor = [], None
    while True:
        body = get(api, alice_key, query="hotel budget", mode=mode, limit=2, **({"cursor": cursor} if cursor else {}))
        seen += [item["transcriptId"] for item in body["items"]]
        cursor = body["nextCursor"]
        if cursor is None:
            break
    assert seen == [item["transcriptId"] for item in whole["items"]]
    # A cursor is bound to its mode, query and workspace.
    first = get(api, alice_key, query="hotel budget", mode=mode, limit=2)
    other = "semantic" if mode == "hybrid" else "hybrid"
    for params in ({"mode": other}, {"mode": "keyword"}, {"mode": mode, "query": "something else"}):
        response = api.get(SEARCH, alice_key, **{"query": "hotel budget", "cursor": first["nextCursor"], **params})
        assert response.status_code == 400 and response.json()["error"] == "invalid_request"
    keyword = get(api, alice_key, query="budget", limit=2)
    response = api.get(SEARCH, alice_key, query="budget", mode=mode, cursor=keyword["nextCursor"])
    assert response.status_code == 400


@needs_extra
def test_another_workspaces_segments_never_appear_nor_are_read(api, acme, globex, alice_key, bob_key, semantic_on):
    mine = factories.session(acme, committed=OTHER)
    theirs = factories.session(globex, committed=BUDGET * 3)
    also_theirs = factories.session(globex, committed=BUDGET)
    embed_everything()
    for mode in ("semantic", "hybrid"):
        body = get(api, alice_key, query="What did we decide about the budget?", mode=mode)
        assert {item["session"]["id"] for item in body["items"]} == {mine.id}
        found = {item["session"]["id"] for item in get(api, bob_key, query="budget", mode=mode)["items"]}
        assert found == {theirs.id, also_theirs.id}
    # The search read its own workspace's vectors only (its cost follows its own size).
    from apps.recordings.semantic import index  # numpy: the extra's

    assert index._cache[(acme.id, next(iter(index._cache))[1])].size == len(OTHER)
    cursor = get(api, bob_key, query="budget", mode="semantic", limit=1)["nextCursor"]
    assert api.get(SEARCH, alice_key, query="budget", mode="semantic", cursor=cursor).status_code == 400
