//! AWS's published SigV4 test vectors (`tests/sigv4`, see its NOTICE) through the plugin's
//! signer: for each case, the canonical request, the string to sign and the signature; then
//! `sign` on a Bedrock request, checked against the same steps written out.

use std::path::{Path, PathBuf};

use gateway_plugin_sdk::http::Request;
use serde::Deserialize;

use crate::sigv4::{
    AmzDate, Credentials, Scope, UrlParts, authorization, canonical_request, sha256_hex, sign,
    signature, signing_key, string_to_sign, url_parts,
};

const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

#[derive(Debug, Deserialize)]
struct Context {
    credentials: ContextCredentials,
    region: String,
    service: String,
    timestamp: String,
    normalize: bool,
    sign_body: bool,
    #[serde(default)]
    omit_session_token: bool,
}

#[derive(Debug, Deserialize)]
struct ContextCredentials {
    access_key_id: String,
    secret_access_key: String,
    token: Option<String>,
}

/// A `request.txt`: request line, headers (a line starting with whitespace continues the one
/// before), a blank line, the body.
struct TestRequest {
    method: String,
    path: String,
    query: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

fn parse_request(text: &str) -> TestRequest {
    let (head, body) = text.split_once("\n\n").unwrap_or((text, ""));
    let mut lines = head.lines();
    let request_line = lines.next().expect("a request line");
    let mut words = request_line.split(' ');
    let method = words.next().expect("a method").to_owned();
    // The target may hold spaces only in the left-out cases; it ends before ` HTTP/1.1`.
    let target = request_line[method.len() + 1..]
        .trim_end_matches(" HTTP/1.1")
        .to_owned();
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let mut headers: Vec<(String, String)> = Vec::new();
    for line in lines {
        if line.starts_with([' ', '\t']) {
            let last = headers.last_mut().expect("a header to continue");
            last.1.push(' ');
            last.1.push_str(line.trim());
            continue;
        }
        let (name, value) = line.split_once(':').expect("name:value");
        headers.push((name.to_owned(), value.to_owned()));
    }
    TestRequest {
        method,
        path: path.to_owned(),
        query: query.to_owned(),
        headers,
        body: body.as_bytes().to_vec(),
    }
}

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sigv4")
}

/// A file of the case without a final newline (some have one, most do not).
fn read(case: &Path, file: &str) -> Option<String> {
    let text = std::fs::read_to_string(case.join(file)).ok()?;
    Some(text.strip_suffix('\n').map(str::to_owned).unwrap_or(text))
}

/// `2015-08-30T12:36:00Z` as `20150830T123600Z`.
fn amz_date(timestamp: &str) -> AmzDate {
    let compact: String = timestamp
        .chars()
        .filter(|c| !matches!(c, '-' | ':'))
        .collect();
    AmzDate::parse(&compact).unwrap_or_else(|| panic!("timestamp {timestamp}"))
}

/// Runs one case; returns how many of its three expectations it checked.
fn run_case(case: &Path) -> usize {
    let name = case.file_name().and_then(|n| n.to_str()).unwrap_or("?");
    let context: Context =
        serde_json::from_str(&read(case, "context.json").expect("context.json")).expect(name);
    let request = parse_request(&read(case, "request.txt").expect("request.txt"));
    let date = amz_date(&context.timestamp);
    let scope = Scope {
        region: &context.region,
        service: &context.service,
    };
    let payload_hash = sha256_hex(&request.body);
    let mut headers: Vec<(&str, &str)> = request
        .headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    if !headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("x-amz-date"))
    {
        headers.push(("x-amz-date", date.as_str()));
    }
    if let Some(token) = context.credentials.token.as_deref()
        && !context.omit_session_token
    {
        headers.push(("x-amz-security-token", token));
    }
    if context.sign_body {
        headers.push(("x-amz-content-sha256", &payload_hash));
    }
    let canonical = canonical_request(
        &request.method,
        &request.path,
        &request.query,
        &headers,
        &payload_hash,
        context.normalize,
    );
    let mut checked = 0;
    let expected = read(case, "header-canonical-request.txt").expect("canonical request");
    assert_eq!(canonical.request, expected, "{name}: canonical request");
    checked += 1;
    let to_sign = string_to_sign(&date, scope, &canonical.request);
    if let Some(expected) = read(case, "header-string-to-sign.txt") {
        assert_eq!(to_sign, expected, "{name}: string to sign");
        checked += 1;
    }
    if let Some(expected) = read(case, "header-signature.txt") {
        let key = signing_key(&context.credentials.secret_access_key, &date, scope).unwrap();
        assert_eq!(
            signature(&key, &to_sign).unwrap(),
            expected.trim(),
            "{name}: signature"
        );
        checked += 1;
    }
    let _ = &context.credentials.access_key_id;
    checked
}

