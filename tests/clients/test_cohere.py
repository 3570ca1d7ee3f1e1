"""The official `cohere` SDK, unchanged, against the gateway's rerank endpoint: its v2 client
(`/v2/rerank`) and its v1 client (`/v1/rerank`), on routes of the openai plugin to a rerank
server of Jina's shape (which counts tokens, priced) and one of Cohere's (which bills search
units)."""

import cohere
import pytest

from conftest import TIMEOUT_SECONDS
from scenario import record

SERVERS = ("jina", "cohere")


@pytest.fixture(scope="module")
def case(scenario):
    return scenario["rerank"]


@pytest.fixture(scope="module")
def v2(scenario):
    return cohere.ClientV2(
        api_key=scenario["key"], base_url=scenario["url"], timeout=TIMEOUT_SECONDS
    )


@pytest.fixture(scope="module")
def v1(scenario):
    return cohere.Client(
        api_key=scenario["key"], base_url=scenario["url"], timeout=TIMEOUT_SECONDS
    )


@pytest.mark.parametrize("server", SERVERS)
def test_v2_rerank(v2, scenario, case, server):
    answer = v2.rerank(
        model=case[server]["model"],
        query=case["query"],
        documents=case["documents"],
        top_n=2,
    )
    assert [r.index for r in answer.results] == case["order"][:2]
    assert [r.relevance_score for r in answer.results] == case["scores"][:2]
    invocation = record(scenario, answer.id)
    assert invocation["type"] == "rerank"
    assert invocation["status"] == "success"
    if server == "cohere":
        assert answer.meta.billed_units.search_units == 1
        assert invocation["usage"]["search_units"] == 1
        assert invocation["usage"]["prompt_tokens"] == 0
    else:
        assert answer.meta.billed_units is None
        assert invocation["usage"]["prompt_tokens"] == case["tokens"]
        assert invocation["usageCost"] == pytest.approx(case["cost_usd"], rel=1e-12)


def test_v2_rerank_of_every_document(v2, case):
    answer = v2.rerank(
        model=case["jina"]["model"], query=case["query"], documents=case["documents"]
    )
    assert [r.index for r in answer.results] == case["order"]


def test_v1_rerank_returns_documents_when_asked(v1, case):
    answer = v1.rerank(
        model=case["jina"]["model"],
        query=case["query"],
        documents=[{"text": text} for text in case["documents"]],
        top_n=3,
        return_documents=True,
    )
    assert [r.index for r in answer.results] == case["order"][:3]
    for result in answer.results:
        assert result.document.text == case["documents"][result.index]
    plain = v1.rerank(
        model=case["jina"]["model"], query=case["query"], documents=case["documents"]
    )
    assert all(result.document is None for result in plain.results)


def test_a_bad_rerank_is_the_sdk_s_bad_request(v2, case):
    with pytest.raises(cohere.BadRequestError) as raised:
        v2.rerank(model=case["jina"]["model"], query="", documents=case["documents"])
    assert raised.value.status_code == 400
    assert "query" in str(raised.value.body)


def test_an_unknown_model_is_not_found(v2, case):
    with pytest.raises(cohere.NotFoundError):
        v2.rerank(model="no-such-route/x", query=case["query"], documents=case["documents"])
