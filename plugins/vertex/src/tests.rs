use std::cell::Cell;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use gateway_plugin_sdk::http::{Request, Response};
use gateway_plugin_sdk::{
    CompletionRequest, Embeddings, GeneratedImage, ImageRequest, Images, Prompt, Provider,
    ProviderError, Role, Route, Sink, Source, kv, read_completion, read_stream, testing,
};
use gateway_test_support::fixtures::{failed, invalid_request, message, upstream};
use rsa::pkcs1v15::{Signature, VerifyingKey};
use rsa::pkcs8::DecodePublicKey;
use rsa::sha2::Sha256;
use rsa::signature::Verifier;
use serde_json::{Value, json};

use crate::auth::{self, Credentials, ServiceAccount};
use crate::call::{self, Publisher, Settings};
use crate::embed;
use crate::{ANTHROPIC_VERSION, Call, Vertex, completion_request};

/// The test-only service account key (a throwaway RSA key made for these tests) and its public
/// key (see tests/keys/README.md).
const TEST_KEY: &str = include_str!("../../../tests/keys/vertex-test-service-account.json");
const TEST_PUBLIC_KEY: &str = include_str!("../../../tests/keys/vertex-test-public.pem");
const TEST_EMAIL: &str = "gateway-test@gateway-test-project.iam.gserviceaccount.com";

const REGIONAL: &str = "https://us-central1-aiplatform.googleapis.com";

fn route(settings: Value, secrets: &[(&str, &str)], api_key: Option<&str>) -> Route {
    Route {
        id: "vx".into(),
        base_url: REGIONAL.into(),
        api_key: api_key.map(Into::into),
        settings: settings.to_string(),
        secrets: secrets
            .iter()
            .map(|(name, value)| ((*name).into(), (*value).into()))
            .collect(),
    }
}

fn settings_json(location: &str) -> Value {
    json!({"project": "my-proj", "location": location})
}

/// A route that authenticates with an access token as its key (no token endpoint).
fn token_route() -> Route {
    route(settings_json("us-central1"), &[], Some("ya29.route-token"))
}

/// A route with the test key in `credentials_file_env`'s secret.
fn key_route() -> Route {
    let mut settings = settings_json("us-central1");
    settings["credentials_file_env"] = json!("GOOGLE_APPLICATION_CREDENTIALS");
    route(settings, &[("credentials_file", TEST_KEY)], None)
}

fn request(route: Route, model: &str) -> CompletionRequest {
    CompletionRequest {
        route,
        model: model.into(),
        prompt: Prompt::Chat(vec![
            message(Role::System, "Be brief."),
            message(Role::User, "Hi"),
        ]),
        functions: Vec::new(),
        function_choice: None,
        reasoning: None,
        output: gateway_plugin_sdk::OutputLimit::NONE,
        params: r#"{"max_tokens": 50}"#.into(),
    }
}

fn account() -> ServiceAccount {
    ServiceAccount::parse(TEST_KEY, "the test key").expect("the test key parses")
}

fn json_response(status: u16, body: &Value) -> Response {
    Response::from_chunks(
        status,
        vec![("content-type".into(), "application/json".into())],
        vec![body.to_string().into_bytes()],
    )
}

fn body_json(request: &Request) -> Value {
    serde_json::from_slice(request.body_bytes()).expect("a JSON body")
}

// ---------------------------------------------------------------------------------------------
// URLs and publishers

#[test]
fn urls_name_project_location_publisher_model_and_method() {
    let settings = Settings::of(&token_route()).unwrap();
    let url = |model: &str, method: &str| {
        call::model_url(&token_route(), &settings, model, method).unwrap()
    };
    assert_eq!(
        url("gemini-2.5-flash", "generateContent"),
        "https://us-central1-aiplatform.googleapis.com/v1/projects/my-proj/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent"
    );
    assert_eq!(
        url("claude-sonnet-4@20250514", "rawPredict"),
        "https://us-central1-aiplatform.googleapis.com/v1/projects/my-proj/locations/us-central1/publishers/anthropic/models/claude-sonnet-4@20250514:rawPredict"
    );
    // Nothing in a model name changes the URL's meaning.
    assert!(
        url("gemini?x=1#y", "predict").ends_with("/models/gemini%3Fx%3D1%23y:predict"),
        "{}",
        url("gemini?x=1#y", "predict")
    );
    let error = invalid_request(call::model_url(
        &token_route(),
        &settings,
        "publishers/google/models/x",
        "predict",
    ));
    assert!(error.contains("not a Vertex AI model id"), "{error}");
}

