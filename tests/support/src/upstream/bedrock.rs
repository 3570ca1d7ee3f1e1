//! Amazon Bedrock Runtime as the fake serves it: Converse (`POST /model/{modelId}/converse`)
//! answered with JSON from the script, ConverseStream (`/converse-stream`) with AWS event-stream
//! frames from the script, and InvokeModel (`/invoke`) of the embedding models (Titan Text
//! Embeddings, Cohere Embed), the rerank models (Cohere Rerank, Amazon Rerank) and the image
//! models (Nova Canvas, Titan Image Generator v1 and v2) computed by the fake itself.
//!
//! Like AWS, it checks who is asking before anything else: with [`BedrockAuth::SigV4`] it
//! recomputes the SigV4 signature of every request it receives from the received method, path,
//! headers and body and the test's secret (written here from AWS's specification, apart from
//! the plugin's signer), and checks the credential scope, the time and the session token; with
//! [`BedrockAuth::Bearer`] it checks the API key. A request that fails gets AWS's 403 and is
//! kept in [`BedrockUpstream::rejected`], which tests assert is empty.
//!
//! Errors are answered as Bedrock answers them: an `x-amzn-errortype` header and a JSON
//! `{"message": ...}` body ([`BedrockReply::error`]); exceptions in a stream as exception frames
//! ([`exception_frame`]).

use std::collections::VecDeque;
use std::ops::Deref;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use gateway_plugin_sdk::eventstream::{HeaderValue, encode};
use hmac::{Hmac, KeyInit, Mac};
use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use super::server::{self, FakeServer, Handler, Outcome, ScriptedBody, lock};
use super::{
    EVENT_GAP, ReceivedRequest, Traffic, counted_tokens, fake_embedding, fake_png, fake_relevance,
};

/// The content type of ConverseStream's answers.
pub const EVENT_STREAM: &str = "application/vnd.amazon.eventstream";

/// How long a signature stays valid around its `x-amz-date`, as AWS allows.
const CLOCK_SKEW: u64 = 5 * 60;

/// The prompt the fake's image models refuse as Nova Canvas refuses one its content filters
/// block: a 400 `ValidationException` with [`CONTENT_FILTERED`].
pub const REFUSED_PROMPT: &str = "refuse me";

/// Nova Canvas's message for a prompt its content filters block.
pub const CONTENT_FILTERED: &str = "This request has been blocked by our content filters. \
    Please adjust your text prompt to submit a new request.";

/// Who the fake accepts requests from.
#[derive(Debug, Clone)]
pub enum BedrockAuth {
    /// SigV4 signatures by this access key, for this region, with this session token (which
    /// then must be sent, signed) when one is given.
    SigV4 {
        access_key_id: String,
        secret_access_key: String,
        session_token: Option<String>,
        region: String,
    },
    /// A Bedrock API key, as `Authorization: Bearer`.
    Bearer(String),
}

/// One scripted answer to a Converse or ConverseStream call.
#[derive(Debug, Clone)]
pub enum BedrockReply {
    /// A JSON body with `status` and extra headers.
    Json {
        status: u16,
        headers: Vec<(String, String)>,
        body: Value,
    },
    /// An event stream: each frame its own write, [`EVENT_GAP`] apart.
    Frames(Vec<Vec<u8>>),
}

impl BedrockReply {
    /// A whole Converse answer of `content` blocks.
    pub fn converse(content: Value, stop_reason: &str, usage: Value) -> BedrockReply {
        BedrockReply::Json {
            status: 200,
            headers: Vec::new(),
            body: json!({
                "output": {"message": {"role": "assistant", "content": content}},
                "stopReason": stop_reason,
                "usage": usage,
                "metrics": {"latencyMs": 42}
            }),
        }
    }

    /// A whole answer of one text block that ended its turn.
    pub fn text(text: &str, input_tokens: u64, output_tokens: u64) -> BedrockReply {
        BedrockReply::converse(
            json!([{ "text": text }]),
            "end_turn",
            usage(input_tokens, output_tokens),
        )
    }

    /// A ConverseStream answer of `(event type, payload)` events.
    pub fn stream(events: &[(&str, Value)]) -> BedrockReply {
        BedrockReply::Frames(
            events
                .iter()
                .map(|(kind, payload)| event_frame(kind, payload))
                .collect(),
        )
    }

    /// A streamed answer of one text block sent in `pieces`, ended with `stop_reason`, usage
    /// last: what ConverseStream sends.
    pub fn text_stream(
        pieces: &[&str],
        stop_reason: &str,
        input_tokens: u64,
        output_tokens: u64,
    ) -> BedrockReply {
        let mut events = vec![("messageStart", json!({"role": "assistant"}))];
        for piece in pieces {
            events.push((
                "contentBlockDelta",
                json!({"contentBlockIndex": 0, "delta": {"text": piece}}),
            ));
        }
        events.push(("contentBlockStop", json!({"contentBlockIndex": 0})));
        events.push(("messageStop", json!({ "stopReason": stop_reason })));
        events.push((
            "metadata",
            json!({"usage": usage(input_tokens, output_tokens), "metrics": {"latencyMs": 42}}),
        ));
        BedrockReply::stream(&events)
    }

