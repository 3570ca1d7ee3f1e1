//! The upstreams of a route: choosing one by weight, and taking one that keeps failing out of
//! rotation for a while (ejection) until a single probe request finds it well again.
//!
//! Ejection state lives in this process: each replica ejects on what it saw itself.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use hyper::header::HeaderValue;

use crate::plugins::{Sandbox, types};

/// One upstream of a route: its `base_url`, key, plugin settings and share of the requests.
pub struct Target {
    /// Its place among the route's targets.
    pub index: usize,
    pub sandbox: Arc<Sandbox>,
    /// `base_url`'s host, with its port when it has one: `api.openai.com`, `127.0.0.1:8081`
    /// (`None` for a route that calls no upstream). What records and `x-gateway-target` show.
    pub host: Option<String>,
    /// `host` as the `x-gateway-target` response header carries it, made once.
    pub header: Option<HeaderValue>,
    base_url: String,
    configured_key: Option<String>,
    settings: String,
    /// What `settings` name by `NAME_env` / `NAME_file_env`, read when the route was built.
    secrets: Vec<(String, String)>,
    weight: u32,
    pub(super) health: Arc<Health>,
}

impl Target {
    pub(super) fn new(
        index: usize,
        base_url: Option<&str>,
        sandbox: crate::plugins::Sandbox,
        configured_key: Option<String>,
        (settings, secrets): (String, Vec<(String, String)>),
        weight: u32,
        health: Arc<Health>,
    ) -> Target {
        let host = base_url.map(host_of);
        Target {
            index,
            sandbox: Arc::new(sandbox),
            header: host
                .as_deref()
                .and_then(|host| HeaderValue::from_str(host).ok()),
            host,
            base_url: base_url.unwrap_or("").trim_end_matches('/').to_owned(),
            configured_key,
            settings,
            secrets,
            weight,
            health,
        }
    }

    pub(super) fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The target as operators see it (the admin console): `ejected_for` how long it stays out
    /// of rotation, where its route ejects and it is out.
    pub(super) fn view(&self, ejected_for: Option<Duration>) -> TargetView {
        TargetView {
            base_url: masked_url(&self.base_url),
            weight: self.weight,
            ejected_for,
            settings: masked_settings(&self.settings, self.secret_values()),
        }
    }

    /// How long the target stays out of rotation: `None` when it is in.
    pub(super) fn out_for(&self, now: Instant, probe_limit: Duration) -> Option<Duration> {
        Some(self.health.back_in(now, probe_limit)).filter(|left| !left.is_zero())
    }

    /// The gateway's own provider key for this target, if it has one.
    pub fn configured_key(&self) -> Option<&str> {
        self.configured_key.as_deref()
    }

    /// Whether its settings name secrets the gateway could read.
    pub fn has_secrets(&self) -> bool {
        !self.secrets.is_empty()
    }

    /// The values of the secrets its settings name (never to be shown: to redact).
    pub fn secret_values(&self) -> impl Iterator<Item = &str> {
        self.secrets.iter().map(|(_, value)| value.as_str())
    }

    /// The route as the plugin sees it on a call to this target.
    pub fn wit_route(&self, route_id: &str, api_key: Option<String>) -> types::Route {
        types::Route {
            id: route_id.to_owned(),
            base_url: self.base_url.clone(),
            api_key,
            settings: self.settings.clone(),
            secrets: self.secrets.clone(),
        }
    }
}

/// The targets of one route a request has tried (a route has at most
/// [`crate::config::MAX_TARGETS`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tried(u64);

impl Tried {
    pub fn has(self, index: usize) -> bool {
        index < 64 && self.0 & (1 << index) != 0
    }

    pub fn with(self, index: usize) -> Tried {
        Tried(self.0 | 1u64.checked_shl(index as u32).unwrap_or(0))
    }
}

/// Where a route sends a try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// This target (its index).
    Target(usize),
    /// Every target that could take it is out of rotation, the first for this long still.
    Ejected(Duration),
    /// No target could take it (none has a provider key and the caller sent none).
    NoneLeft,
}

/// A route's `eject_after_failures` and `eject_secs`.
pub(super) struct Ejection {
    pub after: u32,
    pub out_for: Duration,
}

/// A target as the admin console shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetView {
    /// Its `base_url`, its password and query values masked.
    pub base_url: String,
    pub weight: u32,
    /// How long it stays out of rotation, when ejected.
    pub ejected_for: Option<Duration>,
    /// The plugin's settings, secrets masked.
    pub settings: serde_json::Map<String, serde_json::Value>,
}

