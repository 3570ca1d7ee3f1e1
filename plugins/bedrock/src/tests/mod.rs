//! Unit tests of the plugin: the signer against AWS's vectors, the request mapping, the
//! decoding of whole and streamed answers, errors and embeddings.

mod convert;
mod embed;
mod golden;
mod sigv4;
mod stream;
