//! A scriptable fake provider API on 127.0.0.1, for the tests of the provider plugins through
//! the gateway.
//!
//! The scripting, the record of what was received and the replay of streams live here once;
//! what differs between providers is a [`Provider`]: which paths are generation calls (answered
//! from the script), what the fake computes itself (embeddings, OpenAI's legacy completions)
//! and the shape of its error bodies. A script is one of:
//!
//! - [`FakeUpstream::script`] / [`FakeUpstream::replay`]: generation calls get the replies (or
//!   a recording's interactions) in order;
//! - [`FakeUpstream::each_call`]: every generation call gets the same reply (a slow stream);
//! - [`FakeUpstream::always`] / [`FakeUpstream::hang`]: every request, whatever its path, gets
//!   the same reply, or none at all.
//!
//! A request the script has no answer for gets an error in the provider's shape, which the
//! test then sees failing. Every request is kept ([`Traffic`]) for assertions.
//!
//! [`hostile`] is a different kind of fake: answers no provider sends, for the sandbox tests.

pub mod anthropic;
pub mod bedrock;
pub mod gemini;
pub mod hostile;
pub mod open_meteo;
pub mod openai;
mod server;
pub mod vertex;

use std::collections::VecDeque;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::ops::Deref;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::Value;

use crate::recording::{Interaction, Recording};
pub use server::{Ending, ReceivedRequest, Traffic};
use server::{FakeServer, Handler, ScriptedBody, lock};

pub use anthropic::Anthropic;
pub use gemini::Gemini;
pub use openai::{FAKE_IMAGE_TOKENS, OpenAi};

/// A fake OpenAI-compatible API (chat, legacy completions, embeddings).
pub type OpenAiUpstream = FakeUpstream<OpenAi>;
/// A fake Anthropic Messages API.
pub type AnthropicUpstream = FakeUpstream<Anthropic>;
/// A fake Gemini API.
pub type GeminiUpstream = FakeUpstream<Gemini>;
/// A fake Vertex AI with Google's token endpoint.
pub type VertexUpstream = FakeUpstream<vertex::Vertex>;
/// The weather API the example tool plugin calls.
pub type OpenMeteoUpstream = FakeUpstream<open_meteo::OpenMeteo>;

/// Pause between the pieces of a streamed reply, so each travels in its own write and the
/// plugin sees the stream arrive piece by piece.
pub const EVENT_GAP: Duration = Duration::from_millis(2);

/// What makes a fake upstream one provider's API.
pub trait Provider: 'static {
    /// Names the server's thread.
    const NAME: &'static str;

    /// Whether a request to `path` (without its query) is a generation call, answered from the
    /// script.
    fn is_generation(path: &str) -> bool;

    /// The answer the fake computes from `request` itself (embeddings and the like), `None`
    /// for the requests it does not.
    fn computed(request: &ReceivedRequest) -> Option<Reply>;

    /// An error answer in the provider's shape, for requests the test did not script.
    fn error(status: u16, message: &str) -> Reply;
}

/// What a fake's token count answers (Anthropic's `count_tokens`, Gemini's `countTokens`) for
/// `messages` messages and `tools` tools: a number a test can expect, which shows that both
/// arrived.
pub fn counted_tokens(messages: usize, tools: usize) -> u64 {
    100 * messages as u64 + tools as u64
}

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A body sent whole, with its length.
    Whole {
        status: u16,
        content_type: String,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// A body written in `pieces`, each its own write, `gap` apart; it ends as `ending` says.
    Pieces {
        status: u16,
        content_type: String,
        headers: Vec<(String, String)>,
        pieces: Vec<String>,
        gap: Duration,
        ending: Ending,
    },
    /// No answer: the request is read and held until the client gives up (for timeouts).
    Hang,
}

impl Reply {
    /// `body` as an `application/json` answer with `status`.
    pub fn json(status: u16, body: &Value) -> Reply {
        Reply::raw(status, "application/json", body.to_string())
    }

    /// Any text as a whole body (for bodies that are not what they claim to be).
    pub fn raw(status: u16, content_type: &str, body: impl Into<String>) -> Reply {
        Reply::Whole {
            status,
            content_type: content_type.to_owned(),
            headers: Vec::new(),
            body: body.into(),
        }
    }

