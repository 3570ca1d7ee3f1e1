//! `gateway prices import` and the `prices_file` it writes: the committed sample of the
//! community price list (tests/prices/litellm-sample.json, LiteLLM's format and data, MIT: see
//! tests/prices/NOTICE) imported with the real binary, a gateway serving with the file pricing a
//! model the shipped table does not know at exactly the file's prices, a second import's
//! counts, malformed lists refused without touching the current file, and the file reloaded
//! while the gateway serves (a broken edit keeping the prices already loaded).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use gateway_test_support::harness::gateway_binary;
use gateway_test_support::recording::{RecordedRequest, RecordedResponse};
use gateway_test_support::refused::refused_start;
use gateway_test_support::{
    Gateway, Interaction, OpenAiUpstream, Reply, Route, assert_ok, chat_request,
    post_with_provider_key, with,
};
use serde_json::{Value, json};

const PROVIDER_KEY: &str = "sk-test-prices-0123456789";
const ROUTE: &str = "oai";
/// In the sample, and in no table the gateway ships: priced only when the file is loaded.
const MODEL: &str = "gpt-5.6-luna";
/// The usage the fake upstream reports: 2048 prompt tokens of which 1536 from the cache, 400
/// completion tokens.
const PROMPT: u64 = 2048;
const CACHED: u64 = 1536;
const COMPLETION: u64 = 400;

fn sample_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/prices/litellm-sample.json")
}

fn sample() -> serde_json::Map<String, Value> {
    let text = std::fs::read_to_string(sample_path()).expect("read the sample");
    serde_json::from_str(&text).expect("the sample is a JSON object")
}

/// The sample's entries the gateway imports (worked out here independently of the gateway: a
/// provider a plugin serves, a mode it prices (by tokens, and Nova Canvas's image, GPT Image's
/// image tokens, Whisper's seconds, TTS's characters), a price it can use, no region in a
/// Bedrock name, not a second name of a model already there).
const IMPORTED: usize = 38;

/// Runs `gateway ARGS` with no config file unless `ARGS` names one.
fn gateway(args: &[&str]) -> Output {
    Command::new(gateway_binary())
        .args(args)
        .env_remove("GATEWAY_CONFIG")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run the gateway binary")
}

