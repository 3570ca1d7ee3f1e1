//! The Kubernetes manifests (`deploy/kubernetes/`): the base and the plugin overlay rendered by
//! kustomize (`kubectl kustomize`), every object they make validated against Kubernetes's own
//! schemas (`kubernetes-validate --strict`: an unknown or misspelt field fails) for the oldest
//! Kubernetes the manifests need and the newest the validator knows, what issue 54 asks of
//! them asserted on the rendered objects, and the `gateway.toml` of their ConfigMaps checked by
//! the gateway's own `check-config` with the environment the Deployment sets.
//!
//! The tools are Python packages, with the schemas and kubectl inside, pinned in
//! `tests/deploy/requirements.txt`: `cargo xtask test` installs them into `target/deploy-venv`
//! and names its interpreter in `GATEWAY_DEPLOY_PYTHON`. Nothing is fetched: kustomize reads
//! the folders, the validator its bundled schemas.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine as _;
use gateway_test_support::harness::gateway_binary;
use serde_json::Value;

/// The Kubernetes versions validated against: 1.30, the first whose API server keeps a preStop
/// `sleep` by default (the image has no shell to sleep with), and the newest the pinned
/// `kubernetes-validate` bundles.
const KUBERNETES: [&str; 2] = ["1.30.0", "1.37.0"];
/// The Secret the manifests name (its values are the operator's, never in the manifests).
const SECRET: &str = "gateway-secrets";
/// What the gateway may take after `shutdown_grace_secs` before it exits: its rate-limit leases
/// handed back (2 s at most) and the invocation writer's flush (10 s at most): `server/app.rs`.
const AFTER_GRACE_SECS: u64 = 12;
/// The overlay's ConfigMap of plugin files, whose files the operator puts beside it.
const PLUGINS_CONFIGMAP: &str = "gateway-plugins";
/// What stands in for the operator's plugin file: a WebAssembly header, then bytes that are not
/// UTF-8 (a real plugin's are not either), so that kustomize puts it in `binaryData`.
const STAND_IN_PLUGIN: &[u8] = b"\0asm\x01\0\0\0\xff\xfe\x80 a plugin of the operator's own";

/// `deploy/kubernetes` in the repository.
fn manifests() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes")
}

/// kubectl (kustomize inside), `kubernetes-validate` and the interpreter that turns YAML into
/// JSON, all from one venv.
struct Tools {
    python: PathBuf,
    kubectl: PathBuf,
    validate: PathBuf,
}

/// The venv's tools; `None` (said loudly) when `GATEWAY_DEPLOY_PYTHON` is not set, which under
/// CI is a failure: CI runs `cargo xtask test`, which sets it.
fn tools(test: &str) -> Option<Tools> {
    let Some(python) = std::env::var_os("GATEWAY_DEPLOY_PYTHON").filter(|v| !v.is_empty()) else {
        let why = "GATEWAY_DEPLOY_PYTHON is not set: run the tests through `cargo xtask test`, \
                   which installs tests/deploy/requirements.txt into target/deploy-venv";
        gateway_test_support::skip_outside_ci(test, why);
        return None;
    };
    // The venv's bin directory, as named (its python may be a link to one elsewhere).
    let python = PathBuf::from(python);
    let bin = python
        .parent()
        .expect("the venv's bin directory")
        .to_owned();
    Some(Tools {
        kubectl: bin.join("kubectl"),
        validate: bin.join("kubernetes-validate"),
        python,
    })
}