/// What a setting's value is shown as when it may be a secret.
pub const MASK: &str = "••••";

/// `settings` (the plugin's JSON object) with every value that may be a secret replaced by
/// [`MASK`]: one whose name says key, secret, token, password or credential (but not the name
/// of the environment variable a `NAME_env` setting points at), and one equal to a secret
/// the gateway read for it.
fn masked_settings<'a>(
    settings: &str,
    secrets: impl Iterator<Item = &'a str>,
) -> serde_json::Map<String, serde_json::Value> {
    let secrets: Vec<&str> = secrets.collect();
    let mut object: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(settings).unwrap_or_default();
    for (name, value) in object.iter_mut() {
        let lower = name.to_ascii_lowercase();
        let names_variable = lower.ends_with("_env");
        let secret_name = ["key", "secret", "token", "password", "credential"]
            .iter()
            .any(|word| lower.contains(word));
        let secret_value = value.as_str().is_some_and(|text| secrets.contains(&text));
        if secret_value || (secret_name && !names_variable) {
            *value = serde_json::Value::String(MASK.to_owned());
        }
    }
    object
}

/// `url` as operators may see it: a password in it (`https://user:PASSWORD@host`) and every
/// value of its query string (`?key=VALUE`, and an item without `=` whole) as [`MASK`]; the
/// rest as written. Some upstreams take their key there.
fn masked_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, rest) = rest.split_at(authority_end);
    let (path, rest) = rest.split_at(rest.find(['?', '#']).unwrap_or(rest.len()));
    let (query, fragment) = match rest.strip_prefix('?') {
        Some(after) => after.split_at(after.find('#').unwrap_or(after.len())),
        None => ("", rest),
    };
    let mut masked = String::with_capacity(url.len());
    if let Some(scheme) = scheme {
        masked.push_str(scheme);
        masked.push_str("://");
    }
    // The host is after the last `@`: a password may hold one (unescaped).
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            match userinfo.split_once(':') {
                Some((user, _password)) => {
                    masked.push_str(user);
                    masked.push(':');
                    masked.push_str(MASK);
                }
                None => masked.push_str(userinfo),
            }
            masked.push('@');
            masked.push_str(host);
        }
        None => masked.push_str(authority),
    }
    masked.push_str(path);
    if rest.starts_with('?') {
        masked.push('?');
        let items: Vec<String> = query
            .split('&')
            .map(|item| match item.split_once('=') {
                Some((name, _value)) => format!("{name}={MASK}"),
                None if item.is_empty() => String::new(),
                None => MASK.to_owned(),
            })
            .collect();
        masked.push_str(&items.join("&"));
    }
    masked.push_str(fragment);
    masked
}

/// Whether a target is in rotation. A mutex: it is taken only on routes that eject, for a few
/// instructions per try.
#[derive(Default)]
pub(super) struct Health(Mutex<State>);

#[derive(Default)]
struct State {
    /// Retryable failures in a row.
    failures: u32,
    /// Out of rotation until then, once ejected (still set while the probe runs).
    out_until: Option<Instant>,
    /// When the probe request started, while one runs.
    probe_since: Option<Instant>,
}

impl State {
    /// When a try may next be sent: `None` now. A probe that never reported (its request
    /// vanished) stops blocking others after `probe_limit`.
    fn closed_until(&self, probe_limit: Duration) -> Option<Instant> {
        let out_until = self.out_until?;
        let probe_until = self.probe_since.map(|since| since + probe_limit);
        Some(probe_until.map_or(out_until, |probe| probe.max(out_until)))
    }
}

impl Health {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is a few numbers, consistent after any single assignment.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn in_rotation(&self, now: Instant, probe_limit: Duration) -> bool {
        self.state()
            .closed_until(probe_limit)
            .is_none_or(|until| now >= until)
    }

    /// Takes a try for this target if it is in rotation; an ejected target whose time is up
    /// takes one, its probe, and no other until that one reports.
    fn claim(&self, now: Instant, probe_limit: Duration) -> bool {
        let mut state = self.state();
        match state.closed_until(probe_limit) {
            Some(until) if now < until => false,
            Some(_) => {
                state.probe_since = Some(now);
                true
            }
            None => true,
        }
    }

    fn back_in(&self, now: Instant, probe_limit: Duration) -> Duration {
        self.state()
            .closed_until(probe_limit)
            .map_or(Duration::ZERO, |until| until.saturating_duration_since(now))
    }