    /// An error answer as Bedrock writes it: `x-amzn-errortype` and `{"message": ...}`.
    pub fn error(status: u16, kind: &str, message: &str) -> BedrockReply {
        BedrockReply::Json {
            status,
            headers: vec![(
                "x-amzn-errortype".to_owned(),
                format!("{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"),
            )],
            body: json!({ "message": message }),
        }
    }
}

/// `usage` of a Converse answer without cache tokens.
pub fn usage(input_tokens: u64, output_tokens: u64) -> Value {
    json!({"inputTokens": input_tokens, "outputTokens": output_tokens,
        "totalTokens": input_tokens + output_tokens})
}

/// One ConverseStream event frame, its payload padded with `p` as Bedrock pads them.
pub fn event_frame(kind: &str, payload: &Value) -> Vec<u8> {
    let mut payload = payload.clone();
    if let Some(object) = payload.as_object_mut() {
        object.insert("p".into(), json!("abcdefghijklmnopqrstuvwxyzABCDEF"));
    }
    encode(
        &[
            (":event-type", HeaderValue::from(kind)),
            (":content-type", "application/json".into()),
            (":message-type", "event".into()),
        ],
        payload.to_string().as_bytes(),
    )
}

/// An exception frame (`throttlingException`, `validationException`, ...) with `message`.
pub fn exception_frame(kind: &str, message: &str) -> Vec<u8> {
    encode(
        &[
            (":exception-type", HeaderValue::from(kind)),
            (":content-type", "application/json".into()),
            (":message-type", "exception".into()),
        ],
        json!({ "message": message }).to_string().as_bytes(),
    )
}

/// `frame` with its message checksum broken.
pub fn corrupt(mut frame: Vec<u8>) -> Vec<u8> {
    if let Some(last) = frame.last_mut() {
        *last ^= 0xff;
    }
    frame
}

/// The server side: who it accepts, the script, and what happened.
struct State {
    auth: BedrockAuth,
    script: Mutex<VecDeque<BedrockReply>>,
    traffic: Traffic,
    rejected: Mutex<Vec<String>>,
}

/// A running fake Bedrock Runtime; stops when dropped. Derefs to its [`Traffic`].
pub struct BedrockUpstream {
    state: Arc<State>,
    server: FakeServer,
}

impl Deref for BedrockUpstream {
    type Target = Traffic;

    fn deref(&self) -> &Traffic {
        &self.state.traffic
    }
}

impl BedrockUpstream {
    /// Accepts requests by `auth`; answers Converse and ConverseStream calls with `replies`,
    /// in order.
    pub fn start(auth: BedrockAuth, replies: Vec<BedrockReply>) -> BedrockUpstream {
        let state = Arc::new(State {
            auth,
            script: Mutex::new(replies.into()),
            traffic: Traffic::default(),
            rejected: Mutex::new(Vec::new()),
        });
        BedrockUpstream {
            server: FakeServer::start("fake-bedrock", state.clone()),
            state,
        }
    }

    /// `http://127.0.0.1:PORT`, the route's `base_url`.
    pub fn base_url(&self) -> String {
        self.server.base_url("")
    }

    /// Why the requests it refused were refused (a bad signature, a wrong key), in order.
    pub fn rejected(&self) -> Vec<String> {
        lock(&self.state.rejected).clone()
    }

    /// Asserts every request so far was signed (or keyed) right, and that there was one.
    pub fn assert_all_signed(&self) {
        assert!(
            self.request_count() > 0,
            "the fake Bedrock received no request"
        );
        assert_eq!(
            self.rejected(),
            Vec::<String>::new(),
            "requests the fake Bedrock refused"
        );
    }
}

impl Handler for State {
    type Body = ScriptedBody;

    async fn handle(self: Arc<Self>, request: Request<Incoming>) -> Response<ScriptedBody> {
        let received = ReceivedRequest::read(request).await;
        let reply = match check_auth(&self.auth, &received) {
            Err(reason) => {
                // As AWS words it, quoting what it computed (which holds the session token).
                let message = format!(
                    "The request signature we calculated does not match the signature you \
                     provided. Check your AWS Secret Access Key and signing method.\n\nThe \
                     Canonical String for this request should have been\n'{reason}'"
                );
                lock(&self.rejected).push(reason);
                BedrockReply::error(403, "InvalidSignatureException", &message)
            }
            Ok(()) => {
                // Held while recording, so the n-th request recorded gets the n-th reply.
                let mut script = lock(&self.script);
                let reply = answer(&mut script, &received);
                self.traffic.record(received);
                return respond(reply, &self.traffic);
            }
        };
        self.traffic.record(received);
        respond(reply, &self.traffic)
    }
}