/// Runs `command` with `input` on its stdin; what it said.
fn run(command: &mut Command, input: Option<&[u8]>) -> Output {
    use std::io::Write as _;
    use std::process::Stdio;
    let name = format!("{command:?}");
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut stdin = child.stdin.take().expect("stdin");
    if let Some(input) = input {
        stdin.write_all(input).expect("write stdin");
    }
    drop(stdin);
    child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

impl Tools {
    /// YAML documents as JSON values (empty documents left out).
    fn yaml(&self, text: &str) -> Vec<Value> {
        const TO_JSON: &str = "import json, sys, yaml\n\
                               docs = [d for d in yaml.safe_load_all(sys.stdin) if d is not None]\n\
                               json.dump(docs, sys.stdout)";
        let out = run(
            Command::new(&self.python).args(["-c", TO_JSON]),
            Some(text.as_bytes()),
        );
        assert!(
            out.status.success(),
            "YAML: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("the YAML as JSON")
    }

    /// `kubectl kustomize DIR`: what `kubectl apply -k DIR` would send, as YAML.
    fn render(&self, dir: &Path) -> String {
        let out = run(Command::new(&self.kubectl).arg("kustomize").arg(dir), None);
        assert!(
            out.status.success(),
            "kubectl kustomize {}: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("kustomize's output")
    }

    /// Every object of `yaml` passes the schemas of each version in [`KUBERNETES`], strictly:
    /// no error, no warning (an unknown kind is one), a pass for each object.
    fn validate(&self, yaml: &str, objects: usize) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let file = dir.path().join("rendered.yaml");
        std::fs::write(&file, yaml).expect("the rendered manifests");
        for version in KUBERNETES {
            let out = run(
                Command::new(&self.validate)
                    .args(["--strict", "--kubernetes-version", version])
                    .arg(&file),
                None,
            );
            let said = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                out.status.success(),
                "kubernetes-validate {version}:\n{said}"
            );
            let lines: Vec<&str> = said.lines().filter(|l| !l.trim().is_empty()).collect();
            assert!(
                lines
                    .iter()
                    .all(|l| l.starts_with("INFO") && l.contains(" passed for resource ")),
                "kubernetes-validate {version}:\n{said}"
            );
            assert_eq!(
                lines.len(),
                objects,
                "kubernetes-validate {version} did not pass every object:\n{said}"
            );
        }
    }
}

/// `deploy/kubernetes` copied to a temporary directory, where a test can put the plugin file
/// the overlay's operator provides.
fn tree() -> tempfile::TempDir {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).expect("a directory of the copy");
        for entry in std::fs::read_dir(from).expect("deploy/kubernetes") {
            let entry = entry.expect("an entry");
            let path = entry.path();
            if path.is_dir() {
                copy(&path, &to.join(entry.file_name()));
            } else {
                std::fs::copy(&path, to.join(entry.file_name())).expect("a file of the copy");
            }
        }
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    copy(&manifests(), dir.path());
    dir
}

/// What a kustomization lists: the files it names, and the generator files of
/// [`PLUGINS_CONFIGMAP`] (the operator's, absent from the repository).
struct Listing {
    files: Vec<String>,
    operators: Vec<String>,
}

/// Checks the kustomization of `dir` (in the repository) against the folder: every file is
/// listed, and every listed file is there, but the operator's plugin files.
fn listing(tools: &Tools, dir: &Path) -> Listing {
    let text = std::fs::read_to_string(dir.join("kustomization.yaml")).expect("kustomization.yaml");
    let kustomization = tools.yaml(&text).remove(0);
    let mut files = Vec::new();
    let mut operators = Vec::new();
    for resource in array(&kustomization, "/resources") {
        let resource = resource.as_str().expect("a resource's path");
        // A base (a folder) is rendered, not listed.
        if !dir.join(resource).is_dir() {
            files.push(resource.to_owned());
        }
    }
    for patch in array(&kustomization, "/patches") {
        files.push(text_at(patch, "/path").to_owned());
    }
    for generator in array(&kustomization, "/configMapGenerator") {
        for file in array(generator, "/files") {
            // `KEY=PATH` names the key; the file is PATH.
            let file = file.as_str().expect("a generator's file");
            let file = file
                .split_once('=')
                .map_or(file, |(_, path)| path)
                .to_owned();
            if text_at(generator, "/name") == PLUGINS_CONFIGMAP {
                assert!(file.ends_with(".wasm"), "{file} is not a plugin");
                operators.push(file);
            } else {
                files.push(file);
            }
        }
    }
    for kind in [
        "/secretGenerator",
        "/patchesStrategicMerge",
        "/patchesJson6902",
        "/bases",
    ] {
        assert!(
            kustomization.pointer(kind).is_none(),
            "{}: {kind} is not expected (no Secret in the manifests; `patches` for patches)",
            dir.display()
        );
    }
    let mut present: Vec<String> = std::fs::read_dir(dir)
        .expect("the kustomization's folder")
        .map(|entry| entry.expect("an entry"))
        .filter(|entry| entry.path().is_file())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        // The operator's plugin, if one was put there to try the overlay, is not the
        // repository's.
        .filter(|name| name != "kustomization.yaml" && !operators.contains(name))
        .collect();
    present.sort();
    let mut listed = files.clone();
    listed.sort();
    assert_eq!(
        present,
        listed,
        "{}: the files of the folder and those its kustomization lists differ",
        dir.display()
    );
    Listing { files, operators }
}

