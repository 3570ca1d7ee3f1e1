//! The plugin's info.

use super::*;

#[test]
fn info_lists_models_with_list_prices() {
    let info = OpenAi::info();
    assert_eq!(info.name, "openai");
    assert_eq!(info.version, env!("CARGO_PKG_VERSION"));
    let expected = [
        ("gpt-4o-mini", 0.15, 0.60),
        ("gpt-4o", 2.50, 10.00),
        ("gpt-4.1", 2.00, 8.00),
        ("gpt-4.1-mini", 0.40, 1.60),
        ("gpt-4.1-nano", 0.10, 0.40),
        ("o4-mini", 1.10, 4.40),
        ("gpt-5", 1.25, 10.00),
        ("gpt-5-mini", 0.25, 2.00),
        ("gpt-5-nano", 0.05, 0.40),
        ("text-embedding-3-small", 0.02, 0.0),
        ("text-embedding-3-large", 0.13, 0.0),
        ("text-embedding-ada-002", 0.10, 0.0),
    ];
    for (model, input, output) in expected {
        let price = info
            .models
            .iter()
            .find(|p| p.model == model)
            .unwrap_or_else(|| panic!("{model} missing"));
        assert_eq!(
            (price.input_per_mtok, price.output_per_mtok),
            (input, output)
        );
    }
    let mut names: Vec<&str> = info.models.iter().map(|p| p.model.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), info.models.len(), "duplicate model names");
}
