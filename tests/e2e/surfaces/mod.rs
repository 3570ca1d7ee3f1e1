//! The wire formats callers speak, each read and answered in its own shape: the Commonbase API,
//! OpenAI's (chat, completions, embeddings, models), Anthropic's Messages API, OpenAI's
//! Responses API, Gemini's API; content parts (images, audio, documents) on all of them; and
//! the official OpenAI, Anthropic and Google GenAI Python SDKs, unchanged, against them.
//! Beside them, `POST /mcp` (`mcp`), with the official MCP SDKs as client and servers, and
//! OpenAI's Files and Batch APIs (`files`, `batches`).

mod anthropic;
mod audio;
mod batches;
mod clients;
mod commonbase;
mod count_tokens;
mod files;
mod gemini;
mod images;
mod mcp;
mod openai;
mod parts;
mod rerank;
mod responses;
mod speech;