#[test]
fn the_global_location_has_the_global_endpoint() {
    assert_eq!(
        call::endpoint("global"),
        "https://aiplatform.googleapis.com"
    );
    assert_eq!(
        call::endpoint("europe-west4"),
        "https://europe-west4-aiplatform.googleapis.com"
    );
    let mut route = route(settings_json("global"), &[], Some("t"));
    route.base_url = "https://aiplatform.googleapis.com/".into();
    let settings = Settings::of(&route).unwrap();
    assert_eq!(
        call::model_url(
            &route,
            &settings,
            "gemini-2.5-pro",
            "streamGenerateContent?alt=sse"
        )
        .unwrap(),
        "https://aiplatform.googleapis.com/v1/projects/my-proj/locations/global/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    );
    // Without a base_url the error names the location's endpoint.
    route.base_url = String::new();
    let error = failed(call::model_url(&route, &settings, "gemini-2.5-pro", "x"));
    assert!(
        error.contains("https://aiplatform.googleapis.com"),
        "{error}"
    );
}

#[test]
fn claude_models_are_anthropics_and_the_rest_googles() {
    assert_eq!(
        Publisher::of("claude-sonnet-4@20250514"),
        Publisher::Anthropic
    );
    assert_eq!(Publisher::of("claude-3-5-haiku"), Publisher::Anthropic);
    assert_eq!(Publisher::of("gemini-2.5-flash"), Publisher::Google);
    assert_eq!(Publisher::of("text-embedding-005"), Publisher::Google);
    assert_eq!(
        Publisher::Google.completion_method(true),
        "streamGenerateContent?alt=sse"
    );
    assert_eq!(Publisher::Anthropic.completion_method(false), "rawPredict");
    assert_eq!(
        Publisher::Anthropic.completion_method(true),
        "streamRawPredict"
    );
}

#[test]
fn settings_are_checked() {
    let error = failed(Settings::of(&route(
        json!({"project": "p", "location": "l", "regoin": "x"}),
        &[],
        None,
    )));
    assert!(error.contains("regoin"), "{error}");
    let error = failed(Settings::of(&route(
        json!({"project": " ", "location": "l"}),
        &[],
        None,
    )));
    assert!(error.contains("settings.project is empty"), "{error}");
    let error = failed(Settings::of(&route(json!({"project": "p"}), &[], None)));
    assert!(error.contains("location"), "{error}");
}

// ---------------------------------------------------------------------------------------------
// Bodies: the gemini and anthropic plugins' own

#[test]
fn gemini_calls_carry_the_gemini_plugins_body() {
    let call = Call::new(token_route_ref()).unwrap();
    let request = request(token_route(), "gemini-2.5-flash");
    let (http, publisher) = completion_request(&call, &request, false).unwrap();
    assert_eq!(publisher, Publisher::Google);
    assert!(
        http.url()
            .ends_with("/publishers/google/models/gemini-2.5-flash:generateContent")
    );
    // The token is added when it is sent.
    assert_eq!(http.header_value("authorization"), None);
    assert_eq!(http.header_value("accept"), Some("application/json"));
    // Exactly what the gemini plugin sends the Gemini API.
    let gemini = gemini::completion_body(Request::post("https://x"), &request).unwrap();
    assert_eq!(body_json(&http), body_json(&gemini));
    assert_eq!(
        body_json(&http)["systemInstruction"]["parts"][0]["text"],
        "Be brief."
    );
    assert_eq!(body_json(&http)["generationConfig"]["maxOutputTokens"], 50);

    let (http, _) = completion_request(&call, &request, true).unwrap();
    assert!(http.url().ends_with(":streamGenerateContent?alt=sse"));
    assert_eq!(http.header_value("accept"), Some("text/event-stream"));
}

/// A `'static` route for [`Call::new`], which borrows it.
fn token_route_ref() -> &'static Route {
    Box::leak(Box::new(token_route()))
}

