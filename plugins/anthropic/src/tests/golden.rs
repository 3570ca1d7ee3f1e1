//! The golden conversation's upstream request: `plugins/golden/anthropic.json`
//! (`UPDATE_GOLDEN=1` rewrites it).

use std::path::Path;

use gateway_plugin_sdk::golden;

use super::*;

#[test]
fn the_golden_conversation_is_the_golden_request() {
    let request = golden::request(route("{}"), "claude-sonnet-4-20250514");
    let http = upstream_request(&request, false).expect("builds");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../golden/anthropic.json");
    golden::check(&file, &golden::sent(&http));
}
