//! The plugin's info.

use super::*;

#[test]
fn info_lists_models_with_list_prices() {
    let info = Gemini::info();
    assert_eq!(info.name, "gemini");
    assert_eq!(info.version, env!("CARGO_PKG_VERSION"));
    let expected = [
        ("gemini-2.5-pro", 1.25, 10.0),
        ("gemini-2.5-flash", 0.30, 2.50),
        ("gemini-2.5-flash-image", 0.30, 30.0),
        ("gemini-2.5-flash-lite", 0.10, 0.40),
        ("gemini-2.0-flash", 0.10, 0.40),
        ("gemini-2.0-flash-lite", 0.075, 0.30),
        ("text-embedding-004", 0.0, 0.0),
        ("gemini-embedding-001", 0.15, 0.0),
    ];
    let listed: Vec<(&str, f64, f64)> = info
        .models
        .iter()
        .map(|p| (p.model.as_str(), p.input_per_mtok, p.output_per_mtok))
        .collect();
    assert_eq!(listed, expected);
}