#[test]
fn claude_calls_carry_the_messages_body_without_model_with_the_vertex_version() {
    let call = Call::new(token_route_ref()).unwrap();
    let request = request(token_route(), "claude-sonnet-4@20250514");
    let (http, publisher) = completion_request(&call, &request, false).unwrap();
    assert_eq!(publisher, Publisher::Anthropic);
    assert!(
        http.url()
            .ends_with("/publishers/anthropic/models/claude-sonnet-4@20250514:rawPredict")
    );
    // The token is added when it is sent.
    assert_eq!(http.header_value("authorization"), None);
    assert_eq!(http.header_value("anthropic-version"), None);
    assert_eq!(http.header_value("x-api-key"), None);
    let body = body_json(&http);
    assert_eq!(body.get("model"), None);
    assert_eq!(body["anthropic_version"], ANTHROPIC_VERSION);
    assert_eq!(body["system"], "Be brief.");
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "Hi"}]}])
    );
    assert_eq!(body["max_tokens"], 50);
    assert_eq!(body.get("stream"), None);

    let (http, _) = completion_request(&call, &request, true).unwrap();
    assert!(http.url().ends_with(":streamRawPredict"));
    assert_eq!(body_json(&http)["stream"], true);
}

#[test]
fn claudes_default_max_tokens_is_a_route_setting() {
    let mut settings = settings_json("us-central1");
    settings["default_max_tokens"] = json!(1000);
    let route: &'static Route = Box::leak(Box::new(route(settings, &[], Some("t"))));
    let call = Call::new(route).unwrap();
    let mut request = request(route.clone(), "claude-3-5-haiku@20241022");
    request.params = "{}".into();
    let (http, _) = completion_request(&call, &request, false).unwrap();
    assert_eq!(body_json(&http)["max_tokens"], 1000);
}

#[test]
fn answers_are_read_by_the_plugins_decoders() {
    let gemini_answer = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Hello"}]},
        "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1,
        "totalTokenCount": 4}, "modelVersion": "gemini-2.5-flash"});
    let completion = read_completion(
        json_response(200, &gemini_answer),
        "gemini-2.5-flash",
        gemini::Decoder::default(),
    )
    .unwrap();
    assert_eq!(completion.choices[0].text, "Hello");
    assert_eq!(completion.usage.unwrap().total_tokens, 4);

    let events = [
        r#"{"type":"message_start","message":{"id":"msg_vrtx_1","type":"message","role":"assistant","model":"claude-sonnet-4-20250514","content":[],"stop_reason":null,"usage":{"input_tokens":9,"output_tokens":1}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi there"}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}"#,
        r#"{"type":"message_stop"}"#,
    ];
    let stream: Vec<Vec<u8>> = events
        .iter()
        .map(|data| {
            let name = serde_json::from_str::<Value>(data).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned();
            format!("event: {name}\ndata: {data}\n\n").into_bytes()
        })
        .collect();
    let response = Response::from_chunks(
        200,
        vec![("content-type".into(), "text/event-stream".into())],
        stream,
    );
    let mut sink = Sink::buffered();
    let completion = read_stream(
        response,
        &mut sink,
        "claude-sonnet-4@20250514",
        anthropic::Decoder::default(),
    )
    .unwrap();
    assert_eq!(completion.choices[0].text, "Hi there");
    assert_eq!(completion.usage.unwrap().prompt_tokens, 9);
}

// ---------------------------------------------------------------------------------------------
// Credentials

#[test]
fn credentials_come_from_the_secret_the_settings_name() {
    let from_file = key_route();
    let settings = Settings::of(&from_file).unwrap();
    match auth::credentials(&from_file, &settings).unwrap() {
        Credentials::ServiceAccount(account) => {
            assert_eq!(account.client_email, TEST_EMAIL);
            assert_eq!(account.token_uri(), "https://oauth2.googleapis.com/token");
        }
        other => panic!("{other:?}"),
    }

    let mut settings = settings_json("us-central1");
    settings["credentials_env"] = json!("VERTEX_KEY_JSON");
    let from_env = route(settings, &[("credentials", TEST_KEY)], Some("ignored"));
    let settings = Settings::of(&from_env).unwrap();
    assert!(matches!(
        auth::credentials(&from_env, &settings).unwrap(),
        Credentials::ServiceAccount(_)
    ));

    let tokened = token_route();
    let settings = Settings::of(&tokened).unwrap();
    assert!(matches!(
        auth::credentials(&tokened, &settings).unwrap(),
        Credentials::Token("ya29.route-token")
    ));
}