/// The answer to an authenticated request.
fn answer(script: &mut VecDeque<BedrockReply>, request: &ReceivedRequest) -> BedrockReply {
    let path = request.path_only();
    let operation = path.rsplit('/').next().unwrap_or("");
    if !path.starts_with("/model/") || request.method != "POST" {
        return BedrockReply::error(404, "UnknownOperationException", "unknown operation");
    }
    match operation {
        "converse" | "converse-stream" => script.pop_front().unwrap_or_else(|| {
            BedrockReply::error(
                500,
                "InternalServerException",
                "no reply left in the script",
            )
        }),
        "invoke" if path.contains(".rerank-") => rerank(path, request),
        "invoke" if path.contains("amazon.nova-canvas") => images(ImageModel::Nova, request),
        "invoke" if path.contains("amazon.titan-image-generator") => {
            images(ImageModel::Titan, request)
        }
        "invoke" => embeddings(path, request),
        "count-tokens" => count(request),
        _ => BedrockReply::error(404, "UnknownOperationException", "unknown operation"),
    }
}

/// The fields CountTokens' `converse` input takes: Bedrock refuses any other.
const COUNT_FIELDS: [&str; 4] = [
    "messages",
    "system",
    "toolConfig",
    "additionalModelRequestFields",
];

/// CountTokens of a `converse` input, counting [`counted_tokens`] of its messages and tools.
fn count(request: &ReceivedRequest) -> BedrockReply {
    let body = serde_json::from_slice::<Value>(&request.body).unwrap_or(Value::Null);
    let invalid = |message: &str| BedrockReply::error(400, "ValidationException", message);
    let Some(converse) = body["input"]["converse"].as_object() else {
        return invalid("input.converse is required");
    };
    if let Some(extra) = converse
        .keys()
        .find(|key| !COUNT_FIELDS.contains(&key.as_str()))
    {
        return invalid(&format!(
            "input.converse.{extra} is not a field of ConverseTokensRequest"
        ));
    }
    let length = |value: Option<&Value>| value.and_then(Value::as_array).map_or(0, Vec::len);
    let tools = converse
        .get("toolConfig")
        .and_then(|config| config.get("tools"));
    let tokens = counted_tokens(length(converse.get("messages")), length(tools));
    BedrockReply::Json {
        status: 200,
        headers: Vec::new(),
        body: json!({ "inputTokens": tokens }),
    }
}

/// InvokeModel of a rerank model, computed with [`fake_relevance`]: Cohere Rerank 3.5 (which
/// needs `api_version` 2 or more) and Amazon Rerank 1.0, each refusing a key it does not take,
/// answering `results` the most relevant first, cut to `top_n`, without usage (as Bedrock
/// answers them).
fn rerank(path: &str, request: &ReceivedRequest) -> BedrockReply {
    let body = serde_json::from_slice::<Value>(&request.body).unwrap_or(Value::Null);
    let invalid = |message: &str| BedrockReply::error(400, "ValidationException", message);
    let cohere = path.contains("cohere.rerank");
    let keys: &[&str] = if cohere {
        &[
            "query",
            "documents",
            "top_n",
            "api_version",
            "max_tokens_per_doc",
        ]
    } else {
        &["query", "documents", "top_n"]
    };
    let Some(fields) = body.as_object() else {
        return invalid("the body is not a JSON object");
    };
    if let Some(extra) = fields.keys().find(|key| !keys.contains(&key.as_str())) {
        return invalid(&format!("#: extraneous key [{extra}] is not permitted"));
    }
    if cohere
        && body["api_version"]
            .as_u64()
            .is_none_or(|version| version < 2)
    {
        return invalid("#/api_version: 1 is not greater or equal to 2");
    }
    let query = body["query"].as_str();
    let documents: Option<Vec<&str>> = (body["documents"].as_array())
        .and_then(|documents| documents.iter().map(Value::as_str).collect());
    let (Some(query), Some(documents)) = (query, documents) else {
        return invalid("query and documents (strings) are required");
    };
    let mut ranked: Vec<(usize, f64)> = (documents.iter().enumerate())
        .map(|(i, document)| (i, fake_relevance(query, document)))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    if let Some(n) = body["top_n"].as_u64() {
        ranked.truncate(n as usize);
    }
    let results: Vec<Value> = (ranked.iter())
        .map(|&(index, score)| json!({"index": index, "relevance_score": score}))
        .collect();
    BedrockReply::Json {
        status: 200,
        headers: Vec::new(),
        body: json!({"id": "rerank-1", "results": results}),
    }
}

/// An Amazon image model as the fake serves it: what its TEXT_IMAGE body may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ImageModel {
    Nova,
    Titan,
}

