//! Each provider plugin through the gateway, against a fake upstream replaying its recorded
//! traffic: the request it sends, the answers, usage and errors it reads back (openai with
//! Azure, anthropic, bedrock, gemini, vertex), and the caller's reasoning wish mapped to each.

mod anthropic;
mod azure;
mod bedrock;
mod gemini;
mod openai;
mod reasoning;
mod vertex;