    /// What became of a try (see [`super::Route::report`]).
    pub fn report(&self, outcome: Option<bool>, ejection: &Ejection, route: &str, target: &Target) {
        let host = target.host.as_deref().unwrap_or("");
        let mut state = self.state();
        match outcome {
            None => state.probe_since = None,
            Some(true) => {
                if state.out_until.is_some() {
                    tracing::info!(
                        route,
                        target = host,
                        "upstream answered its probe: back in rotation"
                    );
                }
                *state = State::default();
            }
            Some(false) => {
                state.failures = state.failures.saturating_add(1);
                let probing = state.probe_since.take().is_some();
                if state.failures >= ejection.after {
                    if state.out_until.is_none() || probing {
                        tracing::warn!(
                            route,
                            target = host,
                            failures = state.failures,
                            secs = ejection.out_for.as_secs(),
                            "upstream ejected: out of rotation after failures in a row"
                        );
                    }
                    state.out_until = Some(Instant::now() + ejection.out_for);
                }
            }
        }
    }
}

/// One of `candidates` by weight, skipping those out of rotation (`ejection`: the route ejects).
pub(super) fn pick(
    candidates: &[&Target],
    ejection: Option<&Ejection>,
    now: Instant,
    probe_limit: Duration,
) -> Pick {
    if candidates.is_empty() {
        return Pick::NoneLeft;
    }
    let mut open: Vec<&Target> = candidates
        .iter()
        .copied()
        .filter(|target| ejection.is_none() || target.health.in_rotation(now, probe_limit))
        .collect();
    while !open.is_empty() {
        let chosen = weighted(&open);
        // Another request may have taken the probe since `in_rotation` said yes.
        if ejection.is_none() || open[chosen].health.claim(now, probe_limit) {
            return Pick::Target(open[chosen].index);
        }
        open.swap_remove(chosen);
    }
    let back_in = candidates
        .iter()
        .map(|target| target.health.back_in(now, probe_limit))
        .min()
        .unwrap_or(Duration::ZERO);
    Pick::Ejected(back_in)
}

/// An index of `targets` (not empty), each as likely as its weight.
fn weighted(targets: &[&Target]) -> usize {
    if targets.len() == 1 {
        return 0;
    }
    let total: u64 = targets.iter().map(|target| u64::from(target.weight)).sum();
    let mut point = random_u64() % total.max(1);
    for (index, target) in targets.iter().enumerate() {
        let weight = u64::from(target.weight);
        if point < weight {
            return index;
        }
        point -= weight;
    }
    targets.len() - 1
}

/// A random number, from the operating system. Should that ever fail, the clock's nanoseconds
/// still spread choices and waits (they need no secrecy, only not to move in step).
pub fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    match getrandom::fill(&mut bytes) {
        Ok(()) => u64::from_le_bytes(bytes),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.subsec_nanos().into()),
    }
}

