//! What needs a slow upstream: a client leaving mid-stream (the call cancelled and recorded
//! so) and a graceful shutdown during a stream (finished and recorded).

use super::*;

#[test]
fn client_disconnect_mid_stream_cancels_and_records_cancelled() {
    let upstream =
        OpenAiUpstream::each_call(Reply::openai_slow_stream(50, Duration::from_millis(200)));
    let gw = gateway_for(&upstream, "/v1");
    let mut stream = open_stream_with_provider_key(
        &gw,
        PROVIDER_KEY,
        &with(hi_request(&gw), "stream", json!(true)),
    );
    assert_eq!(stream.status, 200);
    let first = stream.next_frame().expect("a first frame");
    let second = stream.next_frame().expect("a second frame");
    assert_eq!(streamed_text(&[first.clone(), second], 0), "w0 w1 ");
    let id = first["invocationId"].as_str().expect("id").to_owned();
    drop(stream);

    // The upstream call is cancelled, not left to run to its end.
    upstream.wait_until("the upstream stream to be dropped", |u| {
        u.aborted_streams() == 1
    });
    assert_eq!(upstream.finished_streams(), 0);
    let record = gw.wait_for_record(&id, |r| r["status"] == json!("cancelled"));
    assert_eq!(record["stream"], json!(true), "{record}");
}

#[test]
fn sigterm_finishes_an_in_flight_stream_and_records_it() {
    let frames = 10;
    let upstream = OpenAiUpstream::each_call(Reply::openai_slow_stream(
        frames,
        Duration::from_millis(200),
    ));
    let mut gw = gateway_for(&upstream, "/v1");
    let mut stream = open_stream_with_provider_key(
        &gw,
        PROVIDER_KEY,
        &with(hi_request(&gw), "stream", json!(true)),
    );
    assert_eq!(stream.status, 200);
    let first = stream.next_frame().expect("a first frame");
    let id = first["invocationId"].as_str().expect("id").to_owned();

    gw.terminate();
    let mut all = vec![first];
    while let Some(frame) = stream.next_frame() {
        all.push(frame);
    }
    let last = all.last().expect("frames").clone();
    assert_eq!(last["completed"], json!(true), "stream cut short: {last}");
    let expected: String = (0..frames).map(slow_word).collect();
    assert_eq!(streamed_text(&all, 0), expected);

    let status = gw.wait_exit();
    assert!(status.success(), "exit status {status}");
    // The gateway has exited: the record must already be in the database.
    let line = gw
        .list_invocations(&[])
        .into_iter()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{id} not recorded before the gateway exited"));
    assert!(line.split_whitespace().any(|c| c == "success"), "{line}");
    assert_eq!(gw.record(&id)["status"], json!("success"));
}