    /// A `200` event stream of `events`, each its own write, [`EVENT_GAP`] apart.
    pub fn events(events: Vec<String>) -> Reply {
        Reply::Pieces {
            status: 200,
            content_type: "text/event-stream; charset=utf-8".to_owned(),
            headers: vec![("cache-control".to_owned(), "no-cache".to_owned())],
            pieces: events,
            gap: EVENT_GAP,
            ending: Ending::Finish,
        }
    }

    /// The recorded answer of `interaction`, with its status and content type; a stream is
    /// sent event by event.
    pub fn recorded(interaction: &Interaction) -> Reply {
        let (status, content_type) = (interaction.response.code, interaction.content_type());
        if interaction.is_sse() {
            Reply::Pieces {
                status,
                content_type,
                headers: vec![("cache-control".to_owned(), "no-cache".to_owned())],
                pieces: interaction.sse_events(),
                gap: EVENT_GAP,
                ending: Ending::Finish,
            }
        } else {
            Reply::raw(status, &content_type, interaction.response.body.clone())
        }
    }

    /// Adds a response header.
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        if let Reply::Whole { headers, .. } | Reply::Pieces { headers, .. } = &mut self {
            headers.push((name.to_owned(), value.to_owned()));
        }
        self
    }

    /// Adds `retry-after` when given.
    pub fn retry_after(self, value: Option<&str>) -> Reply {
        match value {
            Some(value) => self.header("retry-after", value),
            None => self,
        }
    }

    /// Pieces written `gap` apart instead of [`EVENT_GAP`].
    pub fn gap(mut self, new_gap: Duration) -> Reply {
        if let Reply::Pieces { gap, .. } = &mut self {
            *gap = new_gap;
        }
        self
    }

    /// A whole body sent in two halves `gap` apart: an answer that keeps its request in
    /// flight for `gap`.
    pub fn slowly(self, gap: Duration) -> Reply {
        match self {
            Reply::Whole {
                status,
                content_type,
                headers,
                body,
            } => {
                let mut half = body.len() / 2;
                while !body.is_char_boundary(half) {
                    half += 1;
                }
                let (first, second) = body.split_at(half);
                Reply::Pieces {
                    status,
                    content_type,
                    headers,
                    pieces: vec![first.to_owned(), second.to_owned()],
                    gap,
                    ending: Ending::Finish,
                }
            }
            other => other.gap(gap),
        }
    }

    /// Drops the connection after the last piece instead of ending the body properly.
    pub fn cut(mut self) -> Reply {
        if let Reply::Pieces { ending, .. } = &mut self {
            *ending = Ending::Cut;
        }
        self
    }
}

/// How requests are answered.
enum Script {
    /// Generation calls get these replies, in order.
    Queue(VecDeque<Reply>),
    /// Every generation call gets this reply.
    EachCall(Reply),
    /// Every request, whatever its path, gets this reply.
    Always(Reply),
    /// Every generation call gets the reply computed from it.
    Computed(Compute),
}

/// How a reply is computed from the request it answers.
pub type Compute = Arc<dyn Fn(&ReceivedRequest) -> Reply + Send + Sync>;

/// The server side: the script and what happened.
struct Upstream<P> {
    script: Mutex<Script>,
    traffic: Traffic,
    provider: PhantomData<fn() -> P>,
}

/// A running fake upstream serving provider `P`'s API; stops when dropped. Derefs to its
/// [`Traffic`] (requests and streams) for assertions.
pub struct FakeUpstream<P> {
    traffic: Traffic,
    server: FakeServer,
    provider: PhantomData<fn() -> P>,
}

impl<P> Deref for FakeUpstream<P> {
    type Target = Traffic;

    fn deref(&self) -> &Traffic {
        &self.traffic
    }
}

impl<P: Provider> FakeUpstream<P> {
    /// Answers only what the fake computes itself (e.g. embeddings).
    pub fn start() -> Self {
        Self::script(Vec::new())
    }

    /// Answers generation calls with `replies`, in order.
    pub fn script(replies: Vec<Reply>) -> Self {
        Self::with(Script::Queue(replies.into()))
    }

    /// Answers generation calls with a recording's interactions, in order.
    pub fn replay(recording: &Recording) -> Self {
        Self::script(recording.interactions.iter().map(Reply::recorded).collect())
    }