/// `base_url`'s host, with its port when it has one: `api.openai.com`, `127.0.0.1:8081`.
fn host_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    // Credentials in a URL are not the host's business (nor the record's).
    authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(index: usize, weight: u32) -> Target {
        target_at(index, weight, "http://127.0.0.1:9/v1")
    }

    fn target_at(index: usize, weight: u32, base_url: &str) -> Target {
        Target::new(
            index,
            Some(base_url),
            Sandbox::new(
                crate::plugins::AllowedHosts::none(),
                crate::plugins::Limits::default(),
            )
            .expect("a sandbox"),
            None,
            ("{}".to_owned(), Vec::new()),
            weight,
            Arc::new(Health::default()),
        )
    }

    #[test]
    fn hosts_keep_their_port_and_drop_credentials() {
        assert_eq!(host_of("https://api.openai.com/v1"), "api.openai.com");
        assert_eq!(host_of("http://127.0.0.1:8081/v1?x=1"), "127.0.0.1:8081");
        assert_eq!(host_of("https://user:pw@h.example:8443"), "h.example:8443");
    }

    #[test]
    fn tried_sets_hold_every_index_of_a_route() {
        let tried = Tried::default().with(0).with(63);
        assert!(tried.has(0) && tried.has(63) && !tried.has(1));
        assert!(!tried.with(64).has(64), "past the cap nothing is kept");
    }

    #[test]
    fn weights_share_the_picks() {
        let (a, b) = (target(0, 3), target(1, 1));
        let picks = (0..4000)
            .filter(|_| {
                pick(&[&a, &b], None, Instant::now(), Duration::from_secs(1)) == Pick::Target(0)
            })
            .count();
        // 3000 expected; a binomial spread of ±27, so ±200 never fails by chance.
        assert!(
            (2800..=3200).contains(&picks),
            "{picks} of 4000 on weight 3 of 4"
        );
    }

    #[test]
    fn an_ejected_target_takes_one_probe_then_returns_or_stays_out() {
        let ejection = Ejection {
            after: 2,
            out_for: Duration::from_millis(50),
        };
        let (a, limit) = (target(0, 1), Duration::from_secs(10));
        let one = |now| pick(&[&a], Some(&ejection), now, limit);
        a.health.report(Some(false), &ejection, "r", &a);
        assert_eq!(
            one(Instant::now()),
            Pick::Target(0),
            "one failure ejects nothing"
        );
        a.health.report(Some(false), &ejection, "r", &a);
        assert!(matches!(one(Instant::now()), Pick::Ejected(_)));
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(one(Instant::now()), Pick::Target(0), "the probe");
        assert!(
            matches!(one(Instant::now()), Pick::Ejected(_)),
            "only one probe"
        );
        a.health.report(Some(false), &ejection, "r", &a);
        assert!(
            matches!(one(Instant::now()), Pick::Ejected(_)),
            "a failed probe ejects again"
        );
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(one(Instant::now()), Pick::Target(0));
        a.health.report(Some(true), &ejection, "r", &a);
        assert_eq!(
            one(Instant::now()),
            Pick::Target(0),
            "a probe that answered ends it"
        );
        assert_eq!(one(Instant::now()), Pick::Target(0));
    }

    #[test]
    fn a_probe_that_never_reports_stops_blocking_after_the_routes_timeout() {
        let ejection = Ejection {
            after: 1,
            out_for: Duration::ZERO,
        };
        let a = target(0, 1);
        a.health.report(Some(false), &ejection, "r", &a);
        let limit = Duration::from_millis(30);
        assert_eq!(
            pick(&[&a], Some(&ejection), Instant::now(), limit),
            Pick::Target(0)
        );
        assert!(matches!(
            pick(&[&a], Some(&ejection), Instant::now(), limit),
            Pick::Ejected(_)
        ));
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(
            pick(&[&a], Some(&ejection), Instant::now(), limit),
            Pick::Target(0)
        );
    }

    #[test]
    fn a_base_urls_password_and_query_values_are_masked() {
        for (url, shown) in [
            (
                "https://user:secret@host.example/v1?key=abc",
                "https://user:••••@host.example/v1?key=••••",
            ),
            (
                "https://user:p@ss:w@rd@host.example:8443/v1",
                "https://user:••••@host.example:8443/v1",
            ),
            (
                "https://user@host.example/v1",
                "https://user@host.example/v1",
            ),
            (
                "http://127.0.0.1:8081/v1?api-version=2024-10-21&sig=x%3Dy&&bare#frag",
                "http://127.0.0.1:8081/v1?api-version=••••&sig=••••&&••••#frag",
            ),
            (
                "https://host.example?token=abc",
                "https://host.example?token=••••",
            ),
            ("https://host.example/v1?", "https://host.example/v1?"),
            ("https://host.example/v1", "https://host.example/v1"),
            ("", ""),
        ] {
            assert_eq!(masked_url(url), shown, "{url}");
        }
        let view = target_at(0, 1, "https://u:hunter2@h.example/v1?key=k3y/").view(None);
        assert_eq!(view.base_url, "https://u:••••@h.example/v1?key=••••");
    }

    #[test]
    fn settings_that_may_be_secrets_are_masked() {
        let settings = r#"{"api_key_header": "api-key", "access_key_env": "AWS_KEY",
            "region": "eu-west-1", "session_token": "abc", "project": "read-secret"}"#;
        let masked = masked_settings(settings, ["read-secret"].into_iter());
        assert_eq!(masked["api_key_header"], MASK, "a name with key in it");
        assert_eq!(
            masked["access_key_env"], "AWS_KEY",
            "a variable's name is no secret"
        );
        assert_eq!(masked["region"], "eu-west-1");
        assert_eq!(masked["session_token"], MASK);
        assert_eq!(masked["project"], MASK, "a secret the gateway read");
        assert!(masked_settings("not json", std::iter::empty()).is_empty());
    }
}