/// `gateway prices import FILE --out OUT`, which must succeed; its stdout.
fn import(file: &Path, out: &Path) -> String {
    let output = gateway(&[
        "prices",
        "import",
        &file.to_string_lossy(),
        "--out",
        &out.to_string_lossy(),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "import failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The number on the `LABEL: N` line of an import's report.
fn count(report: &str, label: &str) -> usize {
    report
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{label}: ")))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no `{label}: N` line in:\n{report}"))
}

/// A decimal number as an exact fraction: `digits / 10^scale`.
fn decimal(value: f64) -> (i128, u32) {
    // The shortest decimal that reads back as this double: the digits the file wrote.
    let text = format!("{value:e}");
    let (mantissa, exponent) = text.split_once('e').expect("an exponent");
    let exponent: i32 = exponent.parse().expect("an integer exponent");
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: i128 = format!("{whole}{fraction}").parse().expect("digits");
    let scale = fraction.len() as i32 - exponent;
    if scale >= 0 {
        (digits, scale as u32)
    } else {
        (digits * 10i128.pow((-scale) as u32), 0)
    }
}

/// `Σ tokens × per-token price` of the entry, computed exactly in decimal and only then made
/// a double: what "the file's prices" cost, with no float error of its own.
fn exact_cost(entry: &Value, tokens: &[(&str, u64)]) -> f64 {
    let terms: Vec<(i128, u32)> = tokens
        .iter()
        .map(|(field, n)| {
            let price = entry[field]
                .as_f64()
                .unwrap_or_else(|| panic!("no {field} in {entry}"));
            let (digits, scale) = decimal(price);
            (digits * i128::from(*n), scale)
        })
        .collect();
    let scale = terms.iter().map(|t| t.1).max().unwrap_or(0);
    let sum: i128 = terms
        .iter()
        .map(|(digits, s)| digits * 10i128.pow(scale - s))
        .sum();
    format!("{sum}e-{scale}").parse().expect("a number")
}

/// The cost of the fake upstream's usage at the entry's prices.
fn expected_cost(entry: &Value) -> f64 {
    exact_cost(
        entry,
        &[
            ("input_cost_per_token", PROMPT - CACHED),
            ("cache_read_input_token_cost", CACHED),
            ("output_cost_per_token", COMPLETION),
        ],
    )
}

/// Equal to the last bits a double's arithmetic can keep: the gateway adds the classes' costs
/// and divides by a million in doubles, so a rounding or two of the last bit is all it may be
/// off by (a price stored as `per_token * 1e6` would be off by far more).
fn assert_exact(actual: &Value, expected: f64, context: &Value) {
    let actual = actual
        .as_f64()
        .unwrap_or_else(|| panic!("cost is not a number: {context}"));
    assert!(
        (actual - expected).abs() <= 4.0 * f64::EPSILON * expected,
        "cost {actual} != {expected} (the file's prices): {context}"
    );
}

fn openai_answer() -> Interaction {
    let body = json!({
        "id": "chatcmpl-prices", "object": "chat.completion", "created": 0, "model": MODEL,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Priced."},
            "logprobs": null, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": PROMPT, "completion_tokens": COMPLETION,
            "total_tokens": PROMPT + COMPLETION,
            "prompt_tokens_details": {"cached_tokens": CACHED}}
    });
    Interaction {
        request: RecordedRequest {
            body: "{}".into(),
            url: "http://upstream.test/v1/chat/completions".into(),
            method: "POST".into(),
        },
        response: RecordedResponse {
            body: body.to_string(),
            headers: BTreeMap::from([(
                "Content-Type".to_owned(),
                vec!["application/json".to_owned()],
            )]),
            code: 200,
        },
    }
}

/// A gateway with one OpenAI route to a fake upstream, loading `prices_file`.
fn serving(upstream: &OpenAiUpstream, prices_file: &Path) -> Gateway {
    let path = serde_json::to_string(&prices_file.to_string_lossy()).expect("a string");
    Gateway::builder()
        .route(Route::openai(ROUTE, &upstream.base_url("/v1")))
        .config_line(&format!("prices_file = {path}"))
        .start()
}

/// A chat call of [`MODEL`]; its answer's cost, after checking the record has the same.
fn call_cost(gw: &Gateway) -> (Value, Value) {
    let request = with(
        chat_request(
            &gw.project_id,
            ROUTE,
            MODEL,
            json!([{"role": "user", "content": "hello"}]),
        ),
        "showUsage",
        json!(true),
    );
    let body = assert_ok(&post_with_provider_key(
        gw,
        "/completions",
        PROVIDER_KEY,
        &request,
    ));
    let id = body["invocationId"].as_str().expect("an invocationId");
    let record = gw.get_invocation(id).json();
    assert_eq!(record["usageCost"], body["usage_cost"], "{record}");
    (body["usage_cost"].clone(), body)
}

fn work_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("gateway-prices-")
        .tempdir()
        .expect("a temporary directory")
}

