//! `GET /v1/models` and `GET /v1/models/{id}`: the config's routes and models, those of the
//! key's scope only.

use super::*;

#[test]
fn models_list_and_retrieve() {
    let upstream = Upstream::OpenAi(OpenAiUpstream::start());
    let var = unique("OPENAI_SURFACE_KEY_");
    let gw = Gateway::builder()
        .route(route_for(OpenAi, &upstream.base_url(), &var))
        .route(Route::echo("demo"))
        .env(&var, PROVIDER_KEY)
        .config_line("[models.fast]\nroute = \"demo\"")
        .start();

    let response = gw.request(
        "GET",
        "/v1/models",
        None,
        &[("Authorization", &bearer(&gw))],
        b"",
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let body = response.json();
    assert_eq!(body["object"], json!("list"));
    let data = body["data"].as_array().expect("data");
    let entry = |id: &str| data.iter().find(|m| m["id"] == json!(id)).cloned();
    assert_eq!(
        entry("fast"),
        Some(json!({"id": "fast", "object": "model", "created": 0, "owned_by": "demo"}))
    );
    assert_eq!(
        entry("oai/gpt-4o-mini").map(|m| m["owned_by"].clone()),
        Some(json!("oai"))
    );
    assert_eq!(
        entry("demo/echo").map(|m| m["owned_by"].clone()),
        Some(json!("demo"))
    );
    let mut ids: Vec<&str> = data.iter().filter_map(|m| m["id"].as_str()).collect();
    let count = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), count, "each name once: {body}");
    // Every model the openai plugin knows, under its route.
    assert!(
        data.iter()
            .filter(|m| m["owned_by"] == json!("oai"))
            .count()
            > 1,
        "{body}"
    );

    let one = gw.request(
        "GET",
        "/v1/models/oai%2Fgpt-4o-mini",
        None,
        &[("x-api-key", &gw.key)],
        b"",
    );
    assert_eq!(one.status, 200, "{}", one.text());
    assert_eq!(one.json()["id"], json!("oai/gpt-4o-mini"));
    let none = gw.request(
        "GET",
        "/v1/models/nope",
        None,
        &[("Authorization", &bearer(&gw))],
        b"",
    );
    assert_openai_error(
        &none,
        404,
        "invalid_request_error",
        Some("model"),
        Some("model_not_found"),
        "nope",
    );
    let anonymous = gw.request("GET", "/v1/models", None, &[], b"");
    assert_openai_error(
        &anonymous,
        401,
        "authentication_error",
        None,
        Some("invalid_api_key"),
        "key",
    );
    let posted = gw.request(
        "POST",
        "/v1/models",
        None,
        &[("Authorization", &bearer(&gw))],
        b"{}",
    );
    assert_openai_error(&posted, 405, "invalid_request_error", None, None, "GET");
    assert_eq!(posted.header("allow"), Some("GET"));
}

/// A key scoped to some routes or models lists only what it may use, and a name outside its
/// scope answers 404 as an unknown one does.
#[test]
fn models_are_those_of_the_keys_scope() {
    let gw = Gateway::builder()
        .route(
            Route::new("oai", "openai")
                .base_url("http://127.0.0.1:9/v1")
                .default_model("gpt-4o-mini"),
        )
        .route(Route::echo("demo"))
        .config_line("[models.fast]\nroute = \"demo\"")
        .config_line("[models.smart]\nroute = \"oai\"\nmodel = \"gpt-4o-mini\"")
        .start();
    let key = |flags: &[&str]| {
        let mut args = vec!["key", "create", gw.project_id.as_str()];
        args.extend_from_slice(flags);
        gw.cli(&args).checked(&args.join(" ")).last_line()
    };
    let get = |key: &str, path: &str| {
        gw.request(
            "GET",
            path,
            None,
            &[("Authorization", &format!("Bearer {key}"))],
            b"",
        )
    };
    let ids = |key: &str| -> Vec<String> {
        let listed = get(key, "/v1/models");
        assert_eq!(listed.status, 200, "{}", listed.text());
        let body = listed.json();
        body["data"]
            .as_array()
            .unwrap_or_else(|| panic!("no data: {body}"))
            .iter()
            .map(|m| m["id"].as_str().expect("an id").to_owned())
            .collect()
    };
    let unknown = |key: &str, path: &str, name: &str| {
        assert_openai_error(
            &get(key, path),
            404,
            "invalid_request_error",
            Some("model"),
            Some("model_not_found"),
            name,
        );
    };

    let everything = ids(&gw.key);
    assert!(
        everything.iter().any(|id| id.starts_with("oai/"))
            && everything.iter().any(|id| id.starts_with("demo/")),
        "an unscoped key sees every route: {everything:?}"
    );

    let demo = key(&["--routes", "demo"]);
    let listed = ids(&demo);
    assert!(listed.contains(&"fast".to_owned()), "{listed:?}");
    assert!(listed.contains(&"demo/echo".to_owned()), "{listed:?}");
    assert!(
        listed
            .iter()
            .all(|id| id == "fast" || id.starts_with("demo/")),
        "names outside --routes demo: {listed:?}"
    );
    assert_eq!(get(&demo, "/v1/models/demo%2Fecho").status, 200);
    unknown(&demo, "/v1/models/oai%2Fgpt-4o-mini", "oai/gpt-4o-mini");
    unknown(&demo, "/v1/models/smart", "smart");

    let one = key(&["--models", "oai/gpt-4o-mini"]);
    assert_eq!(ids(&one), ["smart", "oai/gpt-4o-mini"]);
    assert_eq!(get(&one, "/v1/models/smart").status, 200);
    unknown(&one, "/v1/models/fast", "fast");
    unknown(&one, "/v1/models/demo%2Fecho", "demo/echo");
}
