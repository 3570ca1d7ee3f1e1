//! Slow and careless clients: read timeouts (408 for a body that stops coming), the connection cap,
//! silent and idle connections closed, a request in flight outliving the connection deadlines, and a
//! client still sending a body over the limit reading its 413.

use super::*;

// ------------------------------------------------------------------ 3: slow clients

fn quick_read_timeout() -> Gateway {
    Gateway::builder()
        .route(Route::echo("demo"))
        .config_line("request_read_timeout_secs = 1")
        .start()
}

#[test]
fn a_body_that_stops_coming_gets_408_and_the_connection_closes() {
    let gw = quick_read_timeout();
    // A lying Content-Length.
    let mut head = post_head(&gw, "Content-Length: 1000\r\n").into_bytes();
    head.extend_from_slice(br#"{"projectId""#);
    let mut stream = raw_connection(&gw, &head);
    let answer = read_until_closed(&mut stream);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    let body: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).expect("a body"))
        .expect("a JSON body");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("request_read_timeout_secs"),
        "{body}"
    );
    let id = body["invocationId"].as_str().expect("an invocation id");
    assert_eq!(gw.record(id)["httpStatus"], json!(408));

    // Chunked, without its last chunk.
    let mut head = post_head(&gw, "Transfer-Encoding: chunked\r\n").into_bytes();
    head.extend_from_slice(b"5\r\n{\"pro\r\n");
    let mut stream = raw_connection(&gw, &head);
    let answer = read_until_closed(&mut stream);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
}

#[test]
fn headers_that_stop_coming_close_the_connection() {
    let gw = quick_read_timeout();
    let mut stream = raw_connection(&gw, b"POST /completions HTTP/1.1\r\nHost: x\r\n");
    // Closed by the gateway (hyper's header timeout answers nothing).
    read_until_closed(&mut stream);
    assert_eq!(gw.get("/healthz", None).status, 200);
}

#[test]
fn connections_over_max_connections_wait_for_a_free_slot() {
    let gw = Gateway::builder()
        .route(Route::echo("demo"))
        .config_line("max_connections = 2")
        .config_line("request_read_timeout_secs = 120")
        .start();
    let first = TcpStream::connect(gw.addr).expect("connect");
    let second = TcpStream::connect(gw.addr).expect("connect");
    // Accepted by the kernel, not served: both slots are taken.
    let mut third = raw_connection(
        &gw,
        format!(
            "GET /healthz HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            gw.addr
        )
        .as_bytes(),
    );
    third
        .set_read_timeout(Some(Duration::from_millis(1500)))
        .expect("timeout");
    let mut buf = [0u8; 64];
    match third.read(&mut buf) {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
        other => panic!("a third connection was served over max_connections = 2: {other:?}"),
    }
    drop(first);
    third.set_read_timeout(Some(GENEROUS)).expect("timeout");
    let answer = read_until_closed(&mut third);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    drop(second);
}

/// How long a liveness outcome of a few seconds may take on a loaded machine.
const LIVENESS: Duration = Duration::from_secs(30);

/// HTTP/2's connection preface starts with this.
const H2_MAGIC: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut frame = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    frame.extend_from_slice(&[kind, flags]);
    frame.extend_from_slice(&stream.to_be_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// A client's whole HTTP/2 preface: the magic and its (empty) SETTINGS.
fn h2_preface() -> Vec<u8> {
    let mut bytes = H2_MAGIC.to_vec();
    bytes.extend(h2_frame(0x4, 0, 0, &[]));
    bytes
}

/// The preface and `GET path` on stream 1 (HPACK: static-table method and scheme, the path
/// and authority as literals of indexed names).
fn h2_get(gw: &Gateway, path: &str) -> Vec<u8> {
    let mut block = vec![0x82, 0x86];
    for (name_index, value) in [(4u8, path.to_owned()), (1, gw.addr.to_string())] {
        block.extend_from_slice(&[name_index, value.len() as u8]);
        block.extend_from_slice(value.as_bytes());
    }
    let mut bytes = h2_preface();
    // END_STREAM | END_HEADERS
    bytes.extend(h2_frame(0x1, 0x5, 1, &block));
    bytes
}

/// The frames in what a server sent: (type, stream, payload).
fn h2_frames(mut bytes: &[u8]) -> Vec<(u8, u32, Vec<u8>)> {
    let mut frames = Vec::new();
    while bytes.len() >= 9 {
        let len = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
        let stream = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]) & 0x7fff_ffff;
        let payload = bytes[9..].get(..len).expect("a whole frame").to_vec();
        frames.push((bytes[3], stream, payload));
        bytes = &bytes[9 + len..];
    }
    frames
}

