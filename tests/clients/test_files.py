"""The official `openai` SDK, unchanged, against the gateway's Files API (`/v1/files`):
`files.create` (bytes and a file on disk, with and without `expires_after`), `retrieve`,
`list` (auto-paging across pages, `purpose`, `order`), `content`, `delete`, and its errors."""

import io
import json

import openai
import pytest


def batch_lines(count):
    lines = [
        json.dumps(
            {
                "custom_id": f"line-{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {"model": "m", "messages": [{"role": "user", "content": f"é {i}"}]},
            }
        )
        for i in range(count)
    ]
    return ("\n".join(lines) + "\n").encode()


def test_a_file_round_trips(openai_client, tmp_path):
    data = batch_lines(500)
    path = tmp_path / "requests.jsonl"
    path.write_bytes(data)
    with path.open("rb") as f:
        created = openai_client.files.create(file=f, purpose="batch")
    assert created.object == "file"
    assert created.id.startswith("file-")
    assert created.bytes == len(data)
    assert created.filename == "requests.jsonl"
    assert created.purpose == "batch"
    assert created.status == "processed"
    # Batch files expire after 30 days unless asked otherwise, as OpenAI's do.
    assert created.expires_at == created.created_at + 30 * 24 * 3600

    retrieved = openai_client.files.retrieve(created.id)
    assert retrieved == created
    content = openai_client.files.content(created.id)
    assert content.content == data
    assert content.response.headers["content-length"] == str(len(data))

    deleted = openai_client.files.delete(created.id)
    assert (deleted.id, deleted.object, deleted.deleted) == (created.id, "file", True)
    with pytest.raises(openai.NotFoundError):
        openai_client.files.retrieve(created.id)
    with pytest.raises(openai.NotFoundError):
        openai_client.files.content(created.id)


def test_an_expiry_is_kept(openai_client):
    created = openai_client.files.create(
        file=("notes.txt", io.BytesIO(b"kept for an hour")),
        purpose="user_data",
        expires_after={"anchor": "created_at", "seconds": 3600},
    )
    assert created.expires_at == created.created_at + 3600
    plain = openai_client.files.create(file=("plain.txt", b"kept"), purpose="user_data")
    assert plain.expires_at is None
    for file in (created, plain):
        openai_client.files.delete(file.id)


def test_files_are_listed_page_by_page(openai_client):
    ids = [
        openai_client.files.create(file=(f"f{i}.jsonl", batch_lines(1)), purpose="evals").id
        for i in range(5)
    ]
    # Newest first by default; `limit=2` makes the SDK follow `after` across three pages.
    listed = [f.id for f in openai_client.files.list(purpose="evals", limit=2)]
    assert listed == list(reversed(ids))
    page = openai_client.files.list(purpose="evals", limit=2, order="asc")
    assert [f.id for f in page.data] == ids[:2]
    assert page.has_more
    for id in ids:
        openai_client.files.delete(id)
    assert list(openai_client.files.list(purpose="evals")) == []


def test_bad_uploads_are_the_sdks_errors(openai_client):
    with pytest.raises(openai.BadRequestError) as refused:
        openai_client.files.create(file=("x.jsonl", b"{}"), purpose="gifts")
    assert refused.value.param == "purpose"
    with pytest.raises(openai.BadRequestError) as refused:
        openai_client.files.create(
            file=("x.jsonl", b"{}"),
            purpose="batch",
            expires_after={"anchor": "created_at", "seconds": 5},
        )
    assert refused.value.param == "expires_after.seconds"
    with pytest.raises(openai.NotFoundError):
        openai_client.files.retrieve("file-00000000000000000000000000000000")