fn array<'a>(value: &'a Value, pointer: &str) -> &'a [Value] {
    value
        .pointer(pointer)
        .map_or(&[], |v| v.as_array().expect("an array"))
}

fn text_at<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no text at {pointer} of {value}"))
}

fn int_at(value: &Value, pointer: &str) -> u64 {
    value
        .pointer(pointer)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("no count at {pointer} of {value}"))
}

/// The one object of `kind` whose name starts with `name` (a generated ConfigMap's name ends
/// with a hash of its content).
fn one<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let found: Vec<&Value> = objects
        .iter()
        .filter(|o| text_at(o, "/kind") == kind && text_at(o, "/metadata/name").starts_with(name))
        .collect();
    assert_eq!(found.len(), 1, "one {kind} {name}: {found:?}");
    found[0]
}

/// A rendered kustomization: its objects.
struct Rendered {
    objects: Vec<Value>,
}

impl Rendered {
    /// Renders the kustomization in `dir`, validates every object it makes, and checks what
    /// every render must hold.
    fn new(tools: &Tools, dir: &Path) -> Rendered {
        let yaml = tools.render(dir);
        let objects = tools.yaml(&yaml);
        tools.validate(&yaml, objects.len());
        let rendered = Rendered { objects };
        rendered.holds_what_the_issue_asks();
        rendered
    }

    fn deployment(&self) -> &Value {
        one(&self.objects, "Deployment", "gateway")
    }

    fn container(&self) -> &Value {
        let containers = array(self.deployment(), "/spec/template/spec/containers");
        assert_eq!(containers.len(), 1, "one container: {containers:?}");
        &containers[0]
    }

    /// The config the pods mount: the ConfigMap's `gateway.toml`, and the file's text.
    fn config(&self) -> (toml::Table, String) {
        let map = one(&self.objects, "ConfigMap", "gateway-config-");
        let text = text_at(map, "/data/gateway.toml").to_owned();
        (text.parse().expect("the ConfigMap's gateway.toml"), text)
    }

    /// The container's port named `name`.
    fn port(&self, name: &str) -> u64 {
        let port = array(self.container(), "/ports")
            .iter()
            .find(|p| text_at(p, "/name") == name)
            .unwrap_or_else(|| panic!("no container port named {name}"));
        int_at(port, "/containerPort")
    }

    /// The container's mount whose path is `path`, and its volume.
    fn mount(&self, path: &str) -> Option<(&Value, &Value)> {
        let mount = array(self.container(), "/volumeMounts")
            .iter()
            .find(|m| text_at(m, "/mountPath") == path)?;
        let volume = array(self.deployment(), "/spec/template/spec/volumes")
            .iter()
            .find(|v| v["name"] == mount["name"])
            .unwrap_or_else(|| panic!("no volume for the mount {mount}"));
        Some((mount, volume))
    }