fn healthz_over_http1(gw: &Gateway, connection: &str) -> TcpStream {
    raw_connection(
        gw,
        format!(
            "GET /healthz HTTP/1.1\r\nHost: {}\r\nConnection: {connection}\r\n\r\n",
            gw.addr
        )
        .as_bytes(),
    )
}

#[test]
fn silent_connections_are_closed_and_do_not_hold_the_connection_cap() {
    let gw = Gateway::builder()
        .route(Route::echo("demo"))
        .config_line("max_connections = 8")
        .config_line("request_read_timeout_secs = 2")
        .start();
    // Every slot: nothing, part of HTTP/2's preface, or all of it, and then nothing.
    let preface = h2_preface();
    let mut silent: Vec<TcpStream> = (0..8)
        .map(|i| match i % 3 {
            0 => raw_connection(&gw, b""),
            1 => raw_connection(&gw, &H2_MAGIC[..10]),
            _ => raw_connection(&gw, &preface),
        })
        .collect();
    // Waits in the backlog until the gateway closes silent ones.
    let mut request = healthz_over_http1(&gw, "close");
    request.set_read_timeout(Some(LIVENESS)).expect("timeout");
    let answer = read_until_closed(&mut request);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    for stream in &mut silent {
        stream.set_read_timeout(Some(LIVENESS)).expect("timeout");
        read_until_closed(stream);
    }
}

#[test]
fn idle_connections_are_closed_after_client_idle_timeout_secs() {
    let gw = Gateway::builder()
        .route(Route::echo("demo"))
        .config_line("request_read_timeout_secs = 600")
        .config_line("client_idle_timeout_secs = 2")
        .start();
    // HTTP/1.1 keep-alive: answered, then closed.
    let mut http1 = healthz_over_http1(&gw, "keep-alive");
    http1.set_read_timeout(Some(LIVENESS)).expect("timeout");
    let answer = read_until_closed(&mut http1);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains(r#""status":"ok""#), "{answer}");

    // HTTP/2: answered, then GOAWAY and closed.
    let mut http2 = raw_connection(&gw, &h2_get(&gw, "/healthz"));
    http2.set_read_timeout(Some(LIVENESS)).expect("timeout");
    let frames = h2_frames(&read_bytes_until_closed(&mut http2));
    let data: Vec<u8> = frames
        .iter()
        .filter(|(kind, stream, _)| *kind == 0x0 && *stream == 1)
        .flat_map(|(_, _, payload)| payload.clone())
        .collect();
    let kinds: Vec<u8> = frames.iter().map(|(kind, _, _)| *kind).collect();
    assert!(
        String::from_utf8_lossy(&data).contains(r#""status":"ok""#),
        "frames: {kinds:?}, data: {}",
        String::from_utf8_lossy(&data)
    );
    assert!(
        kinds.contains(&0x7),
        "no GOAWAY before the close: {kinds:?}"
    );
}

#[test]
fn a_request_in_flight_outlives_the_connection_deadlines() {
    // Quieter than the idle deadline between frames, and longer than both deadlines.
    let slow = OpenAiUpstream::each_call(Reply::openai_slow_stream(2, Duration::from_millis(1200)));
    let gw = Gateway::builder()
        .route(Route::openai("slow", &slow.base_url("/v1")))
        .config_line("request_read_timeout_secs = 1")
        .config_line("client_idle_timeout_secs = 1")
        .start();
    let body = with(
        chat_request(
            &gw.project_id,
            "slow",
            "gpt-4o-mini",
            json!([{"role": "user", "content": "hi"}]),
        ),
        "stream",
        json!(true),
    );
    let provider_key = ("Provider-API-Key", "sk-test-0123456789");
    let (addr, key, sent) = (gw.addr, gw.key.clone(), body.to_string());
    let over_http2 = std::thread::spawn(move || {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let client = reqwest::Client::builder()
                .http2_prior_knowledge()
                .build()
                .expect("client");
            let response = client
                .post(format!("http://{addr}/completions"))
                .header("Authorization", format!("Bearer {key}"))
                .header("Content-Type", "application/json")
                .header(provider_key.0, provider_key.1)
                .body(sent)
                .send()
                .await
                .expect("h2 stream");
            assert_eq!(response.version(), reqwest::Version::HTTP_2);
            response.text().await.expect("the whole stream")
        })
    });
    let over_http1 =
        gw.post_stream_with_headers("/completions", Some(&gw.key), &[provider_key], &body);
    let over_http2 = parse_sse(&over_http2.join().expect("the h2 client's thread"));
    for (frames, what) in [(&over_http1.frames, "HTTP/1.1"), (&over_http2, "HTTP/2")] {
        let last = frames.last().unwrap_or_else(|| panic!("{what}: no frames"));
        assert_eq!(last["completed"], json!(true), "{what}: {last}");
    }
}

