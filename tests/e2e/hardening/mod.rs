//! What a hostile caller or a careless client finds: bounded expansion, bodies kept only
//! for authenticated callers, read timeouts, connection caps, redaction of provider keys,
//! strict JSON, HTTP/2, and records for every request cut short by shutdown or left by its
//! caller.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use gateway_test_support::client::{self, parse_sse};
use gateway_test_support::{
    Gateway, OpenAiUpstream, Recording, Reply, Route, assert_error, assert_ok, chat_request,
    text_request, with,
};
use serde_json::{Value, json};

mod connections;
mod leaving;
mod memory;
mod protocol;
mod records;
mod shutdown;

/// A deadline for outcomes that should come within a second or two.
const GENEROUS: Duration = Duration::from_secs(60);

/// A kernel figure of the gateway process from /proc/PID/status, in KiB (e.g. `VmHWM`, the
/// peak resident set).
pub(crate) fn proc_status_kib(gw: &Gateway, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", gw.pid().expect("running")))
        .expect("status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc status"))
}

/// Makes the gateway write every record queued so far (a GET of a record flushes the log).
fn flush_records(gw: &Gateway) {
    let response = gw.post(
        "/completions",
        &text_request(&gw.project_id, "demo", "echo", "x"),
    );
    let body = assert_ok(&response);
    let id = body["invocationId"].as_str().expect("id");
    assert_eq!(gw.get_invocation(id).status, 200);
}

/// Opens a raw connection and sends `bytes` (a request, or the start of one).
fn raw_connection(gw: &Gateway, bytes: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(gw.addr).expect("connect");
    stream.set_read_timeout(Some(GENEROUS)).expect("timeout");
    stream.write_all(bytes).expect("send");
    stream
}

/// Reads until the server closes the connection (panics after the stream's read timeout,
/// [`GENEROUS`] unless set otherwise).
fn read_until_closed(stream: &mut TcpStream) -> String {
    String::from_utf8_lossy(&read_bytes_until_closed(stream)).into_owned()
}

fn read_bytes_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return all,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return all,
            Err(e) => panic!(
                "the connection was not closed: {e}; read so far: {}",
                String::from_utf8_lossy(&all)
            ),
        }
    }
}

fn post_head(gw: &Gateway, extra: &str) -> String {
    format!(
        "POST /completions HTTP/1.1\r\nHost: {}\r\nAuthorization: {}\r\nContent-Type: application/json\r\n{extra}\r\n",
        gw.addr, gw.key
    )
}
