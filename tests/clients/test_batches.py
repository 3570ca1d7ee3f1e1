"""The official `openai` SDK, unchanged, against the gateway's Batch API (`/v1/batches`): the
input uploaded with `files.create`, `batches.create`, polled with `retrieve` to `completed`, the
output and error files read with `files.content` and compared line by line, `list`, and
`cancel` mid-run (lines whose upstream keeps answering 429 wait, and are closed as
`batch_cancelled`); and the official `anthropic` SDK against `/v1/messages/batches` likewise
(create, retrieve, results, list, cancel, delete)."""

import io
import json
import time

import anthropic
import openai
import pytest
from openai.types.chat import ChatCompletion

FINAL = ("completed", "failed", "expired", "cancelled")


def upload(client, requests):
    data = ("\n".join(json.dumps(r) for r in requests) + "\n").encode()
    return client.files.create(file=("batch.jsonl", io.BytesIO(data)), purpose="batch")


def chat(custom_id, model, text="Say hi in Portuguese"):
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": model, "messages": [{"role": "user", "content": text}]},
    }


def wait_until(client, batch_id, done, what):
    deadline = time.monotonic() + 60
    while True:
        batch = client.batches.retrieve(batch_id)
        if done(batch):
            return batch
        assert time.monotonic() < deadline, f"{what}: {batch}"
        time.sleep(0.1)


def lines_of(client, file_id):
    text = client.files.content(file_id).text
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def test_a_batch_runs_to_completed_and_its_files_hold_each_line_once(openai_client, scenario):
    simple = scenario["cases"]["openai"]["simple"]
    requests = [chat(f"q-{i}", simple["model"]) for i in range(12)]
    requests.insert(4, chat("no-route", "no-such-route/model"))
    file = upload(openai_client, requests)
    batch = openai_client.batches.create(
        input_file_id=file.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"suite": "sdk"},
    )
    assert batch.object == "batch"
    assert batch.id.startswith("batch_")
    assert batch.status in ("in_progress", "finalizing", "completed")
    assert batch.input_file_id == file.id
    assert batch.metadata == {"suite": "sdk"}
    assert batch.request_counts.total == 13

    done = wait_until(openai_client, batch.id, lambda b: b.status in FINAL, "never ended")
    assert done.status == "completed", done
    assert (done.request_counts.completed, done.request_counts.failed) == (12, 1)
    assert done.completed_at >= done.in_progress_at >= done.created_at

    output = lines_of(openai_client, done.output_file_id)
    assert [line["custom_id"] for line in output] == [f"q-{i}" for i in range(12)]
    for line in output:
        assert line["error"] is None
        assert line["response"]["status_code"] == 200
        completion = ChatCompletion.model_validate(line["response"]["body"])
        assert completion.choices[0].message.content == simple["text"]
    errors = lines_of(openai_client, done.error_file_id)
    assert [line["custom_id"] for line in errors] == ["no-route"]
    assert 400 <= errors[0]["response"]["status_code"] < 500
    assert errors[0]["response"]["body"]["error"]["message"]

    output_file = openai_client.files.retrieve(done.output_file_id)
    assert output_file.purpose == "batch_output"
    listed = [b.id for b in openai_client.batches.list(limit=2)]
    assert done.id in listed


def test_a_batch_is_cancelled_mid_run(openai_client, scenario):
    simple = scenario["cases"]["openai"]["simple"]["model"]
    # Lines whose upstream answers 429 with a Retry-After wait to run again: in flight until
    # the batch is cancelled.
    limited = scenario["limited"]["openai"]
    requests = [chat(f"ok-{i}", simple) for i in range(3)]
    requests += [chat(f"wait-{i}", limited) for i in range(3)]
    batch = openai_client.batches.create(
        input_file_id=upload(openai_client, requests).id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
    )
    wait_until(
        openai_client,
        batch.id,
        lambda b: b.request_counts.completed == 3,
        "the answerable lines never completed",
    )
    cancelling = openai_client.batches.cancel(batch.id)
    assert cancelling.status in ("cancelling", "cancelled")
    done = wait_until(openai_client, batch.id, lambda b: b.status in FINAL, "never cancelled")
    assert done.status == "cancelled"
    assert (done.request_counts.completed, done.request_counts.failed) == (3, 3)
    assert [line["custom_id"] for line in lines_of(openai_client, done.output_file_id)] == [
        "ok-0",
        "ok-1",
        "ok-2",
    ]
    errors = lines_of(openai_client, done.error_file_id)
    assert sorted(line["custom_id"] for line in errors) == ["wait-0", "wait-1", "wait-2"]
    for line in errors:
        assert line["response"] is None
        assert line["error"]["code"] == "batch_cancelled"

    with pytest.raises(openai.ConflictError):
        finished = openai_client.batches.create(
            input_file_id=upload(openai_client, [chat("one", simple)]).id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )
        wait_until(openai_client, finished.id, lambda b: b.status in FINAL, "never ended")
        openai_client.batches.cancel(finished.id)