    /// Answers every generation call with `reply`.
    pub fn each_call(reply: Reply) -> Self {
        Self::with(Script::EachCall(reply))
    }

    /// Answers every generation call with the reply `compute` makes of it (a model that writes
    /// as much as it was allowed, say).
    pub fn computing(compute: impl Fn(&ReceivedRequest) -> Reply + Send + Sync + 'static) -> Self {
        Self::with(Script::Computed(Arc::new(compute)))
    }

    /// Answers every request, whatever its path, with `reply`.
    pub fn always(reply: Reply) -> Self {
        Self::with(Script::Always(reply))
    }

    /// Never answers (for timeouts).
    pub fn hang() -> Self {
        Self::always(Reply::Hang)
    }

    fn with(script: Script) -> Self {
        let traffic = Traffic::default();
        let upstream = Upstream::<P> {
            script: Mutex::new(script),
            traffic: traffic.clone(),
            provider: PhantomData,
        };
        FakeUpstream {
            traffic,
            server: FakeServer::start(P::NAME, Arc::new(upstream)),
            provider: PhantomData,
        }
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// A base URL for a route: `http://127.0.0.1:PORT<prefix>`, e.g. prefix `/v1`.
    pub fn base_url(&self, prefix: &str) -> String {
        self.server.base_url(prefix)
    }

    /// Waits until `condition` holds; panics after a minute (a liveness bound, not a timing
    /// assertion).
    pub fn wait_until(&self, what: &str, condition: impl Fn(&Self) -> bool) {
        server::wait_until(what, || condition(self));
    }
}

impl<P: Provider> Upstream<P> {
    /// The answer to `request` under `script`.
    fn reply(script: &mut Script, request: &ReceivedRequest) -> Reply {
        if let Script::Always(reply) = script {
            return reply.clone();
        }
        if let Some(reply) = P::computed(request) {
            return reply;
        }
        let path = request.path_only();
        if !P::is_generation(path) {
            return P::error(404, &format!("unknown path {path}"));
        }
        match script {
            Script::Queue(queue) => queue.pop_front().unwrap_or_else(|| {
                P::error(500, &format!("no reply left in the script for {path}"))
            }),
            Script::EachCall(reply) | Script::Always(reply) => reply.clone(),
            Script::Computed(compute) => compute(request),
        }
    }
}

impl<P: Provider> Handler for Upstream<P> {
    type Body = ScriptedBody;

