//! Prometheus metrics of what the gateway serves: requests, their durations, the upstream
//! tries, tokens and cost, rate-limit refusals, tool calls through `/mcp`, the invocation
//! writer's queue, the batches this gateway ran.
//!
//! Recorded per serving thread: each worker updates its own shard (a mutex no other thread
//! takes, except a scrape for a moment), so the request path never contends across threads;
//! `GET /metrics` adds the shards up and writes the Prometheus text format
//! (`prometheus-client`'s encoder). Label values are bounded: routes are the config's, and a
//! model is the route's known model (its `default_model`, a `pricing` key, a `[models]` alias
//! of it, or one its plugin lists) or else `other`, and a tool is one its server listed or else
//! `other`, so that callers naming models or tools cannot grow the series without bound.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeMetric, NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::plugins::{AheadImage, PluginCounts, TrapKind};
use crate::store::TokenUsage;

/// Upper bounds (seconds) of every duration histogram: from a cached answer to a long
/// generation.
const BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];
/// A model label for a model the route does not know.
pub const OTHER_MODEL: &str = "other";
/// The label of a request refused before it had a route or model.
const NONE: &str = "none";

/// The metrics of one gateway process (see the module's description).
pub struct Metrics {
    enabled: bool,
    /// Index 0 for threads that are not serving workers; worker `i` uses shard `i`.
    shards: Box<[Mutex<Shard>]>,
}

/// One request as it ends, for the metrics.
pub struct RequestSample<'a> {
    pub surface: &'static str,
    pub route: Option<&'a str>,
    pub model: Option<&'a str>,
    pub status: u16,
    pub duration: Duration,
    pub usage: Option<&'a TokenUsage>,
    pub cost_usd: Option<f64>,
    /// How the response cache served it (`hit`, `miss`, `skip`), on a route that caches.
    pub cache: Option<&'static str>,
    /// On a hit: what the answer cost when it was stored.
    pub saved_usd: Option<f64>,
}

#[derive(Default)]
struct Shard {
    routes: HashMap<String, RouteStats>,
    rate_limited: HashMap<&'static str, u64>,
    /// By guard id, stage and verdict.
    guard_verdicts: HashMap<(std::sync::Arc<str>, &'static str, &'static str), u64>,
    /// `POST /mcp` tool calls by server, tool and outcome.
    tool_calls: HashMap<(String, String, &'static str), u64>,
    /// Their durations by server and tool.
    tool_durations: HashMap<(String, String), Histogram>,
    /// Audit events by action and outcome (both the table's few words).
    audit_events: HashMap<(&'static str, &'static str), u64>,
    /// Audit events the store would not take.
    audit_write_failures: u64,
    /// Batch lines this gateway ended or gave back, by API and result.
    batch_lines: HashMap<(&'static str, &'static str), u64>,
    /// Batches this gateway finished, by API and status.
    batches: HashMap<(&'static str, &'static str), u64>,
}

#[derive(Default)]
struct RouteStats {
    /// By surface.
    durations: HashMap<&'static str, Histogram>,
    upstream: Histogram,
    first_token: Histogram,
    /// By result: `success`, or how the try failed.
    attempts: HashMap<String, u64>,
    models: HashMap<String, ModelStats>,
    /// By the cache's result: `hit`, `miss`, `skip`.
    cache: HashMap<&'static str, u64>,
    cache_saved_usd: f64,
}

#[derive(Default)]
struct ModelStats {
    /// By surface and HTTP status.
    requests: HashMap<(&'static str, u16), u64>,
    /// prompt, completion, cached_prompt, cache_creation, reasoning, image_prompt, audio_prompt.
    tokens: [u64; 7],
    /// What reranks were billed by beside tokens.
    search_units: u64,
    /// The images models made.
    images: u64,
    /// The seconds of audio transcriptions were billed by.
    audio_seconds: u64,
    /// The input's characters speech was billed by.
    characters: u64,
    cost_usd: f64,
}

const TOKEN_KINDS: [&str; 7] = [
    "prompt",
    "completion",
    "cached_prompt",
    "cache_creation",
    "reasoning",
    "image_prompt",
    "audio_prompt",
];

#[derive(Clone, Default)]
struct Histogram {
    /// Per bucket (not cumulative); the last is above every bound.
    counts: [u64; BUCKETS.len() + 1],
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, value: Duration) {
        let seconds = value.as_secs_f64();
        let bucket = BUCKETS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(BUCKETS.len());
        self.counts[bucket] += 1;
        self.sum += seconds;
    }

