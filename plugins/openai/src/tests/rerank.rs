//! Rerank: the upstream request of each `rerank_api`, sent through the SDK's fake host, and the
//! reading of its answers.

use gateway_plugin_sdk::testing::{self, json};
use gateway_plugin_sdk::{RerankRequest, RerankResult, Reranking, TokenCounts, Usage};
use gateway_test_support::fixtures::upstream;

use super::*;
use crate::convert::RerankApi;
use crate::stream::parse_rerank;

const DOCUMENTS: [&str; 3] = [
    "Berlin is the capital of Germany.",
    "Paris is the capital of France.",
    "France is in Europe.",
];

fn rerank_request(base_url: &str, settings: &str, top_n: Option<u32>) -> RerankRequest {
    RerankRequest {
        route: Route {
            id: "rerank".into(),
            base_url: base_url.into(),
            api_key: Some("rk-test".into()),
            settings: settings.into(),
            secrets: Vec::new(),
        },
        model: "rerank-v3.5".into(),
        query: "What is the capital of France?".into(),
        documents: DOCUMENTS.map(String::from).to_vec(),
        top_n,
        params: "{}".into(),
    }
}

/// What a rerank did: the plugin's result and the requests it sent.
struct Run {
    result: Result<Reranking, ProviderError>,
    sent: Vec<Request>,
}

/// Runs the plugin's rerank of `request` on the SDK's fake host, with `upstream` answering on
/// the route's origin.
fn rerank(
    request: RerankRequest,
    upstream: impl FnMut(&Request) -> Result<Response, ProviderError> + 'static,
) -> Run {
    let (result, sent) = testing::rerank::<OpenAi>(request, upstream);
    Run { result, sent }
}

/// The one request a run sent.
fn only(run: &Run) -> &Request {
    let [sent] = run.sent.as_slice() else {
        panic!("one request: {:?}", run.sent)
    };
    sent
}

fn results(scores: &[(u32, f64)]) -> Vec<RerankResult> {
    (scores.iter())
        .map(|&(index, relevance_score)| RerankResult {
            index,
            relevance_score,
        })
        .collect()
}

fn tokens(read: u32) -> Option<Usage> {
    Some(Usage::counted(TokenCounts {
        prompt: Some(read),
        total: Some(read),
        ..TokenCounts::default()
    }))
}

/// A JSON answer of `status` with a `Retry-After`.
fn error_answer(status: u16, body: &str, retry_after: Option<&str>) -> Response {
    let mut headers = vec![("content-type".into(), "application/json".into())];
    headers.extend(retry_after.map(|after| ("retry-after".into(), after.into())));
    Response::from_chunks(status, headers, vec![body.as_bytes().to_vec()])
}

#[test]
fn cohere_is_the_default_shape_and_serves_cohere_v2() {
    for settings in ["{}", r#"{"rerank_api":"cohere"}"#, r#"{"rerank_api":null}"#] {
        let mut request = rerank_request("https://api.cohere.com/v2", settings, Some(2));
        // Keys the plugin sets are not the caller's to change.
        request.params =
            r#"{"max_tokens_per_doc":512,"model":"evil","documents":["evil"],"top_k":9}"#.into();
        let run = rerank(request, |_| {
            // Cohere v2's answer: no model, no tokens, the search units billed.
            json(
                200,
                &json!({
                    "id": "07734bd2-2473-4f07-94e1-0d9f0e6843cf",
                    "results": [
                        {"index": 1, "relevance_score": 0.9990564},
                        {"index": 2, "relevance_score": 0.25}
                    ],
                    "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}}
                }),
            )
        });
        let sent = only(&run);
        assert_eq!(sent.method(), "POST");
        assert_eq!(sent.url(), "https://api.cohere.com/v2/rerank");
        assert_eq!(sent.header_value("authorization"), Some("Bearer rk-test"));
        assert_eq!(sent.header_value("content-type"), Some("application/json"));
        assert_eq!(sent.header_value("accept"), Some("application/json"));
        assert_eq!(
            super::sent(sent),
            json!({
                "model": "rerank-v3.5",
                "query": "What is the capital of France?",
                "documents": DOCUMENTS,
                "top_n": 2,
                "max_tokens_per_doc": 512
            }),
            "{settings}"
        );
        assert_eq!(
            run.result.expect("a reranking"),
            Reranking {
                model: "rerank-v3.5".into(),
                results: results(&[(1, 0.9990564), (2, 0.25)]),
                usage: None,
                search_units: Some(1),
            }
        );
    }
}

