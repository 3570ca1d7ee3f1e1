//! Rerank: the InvokeModel calls of Cohere Rerank and Amazon Rerank, run on the SDK's fake host
//! (`gateway_plugin_sdk::testing`), and the reading of their answers.

use gateway_plugin_sdk::http::{Request, Response};
use gateway_plugin_sdk::testing::{self, json};
use gateway_plugin_sdk::{ProviderError, RerankRequest, RerankResult, Reranking, Route, Usage};
use gateway_test_support::fixtures::{failed, invalid_request, upstream};
use serde_json::{Value, json};

use super::convert::aws_route;
use crate::Bedrock;
use crate::errors;
use crate::rerank::{read, search_units, upstream_request};
use crate::sigv4::AmzDate;

/// Runs Bedrock's `rerank` on `request` with `upstream` answering its calls, on the SDK's fake
/// host (its check of the route's origin, its record of each request): what it returned, and
/// the requests it sent.
fn run(
    request: RerankRequest,
    upstream: impl FnMut(&Request) -> Result<Response, ProviderError> + 'static,
) -> (Result<Reranking, ProviderError>, Vec<Request>) {
    testing::rerank::<Bedrock>(request, upstream)
}

fn rerank_request(
    route: Route,
    model: &str,
    documents: &[&str],
    top_n: Option<u32>,
    params: Value,
) -> RerankRequest {
    RerankRequest {
        route,
        model: model.into(),
        query: "What is the capital of the United States?".into(),
        documents: documents.iter().map(|&d| d.to_owned()).collect(),
        top_n,
        params: params.to_string(),
    }
}

/// Cohere Rerank of [`CAPITALS`], on the AWS route, with no limit and no params.
fn cohere_request() -> RerankRequest {
    rerank_request(
        aws_route(),
        "cohere.rerank-v3-5:0",
        CAPITALS,
        None,
        json!({}),
    )
}

/// A route whose provider key is a Bedrock API key (no AWS credentials), for us-east-1.
fn api_key_route() -> Route {
    Route {
        id: "bedrock".into(),
        base_url: "https://bedrock-runtime.us-east-1.amazonaws.com".into(),
        api_key: Some("bedrock-api-key-1".into()),
        settings: "{}".into(),
        secrets: Vec::new(),
    }
}

const CAPITALS: &[&str] = &[
    "Carson City is the capital city of the American state of Nevada.",
    "The Commonwealth of the Northern Mariana Islands is a group of islands in the Pacific \
     Ocean. Its capital is Saipan.",
    "Washington, D.C. is the capital of the United States. It is a federal district.",
];

fn body_of(request: &Request) -> Value {
    serde_json::from_slice(request.body_bytes()).expect("a JSON body")
}

/// A 200 answer with `headers` besides its content type, and `body` as JSON.
fn answer(headers: &[(&str, &str)], body: &Value) -> Response {
    let mut all = vec![("content-type".to_owned(), "application/json".to_owned())];
    all.extend(headers.iter().map(|(n, v)| (n.to_string(), v.to_string())));
    Response::from_chunks(200, all, vec![body.to_string().into_bytes()])
}

fn results(ranked: &[(u32, f64)]) -> Vec<RerankResult> {
    (ranked.iter())
        .map(|&(index, relevance_score)| RerankResult {
            index,
            relevance_score,
        })
        .collect()
}

#[test]
fn cohere_rerank_is_one_signed_invoke_model_call() {
    let request = rerank_request(
        aws_route(),
        "cohere.rerank-v3-5:0",
        CAPITALS,
        Some(2),
        json!({"max_tokens_per_doc": 512, "user": "u-1", "return_id": null,
               "query": "not this", "documents": ["nor these"], "api_version": 1}),
    );
    let (reranked, sent) = run(request, |_| {
        json(
            200,
            &json!({"id": "5b0d3b1c", "results": [
                {"index": 2, "relevance_score": 0.7190094},
                {"index": 0, "relevance_score": 0.32418242},
            ]}),
        )
    });

    assert_eq!(sent.len(), 1);
    let call = &sent[0];
    assert_eq!(call.method(), "POST");
    assert_eq!(
        call.url(),
        "https://bedrock-runtime.us-west-2.amazonaws.com/model/cohere.rerank-v3-5%3A0/invoke"
    );
    assert_eq!(call.header_value("accept"), Some("application/json"));
    assert_eq!(call.header_value("content-type"), Some("application/json"));
    assert_eq!(
        call.header_value("x-amz-security-token"),
        Some("session-token-1")
    );
    let date = call.header_value("x-amz-date").expect("x-amz-date");
    let authorization = call.header_value("authorization").expect("authorization");
    assert!(
        authorization.starts_with(&format!(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/{}/us-west-2/bedrock/aws4_request, \
             SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, Signature=",
            &date[..8]
        )),
        "{authorization}"
    );
    assert_eq!(
        body_of(call),
        json!({
            "query": "What is the capital of the United States?",
            "documents": CAPITALS,
            "top_n": 2,
            "api_version": 2,
            "max_tokens_per_doc": 512,
        })
    );

    assert_eq!(
        reranked.unwrap(),
        Reranking {
            model: "cohere.rerank-v3-5:0".into(),
            results: results(&[(2, 0.7190094), (0, 0.32418242)]),
            usage: None,
            search_units: Some(1),
        }
    );
}

