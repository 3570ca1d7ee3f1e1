//! The golden conversation's upstream request: `plugins/golden/bedrock.json`
//! (`UPDATE_GOLDEN=1` rewrites it).

use std::path::Path;

use gateway_plugin_sdk::{Route, golden};

use crate::convert::upstream_request;
use crate::sigv4::AmzDate;

#[test]
fn the_golden_conversation_is_the_golden_request() {
    // A Bedrock API key: the body and URL are those of a SigV4-signed request.
    let route = Route {
        id: "bedrock".into(),
        base_url: "https://bedrock-runtime.us-west-2.amazonaws.com".into(),
        api_key: Some("bedrock-api-key".into()),
        settings: "{}".into(),
        secrets: Vec::new(),
    };
    let request = golden::request(route, "anthropic.claude-sonnet-4-20250514-v1:0");
    let date = AmzDate::from_unix(1_700_000_000);
    let http = upstream_request(&request, false, &date).expect("builds");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../golden/bedrock.json");
    golden::check(&file, &golden::sent(&http));
}