    /// Issue 54's asks, and what makes them hold together, for the base and every overlay.
    fn holds_what_the_issue_asks(&self) {
        let objects = &self.objects;
        let deployment = self.deployment();
        let pod = &deployment["spec"]["template"];
        let spec = &pod["spec"];
        let container = self.container();
        let (config, _) = self.config();
        let labels = pod["metadata"]["labels"]
            .as_object()
            .expect("the pods' labels");
        let selects_the_pods = |selector: &Value, what: &str| {
            let selector = selector.as_object().expect("a selector's labels");
            assert!(!selector.is_empty(), "{what} selects every pod");
            for (key, value) in selector {
                assert_eq!(labels.get(key), Some(value), "{what} selects other pods");
            }
        };

        // No Secret, and so no secret value, in anything applied.
        assert!(
            objects.iter().all(|o| o["kind"] != "Secret"),
            "a Secret in the manifests: they name the operator's, never hold one"
        );

        // Three replicas, rolled one new pod at a time with none of the old ones down first.
        assert_eq!(int_at(deployment, "/spec/replicas"), 3);
        selects_the_pods(
            &deployment["spec"]["selector"]["matchLabels"],
            "the Deployment",
        );
        assert_eq!(text_at(deployment, "/spec/strategy/type"), "RollingUpdate");
        assert_eq!(
            deployment["spec"]["strategy"]["rollingUpdate"],
            serde_json::json!({"maxUnavailable": 0, "maxSurge": 1})
        );
        assert_eq!(
            text_at(container, "/image"),
            format!("gateway:{}", env!("CARGO_PKG_VERSION")),
            "the image's tag is this version's"
        );

        // Non-root, nothing to gain, nothing written outside the volumes.
        assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
        assert_eq!(int_at(spec, "/securityContext/runAsUser"), 65532);
        assert_eq!(
            text_at(spec, "/securityContext/seccompProfile/type"),
            "RuntimeDefault"
        );
        let security = &container["securityContext"];
        assert_eq!(security["runAsNonRoot"], true);
        assert_eq!(security["allowPrivilegeEscalation"], false);
        assert_eq!(security["readOnlyRootFilesystem"], true);
        assert_eq!(security["capabilities"]["drop"], serde_json::json!(["ALL"]));
        assert!(security["capabilities"].get("add").is_none());
        assert_eq!(spec["automountServiceAccountToken"], false);
        for resource in [
            "/resources/requests/cpu",
            "/resources/requests/memory",
            "/resources/limits/memory",
        ] {
            assert!(container.pointer(resource).is_some(), "no {resource}");
        }

        // The ports the config listens on.
        let port_of = |key: &str| -> u64 {
            let address = config[key].as_str().expect("an address");
            assert!(
                address.starts_with("0.0.0.0:"),
                "{key} = {address:?} is not reachable from the Service"
            );
            address
                .rsplit_once(':')
                .expect("a port")
                .1
                .parse()
                .expect("a port")
        };
        assert_eq!(self.port("http"), 8080);
        assert_eq!(port_of("listen"), 8080);
        assert_eq!(self.port("metrics"), 9090);
        assert_eq!(port_of("metrics_listen"), 9090);
        assert_eq!(config["log_format"].as_str(), Some("json"));
        assert_eq!(config["demo_project"].as_bool(), Some(false));

        // Probes on /healthz of the API port (HTTP: the image has no shell).
        for probe in ["startupProbe", "readinessProbe", "livenessProbe"] {
            let get = &container[probe]["httpGet"];
            assert_eq!(text_at(get, "/path"), "/healthz", "{probe}");
            let port = match &get["port"] {
                Value::String(name) => self.port(name),
                port => port.as_u64().expect("a port"),
            };
            assert_eq!(port, 8080, "{probe}");
        }

        // Stopping: a pause while the endpoints drop the pod, the gateway's grace, its flush.
        let pre_stop = int_at(container, "/lifecycle/preStop/sleep/seconds");
        assert!(pre_stop > 0, "preStop pauses");
        let grace = config
            .get("shutdown_grace_secs")
            .map_or(30, |g| g.as_integer().expect("seconds") as u64);
        let kill = int_at(spec, "/terminationGracePeriodSeconds");
        assert!(
            kill >= pre_stop + grace + AFTER_GRACE_SECS,
            "terminationGracePeriodSeconds {kill} must leave preStop's {pre_stop} s, \
             shutdown_grace_secs {grace} and the {AFTER_GRACE_SECS} s that follow before SIGKILL"
        );

        // The config is the ConfigMap's file; everything written is on a writable volume.
        let env: BTreeMap<&str, &Value> = array(container, "/env")
            .iter()
            .map(|e| (text_at(e, "/name"), e))
            .collect();
        assert!(
            container.get("envFrom").is_none(),
            "envFrom: name each variable"
        );
        let config_path = Path::new(text_at(env["GATEWAY_CONFIG"], "/value"));
        let (mount, volume) = self
            .mount(
                config_path
                    .parent()
                    .and_then(Path::to_str)
                    .expect("a folder"),
            )
            .expect("the config's folder is mounted");
        assert_eq!(mount["readOnly"], true);
        assert!(text_at(volume, "/configMap/name").starts_with("gateway-config-"));
        assert_eq!(
            config_path.file_name().and_then(|n| n.to_str()),
            Some("gateway.toml")
        );
        for key in ["journal_dir", "plugin_cache_dir"] {
            let path = Path::new(config[key].as_str().expect("a path"));
            let writable = array(container, "/volumeMounts").iter().any(|m| {
                m["readOnly"] != true
                    && path.starts_with(text_at(m, "/mountPath"))
                    && self
                        .mount(text_at(m, "/mountPath"))
                        .is_some_and(|(_, v)| v.get("emptyDir").is_some())
            });
            assert!(
                writable,
                "{key} ({}) is on no writable volume",
                path.display()
            );
        }
        // The image's plugins stay visible: nothing is mounted over their directory.
        let plugins_dir = config["plugins_dir"].as_str().expect("plugins_dir");
        assert_eq!(
            plugins_dir, "/usr/lib/gateway/plugins",
            "the image's plugins"
        );
        assert!(
            self.mount(plugins_dir).is_none(),
            "a mount hides the image's plugins"
        );

        // Secrets: every variable but the config's path comes from the Secret, by reference;
        // the database and Redis are required, and every route's key is set.
        for (name, var) in &env {
            if *name == "GATEWAY_CONFIG" {
                continue;
            }
            assert!(var.get("value").is_none(), "{name} holds a value");
            assert_eq!(
                text_at(var, "/valueFrom/secretKeyRef/name"),
                SECRET,
                "{name} is not from the Secret"
            );
        }
        for required in ["GATEWAY_DATABASE_URL", "GATEWAY_REDIS_URL"] {
            let reference = &env
                .get(required)
                .unwrap_or_else(|| panic!("{required} is not set"))["valueFrom"]["secretKeyRef"];
            assert_ne!(reference["optional"], true, "{required} is optional");
        }
        for optional in ["GATEWAY_ADMIN_TOKEN", "GATEWAY_METRICS_TOKEN"] {
            assert!(env.contains_key(optional), "{optional} is not set");
        }
        // The file leaves them to the Secret.
        for secret in ["database", "redis_url", "admin_token", "metrics_token"] {
            assert!(!config.contains_key(secret), "gateway.toml sets {secret}");
        }
        let routes = config["providers"].as_table().expect("routes");
        for (id, route) in routes {
            if let Some(var) = route.get("api_key_env").and_then(|v| v.as_str()) {
                assert!(env.contains_key(var), "route {id}'s {var} is not set");
            }
        }

        // The Service: the API, and the metrics on the port a ServiceMonitor names.
        let service = one(objects, "Service", "gateway");
        selects_the_pods(&service["spec"]["selector"], "the Service");
        let ports: BTreeMap<&str, (u64, &str)> = array(service, "/spec/ports")
            .iter()
            .map(|p| {
                (
                    text_at(p, "/name"),
                    (int_at(p, "/port"), text_at(p, "/targetPort")),
                )
            })
            .collect();
        assert_eq!(
            ports,
            BTreeMap::from([("http", (8080, "http")), ("metrics", (9090, "metrics"))])
        );

        // A disruption budget and a CPU autoscaler, both on these pods.
        let budget = one(objects, "PodDisruptionBudget", "gateway");
        selects_the_pods(&budget["spec"]["selector"]["matchLabels"], "the budget");
        assert!(budget["spec"].get("maxUnavailable").is_some());
        let scaler = one(objects, "HorizontalPodAutoscaler", "gateway");
        assert_eq!(
            scaler["spec"]["scaleTargetRef"],
            serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "gateway"})
        );
        assert_eq!(int_at(scaler, "/spec/minReplicas"), 3);
        assert!(int_at(scaler, "/spec/maxReplicas") > 3);
        let metrics = array(scaler, "/spec/metrics");
        assert_eq!(metrics.len(), 1, "{metrics:?}");
        assert_eq!(text_at(&metrics[0], "/type"), "Resource");
        assert_eq!(text_at(&metrics[0], "/resource/name"), "cpu");
        assert_eq!(text_at(&metrics[0], "/resource/target/type"), "Utilization");
    }
}

