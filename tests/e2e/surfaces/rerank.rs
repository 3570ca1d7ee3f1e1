//! `POST /v1/rerank` (and `/v2/rerank`): the rerank API over the openai plugin's rerank servers
//! (Cohere's v2, Jina's and vLLM's, Voyage's, text-embeddings-inference's: the fake is as strict
//! as each about the keys its body may hold), answered in one shape that Cohere's and Jina's
//! clients both read, recorded (type `rerank`) with the tokens a provider counted, priced.
//! Bedrock's rerank models are in `providers::bedrock`; the official Cohere client in
//! `tests/clients/test_cohere.py`.

use gateway_test_support::upstream::{fake_relevance, rerank_tokens};
use gateway_test_support::{Gateway, OpenAiUpstream, Response, Route};
use serde_json::{Value, json};

/// The caller's provider key (`Provider-API-Key`).
const PROVIDER_KEY: &str = "rerank-caller-key-0123456789";
/// Dollars per million tokens read, on every route.
const PRICE: f64 = 0.02;

const QUERY: &str = "capital of France";

fn documents() -> Vec<String> {
    [
        "Berlin is in Germany",
        "Paris is the capital of France",
        "the capital of Spain is Madrid",
        "France grows wine",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// The indexes of [`documents`], the most relevant to [`QUERY`] first: 1, 2, 3, 0.
fn expected_order() -> Vec<u64> {
    let documents = documents();
    let mut order: Vec<usize> = (0..documents.len()).collect();
    order.sort_by(|&a, &b| {
        let score = |i: usize| fake_relevance(QUERY, &documents[i]);
        score(b).total_cmp(&score(a))
    });
    order.into_iter().map(|i| i as u64).collect()
}

fn rerank(gw: &Gateway, path: &str, body: &Value) -> Response {
    gw.post_with_headers(
        path,
        Some(&gw.key),
        &[("Provider-API-Key", PROVIDER_KEY)],
        body,
    )
}

fn invocation(response: &Response) -> String {
    response
        .header("x-invocation-id")
        .unwrap_or_else(|| panic!("no invocation id: {:?}", response.headers))
        .to_owned()
}

/// A route to the fake's rerank server of `api` (the openai plugin's `rerank_api`).
fn route(id: &str, upstream: &OpenAiUpstream, prefix: &str, api: &str) -> Route {
    Route::openai(id, &upstream.base_url(prefix))
        .setting("rerank_api", &format!("{api:?}"))
        .price("rr-1", PRICE, 0.0)
}

fn gateway(upstream: &OpenAiUpstream) -> Gateway {
    Gateway::builder()
        // Its default model is a metrics label (a caller's model names are not).
        .route(route("cohere", upstream, "/v2", "cohere").default_model("rerank-v3.5"))
        .route(route("jina", upstream, "/v1", "cohere"))
        .route(route("voyage", upstream, "/voyage/v1", "voyage"))
        .route(route("tei", upstream, "/tei", "tei"))
        .route(Route::echo("demo"))
        .start()
}

fn indexes(answer: &Value) -> Vec<u64> {
    let results = answer["results"].as_array().expect("results");
    results
        .iter()
        .map(|r| r["index"].as_u64().unwrap())
        .collect()
}

#[test]
fn each_rerank_server_is_asked_in_its_own_shape_and_answered_in_one() {
    let upstream = OpenAiUpstream::start();
    let gw = gateway(&upstream);
    let order = expected_order();
    // (route, the upstream path, the body keys its API takes, whether it counts tokens)
    let servers = [
        ("cohere", "/v2/rerank", "top_n", false),
        ("jina", "/v1/rerank", "top_n", true),
        ("voyage", "/voyage/v1/rerank", "top_k", true),
        ("tei", "/tei/rerank", "", false),
    ];
    for (route, path, top, counts_tokens) in servers {
        let body = json!({
            "model": format!("{route}/rr-1"),
            "query": QUERY,
            "documents": documents(),
            "top_n": 2,
            "return_documents": true,
        });
        let response = rerank(&gw, "/v1/rerank", &body);
        assert_eq!(response.status, 200, "{route}: {}", response.text());
        let answer = response.json();
        assert_eq!(indexes(&answer), order[..2], "{route}: {answer}");
        let first = &answer["results"][0];
        let best = &documents()[order[0] as usize];
        assert_eq!(first["relevance_score"], json!(fake_relevance(QUERY, best)));
        assert_eq!(
            first["document"],
            json!({"text": best}),
            "{route}: {answer}"
        );
        let id = invocation(&response);
        assert_eq!(answer["id"], json!(id));
        assert_eq!(answer["model"], json!("rr-1"));

        let sent = upstream.requests().pop().expect("a request upstream");
        sent.assert_json_post(path);
        assert_eq!(
            sent.header("authorization"),
            Some(format!("Bearer {PROVIDER_KEY}").as_str()),
            "{route}"
        );
        let sent = sent.json();
        assert_eq!(sent["query"], json!(QUERY), "{route}: {sent}");
        if route == "tei" {
            assert_eq!(sent["texts"], json!(documents()), "{sent}");
        } else {
            assert_eq!(sent["documents"], json!(documents()), "{route}: {sent}");
            assert_eq!(sent[top], json!(2), "{route}: {sent}");
            assert_eq!(sent["model"], json!("rr-1"), "{route}: {sent}");
        }

        let record = gw.record(&id);
        assert_eq!(record["type"], json!("rerank"), "{record}");
        assert_eq!(record["status"], json!("success"), "{record}");
        assert_eq!(record["route"], json!(route), "{record}");
        if counts_tokens {
            let tokens = rerank_tokens(QUERY, &documents());
            assert_eq!(answer["usage"], json!({"total_tokens": tokens}), "{answer}");
            assert_eq!(record["usage"]["prompt_tokens"], json!(tokens), "{record}");
            let cost = record["usageCost"].as_f64().expect("a cost");
            assert!(
                (cost - tokens as f64 * PRICE / 1e6).abs() < 1e-15,
                "{record}"
            );
            let header = response.header("x-gateway-cost-usd").map(str::parse::<f64>);
            let header = header.and_then(Result::ok).expect("the cost header");
            assert!((header - cost).abs() < 1e-12, "{header} != {cost}");
        } else {
            assert!(answer.get("usage").is_none(), "{answer}");
        }
        let units = (route == "cohere").then_some(json!({"search_units": 1}));
        assert_eq!(
            answer["meta"].get("billed_units"),
            units.as_ref(),
            "{answer}"
        );
        match route {
            "cohere" => assert_eq!(record["usage"]["search_units"], json!(1), "{record}"),
            "tei" => assert!(record["usage"].is_null(), "{record}"),
            _ => assert!(record["usage"].get("search_units").is_none(), "{record}"),
        }
    }
}

#[test]
fn cohere_s_v2_path_and_documents_as_objects_are_read_and_documents_are_not_returned_unasked() {
    let upstream = OpenAiUpstream::start();
    let gw = gateway(&upstream);
    let documents: Vec<Value> = documents().iter().map(|d| json!({"text": d})).collect();
    let body = json!({"model": "jina/rr-1", "query": QUERY, "documents": documents});
    let response = rerank(&gw, "/v2/rerank", &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let answer = response.json();
    assert_eq!(
        indexes(&answer),
        expected_order(),
        "every document: {answer}"
    );
    assert!(answer["results"][0].get("document").is_none(), "{answer}");
    let sent = upstream.single_request().json();
    assert!(sent.get("top_n").is_none(), "{sent}");
    assert!(sent.get("return_documents").is_none(), "{sent}");
}

#[test]
fn a_bad_rerank_body_is_a_400_naming_the_field_and_is_recorded() {
    let upstream = OpenAiUpstream::start();
    let gw = gateway(&upstream);
    for (body, param) in [
        (json!({"model": "jina/rr-1", "documents": ["a"]}), "query"),
        (
            json!({"model": "jina/rr-1", "query": "q", "documents": []}),
            "documents",
        ),
        (
            json!({"model": "jina/rr-1", "query": "q", "documents": [{"image": "https://x/y.png"}]}),
            "documents[0]",
        ),
        (
            json!({"model": "jina/rr-1", "query": "q", "documents": ["a"], "top_n": 0}),
            "top_n",
        ),
        (
            json!({"model": "jina/rr-1", "query": 3, "documents": ["a"]}),
            "query",
        ),
    ] {
        let response = rerank(&gw, "/v1/rerank", &body);
        assert_eq!(response.status, 400, "{body}: {}", response.text());
        let error = response.json();
        assert_eq!(error["error"]["param"], json!(param), "{body}: {error}");
        let record = gw.record(&invocation(&response));
        assert_eq!(record["status"], json!("error"), "{record}");
    }
    assert!(upstream.requests().is_empty(), "nothing went upstream");
}

#[test]
fn a_route_whose_plugin_does_not_rerank_says_so() {
    let upstream = OpenAiUpstream::start();
    let gw = gateway(&upstream);
    let body = json!({"model": "demo/echo", "query": "q", "documents": ["a"]});
    let response = rerank(&gw, "/v1/rerank", &body);
    assert_eq!(response.status, 400, "{}", response.text());
    assert!(
        response.text().contains("does not support rerank"),
        "{}",
        response.text()
    );
    let record = gw.record(&invocation(&response));
    assert_eq!(record["type"], json!("rerank"), "{record}");
}

#[test]
fn an_upstream_s_ranking_of_documents_it_was_not_given_is_a_502() {
    // A server that ranks a sixth document of five: the caller never gets an index it
    // cannot look up.
    let upstream = OpenAiUpstream::always(gateway_test_support::Reply::json(
        200,
        &json!({"results": [{"index": 5, "relevance_score": 0.9}]}),
    ));
    let gw = Gateway::builder()
        .route(Route::openai("r", &upstream.base_url("/v1")))
        .start();
    let body = json!({"model": "r/rr-1", "query": "q", "documents": ["a", "b", "c", "d", "e"]});
    let response = rerank(&gw, "/v1/rerank", &body);
    assert_eq!(response.status, 502, "{}", response.text());
    assert!(
        response.text().contains("document 5"),
        "{}",
        response.text()
    );
}

#[test]
fn a_rerank_s_query_and_documents_go_through_the_guards() {
    let upstream = OpenAiUpstream::start();
    let gw = Gateway::builder()
        .route(Route::openai("r", &upstream.base_url("/v1")).key("guards", r#"["pii"]"#))
        .guard("pii", "pii-guard", "")
        .start();
    let body = json!({
        "model": "r/rr-1",
        "query": "mail of jane.doe@example.com",
        "documents": ["write to jane.doe@example.com today", "nothing here"],
        "return_documents": true,
    });
    let response = rerank(&gw, "/v1/rerank", &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let sent = upstream.single_request().json();
    assert_eq!(sent["query"], json!("mail of [EMAIL]"), "{sent}");
    assert_eq!(
        sent["documents"],
        json!(["write to [EMAIL] today", "nothing here"]),
        "{sent}"
    );
    assert!(!response.text().contains("jane.doe"), "{}", response.text());
    let record = gw.record(&invocation(&response));
    assert_eq!(record["guards"][0]["verdict"], json!("rewrite"), "{record}");
}

#[test]
fn search_units_are_recorded_and_priced_at_the_shipped_per_search_unit_price() {
    use gateway_test_support::scrape::{scrape, value};
    let upstream = OpenAiUpstream::start();
    let gw = gateway(&upstream);
    // Cohere's rerank-v3.5, priced by host/prices.toml at $0.002 a search unit (no route price).
    let body = json!({"model": "cohere/rerank-v3.5", "query": QUERY, "documents": documents()});
    let response = rerank(&gw, "/v1/rerank", &body);
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(
        response.json()["meta"]["billed_units"],
        json!({"search_units": 1})
    );
    let record = gw.record(&invocation(&response));
    assert_eq!(record["usage"]["search_units"], json!(1), "{record}");
    assert_eq!(record["usage"]["prompt_tokens"], json!(0), "{record}");
    assert_eq!(record["usageCost"], json!(0.002), "{record}");
    assert_eq!(response.header("x-gateway-cost-usd"), Some("0.0020000000"));
    let samples = scrape(&gw, None);
    let labels = [("route", "cohere"), ("model", "rerank-v3.5")];
    assert_eq!(value(&samples, "gateway_search_units_total", &labels), 1.0);
    assert_eq!(value(&samples, "gateway_cost_usd_total", &labels), 0.002);
}