#[test]
fn amazon_rerank_with_an_api_key_and_a_model_arn() {
    let documents: Vec<String> = (0..101).map(|i| format!("document {i}")).collect();
    let documents: Vec<&str> = documents.iter().map(String::as_str).collect();
    let model = "arn:aws:bedrock:us-east-1::foundation-model/amazon.rerank-v1:0";
    let request = rerank_request(api_key_route(), model, &documents, None, json!({}));
    let (reranked, sent) = run(request, |_| {
        Ok(answer(
            &[("X-Amzn-Bedrock-Input-Token-Count", "1234")],
            &json!({"results": [
                {"index": 100, "relevance_score": 0.7711548724998493},
                {"index": 0, "relevance_score": 0.0025114635138098534},
                {"index": 1, "relevance_score": 2.4876490010363496e-05},
            ]}),
        ))
    });

    assert_eq!(sent.len(), 1);
    let call = &sent[0];
    assert_eq!(
        call.url(),
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A%3Afoundation-model%2Famazon.rerank-v1%3A0/invoke"
    );
    assert_eq!(
        call.header_value("authorization"),
        Some("Bearer bedrock-api-key-1")
    );
    assert_eq!(call.header_value("x-amz-date"), None);
    assert_eq!(
        body_of(call),
        json!({"query": "What is the capital of the United States?", "documents": documents})
    );

    assert_eq!(
        reranked.unwrap(),
        Reranking {
            model: model.into(),
            results: results(&[
                (100, 0.7711548724998493),
                (0, 0.0025114635138098534),
                (1, 2.4876490010363496e-05),
            ]),
            usage: Some(Usage::new(1234, 0)),
            search_units: Some(2),
        }
    );
}

#[test]
fn the_call_is_signed_for_the_routes_region_at_its_date() {
    let request = rerank_request(
        aws_route(),
        "us.amazon.rerank-v1:0",
        CAPITALS,
        Some(1),
        json!({}),
    );
    let sent = upstream_request(&request, &AmzDate::from_unix(1_700_000_000)).unwrap();
    assert_eq!(
        sent.url(),
        "https://bedrock-runtime.us-west-2.amazonaws.com/model/us.amazon.rerank-v1%3A0/invoke"
    );
    assert_eq!(sent.header_value("x-amz-date"), Some("20231114T221320Z"));
    let authorization = sent.header_value("authorization").unwrap();
    assert!(
        authorization.starts_with(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20231114/us-west-2/bedrock/aws4_request, \
             SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, Signature="
        ),
        "{authorization}"
    );
    // The same call signed again at the same date is the same signature.
    let again = upstream_request(&request, &AmzDate::from_unix(1_700_000_000)).unwrap();
    assert_eq!(again.header_value("authorization"), Some(authorization));
    assert_eq!(
        body_of(&sent),
        json!({"query": "What is the capital of the United States?", "documents": CAPITALS,
               "top_n": 1})
    );
}

#[test]
fn results_are_read_in_the_models_order_uncut() {
    let request = rerank_request(
        aws_route(),
        "amazon.rerank-v1:0",
        CAPITALS,
        Some(2),
        json!({}),
    );
    // A model that ignored top_n and sent its results in the documents' order: the gateway
    // sorts and cuts, for every provider alike.
    let (reranked, sent) = run(request, |_| {
        json(
            200,
            &json!({"results": [
                {"index": 0, "relevance_score": 0.25},
                {"index": 1, "relevance_score": 0.5},
                {"index": 2, "relevance_score": 0.5},
            ]}),
        )
    });
    assert_eq!(body_of(&sent[0])["top_n"], json!(2));
    assert_eq!(
        reranked.unwrap().results,
        results(&[(0, 0.25), (1, 0.5), (2, 0.5)])
    );
}

