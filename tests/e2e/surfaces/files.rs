//! `/v1/files`, OpenAI's Files API: uploads kept in the store a chunk at a time, read back
//! exactly, listed in pages and deleted by their project only; every bad upload refused with a
//! 4xx naming its fault and leaving nothing stored; `max_file_bytes` and
//! `max_project_file_bytes` held, a 300 MB upload refused without the gateway's memory
//! growing. The official OpenAI client in `tests/clients/test_files.py`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use gateway_test_support::{Gateway, Response, client};
use serde_json::Value;

use crate::hardening::proc_status_kib;

const BOUNDARY: &str = "e2e-files-boundary";
const MIB: usize = 1024 * 1024;

/// A form of text `fields` and, when given, a file named `name` holding `bytes`.
fn form(fields: &[(&str, &str)], file: Option<(&str, &[u8])>) -> Vec<u8> {
    let file = file.map(|(name, bytes)| (name, "application/octet-stream", bytes));
    client::form(BOUNDARY, fields, file)
}

fn content_type() -> String {
    format!("multipart/form-data; boundary={BOUNDARY}")
}

/// Posts `body` to `/v1/files` as a form (`Gateway::request` would call it JSON).
fn upload_as(gw: &Gateway, key: &str, body: &[u8]) -> Response {
    post_form(gw, Some(key), body)
}

fn post_form(gw: &Gateway, key: Option<&str>, body: &[u8]) -> Response {
    let content_type = content_type();
    let mut headers = vec![("Content-Type", content_type.as_str())];
    headers.extend(key.map(|key| ("Authorization", key)));
    client::request(gw.addr, "POST", "/v1/files", &headers, body)
}

