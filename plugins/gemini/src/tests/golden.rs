//! The golden conversation's upstream request: `plugins/golden/gemini.json`
//! (`UPDATE_GOLDEN=1` rewrites it).

use std::path::Path;

use gateway_plugin_sdk::golden;

use super::*;

#[test]
fn the_golden_conversation_is_the_golden_request() {
    let request = golden::request(route(), "gemini-2.5-flash");
    let http = completion_call(&request, false).expect("builds");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../golden/gemini.json");
    golden::check(&file, &golden::sent(&http));
}
