//! The plugin's info, and the embeddings it does not offer.

use super::*;

#[test]
fn info_lists_models_with_list_prices() {
    let info = Anthropic::info();
    assert_eq!(info.name, "anthropic");
    assert_eq!(info.version, env!("CARGO_PKG_VERSION"));
    let expected = [
        ("claude-opus-4-1", 15.0, 75.0),
        ("claude-opus-4", 15.0, 75.0),
        ("claude-sonnet-4-5", 3.0, 15.0),
        ("claude-sonnet-4", 3.0, 15.0),
        ("claude-3-7-sonnet", 3.0, 15.0),
        ("claude-haiku-4-5", 1.0, 5.0),
        ("claude-3-5-haiku", 0.8, 4.0),
        ("claude-3-haiku", 0.25, 1.25),
    ];
    assert_eq!(info.models.len(), expected.len());
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
}

#[test]
fn embeddings_are_not_offered() {
    let result = Anthropic::embed(EmbeddingRequest {
        route: route("{}"),
        model: "claude-sonnet-4-5".into(),
        input: vec!["x".into()],
        params: "{}".into(),
    });
    let message = invalid_request(result);
    assert!(message.contains("anthropic"), "{message}");
}