#[test]
fn cohere_shape_serves_jina_vllm_and_infinity() {
    // Jina: documents echoed by default, tokens as `total_tokens`; no `top_n`, none sent.
    let run = rerank(rerank_request("https://api.jina.ai/v1", "{}", None), |_| {
        json(
            200,
            &json!({
                "model": "jina-reranker-v2-base-multilingual",
                "usage": {"total_tokens": 815},
                "results": [
                    {"index": 1, "document": {"text": DOCUMENTS[1]}, "relevance_score": 0.87},
                    {"index": 2, "document": {"text": DOCUMENTS[2]}, "relevance_score": 0.76},
                    {"index": 0, "document": {"text": DOCUMENTS[0]}, "relevance_score": 0.01}
                ]
            }),
        )
    });
    assert_eq!(only(&run).url(), "https://api.jina.ai/v1/rerank");
    assert_eq!(
        super::sent(only(&run)),
        json!({"model": "rerank-v3.5", "query": "What is the capital of France?", "documents": DOCUMENTS})
    );
    assert_eq!(
        run.result.expect("a reranking"),
        Reranking {
            model: "jina-reranker-v2-base-multilingual".into(),
            results: results(&[(1, 0.87), (2, 0.76), (0, 0.01)]),
            usage: tokens(815),
            search_units: None,
        }
    );

    // vLLM's `/v1/rerank`, and a `top_n` above the number of documents.
    let run = rerank(
        rerank_request("http://vllm.test:8000/v1", "{}", Some(10)),
        |_| {
            json(
                200,
                &json!({
                    "id": "rerank-8c1f",
                    "model": "BAAI/bge-reranker-v2-m3",
                    "usage": {"total_tokens": 42},
                    "results": [
                        {"index": 1, "document": {"text": DOCUMENTS[1]}, "relevance_score": 0.99},
                        {"index": 2, "document": {"text": DOCUMENTS[2]}, "relevance_score": 0.03},
                        {"index": 0, "document": {"text": DOCUMENTS[0]}, "relevance_score": 0.0001}
                    ]
                }),
            )
        },
    );
    assert_eq!(only(&run).url(), "http://vllm.test:8000/v1/rerank");
    // Some servers refuse a limit above the number of documents.
    assert_eq!(super::sent(only(&run))["top_n"], json!(3));
    let reranking = run.result.expect("a reranking");
    assert_eq!(reranking.model, "BAAI/bge-reranker-v2-m3");
    assert_eq!(reranking.results.len(), 3);
    assert_eq!(reranking.usage, tokens(42));

    // Infinity and LocalAI count `prompt_tokens`.
    let run = rerank(rerank_request("http://infinity.test", "{}", None), |_| {
        json(
            200,
            &json!({"object": "rerank", "model": "", "usage": {"prompt_tokens": 17},
                    "results": [{"index": 0, "relevance_score": 0.5, "document": null}]}),
        )
    });
    let reranking = run.result.expect("a reranking");
    assert_eq!(
        reranking.model, "rerank-v3.5",
        "an empty model is the one asked for"
    );
    assert_eq!(reranking.usage, tokens(17));
}

