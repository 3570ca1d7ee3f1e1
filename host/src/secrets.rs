//! The secrets a plugin's settings name (a route's, or a tool plugin server's):
//! `NAME_env = "VAR"` passes the plugin VAR's value as the secret `NAME`,
//! `NAME_file_env = "VAR"` the content of the file whose path VAR holds as `NAME_file` (a cloud
//! service account's JSON key). Read when the routes and servers are built (at start and on a
//! config reload), like a route's `api_key_env`; only what the settings name is read, and the
//! values join the keys that are redacted from what the gateway answers, records and logs.

use std::io::Read;

/// A secret file larger than this is refused (a service-account key is ~2.4 KB): the
/// variable names the wrong file.
const MAX_SECRET_FILE_BYTES: u64 = 1024 * 1024;

/// The secrets `settings` name, in the settings' order. What cannot be read is left out
/// with a warning naming the setting and the variable (the plugin then says what it lacks).
pub fn read(owner: &str, settings: &toml::Table) -> Vec<(String, String)> {
    let mut secrets = Vec::new();
    for (setting, value) in settings {
        let Some(name) = setting.strip_suffix("_env") else {
            continue;
        };
        let Some(var) = value.as_str() else {
            tracing::warn!(owner, setting = %setting,
                "plugin setting ending in _env does not name an environment variable (a string)");
            continue;
        };
        let Some(value) = std::env::var(var).ok().filter(|v| !v.trim().is_empty()) else {
            tracing::warn!(owner, setting = %setting, env = %var,
                "environment variable a plugin setting names is not set");
            continue;
        };
        if name.ends_with("_file") {
            match read_file(&value) {
                Ok(content) => secrets.push((name.to_owned(), content)),
                // The path is not secret; its content is.
                Err(error) => tracing::warn!(owner, setting = %setting, env = %var,
                    path = %value, %error, "the file a plugin setting names cannot be read"),
            }
        } else {
            secrets.push((name.to_owned(), value));
        }
    }
    secrets
}

fn read_file(path: &str) -> std::io::Result<String> {
    let file = std::fs::File::open(path)?;
    let mut content = String::new();
    file.take(MAX_SECRET_FILE_BYTES + 1)
        .read_to_string(&mut content)?;
    if content.len() as u64 > MAX_SECRET_FILE_BYTES {
        return Err(std::io::Error::other(format!(
            "larger than {MAX_SECRET_FILE_BYTES} bytes"
        )));
    }
    Ok(content)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_name_variables_and_files() {
        let dir = std::env::temp_dir().join(format!("gw-secrets-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key_file = dir.join("sa.json");
        std::fs::write(&key_file, "{\"private_key\": \"PEM\"}").unwrap();
        // SAFETY: the variables are unique to this test; no other thread reads them.
        unsafe {
            std::env::set_var("GW_TEST_SECRET_A", "alpha");
            std::env::set_var("GW_TEST_SECRET_FILE", &key_file);
        }
        let settings: toml::Table = toml::from_str(
            "region = \"us-east-1\"\n\
             aws_secret_access_key_env = \"GW_TEST_SECRET_A\"\n\
             credentials_file_env = \"GW_TEST_SECRET_FILE\"\n\
             aws_session_token_env = \"GW_TEST_SECRET_UNSET\"\n\
             odd_env = 3\n",
        )
        .unwrap();
        let mut secrets = read("r", &settings);
        secrets.sort();
        assert_eq!(
            secrets,
            vec![
                ("aws_secret_access_key".to_owned(), "alpha".to_owned()),
                (
                    "credentials_file".to_owned(),
                    "{\"private_key\": \"PEM\"}".to_owned()
                ),
            ]
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