#[test]
fn missing_or_wrong_credentials_are_named_without_their_content() {
    let mut settings = settings_json("us-central1");
    settings["credentials_file_env"] = json!("GOOGLE_APPLICATION_CREDENTIALS");
    let unset = route(settings.clone(), &[], Some("token"));
    let error = failed(auth::credentials(&unset, &Settings::of(&unset).unwrap()));
    assert!(
        error.contains("credentials_file_env names GOOGLE_APPLICATION_CREDENTIALS"),
        "{error}"
    );

    settings["credentials_env"] = json!("KEY");
    let both = route(settings, &[("credentials", TEST_KEY)], None);
    let error = failed(auth::credentials(&both, &Settings::of(&both).unwrap()));
    assert!(error.contains("not both"), "{error}");

    let none = route(settings_json("us-central1"), &[], None);
    let error = failed(auth::credentials(&none, &Settings::of(&none).unwrap()));
    assert!(error.contains("has no credentials"), "{error}");

    let mut settings = settings_json("us-central1");
    settings["credentials_env"] = json!("KEY");
    let secret_text =
        r#"{"type": "authorized_user", "client_id": "x", "refresh_token": "1//secret-refresh"}"#;
    let user = route(settings.clone(), &[("credentials", secret_text)], None);
    let error = failed(auth::credentials(&user, &Settings::of(&user).unwrap()));
    assert!(error.contains("authorized_user"), "{error}");
    assert!(!error.contains("secret-refresh"), "{error}");

    let garbage = route(settings, &[("credentials", "not json: hunter2")], None);
    let error = failed(auth::credentials(
        &garbage,
        &Settings::of(&garbage).unwrap(),
    ));
    assert!(
        error.contains("is not a service account's JSON key"),
        "{error}"
    );
    assert!(!error.contains("hunter2"), "{error}");

    let debug = format!("{:?}", account());
    assert!(!debug.contains("PRIVATE KEY"), "{debug}");
}

// ---------------------------------------------------------------------------------------------
// The JWT

#[test]
fn the_assertion_is_an_rs256_jwt_the_public_key_verifies() {
    let jwt = account().assertion(1_700_000_000).unwrap();
    let segments: Vec<&str> = jwt.split('.').collect();
    assert_eq!(segments.len(), 3, "{jwt}");
    let decode = |segment: &str| -> Value {
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(segment).unwrap()).unwrap()
    };
    assert_eq!(
        decode(segments[0]),
        json!({"alg": "RS256", "typ": "JWT", "kid": "0000000000000000000000000000000000test"})
    );
    assert_eq!(
        decode(segments[1]),
        json!({
            "iss": TEST_EMAIL,
            "scope": "https://www.googleapis.com/auth/cloud-platform",
            "aud": "https://oauth2.googleapis.com/token",
            "iat": 1_700_000_000u64,
            "exp": 1_700_003_600u64,
        })
    );
    let key = VerifyingKey::<Sha256>::from_public_key_pem(TEST_PUBLIC_KEY).unwrap();
    let signature =
        Signature::try_from(URL_SAFE_NO_PAD.decode(segments[2]).unwrap().as_slice()).unwrap();
    let signed = format!("{}.{}", segments[0], segments[1]);
    key.verify(signed.as_bytes(), &signature)
        .expect("the test key's public key verifies the signature");
    // Any other content fails.
    let forged = format!("{}.{}x", segments[0], segments[1]);
    assert!(key.verify(forged.as_bytes(), &signature).is_err());
}

#[test]
fn the_token_request_is_the_jwt_bearer_grant() {
    let account = account();
    let request = account.token_request("aaa.bbb.ccc");
    assert_eq!(request.method(), "POST");
    assert_eq!(request.url(), "https://oauth2.googleapis.com/token");
    assert_eq!(
        request.header_value("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    assert_eq!(
        std::str::from_utf8(request.body_bytes()).unwrap(),
        "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=aaa.bbb.ccc"
    );
}

#[test]
fn a_key_that_is_not_rsa_pem_fails_without_showing_it() {
    let mut key: Value = serde_json::from_str(TEST_KEY).unwrap();
    key["private_key"] =
        json!("-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWJ5dGVz\n-----END PRIVATE KEY-----\n");
    let account = ServiceAccount::parse(&key.to_string(), "k").unwrap();
    let error = failed(account.assertion(1));
    assert!(error.contains("not an RSA key in PEM"), "{error}");
    assert!(!error.contains("c2VjcmV0"), "{error}");
}

// ---------------------------------------------------------------------------------------------
// Minting and keeping tokens

/// A token endpoint answering `answer`, counting its calls and checking each assertion.
fn endpoint(
    answer: Value,
    status: u16,
    calls: &Cell<u32>,
) -> impl FnOnce(Request) -> Result<Response, ProviderError> + '_ {
    move |request: Request| {
        calls.set(calls.get() + 1);
        let form = std::str::from_utf8(request.body_bytes())
            .unwrap()
            .to_owned();
        let assertion = form.split("assertion=").nth(1).unwrap();
        assert_eq!(assertion.split('.').count(), 3);
        Ok(json_response(status, &answer))
    }
}