#[test]
fn voyage_sends_top_k_and_reads_data() {
    let mut request = rerank_request(
        "https://api.voyageai.com/v1",
        r#"{"rerank_api":"voyage"}"#,
        Some(2),
    );
    request.model = "rerank-2.5".into();
    request.params = r#"{"truncation":true,"top_n":7}"#.into();
    let run = rerank(request, |_| {
        json(
            200,
            &json!({
                "object": "list",
                "data": [
                    {"index": 1, "relevance_score": 0.9375},
                    {"index": 2, "relevance_score": 0.4453125}
                ],
                "model": "rerank-2.5",
                "usage": {"total_tokens": 26}
            }),
        )
    });
    let sent = only(&run);
    assert_eq!(sent.url(), "https://api.voyageai.com/v1/rerank");
    assert_eq!(sent.header_value("authorization"), Some("Bearer rk-test"));
    assert_eq!(
        super::sent(sent),
        json!({
            "model": "rerank-2.5",
            "query": "What is the capital of France?",
            "documents": DOCUMENTS,
            "top_k": 2,
            "truncation": true
        })
    );
    assert_eq!(
        run.result.expect("a reranking"),
        Reranking {
            model: "rerank-2.5".into(),
            results: results(&[(1, 0.9375), (2, 0.4453125)]),
            usage: tokens(26),
            search_units: None,
        }
    );
}