    fn add(&mut self, other: &Histogram) {
        for (count, more) in self.counts.iter_mut().zip(other.counts) {
            *count += more;
        }
        self.sum += other.sum;
    }

    fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// `(upper bound, count in it)` per bucket, `+Inf` last, as the encoder takes them.
    fn buckets(&self) -> Vec<(f64, u64)> {
        BUCKETS
            .iter()
            .copied()
            .chain([f64::INFINITY])
            .zip(self.counts)
            .collect()
    }
}

impl Metrics {
    /// Metrics for `workers` serving threads; `enabled = false` records nothing.
    pub fn new(enabled: bool, workers: usize) -> Metrics {
        Metrics {
            enabled,
            shards: (0..=workers).map(|_| Mutex::default()).collect(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    fn shard(&self) -> MutexGuard<'_, Shard> {
        // A thread that is no serving thread (the batch runner) has the last shard.
        let index = crate::worker::current().map_or(usize::MAX, |worker| worker.index);
        let shard = &self.shards[index.min(self.shards.len() - 1)];
        // A shard is counts only: still meaningful after a panic mid-update.
        shard.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A request ended; `known_model` says whether its model is one the route knows (asked
    /// only the first time this thread sees the model on the route).
    pub fn request(&self, sample: &RequestSample<'_>, known_model: impl FnOnce(&str) -> bool) {
        if !self.enabled {
            return;
        }
        let mut shard = self.shard();
        let route = route_stats(&mut shard, sample.route.unwrap_or(NONE));
        route
            .durations
            .entry(sample.surface)
            .or_default()
            .observe(sample.duration);
        if let Some(result) = sample.cache {
            *route.cache.entry(result).or_default() += 1;
            route.cache_saved_usd += sample.saved_usd.unwrap_or(0.0);
        }
        let model = sample.model.unwrap_or(NONE);
        let model = if route.models.contains_key(model) || model == NONE || known_model(model) {
            model
        } else {
            OTHER_MODEL
        };
        let stats = match route.models.get_mut(model) {
            Some(stats) => stats,
            None => route.models.entry(model.to_owned()).or_default(),
        };
        *stats
            .requests
            .entry((sample.surface, sample.status))
            .or_default() += 1;
        if let Some(usage) = sample.usage {
            let kinds = [
                Some(usage.prompt_tokens),
                Some(usage.completion_tokens),
                usage.cached_prompt_tokens,
                usage.cache_creation_tokens,
                usage.reasoning_tokens,
                usage.image_prompt_tokens,
                usage.audio_prompt_tokens,
            ];
            for (total, tokens) in stats.tokens.iter_mut().zip(kinds) {
                *total += u64::from(tokens.unwrap_or(0));
            }
            stats.search_units += u64::from(usage.search_units.unwrap_or(0));
            stats.images += u64::from(usage.images.unwrap_or(0));
            stats.audio_seconds += u64::from(usage.audio_seconds.unwrap_or(0));
            stats.characters += u64::from(usage.characters.unwrap_or(0));
        }
        stats.cost_usd += sample.cost_usd.unwrap_or(0.0);
    }

    /// One try at an upstream ended after `duration` (`None`: the route was passed over
    /// without a try); `result` is `success` or how it failed.
    pub fn attempt(&self, route: &str, result: &str, duration: Option<Duration>) {
        if !self.enabled {
            return;
        }
        let mut shard = self.shard();
        let stats = route_stats(&mut shard, route);
        if let Some(duration) = duration {
            stats.upstream.observe(duration);
        }
        match stats.attempts.get_mut(result) {
            Some(count) => *count += 1,
            None => {
                stats.attempts.insert(result.to_owned(), 1);
            }
        }
    }

    /// A stream's first text reached the caller `after` its request arrived.
    pub fn first_token(&self, route: &str, after: Duration) {
        if self.enabled {
            route_stats(&mut self.shard(), route)
                .first_token
                .observe(after);
        }
    }

    /// A request was refused by a rate limit or budget of `scope` (`project`, `key`).
    pub fn rate_limited(&self, scope: &'static str) {
        if self.enabled {
            *self.shard().rate_limited.entry(scope).or_default() += 1;
        }
    }

    /// Guard `guard` judged a request's `stage` (`request`, `response`): `verdict` is
    /// `allow`, `deny`, `rewrite` or `error`. Guard ids are the config's: bounded.
    pub fn guard_verdict(
        &self,
        guard: &std::sync::Arc<str>,
        stage: &'static str,
        verdict: &'static str,
    ) {
        if !self.enabled {
            return;
        }
        let mut shard = self.shard();
        match shard
            .guard_verdicts
            .get_mut(&(guard.clone(), stage, verdict))
        {
            Some(count) => *count += 1,
            None => {
                shard
                    .guard_verdicts
                    .insert((guard.clone(), stage, verdict), 1);
            }
        }
    }

    /// A `tools/call` through `POST /mcp` ended after `duration`. `server` and `tool` are
    /// bounded by the caller (the config's server ids, a server's listed tools; `none` and
    /// `other` else); `outcome` is one of a few words (`success`, `tool_error`, ...).
    pub fn tool_call(&self, server: &str, tool: &str, outcome: &'static str, duration: Duration) {
        if !self.enabled {
            return;
        }
        let mut shard = self.shard();
        let key = (server.to_owned(), tool.to_owned());
        shard
            .tool_durations
            .entry(key.clone())
            .or_default()
            .observe(duration);
        *shard.tool_calls.entry((key.0, key.1, outcome)).or_default() += 1;
    }

    /// An audit event was written (or tried): `action` and `outcome` are the admin table's
    /// and the audit log's few words, bounded.
    pub fn audit_event(&self, action: &'static str, outcome: &'static str) {
        if self.enabled {
            *self
                .shard()
                .audit_events
                .entry((action, outcome))
                .or_default() += 1;
        }
    }

    /// `count` lines of a batch of `api` (`openai`, `anthropic`) ended as `result`
    /// (`succeeded`, `failed`, `expired`, `cancelled`) or were given back to run again
    /// (`retried`).
    pub fn batch_lines(&self, api: &'static str, result: &'static str, count: u64) {
        if self.enabled {
            *self.shard().batch_lines.entry((api, result)).or_default() += count;
        }
    }

    /// A batch of `api` was finished by this gateway as `status` (`completed`, `expired`,
    /// `cancelled`).
    pub fn batch_finished(&self, api: &'static str, status: &'static str) {
        if self.enabled {
            *self.shard().batches.entry((api, status)).or_default() += 1;
        }
    }

    /// An audit event could not be written.
    pub fn audit_write_failed(&self) {
        if self.enabled {
            self.shard().audit_write_failures += 1;
        }
    }

    /// Every metric in the Prometheus text format (version 0.0.4), with the invocation
    /// writer's state, the plugins' counts and the response cache's bytes read now.
    pub fn render(
        &self,
        writer: WriterState,
        plugins: Vec<PluginCounts>,
        cache_bytes: u64,
    ) -> String {
        let mut registry = Registry::default();
        let mut snapshot = Snapshot::of(self, writer);
        snapshot.cache_bytes = cache_bytes;
        snapshot.plugins(plugins);
        registry.register_collector(Box::new(snapshot));
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut text, &registry);
        text
    }
}

fn route_stats<'s>(shard: &'s mut Shard, route: &str) -> &'s mut RouteStats {
    if !shard.routes.contains_key(route) {
        shard.routes.insert(route.to_owned(), RouteStats::default());
    }
    shard
        .routes
        .get_mut(route)
        .unwrap_or_else(|| unreachable!("inserted above"))
}

/// The invocation writer's side of the metrics.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriterState {
    /// Records waiting for the database.
    pub queue_depth: u64,
    /// Batches the database refused or could not take (each retried later).
    pub write_failures: u64,
}

/// Every shard added up, as one scrape encodes it.
#[derive(Debug, Default)]
struct Snapshot {
    requests: Vec<([String; 4], u64)>,
    durations: Vec<([String; 2], HistogramValues)>,
    upstream: Vec<([String; 1], HistogramValues)>,
    first_token: Vec<([String; 1], HistogramValues)>,
    tokens: Vec<([String; 3], u64)>,
    search_units: Vec<([String; 2], u64)>,
    images: Vec<([String; 2], u64)>,
    audio_seconds: Vec<([String; 2], u64)>,
    characters: Vec<([String; 2], u64)>,
    cost: Vec<([String; 2], f64)>,
    attempts: Vec<([String; 2], u64)>,
    rate_limited: Vec<([String; 1], u64)>,
    guard_verdicts: Vec<([String; 3], u64)>,
    tool_calls: Vec<([String; 3], u64)>,
    tool_durations: Vec<([String; 2], HistogramValues)>,
    audit_events: Vec<([String; 2], u64)>,
    audit_write_failures: Vec<([String; 0], u64)>,
    batch_lines: Vec<([String; 2], u64)>,
    batches: Vec<([String; 2], u64)>,
    cache: Vec<([String; 2], u64)>,
    cache_saved: Vec<([String; 1], f64)>,
    cache_bytes: u64,
    writer: WriterState,
    instances: Vec<([String; 1], i64)>,
    instances_ready: Vec<([String; 1], i64)>,
    made_ahead: Vec<([String; 2], u64)>,
    reloads: Vec<([String; 2], u64)>,
    traps: Vec<([String; 2], u64)>,
}

#[derive(Debug, Clone)]
struct HistogramValues {
    sum: f64,
    count: u64,
    buckets: Vec<(f64, u64)>,
}

impl From<&Histogram> for HistogramValues {
    fn from(histogram: &Histogram) -> HistogramValues {
        HistogramValues {
            sum: histogram.sum,
            count: histogram.count(),
            buckets: histogram.buckets(),
        }
    }
}

impl Snapshot {
    fn of(metrics: &Metrics, writer: WriterState) -> Snapshot {
        // Added up in maps first: the same series lives in every shard that served it.
        let mut requests: HashMap<[String; 4], u64> = HashMap::new();
        let mut durations: HashMap<[String; 2], Histogram> = HashMap::new();
        let mut upstream: HashMap<String, Histogram> = HashMap::new();
        let mut first_token: HashMap<String, Histogram> = HashMap::new();
        let mut tokens: HashMap<[String; 3], u64> = HashMap::new();
        let mut search_units: HashMap<[String; 2], u64> = HashMap::new();
        let mut images: HashMap<[String; 2], u64> = HashMap::new();
        let mut audio_seconds: HashMap<[String; 2], u64> = HashMap::new();
        let mut characters: HashMap<[String; 2], u64> = HashMap::new();
        let mut cost: HashMap<[String; 2], f64> = HashMap::new();
        let mut attempts: HashMap<[String; 2], u64> = HashMap::new();
        let mut rate_limited: HashMap<&'static str, u64> = HashMap::new();
        let mut audit_events: HashMap<[String; 2], u64> = HashMap::new();
        let mut audit_write_failures = 0;
        let mut batch_lines: HashMap<[String; 2], u64> = HashMap::new();
        let mut batches: HashMap<[String; 2], u64> = HashMap::new();
        let mut guard_verdicts: HashMap<[String; 3], u64> = HashMap::new();
        let mut tool_calls: HashMap<[String; 3], u64> = HashMap::new();
        let mut tool_durations: HashMap<[String; 2], Histogram> = HashMap::new();
        let mut cache: HashMap<[String; 2], u64> = HashMap::new();
        let mut cache_saved: HashMap<[String; 1], f64> = HashMap::new();
        for shard in metrics.shards.iter() {
            let shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
            for ((guard, stage, verdict), count) in &shard.guard_verdicts {
                *guard_verdicts
                    .entry([
                        guard.to_string(),
                        (*stage).to_owned(),
                        (*verdict).to_owned(),
                    ])
                    .or_default() += count;
            }
            for ((server, tool, outcome), count) in &shard.tool_calls {
                *tool_calls
                    .entry([server.clone(), tool.clone(), (*outcome).to_owned()])
                    .or_default() += count;
            }
            for ((server, tool), histogram) in &shard.tool_durations {
                tool_durations
                    .entry([server.clone(), tool.clone()])
                    .or_default()
                    .add(histogram);
            }
            for (scope, count) in &shard.rate_limited {
                *rate_limited.entry(scope).or_default() += count;
            }
            for ((action, outcome), count) in &shard.audit_events {
                *audit_events
                    .entry([(*action).to_owned(), (*outcome).to_owned()])
                    .or_default() += count;
            }
            audit_write_failures += shard.audit_write_failures;
            for ((api, result), count) in &shard.batch_lines {
                *batch_lines
                    .entry([(*api).to_owned(), (*result).to_owned()])
                    .or_default() += count;
            }
            for ((api, status), count) in &shard.batches {
                *batches
                    .entry([(*api).to_owned(), (*status).to_owned()])
                    .or_default() += count;
            }
            for (route, stats) in &shard.routes {
                for (surface, histogram) in &stats.durations {
                    durations
                        .entry([(*surface).to_owned(), route.clone()])
                        .or_default()
                        .add(histogram);
                }
                if !stats.upstream.is_empty() {
                    upstream
                        .entry(route.clone())
                        .or_default()
                        .add(&stats.upstream);
                }
                if !stats.first_token.is_empty() {
                    first_token
                        .entry(route.clone())
                        .or_default()
                        .add(&stats.first_token);
                }
                for (result, count) in &stats.attempts {
                    *attempts.entry([route.clone(), result.clone()]).or_default() += count;
                }
                for (result, count) in &stats.cache {
                    *cache
                        .entry([route.clone(), (*result).to_owned()])
                        .or_default() += count;
                }
                if stats.cache.contains_key("hit") {
                    *cache_saved.entry([route.clone()]).or_default() += stats.cache_saved_usd;
                }
                for (model, model_stats) in &stats.models {
                    for ((surface, status), count) in &model_stats.requests {
                        let labels = [
                            (*surface).to_owned(),
                            route.clone(),
                            model.clone(),
                            status.to_string(),
                        ];
                        *requests.entry(labels).or_default() += count;
                    }
                    for (kind, count) in TOKEN_KINDS.iter().zip(model_stats.tokens) {
                        if count > 0 {
                            let labels = [route.clone(), model.clone(), (*kind).to_owned()];
                            *tokens.entry(labels).or_default() += count;
                        }
                    }
                    if model_stats.search_units > 0 {
                        *search_units
                            .entry([route.clone(), model.clone()])
                            .or_default() += model_stats.search_units;
                    }
                    if model_stats.images > 0 {
                        *images.entry([route.clone(), model.clone()]).or_default() +=
                            model_stats.images;
                    }
                    if model_stats.audio_seconds > 0 {
                        *audio_seconds
                            .entry([route.clone(), model.clone()])
                            .or_default() += model_stats.audio_seconds;
                    }
                    if model_stats.characters > 0 {
                        *characters
                            .entry([route.clone(), model.clone()])
                            .or_default() += model_stats.characters;
                    }
                    if model_stats.cost_usd > 0.0 {
                        *cost.entry([route.clone(), model.clone()]).or_default() +=
                            model_stats.cost_usd;
                    }
                }
            }
        }
        fn sorted<K: Ord, V>(map: HashMap<K, V>) -> Vec<(K, V)> {
            let mut entries: Vec<(K, V)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            entries
        }
        let by_route = |map: HashMap<String, Histogram>| {
            sorted(map)
                .into_iter()
                .map(|(route, h)| ([route], HistogramValues::from(&h)))
                .collect()
        };
        Snapshot {
            requests: sorted(requests),
            durations: sorted(durations)
                .into_iter()
                .map(|(labels, h)| (labels, HistogramValues::from(&h)))
                .collect(),
            upstream: by_route(upstream),
            first_token: by_route(first_token),
            tokens: sorted(tokens),
            search_units: sorted(search_units),
            images: sorted(images),
            audio_seconds: sorted(audio_seconds),
            characters: sorted(characters),
            cost: sorted(cost),
            attempts: sorted(attempts),
            rate_limited: sorted(rate_limited)
                .into_iter()
                .map(|(scope, count)| ([scope.to_owned()], count))
                .collect(),
            guard_verdicts: sorted(guard_verdicts),
            tool_calls: sorted(tool_calls),
            tool_durations: sorted(tool_durations)
                .into_iter()
                .map(|(labels, h)| (labels, HistogramValues::from(&h)))
                .collect(),
            audit_events: sorted(audit_events),
            audit_write_failures: vec![([], audit_write_failures)],
            batch_lines: sorted(batch_lines),
            batches: sorted(batches),
            cache: sorted(cache),
            cache_saved: sorted(cache_saved),
            writer,
            ..Snapshot::default()
        }
    }

