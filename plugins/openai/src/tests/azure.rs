//! Azure OpenAI: its URLs, key header and API version.

use super::*;

fn azure_route(base_url: &str, settings: &str) -> Route {
    Route {
        id: "azure".into(),
        base_url: base_url.into(),
        api_key: Some("azure-key-0123".into()),
        settings: settings.into(),
        secrets: Vec::new(),
    }
}

#[test]
fn azure_api_version_switches_to_deployment_urls() {
    let route = azure_route(
        "https://res.openai.azure.com/",
        r#"{"azure_api_version":"2024-10-21"}"#,
    );
    let parsed = settings(&route).expect("settings");
    assert_eq!(parsed.azure_api_version.as_deref(), Some("2024-10-21"));

    let mut req = request(Prompt::Chat(vec![message(Role::User, "hi")]));
    req.route = route.clone();
    req.model = "my-gpt-5-mini".into();
    let http = completion(&req, true).expect("builds");
    assert_eq!(
        http.url(),
        "https://res.openai.azure.com/openai/deployments/my-gpt-5-mini/chat/completions?api-version=2024-10-21"
    );
    // Same body as OpenAI's, usage asked for in streams.
    let body = sent(&http);
    assert_eq!(body["model"], json!("my-gpt-5-mini"));
    assert_eq!(body["stream_options"], json!({"include_usage": true}));

    let mut text = request(Prompt::Text("Once".into()));
    text.route = azure_route(
        "https://res.openai.azure.com",
        r#"{"azure_api_version":"2024-10-21","legacy_completions":true}"#,
    );
    text.model = "instruct".into();
    assert_eq!(
        url(&text),
        "https://res.openai.azure.com/openai/deployments/instruct/completions?api-version=2024-10-21"
    );

    let embed = EmbeddingRequest {
        route: route.clone(),
        model: "embed.small_v3".into(),
        input: vec!["a".into()],
        params: "{}".into(),
    };
    assert_eq!(
        embedding(&embed).expect("builds").url(),
        "https://res.openai.azure.com/openai/deployments/embed.small_v3/embeddings?api-version=2024-10-21"
    );
}

#[test]
fn azure_base_url_may_already_end_in_openai() {
    let mut req = request(Prompt::Text("hi".into()));
    req.route = azure_route(
        "https://res.openai.azure.com/openai",
        r#"{"azure_api_version":"2025-04-01-preview"}"#,
    );
    req.model = "gpt4o".into();
    assert_eq!(
        url(&req),
        "https://res.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=2025-04-01-preview"
    );
}

#[test]
fn azure_deployment_mode_sends_the_key_in_api_key_unless_told_otherwise() {
    let mut req = request(Prompt::Text("hi".into()));
    req.route = azure_route(
        "https://res.openai.azure.com",
        r#"{"azure_api_version":"2024-10-21"}"#,
    );
    let http = completion(&req, false).expect("request");
    assert_eq!(http.header_value("api-key"), Some("azure-key-0123"));
    assert_eq!(http.header_value("authorization"), None);

    // An explicit header wins (e.g. a proxy in front of Azure with its own header).
    req.route.settings =
        r#"{"azure_api_version":"2024-10-21","api_key_header":"x-proxy-key"}"#.into();
    let http = completion(&req, false).expect("request");
    assert_eq!(http.header_value("x-proxy-key"), Some("azure-key-0123"));
    assert_eq!(http.header_value("api-key"), None);
}

#[test]
fn azure_v1_api_is_a_plain_openai_route_with_the_api_key_header() {
    let mut req = request(Prompt::Text("hi".into()));
    req.route = azure_route(
        "https://res.openai.azure.com/openai/v1",
        r#"{"api_key_header":"api-key"}"#,
    );
    req.model = "gpt-5-mini".into();
    let http = completion(&req, false).expect("request");
    assert_eq!(
        http.url(),
        "https://res.openai.azure.com/openai/v1/chat/completions"
    );
    assert_eq!(http.header_value("api-key"), Some("azure-key-0123"));
    assert_eq!(http.header_value("authorization"), None);
}

#[test]
fn azure_deployment_names_cannot_change_the_url() {
    let route = azure_route(
        "https://res.openai.azure.com",
        r#"{"azure_api_version":"2024-10-21"}"#,
    );
    for model in [
        "", ".", "..", "a/b", "../x", "a?b", "a#b", "a b", "a%2fb", "dépl",
    ] {
        let mut req = request(Prompt::Text("hi".into()));
        req.route = route.clone();
        req.model = model.into();
        let message = invalid_request(completion(&req, false));
        assert!(message.contains("deployment name"), "{model:?}: {message}");
        let embed = EmbeddingRequest {
            route: route.clone(),
            model: model.into(),
            input: vec!["a".into()],
            params: "{}".into(),
        };
        invalid_request(embedding(&embed));
    }
    // Without deployment mode the model only travels in the body, so any name goes.
    let mut req = request(Prompt::Text("hi".into()));
    req.model = "org/model:tag".into();
    completion(&req, false).expect("builds");
}

#[test]
fn azure_api_version_setting_is_checked() {
    for bad in [
        r#"{"azure_api_version":""}"#,
        r#"{"azure_api_version":"2024-10-21&x=1"}"#,
        r#"{"azure_api_version":20241021}"#,
    ] {
        let message = failed(settings(&route(bad)));
        assert!(
            message.starts_with("route `test`: setting `azure_api_version`: "),
            "{bad}: {message}"
        );
    }
    assert_eq!(
        settings(&route(r#"{"azure_api_version":null}"#))
            .expect("null is absent")
            .azure_api_version,
        None
    );
}
