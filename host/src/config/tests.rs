use super::*;

#[test]
fn shipped_config_is_the_default_and_parses() {
    let config = Config::load(None).expect("built-in config parses");
    for route in ["demo", "openai", "cb-openai-eu", "cb-openai-us"] {
        assert!(
            config.providers.contains_key(route),
            "missing route {route}"
        );
    }
    let eu = &config.providers["cb-openai-eu"];
    assert_eq!(eu.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
    assert_eq!(eu.pricing["gpt-4o-mini"].output_per_mtok, 0.60);
    assert!(config.providers["openai"].api_key_env.is_none());
}

#[test]
fn the_settings_table_reaches_the_plugin_as_json() {
    let config = Config::parse(
        "[providers.x]\nplugin = \"openai\"\n[providers.x.settings]\n\
         legacy_completions = true\napi_key_header = \"api-key\"\n",
        "test",
    )
    .expect("parses");
    assert_eq!(
        config.providers["x"].settings_json(),
        r#"{"api_key_header":"api-key","legacy_completions":true}"#
    );
    let config = Config::parse("[providers.x]\nplugin = \"openai\"\n", "test").expect("parses");
    assert_eq!(config.providers["x"].settings_json(), "{}");
}

#[test]
fn a_misspelt_route_key_is_refused_with_its_route_and_the_known_keys() {
    let err = Config::parse(
        "[providers.y]\nplugin = \"echo\"\n\
         [providers.x]\nplugin = \"openai\"\nmemory_limt_mb = 128\n",
        "test",
    )
    .expect_err("an unknown route key is refused")
    .to_string();
    assert!(err.contains("providers.x.memory_limt_mb"), "{err}");
    assert!(err.contains("unknown field `memory_limt_mb`"), "{err}");
    for known in [
        "`memory_limit_mb`",
        "`cpu_time_ms`",
        "`settings`",
        "`pricing`",
    ] {
        assert!(err.contains(known), "{known} not listed: {err}");
    }
    assert!(err.contains("[providers.ID.settings]"), "{err}");
}

/// The keys serde accepts in a table: its "expected" list when `config`, which ends
/// inside that table, gets a key it does not know. The struct's own list, so it cannot drift.
fn accepted_keys(config: &str) -> Vec<String> {
    let text = format!("{config}not_a_key = 1\n");
    let err = Config::parse(&text, "test")
        .expect_err("an unknown key is refused")
        .to_string();
    // Serde writes "expected `a`", "expected `a` or `b`" or "expected one of `a`, `b`, ...".
    let (_, expected) = err
        .split_once("unknown field `not_a_key`, expected ")
        .unwrap_or_else(|| panic!("serde lists the keys: {err}"));
    expected
        .lines()
        .next()
        .unwrap_or_default()
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The example config lists the keys a route may have; serde's "expected one of" list is
/// the struct's own, so a key added to [`RouteConfig`] and not to the example fails here.
#[test]
fn the_example_names_every_route_key() {
    let keys = accepted_keys("[providers.x]\nplugin = \"echo\"\n");
    assert!(keys.iter().any(|k| k == "memory_limit_mb"), "{keys:?}");
    let documented = DEFAULT_CONFIG
        .split_once("# Route keys:")
        .map(|(_, rest)| {
            rest.split_once("\n#\n")
                .map_or(rest, |(paragraph, _)| paragraph)
        })
        .expect("the example has a `Route keys:` paragraph");
    let words: Vec<&str> = documented
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .collect();
    for key in keys {
        assert!(
            words.contains(&key.as_str()),
            "route key {key} is missing from the example's `Route keys:` paragraph"
        );
    }
}

/// The configuration reference (`docs/configuration.md`) has a `| key |` table per table of
/// the file, under a heading naming it (`## Routes: `[providers.ID]``; the top level's names
/// none): each must list exactly the keys serde accepts there, so a key added to the config
/// without its row, or a row left after its key went, fails here.
#[test]
fn the_configuration_reference_documents_every_key_and_no_other() {
    const ROUTE: &str = "[providers.x]\nplugin = \"echo\"\n";
    const PRICE: &str = "[providers.x.pricing.m]\ninput_per_mtok = 1\noutput_per_mtok = 1\n";
    // Each table's heading code span, and a config that ends inside that table.
    let tables = [
        ("", String::new()),
        ("[providers.ID]", ROUTE.to_owned()),
        (
            "[[providers.ID.targets]]",
            format!("{ROUTE}[[providers.x.targets]]\nbase_url = \"https://a.example\"\n"),
        ),
        (
            "[providers.ID.pricing.\"MODEL\"]",
            format!("{ROUTE}{PRICE}"),
        ),
        (
            "long_context",
            format!(
                "{ROUTE}{PRICE}[providers.x.pricing.m.long_context]\nabove_prompt_tokens = 1\n\
                 input_per_mtok = 1\noutput_per_mtok = 1\n"
            ),
        ),
        ("[guards.ID]", "[guards.g]\nplugin = \"g\"\n".to_owned()),
        (
            "[models.ALIAS]",
            format!("{ROUTE}[models.a]\nroute = \"x\"\n"),
        ),
        ("[mcp]", "[mcp]\n".to_owned()),
        ("[oidc]", "[oidc]\n".to_owned()),
        ("[oidc.roles]", "[oidc.roles]\n".to_owned()),
        (
            "[oidc.roles.projects.ID]",
            "[oidc.roles.projects.p]\n".to_owned(),
        ),
        (
            "[mcp_servers.ID]",
            "[mcp_servers.s]\nurl = \"https://mcp.example/mcp\"\n".to_owned(),
        ),
    ];
    let reference = include_str!("../../../docs/configuration.md");
    // The `| key |` tables' first cells, by the last code span of the heading above them.
    let mut documented: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let (mut heading, mut in_key_table) = ("", false);
    for line in reference.lines() {
        if line.starts_with('#') {
            heading = line
                .rsplit('`')
                .nth(1)
                .filter(|_| line.ends_with('`'))
                .unwrap_or("");
        } else if line.starts_with("| key |") {
            in_key_table = true;
            documented.entry(heading).or_default();
        } else if !line.starts_with('|') {
            in_key_table = false;
        } else if in_key_table
            && let Some(cell) = line.split('|').nth(1)
            && let Some(key) = cell
                .trim()
                .strip_prefix('`')
                .and_then(|k| k.strip_suffix('`'))
        {
            documented.entry(heading).or_default().push(key);
        }
    }
    for (heading, config) in &tables {
        let table = if heading.is_empty() {
            "the top level"
        } else {
            heading
        };
        let mut accepted = accepted_keys(config);
        accepted.sort();
        let mut rows: Vec<String> = documented
            .remove(heading)
            .unwrap_or_else(|| panic!("docs/configuration.md has no `| key |` table for {table}"))
            .into_iter()
            .map(str::to_owned)
            .collect();
        rows.sort();
        let missing: Vec<&String> = accepted.iter().filter(|k| !rows.contains(k)).collect();
        let unknown: Vec<&String> = rows.iter().filter(|k| !accepted.contains(k)).collect();
        assert!(
            missing.is_empty() && unknown.is_empty(),
            "docs/configuration.md, {table}: keys the config accepts without a row: {missing:?}; \
             rows of keys it does not accept: {unknown:?}"
        );
    }
    assert!(
        documented.is_empty(),
        "docs/configuration.md has `| key |` tables this test does not check: {:?}",
        documented.keys().collect::<Vec<_>>()
    );
}

#[test]
fn a_plugin_setting_left_on_the_route_or_an_unknown_table_is_refused() {
    for (text, key) in [
        (
            "[providers.x]\nplugin = \"openai\"\nlegacy_completions = true\n",
            "providers.x.legacy_completions",
        ),
        (
            "[providers.x]\nplugin = \"openai\"\n[providers.x.setting]\nlegacy_completions = true\n",
            "providers.x.setting",
        ),
    ] {
        let err = Config::parse(text, "test").expect_err(text).to_string();
        assert!(err.contains(key), "{text}: {err}");
        assert!(err.contains("`settings`"), "{text}: {err}");
    }
}

#[test]
fn an_unknown_top_level_key_is_refused_with_the_known_keys() {
    let err = Config::parse("request_timeout = 5\n", "test")
        .expect_err("an unknown top-level key is refused")
        .to_string();
    assert!(err.contains("unknown field `request_timeout`"), "{err}");
    for known in ["`request_timeout_secs`", "`listen`", "`providers`"] {
        assert!(err.contains(known), "{known} not listed: {err}");
    }
    // The hint about plugin settings is for route keys only.
    assert!(!err.contains("settings]"), "{err}");
}

#[test]
fn bad_values_are_rejected_with_their_place() {
    let err = Config::parse("listen = 5", "test").unwrap_err().to_string();
    assert!(err.contains("listen"), "{err}");
    let err = Config::parse(
        "[providers.x]\nplugin = \"openai\"\nbase_url = \"not a url\"\n",
        "test",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("providers.x.base_url"), "{err}");
    let err = Config::parse(
        "[providers.x]\nplugin = \"openai\"\nmemory_limit_mb = 0\n",
        "test",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("providers.x.memory_limit_mb"), "{err}");
}

#[test]
fn zero_and_out_of_range_values_are_refused_with_their_key() {
    for key in [
        "request_timeout_secs",
        "request_read_timeout_secs",
        "client_idle_timeout_secs",
        "max_connections",
        "max_plugin_instances",
        "max_body_bytes",
        "max_expanded_bytes",
        "max_part_bytes",
        "max_conversation_bytes",
        "max_file_bytes",
        "max_project_file_bytes",
        "batch_concurrency",
        "batch_lease_secs",
        "record_retention_days",
        "max_attempts",
    ] {
        let err = Config::parse(&format!("{key} = 0\n"), "test")
            .expect_err(key)
            .to_string();
        assert!(err.contains(&format!("{key}: ")), "{err}");
        assert!(err.contains("must be positive"), "{err}");
    }
    for key in [
        "timeout_secs",
        "memory_limit_mb",
        "cpu_time_ms",
        "connect_timeout_ms",
        "first_byte_timeout_ms",
        "idle_timeout_ms",
        "max_response_bytes",
        "max_http_requests",
        "max_attempts",
        "reserve_max_tokens",
    ] {
        let text = format!("[providers.x]\nplugin = \"echo\"\n{key} = 0\n");
        let err = Config::parse(&text, "test").expect_err(key).to_string();
        assert!(err.contains(&format!("providers.x.{key}: ")), "{err}");
        assert!(err.contains("must be positive"), "{err}");
    }
    let err = Config::parse(
        "[providers.x]\nplugin = \"echo\"\nmemory_limit_mb = 1025\n",
        "test",
    )
    .expect_err("over the engine's reservation")
    .to_string();
    assert!(err.contains("providers.x.memory_limit_mb: "), "{err}");
    assert!(err.contains("must be at most 1024"), "{err}");
    let err = Config::parse(
        "[providers.x]\nplugin = \"echo\"\nallowed_hosts = [\"a.example:1\", \"ftp://b\"]\n",
        "test",
    )
    .expect_err("an unusable host")
    .to_string();
    assert!(err.contains("providers.x.allowed_hosts[1]: "), "{err}");
    // Zero stays allowed where it means something.
    let config = Config::parse("workers = 0\nshutdown_grace_secs = 0\n", "test").expect("parses");
    assert_eq!((config.workers, config.shutdown_grace_secs), (0, 0));
}

/// An admin token that could be guessed is refused naming the key and its length, never
/// repeating the token; 32 bytes pass.
#[test]
fn an_admin_token_shorter_than_32_bytes_is_refused() {
    for token in ["", "hunter2", "a-31-byte-token-for-the-console"] {
        let text = format!("admin_token = {token:?}\n");
        let err = Config::parse(&text, "test").expect_err(token).to_string();
        assert!(
            err.contains(&format!(
                "admin_token: must be at least 32 bytes, not {}",
                token.len()
            )),
            "{err}"
        );
        assert!(token.is_empty() || !err.contains(token), "{err}");
    }
    let token = "a-32-byte-token-for-the-console!";
    let config = Config::parse(&format!("admin_token = {token:?}\n"), "test").expect("parses");
    assert_eq!(config.admin_token.as_deref(), Some(token));
}

#[test]
fn bad_trace_settings_are_refused_with_their_key() {
    for (text, key) in [
        ("trace_sample_ratio = 1.5", "trace_sample_ratio"),
        ("otlp_endpoint = \"localhost:4318\"", "otlp_endpoint"),
        ("otlp_headers = { \"bad name\" = \"v\" }", "otlp_headers"),
    ] {
        let error = Config::parse(text, "test").unwrap_err().to_string();
        assert!(error.contains(key), "{text}: {error}");
    }
    let config = Config::parse(
        "otlp_endpoint = \"http://127.0.0.1:4318\"\ntrace_sample_ratio = 0\n",
        "test",
    )
    .unwrap();
    assert_eq!(config.trace_sample_ratio.get(), 0.0);
}

#[test]
fn an_empty_file_is_the_default_config() {
    assert_eq!(
        Config::parse("", "test").expect("parses"),
        Config::default()
    );
}

/// Serialized and read back, a config is the same config: the tests write theirs this way.
#[test]
fn a_config_round_trips_through_toml() {
    let mut configs = vec![
        Config::default(),
        Config::load(None).expect("the built-in config parses"),
        Config::parse(&example_with_commented_routes(), "example").expect("parses"),
    ];
    let mut full = Config::parse(
        "admin_token = \"0123456789abcdef0123456789abcdef\"\nplugin_cache_dir = \"\"\nmax_expanded_bytes = 10\n\
         redis_url = \"redis://127.0.0.1:6379/2\"\nredis_key_prefix = \"gw:\"\n\
         record_retention_days = 7\nrecord_bodies = \"full\"\n\
         [providers.x]\nplugin = \"openai\"\nbase_url = \"https://a.example/v1\"\n\
         allowed_hosts = [\"b.example:8443\"]\ntimeout_secs = 5\nmemory_limit_mb = 128\n\
         cpu_time_ms = 1\nconnect_timeout_ms = 2\nfirst_byte_timeout_ms = 3\n\
         idle_timeout_ms = 4\nmax_response_bytes = 5\nmax_http_requests = 6\n\
         api_key_required = false\nretries = 3\nretry_backoff_ms = 250\n\
         fallbacks = [\"z\"]\nmax_attempts = 3\nforward_caller_key = true\n\
         [providers.x.settings]\nnested = { a = [1, 2] }\n\
         [providers.x.pricing.\"m.1\"]\ninput_per_mtok = 1.5\noutput_per_mtok = 2\n\
         long_context = { above_prompt_tokens = 10, input_per_mtok = 3, output_per_mtok = 4 }\n\
         [providers.z]\nplugin = \"echo\"\n",
        "test",
    )
    .expect("parses");
    let x = &full.providers["x"];
    assert_eq!(
        (
            x.retries,
            x.retry_backoff_ms.map(Positive::get),
            &x.fallbacks[..]
        ),
        (3, Some(250), &["z".to_owned()][..])
    );
    full.providers
        .insert("y".to_owned(), RouteConfig::new("echo"));
    configs.push(full);
    for config in configs {
        let text = toml::to_string(&config).expect("serializes");
        let again = Config::parse(&text, "serialized").expect(&text);
        assert_eq!(again, config, "{text}");
    }
}

/// The example config with its commented-out routes switched on.
fn example_with_commented_routes() -> String {
    let mut text = DEFAULT_CONFIG.to_owned();
    let mut in_route = false;
    for line in DEFAULT_CONFIG.lines() {
        let Some(rest) = line.strip_prefix("# ") else {
            in_route = false;
            continue;
        };
        if rest.starts_with("[providers.") {
            in_route = true;
        } else if !(in_route
            && rest
                .split_once(" = ")
                .is_some_and(|(key, _)| key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')))
        {
            in_route = false;
            continue;
        }
        text.push_str(rest);
        text.push('\n');
    }
    text
}

#[test]
fn every_commented_route_of_the_example_parses() {
    let text = example_with_commented_routes();
    let config = Config::parse(&text, "example with commented routes").expect("parses");
    for route in [
        "anthropic",
        "gemini",
        "azure",
        "azure-deployments",
        "groq",
        "mistral",
        "together",
        "deepseek",
        "fireworks",
        "openrouter",
        "vllm",
        "llama-cpp",
        "ollama",
        "openai-with-fallbacks",
    ] {
        let route = config
            .providers
            .get(route)
            .unwrap_or_else(|| panic!("no commented route {route} in the example"));
        assert!(route.base_url.is_some() && route.default_model.is_some());
    }
    let deployments = &config.providers["azure-deployments"];
    assert_eq!(
        deployments.settings_json(),
        r#"{"azure_api_version":"2024-10-21"}"#
    );
    assert_eq!(
        config.providers["azure"].settings_json(),
        r#"{"api_key_header":"api-key"}"#
    );
    assert_eq!(
        config.providers["anthropic"].settings_json(),
        r#"{"default_max_tokens":4096}"#
    );
    for route in ["gemini", "groq", "ollama"] {
        assert_eq!(config.providers[route].settings_json(), "{}", "{route}");
    }
    assert_eq!(
        deployments.pricing["my-gpt-4o-mini"].cached_input_per_mtok,
        Some(0.075)
    );
    assert!(!config.providers["ollama"].needs_api_key());
    let resilient = &config.providers["openai-with-fallbacks"];
    assert_eq!(
        (
            resilient.retries,
            resilient.retry_backoff_ms.map(Positive::get)
        ),
        (2, Some(200))
    );
    assert_eq!(resilient.fallbacks, ["cb-openai-us", "anthropic"]);
}

fn route_price(pricing: &str) -> Result<Price, String> {
    let text =
        format!("[providers.x]\nplugin = \"openai\"\n[providers.x.pricing.\"m\"]\n{pricing}\n");
    Config::parse(&text, "test")
        .map(|config| config.providers["x"].pricing["m"])
        .map_err(|e| e.to_string())
}

#[test]
fn prices_take_optional_cache_and_long_context_prices() {
    assert_eq!(
        route_price("input_per_mtok = 3\noutput_per_mtok = 15"),
        Ok(Price::flat(3.0, 15.0))
    );
    let price = route_price(
        "input_per_mtok = 3\noutput_per_mtok = 15\ncached_input_per_mtok = 0.3\n\
         cache_write_per_mtok = 3.75\naudio_input_per_mtok = 5\n\
         long_context = { above_prompt_tokens = 200000, input_per_mtok = 6, output_per_mtok = 22.5, audio_input_per_mtok = 8 }",
    )
    .expect("parses");
    assert_eq!(price.cached_input_per_mtok, Some(0.3));
    assert_eq!(price.cache_write_per_mtok, Some(3.75));
    assert_eq!(price.audio_input_per_mtok, Some(5.0));
    assert_eq!(
        price.long_context,
        Some(LongContextPrice {
            above_prompt_tokens: 200_000,
            input_per_mtok: 6.0,
            output_per_mtok: 22.5,
            cached_input_per_mtok: None,
            cache_write_per_mtok: None,
            audio_input_per_mtok: Some(8.0),
        })
    );
}

#[test]
fn bad_prices_are_rejected_with_their_place() {
    for (pricing, needle) in [
        ("input_per_mtok = -1\noutput_per_mtok = 1", "input_per_mtok"),
        (
            "input_per_mtok = 1\noutput_per_mtok = 1\ncached_input_per_mtok = nan",
            "cached_input_per_mtok",
        ),
        (
            "input_per_mtok = 1\noutput_per_mtok = 1\ncache_write_per_mtok = inf",
            "cache_write_per_mtok",
        ),
        (
            "input_per_mtok = 1\noutput_per_mtok = 1\n\
             long_context = { above_prompt_tokens = 10, input_per_mtok = -2, output_per_mtok = 1 }",
            "long_context.input_per_mtok",
        ),
        (
            "input_per_mtok = 1\noutput_per_mtok = 1\naudio_input_per_mtok = -0.5",
            "audio_input_per_mtok",
        ),
        // A dollar a token is the most (MAX_PER_MTOK): past it, a mistake.
        (
            "input_per_mtok = 1\noutput_per_mtok = 1000000.5",
            "output_per_mtok must be a finite number of dollars per million tokens, from 0 to 1000000",
        ),
        (
            "input_per_mtok = 1\noutput_per_mtok = 1\n\
             long_context = { above_prompt_tokens = 10, input_per_mtok = 2, output_per_mtok = 1, audio_input_per_mtok = inf }",
            "long_context.audio_input_per_mtok",
        ),
        // A misspelt key would otherwise silently bill at the input price.
        (
            "input_per_mtok = 1\noutput_per_mtok = 1\ncached_input_price = 0.1",
            "cached_input_price",
        ),
        ("input_per_mtok = 1", "output_per_mtok"),
    ] {
        let err = route_price(pricing).expect_err(pricing);
        // toml points at the offending line; the message names the key.
        assert!(err.contains(needle), "{pricing}: {err}");
    }
}

#[test]
fn models_name_aliases_routes_and_route_models() {
    let config = Config::parse(
        "[providers.groq]\nplugin = \"openai\"\n\
         [providers.openrouter]\nplugin = \"openai\"\n\
         [models.fast]\nroute = \"groq\"\nmodel = \"llama-3.3-70b-versatile\"\n\
         [models.default]\nroute = \"groq\"\n",
        "test",
    )
    .expect("parses");
    let target = |model| {
        config
            .model_target(model)
            .map(|target| (target.route, target.model))
    };
    assert_eq!(
        target("fast"),
        Some(("groq", Some("llama-3.3-70b-versatile")))
    );
    assert_eq!(target("default"), Some(("groq", None)));
    assert_eq!(target("groq"), Some(("groq", None)));
    assert_eq!(
        target("openrouter/openai/gpt-4o"),
        Some(("openrouter", Some("openai/gpt-4o")))
    );
    // An unknown route is the flow's 404; here it is only split.
    assert_eq!(target("nope/m"), Some(("nope", Some("m"))));
    for nothing in ["nope", "/m", "groq/", ""] {
        assert_eq!(target(nothing), None, "{nothing}");
    }
    let err = Config::parse("[models.x]\nroute = \"missing\"\n", "test")
        .expect_err("an alias needs its route")
        .to_string();
    assert!(err.contains("models.x.route"), "{err}");
    let err = Config::parse(
        "[providers.groq]\nplugin = \"openai\"\n[models.x]\nroute = \"groq\"\nmdl = \"m\"\n",
        "test",
    )
    .expect_err("unknown alias key")
    .to_string();
    assert!(err.contains("mdl"), "{err}");
}

/// A config of routes `r` (plugin `echo`) with the given extra keys each.
fn routes(routes: &[(&str, &str)]) -> Result<Config, String> {
    let text: String = routes
        .iter()
        .map(|(route, keys)| format!("[providers.{route}]\nplugin = \"echo\"\n{keys}\n"))
        .collect();
    Config::parse(&text, "test").map_err(|e| e.to_string())
}

#[test]
fn fallbacks_name_other_known_routes_once_each() {
    let config = routes(&[
        ("a", "fallbacks = [\"b\", \"c\"]"),
        ("b", "fallbacks = [\"c\"]"),
        ("c", ""),
    ])
    .expect("two ways to the same fallback are no cycle");
    assert_eq!(config.providers["a"].fallbacks, ["b", "c"]);
    let err = routes(&[("a", "fallbacks = [\"b\", \"nope\"]"), ("b", "")])
        .expect_err("an unknown fallback");
    assert!(
        err.contains("providers.a.fallbacks[1]: no route \"nope\" in [providers]"),
        "{err}"
    );
    let err = routes(&[("a", "fallbacks = [\"b\", \"a\"]"), ("b", "")])
        .expect_err("a route falling back to itself");
    assert!(
        err.contains("providers.a.fallbacks[1]: a route cannot fall back to itself"),
        "{err}"
    );
    let err = routes(&[
        ("a", "fallbacks = [\"b\", \"c\", \"b\"]"),
        ("b", ""),
        ("c", ""),
    ])
    .expect_err("a fallback listed twice");
    assert!(
        err.contains("providers.a.fallbacks[2]: \"b\" is already listed"),
        "{err}"
    );
}

#[test]
fn fallback_cycles_are_refused_and_spelled_out() {
    let err = routes(&[("a", "fallbacks = [\"b\"]"), ("b", "fallbacks = [\"a\"]")])
        .expect_err("a two-route cycle");
    assert!(
        err.contains("providers.a.fallbacks[0]: fallbacks form a cycle: a -> b -> a"),
        "{err}"
    );
    // A longer one, entered from a route outside it and through a second fallback.
    let err = routes(&[
        ("a", "fallbacks = [\"d\", \"x\"]"),
        ("d", ""),
        ("x", "fallbacks = [\"y\"]"),
        ("y", "fallbacks = [\"d\", \"z\"]"),
        ("z", "fallbacks = [\"x\"]"),
    ])
    .expect_err("a three-route cycle");
    assert!(
        err.contains("providers.x.fallbacks[0]: fallbacks form a cycle: x -> y -> z -> x"),
        "{err}"
    );
    // The same routes without the closing step are fine.
    routes(&[
        ("a", "fallbacks = [\"d\", \"x\"]"),
        ("d", ""),
        ("x", "fallbacks = [\"y\"]"),
        ("y", "fallbacks = [\"d\", \"z\"]"),
        ("z", "fallbacks = [\"d\"]"),
    ])
    .expect("no cycle");
}

#[test]
fn retries_are_at_most_ten() {
    let config = routes(&[("a", "retries = 10\nretry_backoff_ms = 50")]).expect("ten retries");
    assert_eq!(config.providers["a"].retries, 10);
    assert_eq!(
        config.providers["a"].retry_backoff_ms.map(Positive::get),
        Some(50)
    );
    let err = routes(&[("a", "retries = 11")]).expect_err("eleven retries");
    assert!(
        err.contains("providers.a.retries: must be at most 10, not 11"),
        "{err}"
    );
    let err = routes(&[("a", "retries = -1")]).expect_err("negative retries");
    assert!(err.contains("providers.a.retries"), "{err}");
    let err = routes(&[("a", "retry_backoff_ms = 0")]).expect_err("no backoff");
    assert!(err.contains("providers.a.retry_backoff_ms: "), "{err}");
    assert!(err.contains("must be positive"), "{err}");
    let config = routes(&[("a", "")]).expect("defaults");
    assert_eq!(
        (
            config.providers["a"].retries,
            config.providers["a"].retry_backoff_ms,
            config.providers["a"].fallbacks.len()
        ),
        (0, None, 0)
    );
}

#[test]
fn max_attempts_is_the_routes_else_the_top_level_one() {
    let config = routes(&[("a", "max_attempts = 2"), ("b", "")]).expect("parses");
    let max = |id: &str| config.providers[id].max_attempts(&config);
    assert_eq!((max("a"), max("b")), (2, 6), "6 by default");
    let text = "max_attempts = 9\n[providers.b]\nplugin = \"echo\"\n";
    let config = Config::parse(text, "test").expect("parses");
    assert_eq!(config.providers["b"].max_attempts(&config), 9);
}

#[test]
fn forward_caller_key_is_off_unless_set_true() {
    let config = routes(&[("a", "forward_caller_key = true"), ("b", "")]).expect("parses");
    assert!(config.providers["a"].forward_caller_key);
    assert!(!config.providers["b"].forward_caller_key, "off by default");
    let err = routes(&[("a", "forward_caller_key = \"yes\"")]).expect_err("not a bool");
    assert!(err.contains("providers.a.forward_caller_key"), "{err}");
}

#[test]
fn gateway_variables_set_their_keys_over_the_file_and_are_checked_as_the_file_is() {
    let file = "listen = \"127.0.0.1:1\"\nlog_format = \"text\"\n";
    let set = |vars: &[(&'static str, &str)]| {
        let overrides: Vec<(&str, String)> =
            vars.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
        Config::parse_with(file, "test", &overrides)
    };
    let token = "t".repeat(MIN_ADMIN_TOKEN_BYTES);
    let config = set(&[
        ("GATEWAY_LISTEN", "0.0.0.0:8080"),
        ("GATEWAY_METRICS_LISTEN", "0.0.0.0:9090"),
        ("GATEWAY_DATABASE_URL", "postgres://gw:secret@db:5432/gw"),
        ("GATEWAY_REDIS_URL", "redis://redis:6379/0"),
        ("GATEWAY_ADMIN_TOKEN", &token),
        ("GATEWAY_METRICS_TOKEN", "m"),
        ("GATEWAY_PLUGINS_DIR", "/usr/lib/gateway/plugins"),
        ("GATEWAY_LOG_FORMAT", "json"),
    ])
    .expect("parses");
    assert_eq!(config.listen.to_string(), "0.0.0.0:8080");
    assert_eq!(
        config.metrics_listen.map(|a| a.to_string()).as_deref(),
        Some("0.0.0.0:9090")
    );
    assert_eq!(config.database, "postgres://gw:secret@db:5432/gw");
    assert_eq!(
        config.redis_url.as_ref().map(RedisUrl::as_str),
        Some("redis://redis:6379/0")
    );
    assert_eq!(config.admin_token.as_deref(), Some(token.as_str()));
    assert_eq!(config.metrics_token.as_deref(), Some("m"));
    assert_eq!(config.plugins_dir, Path::new("/usr/lib/gateway/plugins"));
    assert_eq!(config.log_format, LogFormat::Json);
    // Every variable of the table is tested here.
    assert_eq!(env::OVERRIDES.len(), 8);
    // Without them, the file's.
    let config = set(&[]).expect("parses");
    assert_eq!(config.listen.to_string(), "127.0.0.1:1");
    assert_eq!(config.log_format, LogFormat::Text);

    // A bad value names its variable and key, never the value (it may be a secret).
    for (var, value, key) in [
        ("GATEWAY_LISTEN", "localhost:s3cret", "listen"),
        ("GATEWAY_METRICS_LISTEN", "9090s3cret", "metrics_listen"),
        ("GATEWAY_REDIS_URL", "http://u:s3cret@redis", "redis_url"),
        ("GATEWAY_LOG_FORMAT", "xml", "log_format"),
    ] {
        let err = set(&[(var, value)]).expect_err(var).to_string();
        assert!(
            err.contains(&format!("{var} (sets {key}): ")),
            "{var}: {err}"
        );
        assert!(!err.contains("s3cret"), "{var}: {err}");
    }
    // The checks of the whole config see the variables' values.
    let err = set(&[("GATEWAY_ADMIN_TOKEN", "short")])
        .expect_err("a short token")
        .to_string();
    assert!(err.contains("admin_token: must be at least"), "{err}");
}

/// The deploying guide's table of variables is the table the gateway reads.
#[test]
fn the_deploying_guide_lists_every_gateway_variable_and_its_key() {
    let guide = include_str!("../../../docs/deploying.md");
    let rows: Vec<&str> = guide
        .lines()
        .filter(|line| line.starts_with("| `GATEWAY_"))
        .collect();
    for (var, key, _) in env::OVERRIDES {
        let row = format!("| `{var}` | `{key}` |");
        assert!(
            rows.iter().any(|line| line.starts_with(&row)),
            "docs/deploying.md has no row {row}"
        );
    }
    assert_eq!(rows.len(), env::OVERRIDES.len(), "{rows:#?}");
}