fn key_credentials(route: &Route) -> Credentials<'_> {
    auth::credentials(route, &Settings::of(route).unwrap()).unwrap()
}

#[test]
fn one_token_serves_until_shortly_before_it_expires() {
    kv::clear();
    let route = key_route();
    let credentials = key_credentials(&route);
    let calls = Cell::new(0);
    let answer =
        json!({"access_token": "ya29.minted-1", "expires_in": 3599, "token_type": "Bearer"});
    for _ in 0..20 {
        let token = auth::access_token(&route, &credentials, endpoint(answer.clone(), 200, &calls))
            .unwrap();
        assert_eq!(token, "ya29.minted-1");
    }
    assert_eq!(calls.get(), 1, "twenty calls, one token");
    // Declared secret once, for as long as it is kept and the SDK's grace: the gateway
    // redacts it from whatever the upstream echoes.
    let lifetime = Duration::from_secs(3599) - auth::EXPIRY_MARGIN + kv::SECRET_GRACE;
    assert_eq!(
        kv::declared_secrets(),
        [("ya29.minted-1".to_owned(), lifetime.as_millis() as u64)]
    );

    // Kept under the account's email: another account mints its own.
    let mut other: Value = serde_json::from_str(TEST_KEY).unwrap();
    other["client_email"] = json!("other@gateway-test-project.iam.gserviceaccount.com");
    let mut settings = settings_json("us-central1");
    settings["credentials_env"] = json!("OTHER_KEY");
    let other_route = route_with_key(settings, &other.to_string());
    let other_credentials = key_credentials(&other_route);
    let other_answer = json!({"access_token": "ya29.other", "expires_in": 3599});
    let token = auth::access_token(
        &other_route,
        &other_credentials,
        endpoint(other_answer, 200, &calls),
    )
    .unwrap();
    assert_eq!(token, "ya29.other");
    assert_eq!(calls.get(), 2);
    let token =
        auth::access_token(&route, &credentials, endpoint(answer.clone(), 200, &calls)).unwrap();
    assert_eq!(token, "ya29.minted-1");
    assert_eq!(calls.get(), 2);

    // Forgotten (the model endpoint refused it): minted again.
    auth::forget(&credentials);
    auth::access_token(&route, &credentials, endpoint(answer, 200, &calls)).unwrap();
    assert_eq!(calls.get(), 3);
}

fn route_with_key(settings: Value, key: &str) -> Route {
    route(settings, &[("credentials", key)], None)
}

#[test]
fn a_token_is_kept_five_minutes_less_than_it_lives() {
    kv::clear();
    let route = key_route();
    let credentials = key_credentials(&route);
    let calls = Cell::new(0);
    // 301 s: kept for one second.
    let answer = json!({"access_token": "ya29.short", "expires_in": 301});
    auth::access_token(&route, &credentials, endpoint(answer.clone(), 200, &calls)).unwrap();
    auth::access_token(&route, &credentials, endpoint(answer.clone(), 200, &calls)).unwrap();
    assert_eq!(calls.get(), 1);
    std::thread::sleep(Duration::from_millis(1100));
    auth::access_token(&route, &credentials, endpoint(answer, 200, &calls)).unwrap();
    assert_eq!(calls.get(), 2, "expired: minted again");

    // Shorter than the margin: never kept (never a negative lifetime).
    let answer = json!({"access_token": "ya29.brief", "expires_in": 60});
    kv::clear();
    for _ in 0..2 {
        auth::access_token(&route, &credentials, endpoint(answer.clone(), 200, &calls)).unwrap();
    }
    assert_eq!(calls.get(), 4);
}

#[test]
fn token_endpoint_refusals_are_failures_naming_its_error_not_the_key() {
    kv::clear();
    let route = key_route();
    let credentials = key_credentials(&route);
    let calls = Cell::new(0);
    let refusal = json!({"error": "invalid_grant", "error_description": "Invalid JWT Signature."});
    let error = failed(auth::access_token(
        &route,
        &credentials,
        endpoint(refusal, 400, &calls),
    ));
    assert!(
        error.contains("https://oauth2.googleapis.com/token"),
        "{error}"
    );
    assert!(
        error.contains("invalid_grant: Invalid JWT Signature."),
        "{error}"
    );
    assert!(error.contains("HTTP 400"), "{error}");
    assert!(!error.contains("PRIVATE KEY"), "{error}");
    // Nothing was kept: the next call tries again.
    let answer = json!({"access_token": "ya29.after", "expires_in": 3599});
    let token = auth::access_token(&route, &credentials, endpoint(answer, 200, &calls)).unwrap();
    assert_eq!(token, "ya29.after");

    kv::clear();
    let error = failed(auth::access_token(
        &route,
        &credentials,
        endpoint(json!({"token_type": "Bearer"}), 200, &calls),
    ));
    assert!(error.contains("without an access_token"), "{error}");

    kv::clear();
    let error = failed(auth::access_token(&route, &credentials, |_| {
        Err(ProviderError::Failed(
            "host oauth2.googleapis.com is not allowed".into(),
        ))
    }));
    assert!(error.contains("could not be reached"), "{error}");
    assert!(error.contains("is not allowed"), "{error}");
}