/// Nova Canvas's visual styles (`textToImageParams.style`); Titan has none.
const NOVA_STYLES: [&str; 8] = [
    "3D_ANIMATED_FAMILY_FILM",
    "DESIGN_SKETCH",
    "FLAT_VECTOR_ILLUSTRATION",
    "GRAPHIC_NOVEL_ILLUSTRATION",
    "MAXIMALISM",
    "MIDCENTURY_RETRO",
    "PHOTOREALISM",
    "SOFT_DIGITAL_PAINTING",
];

/// The sizes Titan Image Generator G1 (v1 and v2) makes, from AWS's user guide (written here
/// apart from the plugin's list, so that each checks the other).
const TITAN_SIZES: [(u64, u64); 25] = [
    (1024, 1024),
    (768, 768),
    (512, 512),
    (768, 1152),
    (384, 576),
    (1152, 768),
    (576, 384),
    (768, 1280),
    (384, 640),
    (1280, 768),
    (640, 384),
    (896, 1152),
    (448, 576),
    (1152, 896),
    (576, 448),
    (768, 1408),
    (384, 704),
    (1408, 768),
    (704, 384),
    (640, 1408),
    (320, 704),
    (1408, 640),
    (704, 320),
    (1152, 640),
    (1173, 640),
];

impl ImageModel {
    /// The longest `text` and `negativeText`, in characters.
    fn max_text(self) -> usize {
        match self {
            ImageModel::Nova => 1024,
            ImageModel::Titan => 512,
        }
    }

    /// The largest `seed`.
    fn max_seed(self) -> u64 {
        match self {
            ImageModel::Nova => 858_993_459,
            ImageModel::Titan => 2_147_483_646,
        }
    }

    fn text_keys(self) -> &'static [&'static str] {
        match self {
            ImageModel::Nova => &["text", "negativeText", "style"],
            ImageModel::Titan => &["text", "negativeText"],
        }
    }

    /// Whether the model makes images `width` by `height` pixels.
    fn makes(self, width: u64, height: u64) -> bool {
        match self {
            ImageModel::Nova => {
                let side =
                    |pixels: u64| (320..=4096).contains(&pixels) && pixels.is_multiple_of(16);
                side(width)
                    && side(height)
                    && width.max(height) <= 4 * width.min(height)
                    && width * height <= 4_194_304
            }
            ImageModel::Titan => TITAN_SIZES.contains(&(width, height)),
        }
    }
}

/// InvokeModel of an image model, TEXT_IMAGE only: the body checked as strictly as Bedrock
/// checks it (no unknown key, every value of its type and in its range, a size the model
/// makes), answered with `numberOfImages` [`fake_png`]s of the prompt and each image's index
/// (`"{prompt}#{i}"`), base64, and `"error": null`. [`REFUSED_PROMPT`] gets Nova Canvas's
/// content filter's 400.
fn images(model: ImageModel, request: &ReceivedRequest) -> BedrockReply {
    let body = serde_json::from_slice::<Value>(&request.body).unwrap_or(Value::Null);
    match text_to_image(model, &body) {
        Err(problem) => BedrockReply::error(
            400,
            "ValidationException",
            &format!(
                "Malformed input request: {problem}, please reformat your input and try again."
            ),
        ),
        Ok((prompt, _)) if prompt == REFUSED_PROMPT => {
            BedrockReply::error(400, "ValidationException", CONTENT_FILTERED)
        }
        Ok((prompt, count)) => {
            let images: Vec<String> = (0..count)
                .map(|i| STANDARD.encode(fake_png(&format!("{prompt}#{i}"))))
                .collect();
            BedrockReply::Json {
                status: 200,
                headers: Vec::new(),
                body: json!({"images": images, "error": null}),
            }
        }
    }
}