#[test]
fn an_imported_list_prices_a_model_at_exactly_the_files_prices() {
    let dir = work_dir();
    let prices = dir.path().join("prices.toml");
    let report = import(&sample_path(), &prices);
    assert_eq!(count(&report, "added"), IMPORTED, "{report}");
    assert_eq!(count(&report, "changed"), 0, "{report}");
    assert_eq!(count(&report, "unchanged"), 0, "{report}");
    assert_eq!(count(&report, "removed"), 0, "{report}");
    // Everything else the sample has, each with its reason (sample_spec is no model).
    assert_eq!(
        count(&report, "skipped"),
        sample().len() - 1 - IMPORTED,
        "{report}"
    );
    for reason in [
        "provider without a gateway plugin: 3 (azure 1, deepseek 1, mistral 1)",
        "not a chat, completion, embedding, rerank, image, transcription or speech model: 1 \
         (guardrail 1)",
        "not priced per token (per character, image, second or request only): 2",
        "name qualified by a region or commitment: 1",
        "another name for a model already imported: 1",
    ] {
        assert!(report.contains(reason), "no {reason:?} in:\n{report}");
    }
    let written = std::fs::read_to_string(&prices).expect("read the prices file");
    // Per million, exactly as the file's per-token prices read, its tier above 272k prompt
    // tokens included.
    assert!(
        written.contains(
            "\"gpt-5.6-luna\" = { input_per_mtok = 0.2, cached_input_per_mtok = 0.02, \
             cache_write_per_mtok = 0.25, output_per_mtok = 1.2, long_context = { \
             above_prompt_tokens = 272000, input_per_mtok = 0.4, cached_input_per_mtok = 0.04, \
             cache_write_per_mtok = 0.5, output_per_mtok = 1.8 } }"
        ),
        "{written}"
    );
    assert!(
        written.contains("[bedrock]") && written.contains("[vertex]"),
        "{written}"
    );

    let upstream = OpenAiUpstream::each_call(Reply::recorded(&openai_answer()));
    let gw = serving(&upstream, &prices);
    let entry = &sample()[MODEL];
    let (cost, body) = call_cost(&gw);
    assert_exact(&cost, expected_cost(entry), &body);
}