#[test]
fn the_base_renders_validates_and_holds_what_the_issue_asks() {
    let Some(tools) = tools("the Kubernetes base") else {
        return;
    };
    let listed = listing(&tools, &manifests().join("base"));
    assert!(listed.operators.is_empty());
    for file in [
        "deployment.yaml",
        "service.yaml",
        "pdb.yaml",
        "hpa.yaml",
        "gateway.toml",
    ] {
        assert!(
            listed.files.iter().any(|f| f == file),
            "the base lost {file}"
        );
    }
    let tree = tree();
    let base = Rendered::new(&tools, &tree.path().join("base"));
    let kinds: Vec<&str> = base.objects.iter().map(|o| text_at(o, "/kind")).collect();
    assert_eq!(
        kinds.len(),
        5,
        "a ConfigMap, Service, Deployment, PodDisruptionBudget and HorizontalPodAutoscaler: {kinds:?}"
    );

    // The ServiceMonitor docs/deploying.md shows selects this Service's metrics port.
    let docs =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/deploying.md"))
            .expect("docs/deploying.md");
    let monitor = docs
        .split("```yaml\n")
        .skip(1)
        .filter_map(|block| block.split_once("```").map(|(yaml, _)| yaml))
        .find(|yaml| yaml.contains("kind: ServiceMonitor"))
        .expect("a ServiceMonitor in docs/deploying.md");
    let monitor = tools.yaml(monitor).remove(0);
    let service = one(&base.objects, "Service", "gateway");
    for (key, value) in monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("the ServiceMonitor's selector")
    {
        assert_eq!(
            &service["metadata"]["labels"][key], value,
            "the ServiceMonitor does not select the Service"
        );
    }
    let endpoints = array(&monitor, "/spec/endpoints");
    assert_eq!(text_at(&endpoints[0], "/port"), "metrics");
    assert_eq!(text_at(&endpoints[0], "/path"), "/metrics");
}