/// The prompt and the number of images of a TEXT_IMAGE body, or what is wrong with it, in the
/// words of Bedrock's schema checks.
fn text_to_image(model: ImageModel, body: &Value) -> Result<(String, u64), String> {
    let top = fields(
        body,
        "#",
        &["taskType", "textToImageParams", "imageGenerationConfig"],
    )?;
    match top.get("taskType") {
        Some(Value::String(task)) if task == "TEXT_IMAGE" => {}
        Some(Value::String(task)) => {
            return Err(format!("#/taskType: {task} is not served by the fake"));
        }
        Some(other) => return Err(wrong_type("#/taskType", "String", other)),
        None => return Err("#: required key [taskType] not found".to_owned()),
    }

    let at = "#/textToImageParams";
    let params = top
        .get("textToImageParams")
        .ok_or("#: required key [textToImageParams] not found")?;
    let params = fields(params, at, model.text_keys())?;
    let prompt = text(params, at, "text", model.max_text())?
        .ok_or(format!("{at}: required key [text] not found"))?;
    text(params, at, "negativeText", model.max_text())?;
    if let Some(style) = text(params, at, "style", usize::MAX)?
        && !NOVA_STYLES.contains(&style)
    {
        return Err(format!("{at}/style: {style} is not a valid enum value"));
    }

    let at = "#/imageGenerationConfig";
    let empty = Value::Object(Map::new());
    let config = fields(
        top.get("imageGenerationConfig").unwrap_or(&empty),
        at,
        &[
            "numberOfImages",
            "width",
            "height",
            "quality",
            "cfgScale",
            "seed",
        ],
    )?;
    let count = integer(config, at, "numberOfImages", 1..=5)?.unwrap_or(1);
    let width = integer(config, at, "width", 1..=u64::MAX)?.unwrap_or(1024);
    let height = integer(config, at, "height", 1..=u64::MAX)?.unwrap_or(1024);
    if !model.makes(width, height) {
        return Err(format!(
            "{at}: Value of (width, height) is not valid. Given: ({width}, {height})"
        ));
    }
    if let Some(quality) = text(config, at, "quality", usize::MAX)?
        && !["standard", "premium"].contains(&quality)
    {
        return Err(format!("{at}/quality: {quality} is not a valid enum value"));
    }
    integer(config, at, "seed", 0..=model.max_seed())?;
    if let Some(value) = config.get("cfgScale") {
        let scale = value
            .as_f64()
            .ok_or_else(|| wrong_type(&format!("{at}/cfgScale"), "Number", value))?;
        if !(1.1..=10.0).contains(&scale) {
            return Err(format!(
                "{at}/cfgScale: {scale} is not between 1.1 and 10.0"
            ));
        }
    }
    Ok((prompt.to_owned(), count))
}

/// `value` as an object whose keys are among `keys`.
fn fields<'a>(value: &'a Value, at: &str, keys: &[&str]) -> Result<&'a Map<String, Value>, String> {
    let fields = value
        .as_object()
        .ok_or_else(|| wrong_type(at, "JSONObject", value))?;
    match fields.keys().find(|key| !keys.contains(&key.as_str())) {
        Some(extra) => Err(format!("{at}: extraneous key [{extra}] is not permitted")),
        None => Ok(fields),
    }
}

/// The string at `key`, when there is one, of 1 to `max` characters.
fn text<'a>(
    fields: &'a Map<String, Value>,
    at: &str,
    key: &str,
    max: usize,
) -> Result<Option<&'a str>, String> {
    let Some(value) = fields.get(key) else {
        return Ok(None);
    };
    let text = value
        .as_str()
        .ok_or_else(|| wrong_type(&format!("{at}/{key}"), "String", value))?;
    let length = text.chars().count();
    if length == 0 || length > max {
        return Err(format!(
            "{at}/{key}: expected length: [1, {max}], actual: {length}"
        ));
    }
    Ok(Some(text))
}

/// The integer at `key`, when there is one, in `range`.
fn integer(
    fields: &Map<String, Value>,
    at: &str,
    key: &str,
    range: std::ops::RangeInclusive<u64>,
) -> Result<Option<u64>, String> {
    let Some(value) = fields.get(key) else {
        return Ok(None);
    };
    let number = value
        .as_u64()
        .ok_or_else(|| wrong_type(&format!("{at}/{key}"), "Integer", value))?;
    if !range.contains(&number) {
        return Err(format!(
            "{at}/{key}: {number} is not between {} and {}",
            range.start(),
            range.end()
        ));
    }
    Ok(Some(number))
}

/// Bedrock's message for a value of the wrong JSON type.
fn wrong_type(at: &str, expected: &str, found: &Value) -> String {
    let found = match found {
        Value::Null => "Null",
        Value::Bool(_) => "Boolean",
        Value::Number(_) => "Number",
        Value::String(_) => "String",
        Value::Array(_) => "JSONArray",
        Value::Object(_) => "JSONObject",
    };
    format!("{at}: expected type: {expected}, found: {found}")
}

/// InvokeModel of an embedding model, computed: Titan's one vector, Cohere's list (with its
/// token count in `x-amzn-bedrock-input-token-count`, as Bedrock reports it). Tokens are words.
fn embeddings(path: &str, request: &ReceivedRequest) -> BedrockReply {
    let body = serde_json::from_slice::<Value>(&request.body).unwrap_or(Value::Null);
    let words = |text: &str| text.split_whitespace().count();
    if path.contains("amazon.titan-embed") {
        let Some(text) = body["inputText"].as_str() else {
            return BedrockReply::error(400, "ValidationException", "inputText is required");
        };
        return BedrockReply::Json {
            status: 200,
            headers: Vec::new(),
            body: json!({"embedding": fake_embedding(0, text),
                "inputTextTokenCount": words(text)}),
        };
    }
    if path.contains("cohere.embed") {
        let texts: Vec<&str> = (body["texts"].as_array().into_iter().flatten())
            .filter_map(Value::as_str)
            .collect();
        if texts.is_empty() || !body["input_type"].is_string() {
            return BedrockReply::error(
                400,
                "ValidationException",
                "texts and input_type are required",
            );
        }
        let vectors: Vec<Vec<f64>> = (texts.iter().enumerate())
            .map(|(i, text)| fake_embedding(i, text))
            .collect();
        let tokens: usize = texts.iter().map(|text| words(text)).sum();
        return BedrockReply::Json {
            status: 200,
            headers: vec![(
                "x-amzn-bedrock-input-token-count".to_owned(),
                tokens.to_string(),
            )],
            body: json!({"id": "emb-1", "embeddings": vectors,
                "response_type": "embeddings_floats", "texts": texts}),
        };
    }
    BedrockReply::error(400, "ValidationException", "not an embedding model")
}

