//! InvokeModel (`POST {base_url}/model/{modelId}/invoke`), whose body and answer are the
//! model's own: what embeddings (`embed`), rerank (`rerank`) and images (`images`) share, so
//! that all sign, address and read their calls the same way (the route's credentials, the
//! model id as one path segment, Bedrock's errors mapped by `errors`).

use gateway_plugin_sdk::http::{Request, Response};
use gateway_plugin_sdk::{ProviderError, Route};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::convert::{Auth, Settings, model_url};
use crate::sigv4::AmzDate;

/// The header in which Bedrock tells the input tokens of an InvokeModel call, for models whose
/// own answer does not.
const INPUT_TOKENS_HEADER: &str = "x-amzn-bedrock-input-token-count";

/// InvokeModel calls of one model on one route.
pub struct Invoke<'a> {
    auth: Auth<'a>,
    url: String,
}

impl<'a> Invoke<'a> {
    /// The route's credentials and `model`'s InvokeModel URL; errors as the route's settings,
    /// credentials or model id are wrong.
    pub fn new(route: &'a Route, model: &str) -> Result<Invoke<'a>, ProviderError> {
        let settings = route.settings::<Settings>()?;
        let auth = Auth::of(route, &settings)?;
        let url = model_url(route, model, "invoke")?;
        Ok(Invoke { auth, url })
    }

    /// The call carrying `body`, signed at `date`: apart from [`Invoke::send`] so that tests
    /// sign at a fixed time.
    pub fn request(&self, body: &Value, date: &AmzDate) -> Result<Request, ProviderError> {
        let call = Request::post(self.url.as_str())
            .header("accept", "application/json")
            .json(body)?;
        self.auth.apply(call, date)
    }

    /// Sends `body`, signed now; an error answer is Bedrock's error, mapped.
    pub fn send(&self, body: &Value) -> Result<Response, ProviderError> {
        crate::send(self.request(body, &AmzDate::now())?)
    }
}

/// The input token count of an answer's header, when Bedrock sends one.
pub fn input_tokens(response: &Response) -> Option<u32> {
    response
        .header(INPUT_TOKENS_HEADER)
        .and_then(|count| count.trim().parse::<u32>().ok())
}

/// An answer's JSON as `T`; anything else is the upstream's fault ([`ProviderError::Failed`]).
pub fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, ProviderError> {
    serde_json::from_slice(body).map_err(ProviderError::malformed)
}
