//! The `GATEWAY_*` variables that set a config key over the file: what a container's or a
//! platform's environment holds (the address to listen on, the database's URL with its
//! password, the admin token) without a config file written for each place it runs.
//!
//! A value goes through the same check as the key's in the file (a listen address must be one,
//! a Redis URL must be redis:// or rediss://), and what is wrong with it names the variable,
//! never its value: most of them are secrets.

use serde::de::DeserializeOwned;

use super::{Config, LogFormat};

/// Sets one key from a variable's value, or says why the value is not one.
type Set = fn(&mut Config, &str) -> Result<(), String>;

/// Each variable, the key it sets, and how. An empty value is the variable unset (an orchestrator
/// often renders an optional setting as an empty string).
pub const OVERRIDES: [(&str, &str, Set); 8] = [
    ("GATEWAY_LISTEN", "listen", |c, v| {
        c.listen = typed(v)?;
        Ok(())
    }),
    ("GATEWAY_METRICS_LISTEN", "metrics_listen", |c, v| {
        c.metrics_listen = Some(typed(v)?);
        Ok(())
    }),
    ("GATEWAY_DATABASE_URL", "database", |c, v| {
        c.database = v.to_owned();
        Ok(())
    }),
    ("GATEWAY_REDIS_URL", "redis_url", |c, v| {
        c.redis_url = Some(typed(v)?);
        Ok(())
    }),
    ("GATEWAY_ADMIN_TOKEN", "admin_token", |c, v| {
        c.admin_token = Some(v.to_owned());
        Ok(())
    }),
    ("GATEWAY_METRICS_TOKEN", "metrics_token", |c, v| {
        c.metrics_token = Some(v.to_owned());
        Ok(())
    }),
    ("GATEWAY_PLUGINS_DIR", "plugins_dir", |c, v| {
        c.plugins_dir = v.into();
        Ok(())
    }),
    ("GATEWAY_LOG_FORMAT", "log_format", |c, v| {
        c.log_format = typed::<LogFormat>(v)?;
        Ok(())
    }),
];

/// The overrides this process's environment sets, as `(variable, value)`, in [`OVERRIDES`]'s
/// order.
pub fn from_env() -> Vec<(&'static str, String)> {
    OVERRIDES
        .iter()
        .filter_map(|(var, _, _)| {
            let value = std::env::var(var).ok().filter(|v| !v.is_empty())?;
            Some((*var, value))
        })
        .collect()
}

/// `value` read as the key's type reads it in the file (a TOML string).
fn typed<T: DeserializeOwned>(value: &str) -> Result<T, String> {
    T::deserialize(toml::Value::String(value.to_owned()))
        .map_err(|e| e.message().trim_end().to_owned())
}

/// Sets what `overrides` name on `config`; the first bad value is `(variable, key, why)`.
pub(super) fn apply(
    config: &mut Config,
    overrides: &[(&str, String)],
) -> Result<(), (&'static str, &'static str, String)> {
    for (var, value) in overrides {
        // A variable not in the table is a caller's mistake: `from_env` gives only known ones.
        let Some((var, key, set)) = OVERRIDES.iter().find(|(known, _, _)| known == var) else {
            continue;
        };
        set(config, value).map_err(|why| (*var, *key, why))?;
    }
    Ok(())
}