fn respond(reply: BedrockReply, traffic: &Traffic) -> Response<ScriptedBody> {
    match reply {
        BedrockReply::Json {
            status,
            headers,
            body,
        } => server::whole(status, "application/json", &headers, body.to_string()),
        BedrockReply::Frames(frames) => {
            let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(1);
            let traffic = traffic.clone();
            tokio::spawn(async move {
                for (i, frame) in frames.into_iter().enumerate() {
                    if i > 0 {
                        tokio::time::sleep(EVENT_GAP).await;
                    }
                    if tx.send(Ok(Bytes::from(frame))).await.is_err() {
                        traffic.count_stream(Outcome::Abandoned);
                        return;
                    }
                }
                drop(tx);
                traffic.count_stream(Outcome::Sent);
            });
            Response::builder()
                .status(200)
                .header("content-type", EVENT_STREAM)
                .body(ScriptedBody::Pieces(rx))
                .expect("valid response")
        }
    }
}

/// `Ok` when `request` proves it comes from `auth`; else why not.
fn check_auth(auth: &BedrockAuth, request: &ReceivedRequest) -> Result<(), String> {
    match auth {
        BedrockAuth::Bearer(key) => {
            if request.header("authorization") == Some(format!("Bearer {key}").as_str()) {
                Ok(())
            } else {
                Err("the Bearer API key is missing or wrong".to_owned())
            }
        }
        BedrockAuth::SigV4 {
            access_key_id,
            secret_access_key,
            session_token,
            region,
        } => check_signature(
            request,
            access_key_id,
            secret_access_key,
            session_token.as_deref(),
            region,
        ),
    }
}