    /// The plugins' series: every plugin seen has each of them, zeros included, so that a
    /// dashboard's `rate()` sees the first crash or failed reload.
    fn plugins(&mut self, plugins: Vec<PluginCounts>) {
        for counts in plugins {
            let plugin = counts.plugin;
            self.instances.push((
                [plugin.clone()],
                i64::try_from(counts.active).unwrap_or(i64::MAX),
            ));
            self.instances_ready.push((
                [plugin.clone()],
                i64::try_from(counts.ready).unwrap_or(i64::MAX),
            ));
            for (image, count) in AheadImage::ALL.iter().zip(counts.made_ahead) {
                self.made_ahead
                    .push(([plugin.clone(), image.as_str().to_owned()], count));
            }
            for (result, count) in [("success", counts.loaded), ("error", counts.rejected)] {
                self.reloads
                    .push(([plugin.clone(), result.to_owned()], count));
            }
            for (kind, count) in TrapKind::ALL.iter().zip(counts.traps) {
                self.traps
                    .push(([plugin.clone(), kind.as_str().to_owned()], count));
            }
        }
    }
}

/// Label names with their values, as the encoder takes a label set.
fn labels<'a, const N: usize>(
    names: [&'a str; N],
    values: &'a [String; N],
) -> Vec<(&'a str, &'a str)> {
    names
        .iter()
        .zip(values.iter())
        .map(|(name, value)| (*name, value.as_str()))
        .collect()
}

/// One counter family: `series` under label `names`.
fn counters<V: EncodeCounterValue, const N: usize>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    names: [&str; N],
    series: &[([String; N], V)],
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (values, value) in series {
        family
            .encode_family(&labels(names, values))?
            .encode_counter::<NoLabelSet, _, u64>(value, None)?;
    }
    Ok(())
}

