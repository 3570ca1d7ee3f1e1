//! Unit tests of the plugin: the signer against AWS's vectors, the request mapping, the
//! decoding of whole and streamed answers, errors, embeddings, rerank and images.

mod convert;
mod embed;
mod golden;
mod images;
mod rerank;
mod sigv4;
mod stream;