// ---------------------------------------------------------------------------------------------
// Embeddings

#[test]
fn predict_bodies_take_one_instance_per_input() {
    let inputs = vec!["a".to_owned(), "bb".to_owned()];
    let body = embed::predict_body(
        &inputs,
        r#"{"dimensions": 256, "task_type": "RETRIEVAL_QUERY", "user": "u1", "encoding_format": "float", "autoTruncate": false, "title": null}"#,
    )
    .unwrap();
    assert_eq!(
        body,
        json!({
            "instances": [
                {"content": "a", "task_type": "RETRIEVAL_QUERY"},
                {"content": "bb", "task_type": "RETRIEVAL_QUERY"},
            ],
            "parameters": {"outputDimensionality": 256, "autoTruncate": false},
        })
    );
    assert_eq!(
        embed::predict_body(&inputs, "{}").unwrap(),
        json!({"instances": [{"content": "a"}, {"content": "bb"}]})
    );
    assert_eq!(embed::batch_size("gemini-embedding-001"), 1);
    assert_eq!(embed::batch_size("text-embedding-005"), 250);
}

#[test]
fn predictions_are_vectors_and_token_counts() {
    let mut embeddings = Embeddings {
        model: "text-embedding-005".into(),
        vectors: Vec::new(),
        usage: None,
    };
    let answer = json!({"predictions": [
        {"embeddings": {"values": [0.5, -1.0], "statistics": {"token_count": 3.0, "truncated": false}}},
        {"embeddings": {"values": [1.5, 2.0], "statistics": {"token_count": 4, "truncated": false}}},
    ], "metadata": {"billableCharacterCount": 9}});
    embed::read_predictions(answer.to_string().as_bytes(), 2, &mut embeddings).unwrap();
    embed::read_predictions(answer.to_string().as_bytes(), 2, &mut embeddings).unwrap();
    assert_eq!(embeddings.vectors.len(), 4);
    assert_eq!(embeddings.vectors[1], vec![1.5, 2.0]);
    let usage = embeddings.usage.unwrap();
    assert_eq!((usage.prompt_tokens, usage.total_tokens), (14, 14));

    let mut empty = Embeddings {
        model: String::new(),
        vectors: Vec::new(),
        usage: None,
    };
    let error = failed(embed::read_predictions(
        answer.to_string().as_bytes(),
        3,
        &mut empty,
    ));
    assert!(error.contains("2 predictions for 3 inputs"), "{error}");
}

#[test]
fn claude_has_no_embeddings() {
    let error = invalid_request(Vertex::embed(gateway_plugin_sdk::EmbeddingRequest {
        route: token_route(),
        model: "claude-sonnet-4@20250514".into(),
        input: vec!["x".into()],
        params: "{}".into(),
    }));
    assert!(error.contains("Google's models only"), "{error}");
}

// ---------------------------------------------------------------------------------------------
// Images (Imagen's `predict` and Gemini's image models' `generateContent`, the gemini plugin's
// bodies and reading)

const IMAGEN: &str = "imagen-4.0-generate-001";

fn image_request(model: &str, size: Option<&str>, params: &str) -> ImageRequest {
    ImageRequest {
        route: token_route(),
        model: model.into(),
        prompt: "a lighthouse at dusk".into(),
        n: 2,
        size: size.map(Into::into),
        quality: None,
        params: params.into(),
    }
}

/// Runs the plugin's `generate_images` of `request`, `status` and `body` answering every
/// request.
fn generate(
    request: ImageRequest,
    status: u16,
    body: Value,
) -> (Result<Images, ProviderError>, Vec<Request>) {
    testing::generate_images::<Vertex>(request, move |_| testing::json(status, &body))
}