/// One gauge family: `series` under label `names`.
fn gauges<const N: usize>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    names: [&str; N],
    series: &[([String; N], i64)],
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (values, value) in series {
        family
            .encode_family(&labels(names, values))?
            .encode_gauge(value)?;
    }
    Ok(())
}

/// One histogram family: `series` under label `names`.
fn histograms<const N: usize>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    names: [&str; N],
    series: &[([String; N], HistogramValues)],
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (values, h) in series {
        family
            .encode_family(&labels(names, values))?
            .encode_histogram::<NoLabelSet>(h.sum, h.count, &h.buckets, None)?;
    }
    Ok(())
}

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let encoder = &mut encoder;
        counters(
            encoder,
            "gateway_requests",
            "Requests to the model endpoints, by API surface, route, model and HTTP status.",
            ["surface", "route", "model", "status"],
            &self.requests,
        )?;
        histograms(
            encoder,
            "gateway_request_duration_seconds",
            "Whole requests, from arrival to the last byte of the answer.",
            ["surface", "route"],
            &self.durations,
        )?;
        histograms(
            encoder,
            "gateway_upstream_duration_seconds",
            "Tries at an upstream (a plugin call), each retry and fallback its own.",
            ["route"],
            &self.upstream,
        )?;
        histograms(
            encoder,
            "gateway_time_to_first_token_seconds",
            "Streams: from the request's arrival to its first frame sent to the caller.",
            ["route"],
            &self.first_token,
        )?;
        counters(
            encoder,
            "gateway_tokens",
            "Tokens the providers reported, by kind: prompt, completion, cached_prompt, \
             cache_creation, reasoning, image_prompt, audio_prompt (the last two, where \
             providers tell them, are parts of prompt).",
            ["route", "model", "kind"],
            &self.tokens,
        )?;
        counters(
            encoder,
            "gateway_search_units",
            "Search units the providers billed reranks by (a query of up to 100 documents), \
             beside their tokens.",
            ["route", "model"],
            &self.search_units,
        )?;
        counters(
            encoder,
            "gateway_images",
            "Images the models made.",
            ["route", "model"],
            &self.images,
        )?;
        counters(
            encoder,
            "gateway_audio_seconds",
            "Seconds of audio the providers billed transcriptions by.",
            ["route", "model"],
            &self.audio_seconds,
        )?;
        counters(
            encoder,
            "gateway_speech_characters",
            "Characters of input text the providers billed speech by.",
            ["route", "model"],
            &self.characters,
        )?;
        counters(
            encoder,
            "gateway_cost_usd",
            "What the calls cost, in US dollars, at the config's prices.",
            ["route", "model"],
            &self.cost,
        )?;
        counters(
            encoder,
            "gateway_attempts",
            "Tries at an upstream by result: success, the upstream's error status (429, 503, \
             ...), or how the try failed (timeout, connection, ...; ejected and no_key: \
             passed over without a try).",
            ["route", "result"],
            &self.attempts,
        )?;
        counters(
            encoder,
            "gateway_rate_limited",
            "Requests refused by a rate limit or budget, by whose: project or key.",
            ["scope"],
            &self.rate_limited,
        )?;
        counters(
            encoder,
            "gateway_guard_verdicts",
            "Guard checks by guard, stage (request, response) and verdict (allow, deny, \
             rewrite, error).",
            ["guard", "stage", "verdict"],
            &self.guard_verdicts,
        )?;
        counters(
            encoder,
            "gateway_mcp_tool_calls",
            "Tool calls through POST /mcp by server, tool and outcome: success, tool_error \
             (the tool answered isError), invalid (unknown tool, bad arguments), denied \
             (outside the key's tool scope), rate_limited, refused (another error of the \
             server's), timeout, failed (the server or plugin did not answer properly).",
            ["server", "tool", "outcome"],
            &self.tool_calls,
        )?;
        histograms(
            encoder,
            "gateway_mcp_tool_call_duration_seconds",
            "Tool calls through POST /mcp, from arrival to the answer.",
            ["server", "tool"],
            &self.tool_durations,
        )?;
        counters(
            encoder,
            "gateway_audit_events",
            "Audit events of this process: changes through the admin API and the console, and \
             sign-ins, by action (key.create, sign_in.failed, ...) and outcome (ok, refused, \
             failed). The CLI's are in the audit log only.",
            ["action", "outcome"],
            &self.audit_events,
        )?;
        counters(
            encoder,
            "gateway_audit_write_failures",
            "Audit events the database did not take (each logged with its change).",
            [],
            &self.audit_write_failures,
        )?;
        counters(
            encoder,
            "gateway_batch_lines",
            "Batch lines this gateway's runner ended, by API (openai, anthropic) and result \
             (succeeded: a 2xx; failed: answered otherwise; expired, cancelled: never run), or \
             gave back to run again after a wait (retried).",
            ["api", "result"],
            &self.batch_lines,
        )?;
        counters(
            encoder,
            "gateway_batches",
            "Batches this gateway's runner finished, by API and status (completed, expired, \
             cancelled).",
            ["api", "status"],
            &self.batches,
        )?;
        counters(
            encoder,
            "gateway_cache_requests",
            "Requests to routes that cache answers, by the cache's result: hit (answered \
             from the cache), miss (looked up, not found) or skip (the caller asked for no \
             lookup: no-cache or no-store).",
            ["route", "result"],
            &self.cache,
        )?;
        counters(
            encoder,
            "gateway_cache_saved_usd",
            "What the answers given from the cache cost when they were stored, in US dollars.",
            ["route"],
            &self.cache_saved,
        )?;
        let cache_bytes = prometheus_client::metrics::gauge::ConstGauge::new(
            i64::try_from(self.cache_bytes).unwrap_or(i64::MAX),
        );
        cache_bytes.encode(encoder.encode_descriptor(
            "gateway_cache_bytes",
            "Bytes of the answers the response cache keeps in this process (with redis_url: \
             those kept while Redis was unreachable).",
            None,
            cache_bytes.metric_type(),
        )?)?;
        let depth = prometheus_client::metrics::gauge::ConstGauge::new(
            i64::try_from(self.writer.queue_depth).unwrap_or(i64::MAX),
        );
        depth.encode(encoder.encode_descriptor(
            "gateway_invocation_queue_depth",
            "Invocation records waiting to be written to the database.",
            None,
            depth.metric_type(),
        )?)?;
        let failures =
            prometheus_client::metrics::counter::ConstCounter::new(self.writer.write_failures);
        failures.encode(encoder.encode_descriptor(
            "gateway_invocation_write_failures",
            "Batches of invocation records the database failed to take (each kept and retried).",
            None,
            failures.metric_type(),
        )?)?;
        gauges(
            encoder,
            "gateway_plugin_instances_active",
            "Plugin instances serving a call now (one per request at the plugin).",
            ["plugin"],
            &self.instances,
        )?;
        gauges(
            encoder,
            "gateway_plugin_instances_ready",
            "Plugin instances made ahead of calls, waiting for one (plugins slow to instantiate).",
            ["plugin"],
            &self.instances_ready,
        )?;
        counters(
            encoder,
            "gateway_plugin_instances_made_ahead",
            "Plugin instances made ahead of calls, by how their memory image got there: copied \
             (in whole as it was made, with plugin_copy_ahead; its call takes no copy-on-write \
             fault) or mapped (copy-on-write: without plugin_copy_ahead, until the plugin is \
             compiled for the pool that copies, or when that pool is full).",
            ["plugin", "image"],
            &self.made_ahead,
        )?;
        counters(
            encoder,
            "gateway_plugin_reloads",
            "Loads of a plugin's file, at start and on each change: success (it serves now) \
             or error (refused; the previous version, if any, keeps serving).",
            ["plugin", "result"],
            &self.reloads,
        )?;
        counters(
            encoder,
            "gateway_plugin_traps",
            "Plugin calls that crashed, by kind: cpu (over its CPU time budget), memory (over \
             its memory limit), trap (a panic or any other fault).",
            ["plugin", "kind"],
            &self.traps,
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample<'a>(route: &'a str, model: &'a str, status: u16) -> RequestSample<'a> {
        RequestSample {
            surface: "commonbase",
            route: Some(route),
            model: Some(model),
            status,
            duration: Duration::from_millis(30),
            usage: None,
            cost_usd: None,
            cache: None,
            saved_usd: None,
        }
    }

    #[test]
    fn unknown_models_are_counted_as_other_and_known_ones_by_name() {
        let metrics = Metrics::new(true, 1);
        metrics.request(&sample("r", "gpt-4o", 200), |model| model == "gpt-4o");
        metrics.request(&sample("r", "made-up-1", 200), |_| false);
        metrics.request(&sample("r", "made-up-2", 400), |_| false);
        let text = metrics.render(WriterState::default(), Vec::new(), 0);
        assert!(
            text.contains(
                r#"gateway_requests_total{surface="commonbase",route="r",model="gpt-4o",status="200"} 1"#
            ),
            "{text}"
        );
        assert!(text.contains(r#"model="other",status="200"} 1"#), "{text}");
        assert!(text.contains(r#"model="other",status="400"} 1"#), "{text}");
        assert!(!text.contains("made-up"), "{text}");
    }

    #[test]
    fn histograms_count_into_cumulative_buckets() {
        let metrics = Metrics::new(true, 1);
        metrics.attempt("r", "success", Some(Duration::from_millis(3)));
        metrics.attempt("r", "500", Some(Duration::from_millis(200)));
        metrics.attempt("r", "ejected", None);
        let text = metrics.render(WriterState::default(), Vec::new(), 0);
        for line in [
            r#"gateway_upstream_duration_seconds_bucket{route="r",le="0.005"} 1"#,
            r#"gateway_upstream_duration_seconds_bucket{route="r",le="0.1"} 1"#,
            r#"gateway_upstream_duration_seconds_bucket{route="r",le="0.25"} 2"#,
            r#"gateway_upstream_duration_seconds_bucket{route="r",le="+Inf"} 2"#,
            r#"gateway_upstream_duration_seconds_count{route="r"} 2"#,
            r#"gateway_attempts_total{route="r",result="500"} 1"#,
            r#"gateway_attempts_total{route="r",result="ejected"} 1"#,
        ] {
            assert!(text.contains(line), "no {line}:\n{text}");
        }
    }

    #[test]
    fn units_billed_beside_tokens_are_counted_by_route_and_model() {
        let metrics = Metrics::new(true, 1);
        let transcription = TokenUsage {
            audio_seconds: Some(61),
            ..TokenUsage::default()
        };
        let speech = TokenUsage {
            characters: Some(1200),
            ..TokenUsage::default()
        };
        for (model, usage) in [
            ("whisper-1", &transcription),
            ("tts-1", &speech),
            ("tts-1", &speech),
        ] {
            let sample = RequestSample {
                usage: Some(usage),
                ..sample("r", model, 200)
            };
            metrics.request(&sample, |_| true);
        }
        let text = metrics.render(WriterState::default(), Vec::new(), 0);
        for line in [
            r#"gateway_audio_seconds_total{route="r",model="whisper-1"} 61"#,
            r#"gateway_speech_characters_total{route="r",model="tts-1"} 2400"#,
            "# HELP gateway_speech_characters_total Characters of input text the providers \
             billed speech by.",
        ] {
            assert!(text.contains(line), "no {line}:\n{text}");
        }
        // None where no call was billed by them.
        assert!(
            !text.contains(r#"gateway_speech_characters_total{route="r",model="whisper-1"}"#),
            "{text}"
        );
    }

    #[test]
    fn disabled_metrics_record_nothing() {
        let metrics = Metrics::new(false, 1);
        metrics.request(&sample("r", "m", 200), |_| true);
        metrics.rate_limited("key");
        let text = metrics.render(WriterState::default(), Vec::new(), 0);
        assert!(!text.contains("route=\"r\""), "{text}");
        assert!(!text.contains("scope="), "{text}");
    }
}
