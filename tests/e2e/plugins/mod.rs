//! Plugins as the host runs them: the sandbox against a hostile plugin, a plugin that fails,
//! what a plugin keeps between requests, plugins written in Python and JavaScript, tool plugins
//! in all three languages, the projects `gateway plugin new` writes, and their lifecycle (hot reload, the compiled-plugin cache, the
//! operator's view).

mod failures;
mod js;
mod lifecycle;
mod python;
mod sandbox;
mod scaffold;
mod state;
mod tools;