fn image_answer(images: &[&[u8]]) -> Value {
    let predictions: Vec<Value> = images
        .iter()
        .map(|bytes| json!({"bytesBase64Encoded": STANDARD.encode(bytes), "mimeType": "image/png"}))
        .collect();
    json!({ "predictions": predictions })
}

#[test]
fn imagen_is_asked_with_predict_on_the_google_publisher() {
    let (result, sent) = generate(
        image_request(
            IMAGEN,
            Some("2048x2048"),
            r#"{"negative_prompt": "people", "seed": 7, "enhance_prompt": false,
                "add_watermark": false, "person_generation": "dont_allow",
                "labels": {"team": "art"}, "user": "u-1", "response_format": "b64_json"}"#,
        ),
        200,
        image_answer(&[b"one", b"two"]),
    );
    let [sent] = sent.as_slice() else {
        panic!("one request: {sent:?}")
    };
    assert_eq!(sent.method(), "POST");
    assert_eq!(
        sent.url(),
        "https://us-central1-aiplatform.googleapis.com/v1/projects/my-proj/locations/us-central1/publishers/google/models/imagen-4.0-generate-001:predict"
    );
    assert_eq!(
        sent.header_value("authorization"),
        Some("Bearer ya29.route-token")
    );
    assert_eq!(
        body_json(sent),
        json!({
            "instances": [{"prompt": "a lighthouse at dusk"}],
            "parameters": {
                "sampleCount": 2,
                "aspectRatio": "1:1",
                "sampleImageSize": "2K",
                "negativePrompt": "people",
                "seed": 7,
                "enhancePrompt": false,
                "addWatermark": false,
                "personGeneration": "dont_allow",
                "includeRaiReason": true,
            },
            "labels": {"team": "art"},
        })
    );
    let images = result.unwrap();
    assert_eq!(images.model, IMAGEN);
    assert_eq!(images.size.as_deref(), Some("2048x2048"));
    assert_eq!(images.usage, None);
    assert_eq!(
        images.images,
        vec![
            GeneratedImage {
                source: Source::Bytes(b"one".to_vec()),
                media_type: Some("image/png".into()),
                revised_prompt: None,
            },
            GeneratedImage {
                source: Source::Bytes(b"two".to_vec()),
                media_type: Some("image/png".into()),
                revised_prompt: None,
            },
        ]
    );
}

#[test]
fn images_are_refused_before_anything_is_sent() {
    for model in ["claude-sonnet-4@20250514", "gemini-2.5-flash"] {
        let (result, sent) = generate(image_request(model, None, "{}"), 200, image_answer(&[]));
        let error = invalid_request(result);
        assert_eq!(
            error,
            format!(
                "{model} is not an image model: the vertex plugin makes images with Imagen \
                 models (e.g. imagen-4.0-generate-001) and Gemini's image models (e.g. \
                 gemini-2.5-flash-image)"
            )
        );
        assert!(sent.is_empty());
    }
    // Gemini's image models make one image a request.
    let (result, sent) = generate(
        image_request(GEMINI_IMAGE, None, "{}"),
        200,
        image_answer(&[]),
    );
    assert!(invalid_request(result).contains("n is 2, but gemini-2.5-flash-image makes one image"));
    assert!(sent.is_empty());
    let mut request = image_request(IMAGEN, Some("1000x500"), "{}");
    let (result, sent) = generate(request.clone(), 200, image_answer(&[]));
    assert!(invalid_request(result).starts_with("route `vx`: size \"1000x500\""));
    assert!(sent.is_empty());
    request.size = None;
    request.n = 5;
    let (result, sent) = generate(request, 200, image_answer(&[]));
    assert!(invalid_request(result).contains("n is 5, but Imagen makes 1 to 4 images"));
    assert!(sent.is_empty());
}

#[test]
fn image_answers_without_images_or_with_errors_fail() {
    let reason = "Your current safety filter threshold filtered out 2 generated images.";
    let (result, _) = generate(
        image_request(IMAGEN, None, "{}"),
        200,
        json!({"predictions": [{"raiFilteredReason": reason}]}),
    );
    let error = upstream(result);
    assert_eq!(error.status, 400);
    assert!(error.message.contains(reason), "{}", error.message);

    let (result, _) = generate(
        image_request(IMAGEN, None, "{}"),
        503,
        json!({"error": {"code": 503, "message": "The service is currently unavailable.",
            "status": "UNAVAILABLE"}}),
    );
    assert_eq!(upstream(result).status, 503);

    let (result, _) = generate(
        image_request(IMAGEN, None, "{}"),
        200,
        json!({"predictions": [{"bytesBase64Encoded": "@@@", "mimeType": "image/png"}]}),
    );
    assert!(failed(result).contains("bytesBase64Encoded"));
}