#[test]
fn aws_sigv4_test_suite() {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(vectors_dir())
        .expect("tests/sigv4")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.is_dir())
        .collect();
    cases.sort();
    let mut checks = 0;
    for case in &cases {
        checks += run_case(case);
    }
    assert_eq!(cases.len(), 37, "{cases:?}");
    assert_eq!(checks, 3 * 37, "every case checks its three steps");
}

#[test]
fn dates_are_utc_calendar_days() {
    assert_eq!(
        AmzDate::from_unix(1_440_938_160).as_str(),
        "20150830T123600Z"
    );
    assert_eq!(AmzDate::from_unix(0).as_str(), "19700101T000000Z");
    // A leap day's last second, and the day after the century's leap day.
    assert_eq!(
        AmzDate::from_unix(1_709_251_199).as_str(),
        "20240229T235959Z"
    );
    assert_eq!(AmzDate::from_unix(951_868_800).as_str(), "20000301T000000Z");
    assert_eq!(AmzDate::from_unix(4_102_444_800).day(), "21000101");
    assert!(AmzDate::parse("20150830T1236Z").is_none());
    let now = AmzDate::now();
    assert!(AmzDate::parse(now.as_str()).is_some(), "{now:?}");
}

#[test]
fn url_parts_are_what_the_host_header_and_path_carry() {
    assert_eq!(
        url_parts("https://Bedrock-Runtime.us-east-1.amazonaws.com:443/model/m%3A0/converse")
            .unwrap(),
        UrlParts {
            host: "bedrock-runtime.us-east-1.amazonaws.com".into(),
            path: "/model/m%3A0/converse",
            query: "",
        }
    );
    assert_eq!(
        url_parts("http://127.0.0.1:8080/model/x/invoke?a=b#frag").unwrap(),
        UrlParts {
            host: "127.0.0.1:8080".into(),
            path: "/model/x/invoke",
            query: "a=b",
        }
    );
    assert_eq!(url_parts("http://[::1]:80").unwrap().host, "[::1]");
    assert_eq!(url_parts("http://h").unwrap().path, "/");
    for bad in ["ftp://h/x", "no-scheme", "https://user@h/x", "https:///x"] {
        assert!(url_parts(bad).is_err(), "{bad}");
    }
}

/// A Converse request signed by `sign`, checked against the steps written out: the model id's
/// `%3A` canonicalized as `%253A`, the signed headers, the session token, the scope.
#[test]
fn sign_a_bedrock_request() {
    let body = br#"{"messages":[]}"#.to_vec();
    let request = Request::post(
        "https://bedrock-runtime.us-west-2.amazonaws.com/model/us.anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse",
    )
    .header("content-type", "application/json")
    .header("accept", "application/json")
    .body(body.clone());
    let credentials = Credentials {
        access_key_id: "AKIDEXAMPLE",
        secret_access_key: SECRET,
        session_token: Some("token/with+chars=="),
    };
    let scope = Scope {
        region: "us-west-2",
        service: "bedrock",
    };
    let date = AmzDate::from_unix(1_440_938_160);
    let signed = sign(request, &credentials, scope, &date).unwrap();
    assert_eq!(signed.header_value("x-amz-date"), Some("20150830T123600Z"));
    assert_eq!(
        signed.header_value("x-amz-security-token"),
        Some("token/with+chars==")
    );
    let expected_canonical = format!(
        "POST\n/model/us.anthropic.claude-3-5-sonnet-20240620-v1%253A0/converse\n\n\
         content-type:application/json\nhost:bedrock-runtime.us-west-2.amazonaws.com\n\
         x-amz-date:20150830T123600Z\nx-amz-security-token:token/with+chars==\n\n\
         content-type;host;x-amz-date;x-amz-security-token\n{}",
        sha256_hex(&body)
    );
    let to_sign = string_to_sign(&date, scope, &expected_canonical);
    assert!(
        to_sign.contains("\n20150830/us-west-2/bedrock/aws4_request\n"),
        "{to_sign}"
    );
    let key = signing_key(SECRET, &date, scope).unwrap();
    let expected = authorization(
        "AKIDEXAMPLE",
        &date,
        scope,
        "content-type;host;x-amz-date;x-amz-security-token",
        &signature(&key, &to_sign).unwrap(),
    );
    assert_eq!(
        signed.header_value("authorization"),
        Some(expected.as_str())
    );
    assert!(
        expected.starts_with(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-west-2/bedrock/aws4_request, \
             SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, Signature="
        ),
        "{expected}"
    );
    // The secret never shows in the request's debug form (its headers' values are hidden).
    assert!(!format!("{signed:?} {credentials:?}").contains(SECRET));
}