// ------------------------------------------------------------------ oversize bodies

/// A gateway whose bodies may be 64 KiB.
fn small_bodies() -> Gateway {
    Gateway::builder()
        .route(Route::echo("demo"))
        .max_body_bytes(65536)
        .start()
}

/// Sends `first`, waits long enough for a gateway that answers at once to have closed the
/// connection, then `rest` a piece at a time (the first write to a closed connection goes
/// out, the next ones fail): every write must go through, and the answer come after.
fn send_in_two_parts(gw: &Gateway, first: &[u8], rest: &[u8]) -> String {
    let mut stream = raw_connection(gw, first);
    std::thread::sleep(Duration::from_millis(1000));
    for piece in rest.chunks(5000) {
        stream
            .write_all(piece)
            .unwrap_or_else(|e| panic!("the rest of the body could not be sent: {e}"));
        std::thread::sleep(Duration::from_millis(50));
    }
    read_until_closed(&mut stream)
}

fn assert_413(answer: &str) {
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    let body: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).expect("a body"))
        .expect("a JSON body");
    assert!(body["error"].as_str().unwrap().contains("65536"), "{body}");
    assert!(body["invocationId"].as_str().is_some(), "{body}");
}

#[test]
fn a_client_still_sending_a_body_over_the_limit_reads_its_413() {
    let gw = small_bodies();
    let body = vec![b'x'; 100_000];
    // Declared too large: refused before reading, then drained.
    let mut head = post_head(&gw, "Content-Length: 100000\r\nConnection: close\r\n").into_bytes();
    head.extend_from_slice(&body[..50_000]);
    assert_413(&send_in_two_parts(&gw, &head, &body[50_000..]));

    // Chunked, growing over the limit while it is read.
    let chunked = |part: &[u8]| {
        let mut bytes = Vec::new();
        for chunk in part.chunks(10_000) {
            bytes.extend(format!("{:x}\r\n", chunk.len()).into_bytes());
            bytes.extend_from_slice(chunk);
            bytes.extend_from_slice(b"\r\n");
        }
        bytes
    };
    let mut head =
        post_head(&gw, "Transfer-Encoding: chunked\r\nConnection: close\r\n").into_bytes();
    head.extend(chunked(&body[..80_000]));
    let mut rest = chunked(&body[80_000..]);
    rest.extend_from_slice(b"0\r\n\r\n");
    assert_413(&send_in_two_parts(&gw, &head, &rest));

    // A client that waits for 100 Continue is answered without sending the body.
    let mut stream = raw_connection(
        &gw,
        post_head(
            &gw,
            "Content-Length: 100000\r\nExpect: 100-continue\r\nConnection: close\r\n",
        )
        .as_bytes(),
    );
    let answer = read_until_closed(&mut stream);
    assert!(!answer.contains("100 Continue"), "{answer}");
    assert_413(&answer);

    // Draining is bounded: a body far over the limit is not read to its end.
    let mut stream = raw_connection(
        &gw,
        post_head(&gw, "Content-Length: 100000000\r\n").as_bytes(),
    );
    stream
        .set_write_timeout(Some(GENEROUS))
        .expect("write timeout");
    let chunk = vec![b'x'; 64 * 1024];
    let refused = (0..100_000_000 / chunk.len()).find_map(|_| stream.write_all(&chunk).err());
    let error = refused.expect("a 100 MB body was read to its end");
    assert!(
        matches!(
            error.kind(),
            ErrorKind::BrokenPipe | ErrorKind::ConnectionReset
        ),
        "{error}"
    );
}
