//! What each request leaves behind and what it cost: the invocation records, usage priced per
//! token class, the prices file, and the usage reports and exports read from the records.

mod cost;
mod invocations;
mod prices;
mod reports;