#[test]
fn tei_sends_texts_and_its_scores_are_read_as_given() {
    let mut request = rerank_request("http://tei.test:8080", r#"{"rerank_api":"tei"}"#, Some(2));
    request.params = r#"{"truncate":true,"model":"evil","return_text":true}"#.into();
    let run = rerank(request, |_| {
        // Every text scored; not in order, which TEI's API does not promise.
        json(
            200,
            &json!([
                {"index": 0, "score": 0.0001},
                {"index": 1, "score": 0.98},
                {"index": 2, "score": 0.5}
            ]),
        )
    });
    let sent = only(&run);
    assert_eq!(sent.url(), "http://tei.test:8080/rerank");
    assert_eq!(sent.header_value("authorization"), Some("Bearer rk-test"));
    assert_eq!(
        super::sent(sent),
        json!({
            "query": "What is the capital of France?",
            "texts": DOCUMENTS,
            "raw_scores": false,
            "return_text": false,
            "truncate": true
        })
    );
    // TEI takes no limit: the gateway sorts and cuts to top_n.
    assert_eq!(
        run.result.expect("a reranking"),
        Reranking {
            model: "rerank-v3.5".into(),
            results: results(&[(0, 0.0001), (1, 0.98), (2, 0.5)]),
            usage: None,
            search_units: None,
        }
    );

    // Logits, when the caller asks for them.
    let mut request = rerank_request("http://tei.test:8080", r#"{"rerank_api":"tei"}"#, None);
    request.params = r#"{"raw_scores":true}"#.into();
    let run = rerank(request, |_| {
        json(
            200,
            &json!([{"index": 2, "score": -1.5}, {"index": 0, "score": 3.25}, {"index": 1, "score": 3.25}]),
        )
    });
    assert_eq!(super::sent(only(&run))["raw_scores"], json!(true));
    assert_eq!(
        run.result.expect("a reranking").results,
        results(&[(2, -1.5), (0, 3.25), (1, 3.25)])
    );
}

#[test]
fn results_are_read_in_the_servers_order_uncut() {
    // A server that ignored the limit sent and did not sort: the gateway does both, for every
    // provider alike.
    let run = rerank(
        rerank_request("https://rerank.test/v1", "{}", Some(2)),
        |_| {
            json(
                200,
                &json!({"results": [
                    {"index": 2, "relevance_score": 0.2},
                    {"index": 0, "relevance_score": 0.7},
                    {"index": 1, "relevance_score": 0.9}
                ]}),
            )
        },
    );
    assert_eq!(super::sent(only(&run))["top_n"], json!(2));
    assert_eq!(
        run.result.expect("a reranking").results,
        results(&[(2, 0.2), (0, 0.7), (1, 0.9)])
    );
    let voyage =
        br#"{"data":[{"index":1,"relevance_score":0.1},{"index":0,"relevance_score":0.8}]}"#;
    assert_eq!(
        (parse_rerank(RerankApi::Voyage, voyage, "m").expect("parses")).results,
        results(&[(1, 0.1), (0, 0.8)])
    );
}

#[test]
fn indices_are_the_gateways_to_check_but_must_fit_a_u32() {
    // One the request did not have, or one twice: the gateway refuses them, whichever provider
    // answered (host/src/flow/whole.rs).
    let cases: [(RerankApi, &[u8], Vec<RerankResult>); 3] = [
        (
            RerankApi::Cohere,
            br#"{"results":[{"index":0,"relevance_score":0.5},{"index":3,"relevance_score":0.9}]}"#,
            results(&[(0, 0.5), (3, 0.9)]),
        ),
        (
            RerankApi::Voyage,
            br#"{"data":[{"index":3,"relevance_score":0.9}],"model":"rerank-2"}"#,
            results(&[(3, 0.9)]),
        ),
        (
            RerankApi::Tei,
            br#"[{"index":1,"score":0.9},{"index":1,"score":0.8}]"#,
            results(&[(1, 0.9), (1, 0.8)]),
        ),
    ];
    for (api, answer, expected) in cases {
        let reranking = parse_rerank(api, answer, "m").expect("parses");
        assert_eq!(reranking.results, expected, "{api:?}");
    }
    for answer in [
        br#"{"results":[{"index":-1,"relevance_score":0.9}]}"#.as_slice(),
        br#"{"results":[{"index":4294967296,"relevance_score":0.9}]}"#,
    ] {
        let message = failed(parse_rerank(RerankApi::Cohere, answer, "m"));
        assert!(
            message.starts_with("malformed response from upstream: "),
            "{message}"
        );
    }
}

#[test]
fn an_answer_that_is_not_the_formats_json_is_refused() {
    let cases: [(RerankApi, &[u8]); 8] = [
        (RerankApi::Cohere, b"<html>Bad Gateway</html>"),
        (RerankApi::Cohere, b""),
        // Voyage's answer on a route set up for Cohere's.
        (
            RerankApi::Cohere,
            br#"{"object":"list","data":[{"index":0,"relevance_score":0.9}]}"#,
        ),
        (RerankApi::Cohere, br#"{"results":[{"index":0}]}"#),
        (
            RerankApi::Cohere,
            br#"{"results":[{"index":0,"relevance_score":"high"}]}"#,
        ),
        (
            RerankApi::Voyage,
            br#"{"results":[{"index":0,"relevance_score":0.9}]}"#,
        ),
        (RerankApi::Tei, br#"{"results":[]}"#),
        (RerankApi::Tei, br#"[{"index":0,"relevance_score":0.9}]"#),
    ];
    for (api, answer) in cases {
        let message = failed(parse_rerank(api, answer, "m"));
        assert!(
            message.starts_with("malformed response from upstream: "),
            "{api:?} {}: {message}",
            String::from_utf8_lossy(answer)
        );
    }
    // An error some compatible servers answer with status 200.
    let error = br#"{"error":{"message":"model not found","code":404}}"#;
    let error = upstream(parse_rerank(RerankApi::Cohere, error, "m"));
    assert_eq!(
        (error.status, error.message.as_str()),
        (404, "model not found")
    );
}

#[test]
fn upstream_errors_map_as_for_embeddings() {
    let cases = [
        // Cohere's error body.
        (
            RerankApi::Cohere,
            400,
            r#"{"id":"a1","message":"invalid request: list of documents must not be empty"}"#,
            None,
            "invalid request: list of documents must not be empty",
            None,
        ),
        // Voyage's (FastAPI's `detail`, which the SDK keeps as the body's text).
        (
            RerankApi::Voyage,
            401,
            r#"{"detail":"Provided API key is invalid."}"#,
            None,
            r#"{"detail":"Provided API key is invalid."}"#,
            None,
        ),
        // TEI's.
        (
            RerankApi::Tei,
            429,
            r#"{"error":"Model is overloaded","error_type":"overloaded"}"#,
            Some("20"),
            "Model is overloaded",
            Some(20),
        ),
    ];
    for (api, status, body, retry_after, message, retry) in cases {
        let settings = match api {
            RerankApi::Cohere => r#"{"rerank_api":"cohere"}"#,
            RerankApi::Voyage => r#"{"rerank_api":"voyage"}"#,
            RerankApi::Tei => r#"{"rerank_api":"tei"}"#,
        };
        let request = rerank_request("https://rerank.test/v1", settings, Some(1));
        let run = rerank(request, move |_| {
            Ok(error_answer(status, body, retry_after))
        });
        assert_eq!(run.sent.len(), 1);
        let error = upstream(run.result);
        assert_eq!(error.status, status, "{api:?}");
        assert_eq!(error.message, message, "{api:?}");
        assert_eq!(error.retry_after, retry, "{api:?}");
    }
}

#[test]
fn azure_deployment_mode_refuses_rerank_and_a_key_header_carries_the_key() {
    let request = rerank_request(
        "https://res.openai.azure.com",
        r#"{"azure_api_version":"2024-10-21"}"#,
        None,
    );
    let run = rerank(request, |request| {
        panic!("nothing to send: {}", request.url())
    });
    let message = invalid_request(run.result);
    assert!(
        message.contains("Azure OpenAI has no rerank API"),
        "{message}"
    );
    assert!(run.sent.is_empty());

    // Azure's v1 API or a proxy: the key in the header the route names.
    let request = rerank_request(
        "https://res.services.ai.azure.com/v2",
        r#"{"api_key_header":"api-key"}"#,
        None,
    );
    let run = rerank(request, |_| {
        json(
            200,
            &json!({"results": [{"index": 1, "relevance_score": 0.9}]}),
        )
    });
    let sent = only(&run);
    assert_eq!(sent.url(), "https://res.services.ai.azure.com/v2/rerank");
    assert_eq!(sent.header_value("api-key"), Some("rk-test"));
    assert_eq!(sent.header_value("authorization"), None);
    run.result.expect("a reranking");

    // No key (a local server): no header.
    let mut request = rerank_request("http://tei.test", r#"{"rerank_api":"tei"}"#, None);
    request.route.api_key = None;
    let run = rerank(request, |_| json(200, &json!([{"index": 0, "score": 0.5}])));
    assert_eq!(only(&run).header_value("authorization"), None);
}

#[test]
fn rerank_api_setting_is_checked() {
    let tei = settings(&route(r#"{"rerank_api":"tei"}"#)).expect("settings");
    assert_eq!(tei.rerank_api, RerankApi::Tei);
    assert_eq!(
        settings(&route("{}")).expect("settings").rerank_api,
        RerankApi::Cohere
    );
    for bad in [
        r#"{"rerank_api":"jina"}"#,
        r#"{"rerank_api":"Voyage"}"#,
        r#"{"rerank_api":1}"#,
    ] {
        let message = failed(settings(&route(bad)));
        assert!(
            message.starts_with("route `test`: setting `rerank_api`: "),
            "{bad}: {message}"
        );
    }
    let message = failed(settings(&route(r#"{"rerank_api":"jina"}"#)));
    assert!(
        message.ends_with("unknown variant `jina`, expected one of `cohere`, `voyage`, `tei`"),
        "{message}"
    );
    // Through the plugin, before anything is sent.
    let request = rerank_request("http://x.test", r#"{"rerank_api":"jina"}"#, None);
    let run = rerank(request, |request| {
        panic!("nothing to send: {}", request.url())
    });
    assert!(failed(run.result).contains("setting `rerank_api`"));
    assert!(run.sent.is_empty());
}

#[test]
fn no_documents_or_an_empty_query_do_not_crash() {
    let mut request = rerank_request("https://api.cohere.com/v2", "{}", Some(3));
    request.documents.clear();
    let run = rerank(request, |request| {
        panic!("nothing to send: {}", request.url())
    });
    assert!(invalid_request(run.result).contains("at least one document"));
    assert!(run.sent.is_empty());

    // An empty query goes as it is: the upstream says what it makes of it.
    let mut request = rerank_request("https://api.cohere.com/v2", "{}", None);
    request.query.clear();
    let run = rerank(request, |_| {
        Ok(error_answer(
            400,
            r#"{"message":"invalid request: query must not be empty"}"#,
            None,
        ))
    });
    assert_eq!(super::sent(only(&run))["query"], json!(""));
    assert_eq!(upstream(run.result).status, 400);

    // An answer without results for documents that were sent is an empty reranking.
    let empty = parse_rerank(RerankApi::Tei, b"[]", "m").expect("parses");
    assert!(empty.results.is_empty());
}