#[test]
fn a_second_import_counts_its_changes_and_a_malformed_list_changes_nothing() {
    let dir = work_dir();
    let prices = dir.path().join("prices.toml");
    import(&sample_path(), &prices);

    // The same list again: nothing changes.
    let report = import(&sample_path(), &prices);
    assert_eq!(
        (
            count(&report, "added"),
            count(&report, "changed"),
            count(&report, "unchanged"),
            count(&report, "removed")
        ),
        (0, 0, IMPORTED, 0),
        "{report}"
    );

    // A newer list: one price changed, one model gone, one new.
    let mut newer = sample();
    newer[MODEL]["input_cost_per_token"] = json!(2.5e-07);
    newer.remove("o3").expect("o3 is in the sample");
    newer.insert(
        "gpt-new".into(),
        json!({"litellm_provider": "openai", "mode": "chat",
            "input_cost_per_token": 1e-06, "output_cost_per_token": 4e-06}),
    );
    let newer_path = dir.path().join("newer.json");
    std::fs::write(&newer_path, Value::Object(newer).to_string()).expect("write");
    let report = import(&newer_path, &prices);
    assert_eq!(
        (
            count(&report, "added"),
            count(&report, "changed"),
            count(&report, "unchanged"),
            count(&report, "removed")
        ),
        (1, 1, IMPORTED - 2, 1),
        "{report}"
    );
    assert!(report.contains("  openai/gpt-new\n"), "{report}");
    assert!(report.contains(&format!("  openai/{MODEL}\n")), "{report}");
    assert!(report.contains("  openai/o3\n"), "{report}");

    // Malformed lists: refused, naming the problem, the current file byte for byte as it was
    // and nothing else left in its directory.
    let before = std::fs::read(&prices).expect("read");
    let listing = || {
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| {
                e.expect("an entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        names
    };
    let files = listing();
    let sample_text = std::fs::read_to_string(sample_path()).expect("read");
    let mut wrong_type = sample();
    wrong_type["gpt-4o-mini"]["output_cost_per_token"] = json!("6e-07");
    // Infinite per million tokens, and finite but absurd: written, the next start would fail.
    let mut infinite = sample();
    infinite["gpt-4o-mini"]["output_cost_per_token"] = json!(1e308);
    let mut absurd = sample();
    absurd["gpt-4o-mini"]["input_cost_per_token"] = json!(1.5);
    let cases = [
        (
            "truncated",
            sample_text[..sample_text.len() / 2].to_owned(),
            "not JSON",
        ),
        (
            "wrong-type",
            Value::Object(wrong_type).to_string(),
            "entry \"gpt-4o-mini\": output_cost_per_token must be a number, not a string",
        ),
        ("empty", "{}".to_owned(), "no model the gateway can price"),
        (
            "infinite",
            Value::Object(infinite).to_string(),
            "entry \"gpt-4o-mini\": output_cost_per_token of 1e+308 dollars a token is over the \
             most a price may be: 1000000 dollars per million tokens",
        ),
        (
            "absurd",
            Value::Object(absurd).to_string(),
            "entry \"gpt-4o-mini\": input_cost_per_token of 1.5 dollars a token is over the most",
        ),
    ];
    for (name, text, reason) in cases {
        let bad = dir.path().join(format!("{name}.json"));
        std::fs::write(&bad, text).expect("write");
        let output = gateway(&[
            "prices",
            "import",
            &bad.to_string_lossy(),
            "--out",
            &prices.to_string_lossy(),
        ]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{name}: accepted:\n{stderr}");
        assert!(stderr.contains(reason), "{name}: {stderr}");
        assert!(stderr.contains("the prices file is unchanged"), "{stderr}");
        assert_eq!(std::fs::read(&prices).expect("read"), before, "{name}");
        std::fs::remove_file(&bad).expect("remove");
        assert_eq!(listing(), files, "{name}");
    }
}

#[test]
fn the_prices_file_is_the_configs_unless_out_names_another() {
    let dir = work_dir();
    // Without a config naming one and without --out, nothing is written anywhere.
    let output = gateway(&["prices", "import", &sample_path().to_string_lossy()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("no prices_file") && stderr.contains("--out"),
        "{stderr}"
    );
    let prices = dir.path().join("configured.toml");
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "prices_file = {}\n",
            serde_json::to_string(&prices.to_string_lossy()).expect("a string")
        ),
    )
    .expect("write the config");
    let output = gateway(&[
        "prices",
        "import",
        &sample_path().to_string_lossy(),
        "--config",
        &config.to_string_lossy(),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let written = std::fs::read_to_string(&prices).expect("the configured file is written");
    assert!(written.contains(&format!("\"{MODEL}\"")), "{written}");
}

#[test]
fn editing_the_prices_file_while_serving_reprices_the_next_call_and_a_broken_edit_is_refused() {
    let dir = work_dir();
    let prices = dir.path().join("prices.toml");
    import(&sample_path(), &prices);
    let upstream = OpenAiUpstream::each_call(Reply::recorded(&openai_answer()));
    let gw = serving(&upstream, &prices);
    let entry = sample()[MODEL].clone();
    let (cost, body) = call_cost(&gw);
    assert_exact(&cost, expected_cost(&entry), &body);

    // An edit by hand, in place.
    let text = std::fs::read_to_string(&prices).expect("read");
    let line = text
        .lines()
        .find(|line| line.starts_with(&format!("\"{MODEL}\" =")))
        .expect("the model's line")
        .to_owned();
    let edited_line = format!(
        "\"{MODEL}\" = {{ input_per_mtok = 3.0, cached_input_per_mtok = 0.3, \
         output_per_mtok = 15.0 }}"
    );
    let edited = text.replace(&line, &edited_line);
    std::fs::write(&prices, &edited).expect("edit the prices file");
    gw.wait_for_log("prices reloaded", 1);
    let by_hand = json!({"input_cost_per_token": 3e-06, "cache_read_input_token_cost": 3e-07,
        "output_cost_per_token": 1.5e-05});
    let (cost, body) = call_cost(&gw);
    assert_exact(&cost, expected_cost(&by_hand), &body);

    // A broken edit: refused with its reason, the prices of the last good one keep serving.
    std::fs::write(
        &prices,
        edited.replace(
            &edited_line,
            &edited_line.replace("input_per_mtok = 3.0", "input_per_mtok = \"3\""),
        ),
    )
    .expect("break the prices file");
    gw.wait_for_log("prices change refused", 1);
    let logs = gw.logs();
    let refusal = logs
        .lines()
        .find(|line| line.contains("prices change refused"))
        .unwrap_or_else(|| panic!("no refusal:\n{logs}"));
    // The entry at fault, by plugin and model.
    assert!(
        refusal.contains(&format!("openai.\"{MODEL}\": ")),
        "{refusal}"
    );
    let (cost, body) = call_cost(&gw);
    assert_exact(&cost, expected_cost(&by_hand), &body);

    // An import while serving: its rename is picked up like an edit.
    let mut newer = sample();
    newer[MODEL]["input_cost_per_token"] = json!(1.25e-08);
    newer[MODEL]["output_cost_per_token"] = json!(4.2e-09);
    let newer_entry = newer[MODEL].clone();
    let newer_path = dir.path().join("newer.json");
    std::fs::write(&newer_path, Value::Object(newer).to_string()).expect("write");
    import(&newer_path, &prices);
    gw.wait_for_log("prices reloaded", 2);
    let (cost, body) = call_cost(&gw);
    assert_exact(&cost, expected_cost(&newer_entry), &body);
}

#[test]
fn a_gateway_whose_prices_file_is_malformed_does_not_start() {
    let dir = work_dir();
    let prices = dir.path().join("prices.toml");
    std::fs::write(
        &prices,
        "as_of = \"2026-11-27\"\n[openai]\n\"m\" = { input_per_mtok = -1.0, output_per_mtok = 1.0 }\n",
    )
    .expect("write");
    let stderr = refused_start(&format!(
        "prices_file = {}\n",
        serde_json::to_string(&prices.to_string_lossy()).expect("a string")
    ));
    assert!(
        stderr.contains("invalid prices file") && stderr.contains("input_per_mtok"),
        "{stderr}"
    );
}

#[test]
fn a_config_edit_that_names_a_prices_file_loads_it_and_watches_it() {
    let dir = work_dir();
    let prices = dir.path().join("prices.toml");
    import(&sample_path(), &prices);
    let upstream = OpenAiUpstream::each_call(Reply::recorded(&openai_answer()));
    let gw = Gateway::builder()
        .route(Route::openai(ROUTE, &upstream.base_url("/v1")))
        .start();
    // Not in the shipped table: no price yet.
    let (cost, body) = call_cost(&gw);
    assert!(cost.is_null(), "{body}");

    let original = std::fs::read_to_string(gw.config_path()).expect("read the config");
    let path = serde_json::to_string(&prices.to_string_lossy()).expect("a string");
    gw.rewrite_config(&format!("prices_file = {path}\n{original}"));
    gw.wait_for_log("config reloaded", 1);
    let (cost, body) = call_cost(&gw);
    assert_exact(&cost, expected_cost(&sample()[MODEL]), &body);

    // The file named is watched from then on.
    let mut newer = sample();
    newer[MODEL]["input_cost_per_token"] = json!(1e-06);
    let newer_entry = newer[MODEL].clone();
    let newer_path = dir.path().join("newer.json");
    std::fs::write(&newer_path, Value::Object(newer).to_string()).expect("write");
    import(&newer_path, &prices);
    gw.wait_for_log("prices reloaded", 1);
    let (cost, body) = call_cost(&gw);
    assert_exact(&cost, expected_cost(&newer_entry), &body);

    // A config edit naming a prices file that cannot be read is refused as a whole.
    let missing = serde_json::to_string(&dir.path().join("missing.toml").to_string_lossy())
        .expect("a string");
    gw.rewrite_config(&format!("prices_file = {missing}\n{original}"));
    gw.wait_for_log("config change refused", 1);
    let logs = gw.logs();
    assert!(
        logs.lines()
            .any(|l| l.contains("config change refused") && l.contains("prices_file")),
        "{logs}"
    );
    let (cost, body) = call_cost(&gw);
    assert_exact(&cost, expected_cost(&newer_entry), &body);
}