const GEMINI_IMAGE: &str = "gemini-2.5-flash-image";

/// Gemini's answer holding `image` (a PNG's bytes), with its usage.
fn gemini_image_answer(image: &[u8]) -> Value {
    json!({
        "candidates": [{"content": {"role": "model", "parts": [
            {"inlineData": {"mimeType": "image/png", "data": STANDARD.encode(image)}}]},
            "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 1290,
                          "totalTokenCount": 1295},
        "modelVersion": GEMINI_IMAGE,
    })
}

#[test]
fn gemini_image_models_are_asked_with_generate_content_on_the_google_publisher() {
    let mut request = image_request(
        GEMINI_IMAGE,
        Some("1344x768"),
        r#"{"person_generation": "ALLOW_ADULT", "output_format": "jpeg", "output_compression": 80,
            "seed": 7, "labels": {"team": "art"}, "user": "u-1"}"#,
    );
    request.n = 1;
    let (result, sent) = generate(request, 200, gemini_image_answer(b"one"));
    let [sent] = sent.as_slice() else {
        panic!("one request: {sent:?}")
    };
    assert_eq!(
        sent.url(),
        "https://us-central1-aiplatform.googleapis.com/v1/projects/my-proj/locations/us-central1/publishers/google/models/gemini-2.5-flash-image:generateContent"
    );
    assert_eq!(
        sent.header_value("authorization"),
        Some("Bearer ya29.route-token")
    );
    assert_eq!(
        body_json(sent),
        json!({
            "contents": [{"role": "user", "parts": [{"text": "a lighthouse at dusk"}]}],
            "generationConfig": {
                "responseModalities": ["IMAGE"],
                "imageConfig": {
                    "aspectRatio": "16:9",
                    "personGeneration": "ALLOW_ADULT",
                    "imageOutputOptions": {"mimeType": "image/jpeg", "compressionQuality": 80},
                },
                "seed": 7,
            },
            "labels": {"team": "art"},
        })
    );
    let images = result.unwrap();
    assert_eq!(images.model, GEMINI_IMAGE);
    assert_eq!(images.size.as_deref(), Some("1344x768"));
    let usage = images.usage.expect("billed by tokens");
    assert_eq!(
        (
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.total_tokens
        ),
        (5, 1290, 1295)
    );
    assert_eq!(
        images.images,
        vec![GeneratedImage {
            source: Source::Bytes(b"one".to_vec()),
            media_type: Some("image/png".into()),
            revised_prompt: None,
        }]
    );

    // A filtered image: Google's refusal, a 400 with its reason.
    let mut request = image_request(GEMINI_IMAGE, None, "{}");
    request.n = 1;
    let (result, _) = generate(
        request,
        200,
        json!({"candidates": [{"finishReason": "IMAGE_SAFETY", "index": 0}]}),
    );
    let error = upstream(result);
    assert_eq!(error.status, 400);
    assert_eq!(
        error.message,
        "gemini-2.5-flash-image made no image (IMAGE_SAFETY)"
    );
}

#[test]
fn info_lists_gemini_claude_and_embedding_models() {
    let info = Vertex::info();
    assert_eq!(info.name, "vertex");
    for model in [
        "gemini-2.5-flash",
        "claude-sonnet-4@20250514",
        "claude-sonnet-4-5",
        "text-embedding-005",
    ] {
        assert!(
            info.models.iter().any(|m| m.model == model),
            "{model} missing"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The golden conversation's upstream requests: `plugins/golden/vertex-gemini.json` and
// `vertex-anthropic.json` (`UPDATE_GOLDEN=1` rewrites them)

fn golden_request(model: &str, file: &str) {
    let call = Call::new(token_route_ref()).unwrap();
    let request = gateway_plugin_sdk::golden::request(token_route(), model);
    let (http, _) = completion_request(&call, &request, false).unwrap();
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    gateway_plugin_sdk::golden::check(&file, &gateway_plugin_sdk::golden::sent(&http));
}

#[test]
fn the_golden_conversation_is_the_golden_request_to_gemini() {
    golden_request("gemini-2.5-flash", "../golden/vertex-gemini.json");
}

#[test]
fn the_golden_conversation_is_the_golden_request_to_claude() {
    golden_request(
        "claude-sonnet-4@20250514",
        "../golden/vertex-anthropic.json",
    );
}