#[test]
fn the_plugin_overlay_adds_a_plugin_beside_the_shipped_ones() {
    let Some(tools) = tools("the Kubernetes plugin overlay") else {
        return;
    };
    let listed = listing(&tools, &manifests().join("overlays/plugin"));
    assert_eq!(listed.operators, ["acme.wasm"]);
    let tree = tree();
    let overlay_dir = tree.path().join("overlays/plugin");
    std::fs::write(overlay_dir.join("acme.wasm"), STAND_IN_PLUGIN).expect("the plugin's file");
    let overlay = Rendered::new(&tools, &overlay_dir);
    let base = Rendered::new(&tools, &tree.path().join("base"));

    // The plugin's file, whole, in a ConfigMap of its own.
    let plugins = one(
        &overlay.objects,
        "ConfigMap",
        &format!("{PLUGINS_CONFIGMAP}-"),
    );
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text_at(plugins, "/binaryData/acme.wasm"))
        .expect("base64");
    assert_eq!(bytes, STAND_IN_PLUGIN);

    // Mounted as one file into the plugins directory, beside the image's own.
    let (config, _) = overlay.config();
    let plugins_dir = config["plugins_dir"].as_str().expect("plugins_dir");
    let (mount, volume) = overlay
        .mount(&format!("{plugins_dir}/acme.wasm"))
        .expect("the plugin is mounted into plugins_dir");
    assert_eq!(text_at(mount, "/subPath"), "acme.wasm");
    assert_eq!(mount["readOnly"], true);
    assert_eq!(
        text_at(volume, "/configMap/name"),
        text_at(plugins, "/metadata/name")
    );

    // The config: the base's, and a route of that plugin (named by its file stem).
    let (mut config, _) = overlay.config();
    let providers = config["providers"].as_table_mut().expect("routes");
    let acme = providers.remove("acme").expect("the overlay's route");
    assert_eq!(acme["plugin"].as_str(), Some("acme"));
    assert_eq!(
        config,
        base.config().0,
        "the overlay's gateway.toml is no longer the base's and its route"
    );
    // The Deployment is the base's, and the plugin's mount, volume and key.
    assert_eq!(
        without_the_plugin(overlay.deployment()),
        without_the_plugin(base.deployment()),
        "the overlay changes more of the Deployment than the plugin's mount and key"
    );
}