fn error_answer(status: u16, kind: &str, message: &str) -> Response {
    Response::from_chunks(
        status,
        vec![
            ("x-amzn-ErrorType".into(), kind.into()),
            ("content-type".into(), "application/json".into()),
            ("Retry-After".into(), "2".into()),
        ],
        vec![json!({ "message": message }).to_string().into_bytes()],
    )
}

#[test]
fn bedrock_errors_are_mapped_as_for_embeddings() {
    let cases = [
        (
            400,
            "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/",
            "Malformed input request: #/api_version: 1 is not greater or equal to 2, please \
             reformat your input and try again.",
        ),
        (
            429,
            "ThrottlingException",
            "Too many requests, please wait before trying again.",
        ),
        (
            403,
            "AccessDeniedException",
            "You don't have access to the model with the specified model ID.",
        ),
    ];
    for (status, kind, message) in cases {
        let request = cohere_request();
        let (reranked, sent) = run(request, move |_| Ok(error_answer(status, kind, message)));
        assert_eq!(sent.len(), 1, "{kind}");
        assert_eq!(
            reranked,
            Err(errors::from_response(error_answer(status, kind, message))),
            "{kind}"
        );
    }

    let request = cohere_request();
    let (refused, _) = run(request.clone(), |_| {
        Ok(error_answer(
            400,
            "ValidationException",
            "Malformed input request",
        ))
    });
    assert_eq!(
        invalid_request(refused),
        "Bedrock refused the request (ValidationException): Malformed input request"
    );
    let (throttled, _) = run(request, |_| {
        Ok(error_answer(429, "ThrottlingException", "slow down"))
    });
    let throttled = upstream(throttled);
    assert_eq!(
        (
            throttled.status,
            throttled.retry_after,
            throttled.message.as_str()
        ),
        (429, Some(2), "slow down")
    );
}

#[test]
fn indices_are_the_gateways_to_check_but_must_fit_a_u32() {
    let request = cohere_request();
    // One the request does not have, or one twice: the gateway refuses them, whichever
    // provider answered (host/src/flow/whole.rs).
    let (as_given, sent) = run(request.clone(), |_| {
        json(
            200,
            &json!({"id": "x", "results": [
                {"index": 0, "relevance_score": 0.9},
                {"index": 3, "relevance_score": 0.1},
                {"index": 0, "relevance_score": 0.05},
            ]}),
        )
    });
    assert_eq!(sent.len(), 1);
    assert_eq!(
        as_given.unwrap().results,
        results(&[(0, 0.9), (3, 0.1), (0, 0.05)])
    );

    let cases = [
        (
            json!({"results": [{"index": 4294967296_u64, "relevance_score": 0.1}]}),
            "document 4294967296",
        ),
        (
            json!({"results": [{"index": -1, "relevance_score": 0.1}]}),
            "malformed",
        ),
        (json!({"id": "x"}), "results"),
        (
            json!({"results": [{"index": 0, "relevance_score": "high"}]}),
            "malformed",
        ),
    ];
    for (body, expected) in cases {
        let message = failed(read(answer(&[], &body), &request));
        assert!(message.contains(expected), "{body}: {message}");
    }
    let html = Response::from_chunks(200, Vec::new(), vec![b"<html>OK</html>".to_vec()]);
    assert!(failed(read(html, &request)).starts_with("malformed response from upstream"));
}

#[test]
fn an_unknown_model_is_refused_before_any_call() {
    for model in [
        "cohere.embed-english-v3",
        "anthropic.claude-3-haiku",
        "rerank-v3.5",
    ] {
        let request = rerank_request(aws_route(), model, CAPITALS, None, json!({}));
        let (refused, sent) = run(request, |request| {
            panic!("no call expected, got {}", request.url())
        });
        let message = invalid_request(refused);
        assert!(
            message.contains("cohere.rerank-v3-5:0")
                && message.contains("amazon.rerank-v1:0")
                && message.contains(model),
            "{message}"
        );
        assert!(sent.is_empty(), "{model}");
    }
}

#[test]
fn search_units_are_queries_of_up_to_100_documents() {
    for (documents, units) in [(1, 1), (3, 1), (100, 1), (101, 2), (350, 4), (1000, 10)] {
        assert_eq!(search_units(documents), units, "{documents} documents");
    }
}