    async fn handle(self: Arc<Self>, request: Request<Incoming>) -> Response<ScriptedBody> {
        let received = ReceivedRequest::read(request).await;
        let reply = {
            // Held while recording, so the n-th request recorded gets the n-th reply.
            let mut script = lock(&self.script);
            let reply = Self::reply(&mut script, &received);
            self.traffic.record(received);
            reply
        };
        match reply {
            Reply::Whole {
                status,
                content_type,
                headers,
                body,
            } => server::whole(status, &content_type, &headers, body),
            Reply::Pieces {
                status,
                content_type,
                headers,
                pieces,
                gap,
                ending,
            } => {
                let traffic = self.traffic.clone();
                server::pieces(
                    status,
                    &content_type,
                    &headers,
                    pieces,
                    gap,
                    ending,
                    move |outcome| traffic.count_stream(outcome),
                )
            }
            Reply::Hang => {
                // Held until the gateway gives up and closes the connection.
                std::future::pending::<()>().await;
                unreachable!("a pending future never completes")
            }
        }
    }
}

/// The vector a fake upstream computes for input number `index`: exactly representable in
/// f32, so tests compare it exactly.
pub fn fake_embedding(index: usize, input: &str) -> Vec<f64> {
    vec![index as f64 + 0.5, input.len() as f64, -0.25]
}

/// How relevant a fake reranker finds `document` to `query`: the share of the query's words
/// the document holds (case aside), so a test can tell the order it expects.
pub fn fake_relevance(query: &str, document: &str) -> f64 {
    let document = document.to_lowercase();
    let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
    let held = words
        .iter()
        .filter(|word| document.split_whitespace().any(|w| w == word.as_str()))
        .count();
    held as f64 / words.len().max(1) as f64
}

/// The tokens a fake reranker counts for `documents` read beside `query`: the words of each
/// pair.
pub fn rerank_tokens(query: &str, documents: &[String]) -> u64 {
    let words = |text: &str| text.split_whitespace().count() as u64;
    documents.iter().map(|d| words(query) + words(d)).sum()
}

/// The side, in pixels, of the square images [`fake_png`] makes.
const FAKE_PNG_SIDE: usize = 2;

/// A valid PNG of 2x2 8-bit RGB pixels that follow from `seed`: the image a fake image model
/// makes, another for each prompt and index (`"{prompt}#{i}"`), and one any PNG reader opens
/// (its chunks' CRCs and its zlib stream's checksum are right).
pub fn fake_png(seed: &str) -> Vec<u8> {
    let mut state = fnv1a(seed.as_bytes());
    let pixels: Vec<u8> = (0..3 * FAKE_PNG_SIDE * FAKE_PNG_SIDE)
        .map(|_| {
            state = splitmix64(state);
            state.to_be_bytes()[0]
        })
        .collect();
    let mut scanlines = Vec::with_capacity(FAKE_PNG_SIDE + pixels.len());
    for row in pixels.chunks(3 * FAKE_PNG_SIDE) {
        // Each scanline starts with its filter type: 0, none.
        scanlines.push(0);
        scanlines.extend_from_slice(row);
    }
    let side = (FAKE_PNG_SIDE as u32).to_be_bytes();
    let mut header = Vec::with_capacity(13);
    header.extend_from_slice(&side);
    header.extend_from_slice(&side);
    // Bit depth 8, color type 2 (RGB), compression 0, filter method 0, no interlace.
    header.extend_from_slice(&[8, 2, 0, 0, 0]);

    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png_chunk(&mut png, b"IHDR", &header);
    png_chunk(&mut png, b"IDAT", &zlib_stored(&scanlines));
    png_chunk(&mut png, b"IEND", &[]);
    png
}

/// Appends a PNG chunk: its length, its type, `data`, and the CRC of the type and the data.
fn png_chunk(png: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    let length = u32::try_from(data.len()).expect("a fake PNG's chunk is small");
    png.extend_from_slice(&length.to_be_bytes());
    let start = png.len();
    png.extend_from_slice(kind);
    png.extend_from_slice(data);
    let crc = crc32(&png[start..]);
    png.extend_from_slice(&crc.to_be_bytes());
}

/// `data` as a zlib stream of one stored (uncompressed) deflate block, so that the fake needs
/// no compressor: what a PNG's IDAT holds.
fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let length = u16::try_from(data.len()).expect("a stored block holds at most 65535 bytes");
    // CMF 0x78 (deflate, 32K window), FLG 0x01 (its check bits), then the block's header byte:
    // BFINAL 1, BTYPE 00 (stored).
    let mut stream = vec![0x78, 0x01, 0x01];
    stream.extend_from_slice(&length.to_le_bytes());
    stream.extend_from_slice(&(!length).to_le_bytes());
    stream.extend_from_slice(data);
    stream.extend_from_slice(&adler32(data).to_be_bytes());
    stream
}

/// CRC-32 (IEEE 802.3, reflected, as PNG and zlib use it), bit by bit: a few bytes per image.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
        }
    }
    !crc
}

/// zlib's Adler-32 checksum.
fn adler32(bytes: &[u8]) -> u32 {
    const MODULUS: u32 = 65_521;
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in bytes {
        a = (a + u32::from(byte)) % MODULUS;
        b = (b + a) % MODULUS;
    }
    (b << 16) | a
}

/// FNV-1a, 64 bits: a seed's starting state.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// One step of SplitMix64, spreading a seed's state over the pixels.
fn splitmix64(state: u64) -> u64 {
    let mut z = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_match_their_reference_values() {
        // The check value of CRC-32/ISO-HDLC, and Adler-32's example (Wikipedia's).
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
    }

    #[test]
    fn fake_pngs_are_pngs_that_follow_their_seed() {
        let png = fake_png("a cat#0");
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0\0\x02\0\0\0\x02"));
        // IEND, empty, with the CRC every PNG ends with.
        assert!(png.ends_with(b"\0\0\0\0IEND\xae\x42\x60\x82"));
        assert_eq!(png, fake_png("a cat#0"));
        assert_ne!(png, fake_png("a cat#1"));
        assert_ne!(png, fake_png("a dog#0"));
    }
}