/// A Deployment without the overlay's plugin (its volume, mount and key), the name of its
/// config's ConfigMap without the hash of the content.
fn without_the_plugin(deployment: &Value) -> Value {
    let mut deployment = deployment.clone();
    let spec = &mut deployment["spec"]["template"]["spec"];
    let volumes = spec["volumes"].as_array_mut().expect("volumes");
    volumes.retain(|v| v["name"] != "plugins");
    for volume in volumes.iter_mut() {
        if let Some(Value::String(name)) = volume.pointer_mut("/configMap/name")
            && name.starts_with("gateway-config-")
        {
            *name = "gateway-config".to_owned();
        }
    }
    let container = &mut spec["containers"][0];
    let mounts = container["volumeMounts"].as_array_mut().expect("mounts");
    mounts.retain(|m| m["name"] != "plugins");
    let env = container["env"].as_array_mut().expect("env");
    env.retain(|e| e["name"] != "ACME_API_KEY");
    deployment
}

#[test]
fn the_configmaps_gateway_toml_passes_the_gateways_config_check() {
    let Some(tools) = tools("the Kubernetes config's check") else {
        return;
    };
    let tree = tree();
    let overlay_dir = tree.path().join("overlays/plugin");
    std::fs::write(overlay_dir.join("acme.wasm"), STAND_IN_PLUGIN).expect("the plugin's file");
    let scratch = tempfile::tempdir().expect("a temporary directory");
    for (name, dir) in [("base", tree.path().join("base")), ("overlay", overlay_dir)] {
        let yaml = tools.render(&dir);
        let rendered = Rendered {
            objects: tools.yaml(&yaml),
        };
        let (_, text) = rendered.config();
        let file = scratch.path().join(format!("{name}.toml"));
        std::fs::write(&file, &text).expect("the config");
        // The environment the Deployment sets, the Secret's keys with values of their shape.
        let mut env: Vec<(String, String)> = Vec::new();
        for var in array(rendered.container(), "/env") {
            let name = text_at(var, "/name").to_owned();
            let value = match var.get("value") {
                // The config's path in the pod: here, the file the ConfigMap holds.
                Some(_) if name == "GATEWAY_CONFIG" => file.display().to_string(),
                Some(value) => value.as_str().expect("a value").to_owned(),
                None => match text_at(var, "/valueFrom/secretKeyRef/key") {
                    "database-url" => "postgres://gateway:pw@postgres:5432/gateway".to_owned(),
                    "redis-url" => "redis://redis:6379/0".to_owned(),
                    "admin-token" | "metrics-token" => "0123456789abcdef".repeat(4),
                    _ => "sk-test-provider-key".to_owned(),
                },
            };
            env.push((name, value));
        }
        let check = |file: &Path| {
            run(
                Command::new(gateway_binary())
                    .arg("check-config")
                    .arg(file)
                    .env_clear()
                    .envs(env.iter().map(|(k, v)| (k, v))),
                None,
            )
        };
        let out = check(&file);
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{name}'s gateway.toml: {said}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).lines().count(),
            1,
            "{name}: {said}"
        );
        // The check does check: a misspelt key fails it.
        let misspelt = scratch.path().join(format!("{name}-misspelt.toml"));
        std::fs::write(&misspelt, text.replace("log_format", "log_fromat")).expect("the config");
        let out = check(&misspelt);
        assert!(
            !out.status.success(),
            "{name}: a misspelt key passed check-config"
        );
        assert!(String::from_utf8_lossy(&out.stderr).contains("log_fromat"));
    }
}