def test_a_malformed_file_fails_its_batch(openai_client, scenario):
    simple = scenario["cases"]["openai"]["simple"]["model"]
    requests = [chat(f"r-{i}", simple) for i in range(9)]
    requests[6]["url"] = "/v1/embeddings"
    batch = openai_client.batches.create(
        input_file_id=upload(openai_client, requests).id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
    )
    assert batch.status == "failed"
    assert batch.errors.data[0].line == 7
    assert batch.errors.data[0].code == "mismatched_endpoint"
    assert batch.errors.data[0].param == "url"
    with pytest.raises(openai.BadRequestError) as refused:
        openai_client.batches.create(
            input_file_id="file-00000000000000000000000000000000",
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )
    assert refused.value.param == "input_file_id"


# ------------------------------------------------------- Anthropic's Message Batches


def message(custom_id, model, text="Say hi in Portuguese"):
    return {
        "custom_id": custom_id,
        "params": {
            "model": model,
            "max_tokens": 64,
            "messages": [{"role": "user", "content": text}],
        },
    }


def wait_for_message_batch(client, batch_id, done, what):
    deadline = time.monotonic() + 60
    while True:
        batch = client.messages.batches.retrieve(batch_id)
        if done(batch):
            return batch
        assert time.monotonic() < deadline, f"{what}: {batch}"
        time.sleep(0.1)


def test_a_message_batch_ends_with_each_requests_result_once(
    anthropic_client, openai_client, scenario
):
    simple = scenario["cases"]["anthropic"]["simple"]
    requests = [message(f"m-{i}", simple["model"]) for i in range(8)]
    requests.insert(3, message("no-route", "no-such-route/model"))
    batch = anthropic_client.messages.batches.create(requests=requests)
    assert batch.type == "message_batch"
    assert batch.id.startswith("msgbatch_")
    assert batch.processing_status in ("in_progress", "ended")
    counts = batch.request_counts
    assert counts.processing + counts.succeeded + counts.errored == 9
    assert batch.expires_at > batch.created_at

    done = wait_for_message_batch(
        anthropic_client, batch.id, lambda b: b.processing_status == "ended", "never ended"
    )
    counts = done.request_counts
    assert (counts.processing, counts.succeeded, counts.errored) == (0, 8, 1)
    assert (counts.canceled, counts.expired) == (0, 0)
    assert done.ended_at >= done.created_at
    assert done.results_url.endswith(f"/v1/messages/batches/{done.id}/results")

    results = list(anthropic_client.messages.batches.results(done.id))
    assert [r.custom_id for r in results] == [r["custom_id"] for r in requests]
    for result in results:
        if result.custom_id == "no-route":
            assert result.result.type == "errored"
            assert result.result.error.error.message
            continue
        assert result.result.type == "succeeded"
        assert result.result.message.content[0].text == simple["text"]

    assert done.id in [b.id for b in anthropic_client.messages.batches.list(limit=5)]
    assert done.id not in [b.id for b in openai_client.batches.list()]
    deleted = anthropic_client.messages.batches.delete(done.id)
    assert (deleted.id, deleted.type) == (done.id, "message_batch_deleted")
    with pytest.raises(anthropic.NotFoundError):
        anthropic_client.messages.batches.retrieve(done.id)


def test_a_message_batch_is_cancelled_mid_run(anthropic_client, scenario):
    simple = scenario["cases"]["anthropic"]["simple"]["model"]
    # Requests whose upstream answers 429 with a Retry-After wait to run again: in flight
    # until the batch is cancelled.
    limited = scenario["limited"]["anthropic"]
    requests = [message(f"ok-{i}", simple) for i in range(3)]
    requests += [message(f"wait-{i}", limited) for i in range(3)]
    batch = anthropic_client.messages.batches.create(requests=requests)
    wait_for_message_batch(
        anthropic_client,
        batch.id,
        lambda b: b.request_counts.succeeded == 3,
        "the answerable requests never succeeded",
    )
    cancelling = anthropic_client.messages.batches.cancel(batch.id)
    assert cancelling.processing_status in ("canceling", "ended")
    assert cancelling.cancel_initiated_at is not None
    done = wait_for_message_batch(
        anthropic_client, batch.id, lambda b: b.processing_status == "ended", "never ended"
    )
    assert (done.request_counts.succeeded, done.request_counts.canceled) == (3, 3)
    results = {r.custom_id: r.result.type for r in anthropic_client.messages.batches.results(done.id)}
    assert results == {
        **{f"ok-{i}": "succeeded" for i in range(3)},
        **{f"wait-{i}": "canceled" for i in range(3)},
    }

    with pytest.raises(anthropic.BadRequestError) as refused:
        anthropic_client.messages.batches.create(
            requests=[message("same", simple), message("same", simple)]
        )
    assert "requests.1.custom_id" in str(refused.value)
