//! Single sign-on to the console through a real OpenID provider: `oidc-provider` (the
//! certified Node.js implementation, `tests/oidc`), started here with a confidential client and
//! three users in groups, and Chromium driven by Playwright (`tests/console/sso_test.py`)
//! through its login and consent pages. The gateway has no admin token: its owner is whoever the
//! provider says is in `platform-admins`; a project viewer is given the role through the CLI;
//! someone with no role is refused. The provider is started again with a new signing key half
//! way, and signing in still works. The audit log has each sign-in, refusal and sign-out.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use gateway_test_support::{Gateway, Route};
use serde_json::{Value, json};

use crate::venv;

/// Where `cargo xtask test` installed the provider (`xtask`'s `oidc_node`).
const NODE_DIR_VAR: &str = "GATEWAY_TEST_OIDC_NODE_DIR";
const CLIENT_ID: &str = "gateway-console";
const CLIENT_SECRET: &str = "the-client-secret-of-the-sso-tests-0123456789";
const SECRET_VAR: &str = "GATEWAY_TEST_OIDC_CLIENT_SECRET";
const CHROMIUM_VAR: &str = "GATEWAY_TEST_CHROMIUM";

/// The provider's process, stopped when dropped.
struct Provider(Child);

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A port no one listens on now (the gateway's must be known before it starts: the provider
/// registers its callback URL).
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

/// Starts the provider on `port`, signing with a new key named `kid`, for a gateway on
/// `gateway_port`; returns once it listens.
fn provider(dir: &Path, port: u16, kid: &str, gateway_port: u16) -> Provider {
    let gateway = format!("http://127.0.0.1:{gateway_port}");
    let mut child = Command::new("node")
        .current_dir(dir)
        .arg("idp.mjs")
        .arg(port.to_string())
        .arg(kid)
        .arg(CLIENT_ID)
        .arg(CLIENT_SECRET)
        .arg(format!("{gateway}/ui/oidc/callback"))
        .arg(format!("{gateway}/ui/"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start the OpenID provider (node idp.mjs): {e}"));
    let stdout = child.stdout.take().expect("piped");
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    reader
        .read_line(&mut line)
        .unwrap_or_else(|e| panic!("the OpenID provider printed nothing: {e}"));
    assert!(
        line.contains("listening"),
        "the OpenID provider printed {line:?}"
    );
    // Read on to its end: a provider writing to a closed pipe would die of it.
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    Provider(child)
}

/// Runs one phase of `tests/console/sso_test.py`.
fn browse(python: &Path, scenario: &Value, phase: &str, gw: &Gateway) {
    let mut scenario = scenario.clone();
    scenario["phase"] = json!(phase);
    let output = venv::command(python)
        .arg("tests/console/sso_test.py")
        .env("GATEWAY_SSO_SCENARIO", scenario.to_string())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "single sign-on, phase {phase}, failed ({}):\n{stdout}\n{stderr}\n--- gateway log ---\n{}",
        output.status,
        gw.logs()
    );
}

#[test]
fn the_console_signs_in_through_an_openid_provider() {
    if let Ok(why) = std::env::var("GATEWAY_TEST_NO_BROWSER") {
        gateway_test_support::skip_outside_ci("the single sign-on browser test", &why);
        return;
    }
    let node_dir = PathBuf::from(std::env::var(NODE_DIR_VAR).unwrap_or_else(|_| {
        panic!(
            "{NODE_DIR_VAR} is not set: run `cargo xtask test`, which installs the OpenID \
             provider (tests/oidc) into target/oidc-node and sets it"
        )
    }));
    let python = venv::python();
    let chromium = std::env::var(CHROMIUM_VAR).unwrap_or_else(|_| "/usr/bin/chromium".into());
    let (provider_port, gateway_port) = (free_port(), free_port());
    let mut idp = provider(&node_dir, provider_port, "key-1", gateway_port);
    let oidc = format!(
        r#"[oidc]
issuer = "http://127.0.0.1:{provider_port}"
client_id = "{CLIENT_ID}"
client_secret_env = "{SECRET_VAR}"
scopes = ["email", "groups"]
redirect_url = "http://127.0.0.1:{gateway_port}/ui/oidc/callback"
[oidc.roles]
owner = ["platform-admins"]"#
    );
    let gw = Gateway::builder()
        .route(Route::echo("demo"))
        .env(SECRET_VAR, CLIENT_SECRET)
        .config_line(&format!("listen = \"127.0.0.1:{gateway_port}\""))
        .config_line(&oidc)
        .start();
    // No admin token: the console signs in only through the provider.
    let sign_in = gw.get("/ui/sign-in", None).json();
    assert_eq!(sign_in, json!({"adminToken": false, "sso": true}));
    assert_eq!(gw.get("/admin/projects", None).status, 401);
    // Bob's role is an owner's gift, not his group's.
    gw.cli_ok(&[
        "users",
        "add",
        "Bob@Example.com",
        "--role",
        "project_viewer",
        "--project",
        &gw.project_id,
    ]);
    let made = gw.cli_ok(&["project", "create", "Secret Bravo"]);
    let other_id = made.lines().last().unwrap_or_default().trim().to_owned();
    let screenshots = venv::workspace_root().join("target").join("ui-screenshots");
    let scenario = json!({
        "url": gw.url(),
        "projectId": gw.project_id,
        "projectName": "test-project",
        "otherId": other_id,
        "otherName": "Secret Bravo",
        "chromium": chromium,
        "screenshots": screenshots,
    });
    browse(&python, &scenario, "roles", &gw);

    // The provider signs with a new key from now on, which the gateway has not seen.
    drop(idp);
    idp = provider(&node_dir, provider_port, "key-2", gateway_port);
    browse(&python, &scenario, "rotated", &gw);
    drop(idp);

    let exported = gw.cli_ok(&["audit", "export"]);
    let events: Vec<Value> = exported
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    let of = |actor: &str, action: &str| {
        events
            .iter()
            .filter(|e| e["actor"] == actor && e["action"] == action)
            .count()
    };
    assert_eq!(of("user:alice@example.com", "sign_in"), 2, "{exported}");
    assert_eq!(of("user:alice@example.com", "sign_out"), 1, "{exported}");
    assert_eq!(of("user:bob@example.com", "sign_in"), 1, "{exported}");
    assert_eq!(
        of("user:carol@example.com", "sign_in.failed"),
        1,
        "{exported}"
    );
    let alice = events
        .iter()
        .find(|e| e["actor"] == "user:alice@example.com" && e["action"] == "sign_in")
        .expect("alice's sign-in");
    assert_eq!(alice["role"], "owner");
    assert_eq!(alice["via"], "console");
    let bob = events
        .iter()
        .find(|e| e["actor"] == "user:bob@example.com" && e["action"] == "sign_in")
        .expect("bob's sign-in");
    assert_eq!(bob["role"], format!("project_viewer:{}", gw.project_id));
    // The users' roles given by the CLI are in it too, and nothing secret is.
    assert_eq!(of_action(&events, "user.add"), 1, "{exported}");
    assert!(!exported.contains(CLIENT_SECRET));
}

fn of_action(events: &[Value], action: &str) -> usize {
    events.iter().filter(|e| e["action"] == action).count()
}