/// Uploads `bytes` for `purpose`; the file object.
fn upload(gw: &Gateway, purpose: &str, name: &str, bytes: &[u8]) -> Value {
    let response = upload_as(
        gw,
        &gw.key,
        &form(&[("purpose", purpose)], Some((name, bytes))),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    response.json()
}

fn get(gw: &Gateway, key: &str, path: &str) -> Response {
    gw.request("GET", path, Some(key), &[], b"")
}

fn delete(gw: &Gateway, key: &str, id: &str) -> Response {
    gw.request("DELETE", &format!("/v1/files/{id}"), Some(key), &[], b"")
}

/// Bytes that are no text: every byte value, CRLFs and lines that look like the boundary.
fn awkward_bytes(len: usize) -> Vec<u8> {
    // Lines that look like the form's boundary without being one (a delimiter is CRLF, `--`
    // and the boundary; a client picks a boundary its content does not hold).
    let mut bytes: Vec<u8> = format!("\r\n-{BOUNDARY}\n--{BOUNDARY}\r\n").into_bytes();
    let mut state = 0x2545_f491_u32;
    while bytes.len() < len {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        bytes.push((state >> 24) as u8);
    }
    bytes.truncate(len);
    bytes
}

/// Waits until the gateway's database holds no file and no chunk (an upload refused half way
/// is deleted by a task of its own, just after its answer).
fn wait_for_no_files(gw: &Gateway) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (files, chunks) = (gw.row_count("files"), gw.row_count("file_chunks"));
        if (files, chunks) == (0, 0) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{files} files and {chunks} chunks still stored"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_file_is_uploaded_read_back_listed_and_deleted_by_its_project_only() {
    let gw = Gateway::demo();
    let other = gw.create_project("other");
    // Over two chunks of the store's, so its rows are read back in order.
    let bytes = awkward_bytes(2 * MIB + 12_345);
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let file = upload(&gw, "batch", "in.jsonl", &bytes);
    let id = file["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("file-"), "{file}");
    assert_eq!(file["object"], "file");
    assert_eq!(file["bytes"], bytes.len() as u64);
    assert_eq!(file["filename"], "in.jsonl");
    assert_eq!(file["purpose"], "batch");
    assert_eq!(file["status"], "processed");
    let created = file["created_at"].as_i64().unwrap();
    assert!((before..=before + 5).contains(&created), "{file}");
    // A batch file expires after 30 days unless its upload says otherwise, as OpenAI's do.
    assert_eq!(file["expires_at"], created + 30 * 24 * 3600);
    assert_eq!(gw.row_count("file_chunks"), 3);

    let retrieved = get(&gw, &gw.key, &format!("/v1/files/{id}"));
    assert_eq!(retrieved.status, 200);
    assert!(retrieved.header("x-invocation-id").is_some());
    assert_eq!(retrieved.json(), file);
    let content = get(&gw, &gw.key, &format!("/v1/files/{id}/content"));
    assert_eq!(content.status, 200);
    assert_eq!(
        content.header("content-length"),
        Some(bytes.len().to_string().as_str())
    );
    assert!(content.body == bytes, "the content differs from the upload");

    // Another project's key finds no such file, whatever it asks.
    for path in [format!("/v1/files/{id}"), format!("/v1/files/{id}/content")] {
        let response = get(&gw, &other.key, &path);
        assert_eq!(response.status, 404, "{path}: {}", response.text());
        assert_eq!(response.json()["error"]["type"], "invalid_request_error");
    }
    let theirs = get(&gw, &other.key, "/v1/files");
    assert_eq!(theirs.json()["data"], serde_json::json!([]));
    let deleted = delete(&gw, &other.key, &id);
    assert_eq!(deleted.status, 404);

    let listed = get(&gw, &gw.key, "/v1/files").json();
    assert_eq!(listed["object"], "list");
    assert_eq!(listed["data"], serde_json::json!([file]));
    assert_eq!(
        (&listed["first_id"], &listed["has_more"]),
        (&file["id"], &Value::Bool(false))
    );

    let deleted = delete(&gw, &gw.key, &id);
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    assert_eq!(
        deleted.json(),
        serde_json::json!({"id": id, "object": "file", "deleted": true})
    );
    assert_eq!(get(&gw, &gw.key, &format!("/v1/files/{id}")).status, 404);
    assert_eq!(
        get(&gw, &gw.key, &format!("/v1/files/{id}/content")).status,
        404
    );
    assert_eq!((gw.row_count("files"), gw.row_count("file_chunks")), (0, 0));
}

#[test]
fn files_are_listed_in_pages_either_way_and_by_purpose() {
    let gw = Gateway::demo();
    let mut ids = Vec::new();
    for (i, purpose) in ["batch", "user_data", "batch"].into_iter().enumerate() {
        let file = upload(&gw, purpose, &format!("f{i}.jsonl"), b"{}\n");
        ids.push(file["id"].as_str().unwrap().to_owned());
    }
    let page = |query: &str| get(&gw, &gw.key, &format!("/v1/files?{query}")).json();
    let ids_of = |page: &Value| -> Vec<String> {
        let data = page["data"].as_array().unwrap();
        data.iter()
            .map(|f| f["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let first = page("limit=2");
    assert_eq!(ids_of(&first), [ids[2].clone(), ids[1].clone()]);
    assert_eq!(first["has_more"], true);
    assert_eq!(first["last_id"], ids[1].as_str());
    let rest = page(&format!("limit=2&after={}", ids[1]));
    assert_eq!(ids_of(&rest), [ids[0].clone()]);
    assert_eq!(rest["has_more"], false);
    assert_eq!(
        ids_of(&page("order=asc")),
        [ids[0].clone(), ids[1].clone(), ids[2].clone()]
    );
    assert_eq!(
        ids_of(&page("purpose=batch")),
        [ids[2].clone(), ids[0].clone()]
    );
    for bad in ["limit=0", "limit=10001", "limit=x", "order=up"] {
        let response = get(&gw, &gw.key, &format!("/v1/files?{bad}"));
        assert_eq!(response.status, 400, "{bad}: {}", response.text());
        let param = bad.split('=').next().unwrap();
        assert_eq!(response.json()["error"]["param"], param, "{bad}");
    }
}

#[test]
fn bad_uploads_are_refused_naming_their_fault_and_nothing_is_kept() {
    let gw = Gateway::demo();
    let file = Some(("in.jsonl", &b"{}\n"[..]));
    let cases: Vec<(&str, Vec<u8>, u16, Option<&str>)> = vec![
        ("no purpose", form(&[], file), 400, Some("purpose")),
        (
            "unknown purpose",
            form(&[("purpose", "gifts")], file),
            400,
            Some("purpose"),
        ),
        (
            "an output purpose",
            form(&[("purpose", "batch_output")], file),
            400,
            Some("purpose"),
        ),
        (
            "no file",
            form(&[("purpose", "batch")], None),
            400,
            Some("file"),
        ),
        (
            "a file as text",
            form(&[("purpose", "batch"), ("file", "{}")], None),
            400,
            Some("file"),
        ),
        (
            "an unknown field",
            form(&[("purpose", "batch"), ("colour", "red")], file),
            400,
            Some("colour"),
        ),
        (
            "purpose twice",
            form(&[("purpose", "batch"), ("purpose", "batch")], file),
            400,
            Some("purpose"),
        ),
        (
            "an expiry too short",
            form(
                &[
                    ("purpose", "batch"),
                    ("expires_after[anchor]", "created_at"),
                    ("expires_after[seconds]", "60"),
                ],
                file,
            ),
            400,
            Some("expires_after.seconds"),
        ),
        (
            "another anchor",
            form(
                &[
                    ("purpose", "batch"),
                    ("expires_after[anchor]", "last_active_at"),
                    ("expires_after[seconds]", "3600"),
                ],
                file,
            ),
            400,
            Some("expires_after.anchor"),
        ),
        (
            "a form cut short",
            form(&[("purpose", "batch")], file)[..60].to_vec(),
            400,
            None,
        ),
    ];
    for (what, body, status, param) in cases {
        let response = upload_as(&gw, &gw.key, &body);
        assert_eq!(response.status, status, "{what}: {}", response.text());
        let error = &response.json()["error"];
        if let Some(param) = param {
            assert_eq!(error["param"], param, "{what}: {error}");
        }
        assert!(response.header("x-invocation-id").is_some(), "{what}");
        wait_for_no_files(&gw);
    }
    // Two files in one form: the first was kept as it came, and is deleted with the refusal.
    let mut two = form(&[("purpose", "batch")], file);
    two.truncate(two.len() - format!("--{BOUNDARY}--\r\n").len());
    two.extend(form(&[], Some(("b.jsonl", b"{}\n"))));
    let response = upload_as(&gw, &gw.key, &two);
    assert_eq!(response.status, 400, "{}", response.text());
    assert_eq!(response.json()["error"]["param"], "file");
    wait_for_no_files(&gw);

    let json = gw.request(
        "POST",
        "/v1/files",
        Some(&gw.key),
        &[("Content-Type", "application/json")],
        b"{}",
    );
    assert_eq!(json.status, 400, "{}", json.text());
    assert!(
        json.text().contains("multipart/form-data"),
        "{}",
        json.text()
    );
    let body = form(&[("purpose", "batch")], file);
    let anonymous = post_form(&gw, None, &body);
    assert_eq!(anonymous.status, 401);
    assert_eq!(get(&gw, "Bearer wrong", "/v1/files").status, 401);
    for id in [
        "file-abc",
        "../../etc/passwd",
        "file-0123456789abcdef0123456789abcdeX",
    ] {
        assert_eq!(
            get(&gw, &gw.key, &format!("/v1/files/{id}")).status,
            404,
            "{id}"
        );
    }
    let put = gw.request("PUT", "/v1/files", Some(&gw.key), &[], b"");
    assert_eq!(put.status, 405);
    // An expiry asked for is kept.
    let response = upload_as(
        &gw,
        &gw.key,
        &form(
            &[
                ("purpose", "user_data"),
                ("expires_after[anchor]", "created_at"),
                ("expires_after[seconds]", "3600"),
            ],
            file,
        ),
    );
    let kept = response.json();
    assert_eq!(
        kept["expires_at"],
        kept["created_at"].as_i64().unwrap() + 3600
    );
    // Other purposes are kept until deleted.
    assert_eq!(
        upload(&gw, "user_data", "u.txt", b"x")["expires_at"],
        Value::Null
    );
}

#[test]
fn a_project_holds_at_most_max_project_file_bytes_uploads_in_progress_included() {
    let gw = Gateway::builder()
        .config_line(&format!("max_project_file_bytes = {}", 3 * MIB))
        .start();
    let first = upload(&gw, "batch", "a.jsonl", &vec![b'a'; 2 * MIB]);
    let body = form(
        &[("purpose", "batch")],
        Some(("b.jsonl", &vec![b'b'; 2 * MIB])),
    );
    let refused = upload_as(&gw, &gw.key, &body);
    assert_eq!(refused.status, 413, "{}", refused.text());
    let message = refused.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("max_project_file_bytes"), "{message}");
    // Another project has its own room.
    let other = gw.create_project("other");
    assert_eq!(upload_as(&gw, &other.key, &body).status, 200);
    let id = first["id"].as_str().unwrap();
    let deleted = delete(&gw, &gw.key, id);
    assert_eq!(deleted.status, 200);
    assert_eq!(upload_as(&gw, &gw.key, &body).status, 200);
}

/// The gateway's resident memory, sampled every 20 ms until `stop`: its highest, in bytes.
fn sample_rss(gw: &Gateway, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    let pid = gw.pid().expect("running");
    std::thread::spawn(move || {
        let peak = AtomicU64::new(0);
        while !stop.load(Ordering::Relaxed) {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            let kib = status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|kib| kib.parse::<u64>().ok())
                .unwrap_or(0);
            peak.fetch_max(kib * 1024, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(20));
        }
        peak.load(Ordering::Relaxed)
    })
}

#[test]
fn a_300_mb_upload_is_refused_and_the_gateways_memory_stays_flat() {
    const UPLOAD: usize = 300 * 1000 * 1000;
    let max_file = 64 * MIB;
    let gw = Gateway::builder()
        .config_line(&format!("max_file_bytes = {max_file}"))
        .start();
    // Warm: one upload of a few chunks, so that what the first one allocates is not counted.
    upload(&gw, "batch", "warm.jsonl", &vec![b'w'; 3 * MIB]);
    let idle = proc_status_kib(&gw, "VmRSS") * 1024;

    // Declared: refused before its body is read (a client that waits for `100 Continue`
    // sends none of it).
    let content_type = content_type();
    let mut declared = TcpStream::connect(gw.addr).unwrap();
    declared
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let head = format!(
        "POST /v1/files HTTP/1.1\r\nHost: gw\r\nConnection: close\r\nAuthorization: {}\r\n\
         Content-Type: {content_type}\r\nExpect: 100-continue\r\nContent-Length: {UPLOAD}\r\n\r\n",
        gw.key
    );
    declared.write_all(head.as_bytes()).unwrap();
    let mut answer = Vec::new();
    declared.read_to_end(&mut answer).unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("max_file_bytes"), "{answer}");

    // Undeclared (chunked): read and kept a chunk at a time until it passes max_file_bytes.
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample_rss(&gw, stop.clone());
    let mut stream = TcpStream::connect(gw.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let head = format!(
        "POST /v1/files HTTP/1.1\r\nHost: gw\r\nAuthorization: {}\r\nContent-Type: {content_type}\r\n\
         Transfer-Encoding: chunked\r\n\r\n",
        gw.key
    );
    let writer = {
        let mut stream = stream.try_clone().unwrap();
        std::thread::spawn(move || {
            stream.write_all(head.as_bytes()).unwrap();
            let mut send = |bytes: &[u8]| {
                let framed = [format!("{:x}\r\n", bytes.len()).as_bytes(), bytes, b"\r\n"].concat();
                stream.write_all(&framed).is_ok()
            };
            let opening = format!(
                "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n\
                 --{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.jsonl\"\r\n\r\n"
            );
            let mut sent = 0usize;
            if send(opening.as_bytes()) {
                let block = vec![b'x'; 256 * 1024];
                while sent < UPLOAD && send(&block) {
                    sent += block.len();
                }
            }
            sent
        })
    };
    let mut answer = Vec::new();
    // The answer, or the connection reset once the gateway stopped reading (either way the
    // upload ended); its status when it was read.
    let _ = stream.read_to_end(&mut answer);
    let sent = writer.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    let peak = sampler.join().unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty()
            || answer.starts_with("HTTP/1.1 413") && answer.contains("max_file_bytes"),
        "{answer}"
    );
    assert!(sent < UPLOAD, "the gateway read the whole 300 MB");
    assert!(sent >= max_file, "refused after {sent} bytes");
    // A megabyte filled and one written at a time, the database's own buffers: nothing near
    // the 64 MiB it kept, let alone the 300 MB sent.
    let grown = peak.saturating_sub(idle);
    eprintln!(
        "[memory figure] 300 MB upload refused at 64 MiB: RSS {idle} idle, {peak} peak (+{grown})"
    );
    assert!(grown < 40 * MIB as u64, "the gateway grew by {grown} bytes");
    // The refused upload's chunks are gone; the warm file stays.
    let deadline = Instant::now() + Duration::from_secs(10);
    while gw.row_count("files") != 1 || gw.row_count("file_chunks") != 3 {
        assert!(
            Instant::now() < deadline,
            "the refused upload is still stored"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
