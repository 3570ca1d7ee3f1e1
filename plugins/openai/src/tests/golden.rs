//! The golden conversation's upstream request: `plugins/golden/openai.json`
//! (`UPDATE_GOLDEN=1` rewrites it).

use std::path::Path;

use gateway_plugin_sdk::golden;

use super::*;

#[test]
fn the_golden_conversation_is_the_golden_request() {
    let request = golden::request(route("{}"), "gpt-5-mini");
    let http = completion(&request, false).expect("builds");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../golden/openai.json");
    golden::check(&file, &golden::sent(&http));
}
