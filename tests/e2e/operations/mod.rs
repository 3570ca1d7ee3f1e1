//! The gateway as an operator runs it: the process and its CLI, the config file, the admin API
//! and console, who may do what on them and the audit log (`access`), a project's guards and
//! tools, metrics, traces, several replicas on one database, and what ships to deploy it
//! (the systemd unit, the Kubernetes manifests).

mod access;
mod admin;
mod cli;
mod config;
mod console;
mod deploy;
mod kubernetes;
mod metrics;
mod project_guards;
mod project_tools;
mod replicas;
mod sso;
mod tracing;