/// Recomputes the request's SigV4 signature (AWS's steps: canonical request, string to sign,
/// derived key, HMAC) and compares it with the one it carries.
fn check_signature(
    request: &ReceivedRequest,
    access_key_id: &str,
    secret: &str,
    session_token: Option<&str>,
    region: &str,
) -> Result<(), String> {
    let authorization = request
        .header("authorization")
        .ok_or("no Authorization header")?;
    let fields = authorization
        .strip_prefix("AWS4-HMAC-SHA256 ")
        .ok_or("not an AWS4-HMAC-SHA256 authorization")?;
    let field = |name: &str| {
        fields
            .split(", ")
            .find_map(|part| part.strip_prefix(name)?.strip_prefix('='))
            .ok_or(format!("no {name} in the authorization"))
    };
    let credential = field("Credential")?;
    let signed_headers = field("SignedHeaders")?;
    let signature = field("Signature")?;

    let date = request.header("x-amz-date").ok_or("no x-amz-date")?;
    let when = parse_amz_date(date).ok_or(format!("x-amz-date {date:?} is malformed"))?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if when.abs_diff(now) > CLOCK_SKEW {
        return Err(format!("x-amz-date {date} is too far from now"));
    }
    let day = &date[..8];
    let scope = format!("{day}/{region}/bedrock/aws4_request");
    if credential != format!("{access_key_id}/{scope}") {
        return Err(format!(
            "the credential {credential:?} is not {access_key_id}/{scope}"
        ));
    }

    let names: Vec<&str> = signed_headers.split(';').collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted != names {
        return Err("SignedHeaders are not sorted lowercase names".to_owned());
    }
    for required in ["host", "x-amz-date"] {
        if !names.contains(&required) {
            return Err(format!("{required} is not signed"));
        }
    }
    match (session_token, request.header("x-amz-security-token")) {
        (Some(expected), Some(sent)) if expected == sent => {
            if !names.contains(&"x-amz-security-token") {
                return Err("the session token is not signed".to_owned());
            }
        }
        (Some(_), _) => return Err("the session token is missing or wrong".to_owned()),
        (None, Some(_)) => return Err("a session token was sent to a key without one".to_owned()),
        (None, None) => {}
    }

    let mut canonical_headers = String::new();
    for name in &names {
        let values: Vec<String> = (request.headers.iter())
            .filter(|(n, _)| n == name)
            .map(|(_, value)| value.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        if values.is_empty() {
            return Err(format!("signed header {name} was not received"));
        }
        canonical_headers.push_str(&format!("{name}:{}\n", values.join(",")));
    }
    let (path, query) = request
        .path
        .split_once('?')
        .unwrap_or((request.path.as_str(), ""));
    let canonical = format!(
        "{}\n{}\n{}\n{canonical_headers}\n{signed_headers}\n{}",
        request.method,
        uri_encode(path, true),
        canonical_query(query),
        hex::encode(Sha256::digest(&request.body))
    );
    let string_to_sign = format!(
        "AWS4-HMAC-SHA256\n{date}\n{scope}\n{}",
        hex::encode(Sha256::digest(canonical.as_bytes()))
    );
    let mut key = hmac(format!("AWS4{secret}").as_bytes(), day.as_bytes());
    for part in [region, "bedrock", "aws4_request"] {
        key = hmac(&key, part.as_bytes());
    }
    let expected = hex::encode(hmac(&key, string_to_sign.as_bytes()));
    if expected != signature {
        return Err(format!(
            "the signature does not match; the canonical request:\n{canonical}"
        ));
    }
    Ok(())
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// SigV4's URI encoding: every byte but `A-Z a-z 0-9 - _ . ~` (and `/` in a path) as `%XX`.
/// A path as received is encoded once more, as AWS does for every service but S3.
fn uri_encode(text: &str, keep_slash: bool) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        let unreserved = byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~');
        if unreserved || (keep_slash && byte == b'/') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// The query's pairs sorted, as received (the plugin sends none).
fn canonical_query(query: &str) -> String {
    let mut pairs: Vec<(String, String)> = (query.split('&'))
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (name.to_owned(), value.to_owned())
        })
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// `20150830T123600Z` as Unix seconds.
fn parse_amz_date(text: &str) -> Option<u64> {
    let bytes = text.as_bytes();
    if bytes.len() != 16 || bytes[8] != b'T' || bytes[15] != b'Z' {
        return None;
    }
    let number = |range: std::ops::Range<usize>| text.get(range)?.parse::<u64>().ok();
    let (year, month, day) = (number(0..4)?, number(4..6)?, number(6..8)?);
    let (hour, minute, second) = (number(9..11)?, number(11..13)?, number(13..15)?);
    // Days since the epoch of a Gregorian date (Howard Hinnant's `days_from_civil`).
    let year = if month <= 2 { year - 1 } else { year };
    let era = year / 400;
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = (era * 146_097 + day_of_era).checked_sub(719_468)?;
    Some(days * 86_400 + hour * 3600 + minute * 60 + second)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amz_dates() {
        assert_eq!(parse_amz_date("20150830T123600Z"), Some(1_440_938_160));
        assert_eq!(parse_amz_date("20240229T235959Z"), Some(1_709_251_199));
        assert_eq!(parse_amz_date("2015-08-30T12:36:00Z"), None);
    }

    /// The answer to an InvokeModel call of `model` with `body`.
    fn invoke(model: &str, body: &Value) -> BedrockReply {
        let request = ReceivedRequest {
            method: "POST".into(),
            path: format!("/model/{model}/invoke"),
            headers: Vec::new(),
            body: body.to_string().into_bytes(),
        };
        answer(&mut VecDeque::new(), &request)
    }

    /// A TEXT_IMAGE body with every option Nova Canvas takes.
    fn nova_body() -> Value {
        json!({
            "taskType": "TEXT_IMAGE",
            "textToImageParams": {"text": "a cat", "negativeText": "dogs", "style": "PHOTOREALISM"},
            "imageGenerationConfig": {"numberOfImages": 2, "width": 1280, "height": 720,
                "quality": "premium", "cfgScale": 6.5, "seed": 42},
        })
    }

    /// A TEXT_IMAGE body with every option Titan Image Generator takes.
    fn titan_body() -> Value {
        let mut body = nova_body();
        body["textToImageParams"]
            .as_object_mut()
            .map(|params| params.remove("style"));
        body["imageGenerationConfig"]["width"] = json!(1173);
        body["imageGenerationConfig"]["height"] = json!(640);
        body
    }

    #[test]
    fn image_models_answer_pngs_of_the_prompt() {
        for (model, body) in [
            ("amazon.nova-canvas-v1%3A0", nova_body()),
            ("amazon.titan-image-generator-v2%3A0", titan_body()),
            ("amazon.titan-image-generator-v1", titan_body()),
        ] {
            let BedrockReply::Json { status, body, .. } = invoke(model, &body) else {
                panic!("a JSON answer");
            };
            assert_eq!(status, 200, "{model}: {body}");
            let expected: Vec<String> = ["a cat#0", "a cat#1"]
                .iter()
                .map(|seed| STANDARD.encode(fake_png(seed)))
                .collect();
            assert_eq!(body, json!({"images": expected, "error": null}), "{model}");
        }
        let minimal = json!({"taskType": "TEXT_IMAGE", "textToImageParams": {"text": "a dog"}});
        let BedrockReply::Json { body, .. } = invoke("amazon.nova-canvas-v1%3A0", &minimal) else {
            panic!("a JSON answer");
        };
        assert_eq!(
            body["images"],
            json!([STANDARD.encode(fake_png("a dog#0"))])
        );
    }

    #[test]
    fn image_bodies_are_checked_as_bedrock_checks_them() {
        let nova = "amazon.nova-canvas-v1%3A0";
        let titan = "amazon.titan-image-generator-v2%3A0";
        let cases: [(&str, Value, &str, Value, &str); 14] = [
            (
                titan,
                titan_body(),
                "/textToImageParams/style",
                json!("PHOTOREALISM"),
                "#/textToImageParams: extraneous key [style] is not permitted",
            ),
            (
                nova,
                nova_body(),
                "/background",
                json!("transparent"),
                "#: extraneous key [background] is not permitted",
            ),
            (
                nova,
                nova_body(),
                "/imageGenerationConfig/style",
                json!("x"),
                "#/imageGenerationConfig: extraneous key [style] is not permitted",
            ),
            (
                nova,
                nova_body(),
                "/taskType",
                json!("INPAINTING"),
                "#/taskType: INPAINTING is not served by the fake",
            ),
            (
                nova,
                nova_body(),
                "/textToImageParams/text",
                json!(""),
                "#/textToImageParams/text: expected length: [1, 1024], actual: 0",
            ),
            (
                titan,
                titan_body(),
                "/textToImageParams/text",
                json!("x".repeat(513)),
                "#/textToImageParams/text: expected length: [1, 512], actual: 513",
            ),
            (
                nova,
                nova_body(),
                "/textToImageParams/style",
                json!("vivid"),
                "#/textToImageParams/style: vivid is not a valid enum value",
            ),
            (
                nova,
                nova_body(),
                "/imageGenerationConfig/numberOfImages",
                json!(6),
                "#/imageGenerationConfig/numberOfImages: 6 is not between 1 and 5",
            ),
            (
                nova,
                nova_body(),
                "/imageGenerationConfig/seed",
                json!("42"),
                "#/imageGenerationConfig/seed: expected type: Integer, found: String",
            ),
            (
                nova,
                nova_body(),
                "/imageGenerationConfig/seed",
                json!(858_993_460),
                "#/imageGenerationConfig/seed: 858993460 is not between 0 and 858993459",
            ),
            (
                nova,
                nova_body(),
                "/imageGenerationConfig/width",
                json!(1000),
                "#/imageGenerationConfig: Value of (width, height) is not valid. Given: (1000, 720)",
            ),
            (
                titan,
                titan_body(),
                "/imageGenerationConfig/width",
                json!(1280),
                "#/imageGenerationConfig: Value of (width, height) is not valid. Given: (1280, 640)",
            ),
            (
                nova,
                nova_body(),
                "/imageGenerationConfig/quality",
                json!("hd"),
                "#/imageGenerationConfig/quality: hd is not a valid enum value",
            ),
            (
                nova,
                nova_body(),
                "/imageGenerationConfig/cfgScale",
                json!(20),
                "#/imageGenerationConfig/cfgScale: 20 is not between 1.1 and 10.0",
            ),
        ];
        for (model, mut body, pointer, value, expected) in cases {
            let (parent, key) = pointer.rsplit_once('/').expect("a pointer");
            body.pointer_mut(parent).expect("the key's object")[key] = value;
            let BedrockReply::Json {
                status,
                headers,
                body,
            } = invoke(model, &body)
            else {
                panic!("a JSON answer");
            };
            assert_eq!(status, 400, "{expected}");
            assert!(headers[0].1.starts_with("ValidationException:"));
            assert_eq!(
                body["message"],
                json!(format!(
                    "Malformed input request: {expected}, please reformat your input and try again."
                ))
            );
        }
    }

    #[test]
    fn image_models_refuse_the_refused_prompt() {
        let BedrockReply::Json {
            status,
            headers,
            body,
        } = invoke("amazon.titan-image-generator-v1", &titan_body())
        else {
            panic!("a JSON answer");
        };
        assert_eq!(
            (status, body["images"].as_array().map(Vec::len)),
            (200, Some(2))
        );
        assert!(headers.is_empty());
        let mut refused = nova_body();
        refused["textToImageParams"]["text"] = json!(REFUSED_PROMPT);
        let BedrockReply::Json {
            status,
            headers,
            body,
        } = invoke("amazon.nova-canvas-v1%3A0", &refused)
        else {
            panic!("a JSON answer");
        };
        assert_eq!(status, 400);
        assert!(headers[0].1.starts_with("ValidationException:"));
        assert_eq!(body, json!({ "message": CONTENT_FILTERED }));
    }

    #[test]
    fn paths_are_encoded_once_more() {
        assert_eq!(
            uri_encode("/model/us.anthropic.claude-v1%3A0/converse", true),
            "/model/us.anthropic.claude-v1%253A0/converse"
        );
    }
}
