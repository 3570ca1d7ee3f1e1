//! Not an area: what areas share beyond `gateway_test_support`, the helpers of the tests that
//! reach the gateway through the Commonbase API with the offline plugins (the echo example,
//! route `demo`, and the misbehaving `faulty` test plugin).

use gateway_test_support::{Gateway, text_request};
use serde_json::{Value, json};

pub(crate) fn hello(gw: &Gateway) -> Value {
    text_request(&gw.project_id, "demo", "echo", "Hello")
}

/// The record of `id` (read with the project's key) is an error with `status`.
pub(crate) fn assert_error_record(gw: &Gateway, id: &str, status: u16) -> Value {
    let response = gw.get_invocation(id);
    assert_eq!(
        response.status,
        200,
        "GET /invocations/{id}: {}",
        response.text()
    );
    let record = response.json();
    check_error_record(&record, id, status);
    record
}

pub(crate) fn check_error_record(record: &Value, id: &str, status: u16) {
    assert_eq!(record["id"], json!(id), "{record}");
    assert_eq!(record["status"], json!("error"), "{record}");
    assert_eq!(record["httpStatus"], json!(status), "{record}");
    assert!(
        record["error"].as_str().is_some_and(|e| !e.is_empty()),
        "error record without an error message: {record}"
    );
}
