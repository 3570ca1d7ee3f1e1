//! Unit tests of the plugin: the signer against AWS's vectors, the request mapping, the
//! decoding of whole and streamed answers, errors, embeddings and rerank.

mod convert;
mod embed;
mod golden;
mod rerank;
mod sigv4;
mod stream;
