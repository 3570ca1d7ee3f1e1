//! The command line's words: commands, their arguments and flags, and the parsers that refuse
//! a bad value before any command runs.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use gateway_scaffold::{Kind, Lang, Name};

use crate::access::Role;
use crate::clock::{now_ms, parse_time};
use crate::limits::Period;
use crate::reports::ExportFormat;
use crate::store::LimitUpdate;
use crate::store::report::GroupBy;

#[derive(Parser)]
#[command(
    name = "gateway",
    version,
    about = "LLM inference gateway with WebAssembly provider plugins"
)]
pub(super) struct Cli {
    /// Configuration file (TOML). Without one, the built-in defaults apply.
    #[arg(long, global = true, env = "GATEWAY_CONFIG")]
    pub(super) config: Option<PathBuf>,
    #[command(subcommand)]
    pub(super) command: Command,
}

#[derive(Subcommand)]
pub(super) enum Command {
    /// Serve the API.
    Serve,
    /// Check a config as `serve` would read it (the `GATEWAY_*` variables over it) without
    /// opening the database or loading plugins: prints one line and exits 0, or prints what is
    /// wrong and exits 2.
    #[command(name = "check-config")]
    CheckConfig {
        /// The file (default: --config or GATEWAY_CONFIG, else the built-in defaults).
        file: Option<PathBuf>,
    },
    /// Ask the gateway this config serves whether it is up (`GET /healthz` on its `listen`, a
    /// wildcard address asked on loopback): exits 0 on a 200 within 5 seconds, else 1. For a
    /// container's HEALTHCHECK (the image has no shell or curl).
    Healthcheck {
        /// Ask this URL instead.
        #[arg(long, value_name = "URL")]
        url: Option<String>,
    },
    /// Bring the database's schema up to date and exit (every command,
    /// `serve` included, does this first; this does only that).
    Migrate,
    /// Manage projects.
    Project {
        #[command(subcommand)]
        command: ProjectCommand,
    },
    /// Manage project API keys.
    Key {
        #[command(subcommand)]
        command: KeyCommand,
    },
    /// Inspect invocation records.
    Invocations {
        #[command(subcommand)]
        command: InvocationsCommand,
    },
    /// Requests, tokens, spend, errors and latency of the invocation records: one total row,
    /// or a row per day, model, route, user, key or project.
    #[command(long_about = USAGE_ABOUT)]
    Usage(UsageArgs),
    /// Inspect provider plugins.
    Plugins {
        #[command(subcommand)]
        command: PluginsCommand,
    },
    /// Write a new plugin.
    Plugin {
        #[command(subcommand)]
        command: PluginCommand,
    },
    /// Manage the prices file (the config's `prices_file`).
    Prices {
        #[command(subcommand)]
        command: PricesCommand,
    },
    /// Manage personal admin tokens: for the admin API and automation, each with its role.
    #[command(name = "admin-token")]
    AdminToken {
        #[command(subcommand)]
        command: AdminTokenCommand,
    },
    /// Give the console's users roles (beside those their groups hold by `[oidc.roles]`).
    Users {
        #[command(subcommand)]
        command: UsersCommand,
    },
    /// Read the audit log: every change through the admin API, the console and the CLI, and
    /// every sign-in.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
}

#[derive(Subcommand)]
pub(super) enum AdminTokenCommand {
    /// Make a token; prints it (shown only this once) as the last line.
    Create {
        /// Its role: owner, admin, viewer, project_admin or project_viewer.
        #[arg(long, value_parser = parse_role)]
        role: Role,
        /// The project a project_admin or project_viewer token holds on.
        #[arg(long, value_name = "PROJECT_ID")]
        project: Option<String>,
        /// When it stops working: a duration (90d), a date, an RFC 3339 time, or `never`.
        /// Default: 90 days.
        #[arg(long, value_name = "90d|DATE|TIME|never")]
        expires: Option<String>,
        /// What it is for, as listings show it. Default: its role.
        #[arg(long)]
        name: Option<String>,
    },
    /// List every token (never the token: its prefix), newest first, with its last use.
    List,
    /// Revoke the token with this prefix (as listed), or the whole token.
    Revoke { prefix: String },
}

#[derive(Subcommand)]
pub(super) enum UsersCommand {
    /// Give a user (by the email their ID token names them by) a role.
    Add {
        email: String,
        /// owner, admin, viewer, project_admin or project_viewer.
        #[arg(long, value_parser = parse_role)]
        role: Role,
        /// The project a project_admin or project_viewer role holds on.
        #[arg(long, value_name = "PROJECT_ID")]
        project: Option<String>,
    },
    /// List every role given to users.
    List,
    /// Take a user's roles back: every one, or the one --role (and --project) names.
    Remove {
        email: String,
        #[arg(long, value_parser = parse_role)]
        role: Option<Role>,
        #[arg(long, value_name = "PROJECT_ID", requires = "role")]
        project: Option<String>,
    },
}

#[derive(Subcommand)]
pub(super) enum AuditCommand {
    /// Write audit events to stdout as JSON lines, oldest first.
    Export {
        /// Events at or after this: a date (YYYY-MM-DD, UTC midnight) or an RFC 3339 time.
        #[arg(long, value_name = "DATE", value_parser = parse_time)]
        since: Option<i64>,
        /// Events before this (exclusive): a date or time as for --since.
        #[arg(long, value_name = "DATE", value_parser = parse_time)]
        until: Option<i64>,
        /// Only this actor's: admin_token, token:PREFIX, cli:USER, ...
        #[arg(long)]
        actor: Option<String>,
        /// Only this action's: key.create, sign_in.failed, ...
        #[arg(long)]
        action: Option<String>,
    },
}

fn parse_role(text: &str) -> Result<Role, String> {
    Role::parse(text)
}

#[derive(Subcommand)]
pub(super) enum PricesCommand {
    /// Write the prices file from the community price list (LiteLLM's
    /// model_prices_and_context_window.json): every model a gateway plugin serves that is
    /// priced per token. Prints how many models were added, changed, unchanged and removed,
    /// and what was skipped and why. A file that does not read as such a list is refused and
    /// the prices file is left as it was; otherwise the prices file is replaced whole, in one
    /// rename (a running gateway reloads it).
    Import {
        /// The price list (JSON).
        file: PathBuf,
        /// Where to write the prices (default: the config's `prices_file`).
        #[arg(long, value_name = "PATH")]
        out: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
pub(super) enum PluginsCommand {
    /// List the plugins of the running gateway (or, when it is not running,
    /// what it would load from plugins_dir).
    List,
}

#[derive(Subcommand)]
pub(super) enum PluginCommand {
    /// Write a plugin project into a new folder: the smallest plugin of its kind, a test of it
    /// against a scripted upstream (the SDK's harness, no gateway needed), its manifest and a
    /// README with the lines that test, build and install it. Prints the files and the next
    /// commands.
    New {
        /// The plugin's name: lowercase words joined by `-` (`acme-chat`). The gateway loads
        /// it as NAME.wasm; routes, guards and MCP servers name it by it.
        #[arg(value_parser = parse_plugin_name)]
        name: Name,
        /// The language it is written in.
        #[arg(long, value_enum)]
        lang: LangArg,
        /// What it is: a provider (serves routes), a guard (checks requests and answers) or a
        /// tool (serves MCP tools at `POST /mcp`).
        #[arg(long, value_enum, default_value_t = KindArg::Provider)]
        kind: KindArg,
        /// The folder to write (default: ./NAME); it must not exist or be empty.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// A local copy of the language's SDK: its folder in the gateway's repository
        /// (plugin-sdk, plugin-sdk-python, plugin-sdk-js) or a packed one (.crate unpacked,
        /// .whl, .tgz). Default: the repository this gateway was built from, when it is still
        /// there; else the registry's release of the SDK.
        #[arg(long, value_name = "PATH")]
        sdk: Option<PathBuf>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum LangArg {
    Rust,
    Python,
    Js,
}

impl LangArg {
    pub(super) fn lang(self) -> Lang {
        match self {
            LangArg::Rust => Lang::Rust,
            LangArg::Python => Lang::Python,
            LangArg::Js => Lang::Js,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum KindArg {
    Provider,
    Guard,
    Tool,
}

impl KindArg {
    pub(super) fn kind(self) -> Kind {
        match self {
            KindArg::Provider => Kind::Provider,
            KindArg::Guard => Kind::Guard,
            KindArg::Tool => Kind::Tool,
        }
    }
}

fn parse_plugin_name(name: &str) -> Result<Name, String> {
    Name::parse(name).map_err(|e| e.to_string())
}

#[derive(Subcommand)]
pub(super) enum ProjectCommand {
    /// Create a project; prints its id as the last line.
    Create { name: String },
    /// List every project with its limits, guards and tools, oldest first.
    List,
    /// Change a project's rate limits and budgets (shared by all its keys); prints them after
    /// the change.
    Limit {
        project_id: String,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Print a project's guards: the ids of the config's `[guards.ID]` its requests go through
    /// (after the top-level ones and the route's), in order. --set replaces them, --clear
    /// removes them; either prints them after the change.
    Guards {
        project_id: String,
        /// The guards, in the order they run; each must be a `[guards.ID]` of the config.
        #[arg(
            long,
            value_delimiter = ',',
            value_name = "GUARD,...",
            num_args = 1,
            conflicts_with = "clear"
        )]
        set: Option<Vec<String>>,
        /// Remove every guard of the project.
        #[arg(long)]
        clear: bool,
    },
    /// Print a project's `/mcp` tools: globs (`*`: any run of characters) of the tools
    /// (`SERVER__TOOL`) its keys may list and call, each key's own --tools limiting it further;
    /// none: every tool. --set replaces them, --clear removes them (every tool again); either
    /// prints them after the change.
    Tools {
        project_id: String,
        /// The globs, e.g. `github__*,calc__add`.
        #[arg(
            long,
            value_delimiter = ',',
            value_name = "GLOB,...",
            num_args = 1,
            value_parser = parse_tool_glob,
            conflicts_with = "clear"
        )]
        set: Option<Vec<String>>,
        /// Remove every glob of the project: its keys may use every tool (their own --tools
        /// still apply).
        #[arg(long)]
        clear: bool,
    },
    /// Requests, tokens and spend of a project since the current UTC day or month began.
    Usage {
        project_id: String,
        #[arg(long, value_enum, default_value_t = PeriodArg::Day)]
        period: PeriodArg,
    },
}

#[derive(Subcommand)]
pub(super) enum KeyCommand {
    /// Create an API key for a project; prints the key (shown only this once) as the last line.
    Create {
        project_id: String,
        #[command(flatten)]
        limits: LimitArgs,
        /// Route ids the key may use (with any model); default: every route.
        #[arg(long, value_delimiter = ',', value_name = "ROUTE,...", value_parser = parse_route)]
        routes: Vec<String>,
        /// ROUTE/MODEL pairs the key may use; default: every model.
        #[arg(long, value_delimiter = ',', value_name = "ROUTE/MODEL,...", value_parser = parse_route_model)]
        models: Vec<String>,
        /// Globs (`*`: any run of characters) of the `/mcp` tools (`SERVER__TOOL`) the key
        /// may list and call; default: every tool.
        #[arg(long, value_delimiter = ',', value_name = "GLOB,...", value_parser = parse_tool_glob)]
        tools: Vec<String>,
        /// When the key stops working: a duration (30d, 12h), a date (the key works through
        /// that UTC day) or an RFC 3339 time.
        #[arg(long, value_name = "30d|DATE|TIME", value_parser = parse_expires)]
        expires: Option<i64>,
    },
    /// Change one key's own rate limits and budgets; prints its prefix and its limits after
    /// the change.
    Limit {
        /// At least 8 characters of the key, or the whole key.
        key_prefix: String,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Revoke every key starting with this prefix (at least 8 characters) or the one whole key.
    Revoke { key_prefix: String },
}

/// The limit flags `project limit`, `key create` and `key limit` share. Absent: unchanged
/// (for `key create`: none); 0: cleared.
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub(super) struct LimitArgs {
    /// Requests per minute (0 clears).
    #[arg(long, value_name = "N")]
    pub(super) rpm: Option<u32>,
    /// Tokens (prompt + completion) per minute (0 clears).
    #[arg(long, value_name = "N")]
    pub(super) tpm: Option<u64>,
    /// Spend per UTC day, in US dollars (0 clears).
    #[arg(long, value_name = "USD", value_parser = parse_budget)]
    pub(super) daily_budget_usd: Option<f64>,
    /// Spend per UTC month, in US dollars (0 clears).
    #[arg(long, value_name = "USD", value_parser = parse_budget)]
    pub(super) monthly_budget_usd: Option<f64>,
}

impl LimitArgs {
    pub(super) fn update(self) -> LimitUpdate {
        LimitUpdate {
            rpm: self.rpm,
            tpm: self.tpm,
            daily_budget_usd: self.daily_budget_usd,
            monthly_budget_usd: self.monthly_budget_usd,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.update() == LimitUpdate::default()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum PeriodArg {
    Day,
    Month,
}

impl PeriodArg {
    pub(super) fn period(self) -> Period {
        match self {
            PeriodArg::Day => Period::Day,
            PeriodArg::Month => Period::Month,
        }
    }
}

/// A budget in dollars: finite and not negative (0 clears it).
fn parse_budget(text: &str) -> Result<f64, String> {
    let usd: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of dollars"))?;
    if !usd.is_finite() || usd < 0.0 {
        return Err(format!(
            "{text:?}: a budget is a finite amount of dollars, not negative (0 clears it)"
        ));
    }
    Ok(usd)
}

/// One route id of a key's scope (`a,,b` is a typo, not "every route").
fn parse_route(text: &str) -> Result<String, String> {
    let route = text.trim();
    if route.is_empty() {
        return Err("an empty route id".to_owned());
    }
    Ok(route.to_owned())
}

/// One tool glob of a key's scope or a project's tools (`github__*`).
fn parse_tool_glob(text: &str) -> Result<String, String> {
    let glob = text.trim();
    if glob.is_empty() {
        return Err("an empty tool glob".to_owned());
    }
    Ok(glob.to_owned())
}

/// One `ROUTE/MODEL` of a key's scope.
fn parse_route_model(text: &str) -> Result<String, String> {
    match text.trim().split_once('/') {
        Some((route, model)) if !route.is_empty() && !model.is_empty() => {
            Ok(text.trim().to_owned())
        }
        _ => Err(format!(
            "{text:?} is not ROUTE/MODEL (e.g. openai/gpt-4o-mini)"
        )),
    }
}

fn parse_expires(text: &str) -> Result<i64, String> {
    crate::clock::parse_expiry(text, now_ms())
}

const USAGE_ABOUT: &str = "\
Requests, tokens, spend, errors and latency of the invocation records: a table, or with --json
a JSON document {\"filter\": {\"project_id\", \"since\", \"until\", \"by\"}, \"rows\": [...]}.

A row has its group's values (day, model, route, user_id, key_prefix, project_id: the ones --by
asked for; null, in the table `-`, where the records have none) and these numbers:

  JSON                   TABLE
  requests               REQUESTS        every record, whatever its outcome
  errors                 ERRORS          records whose status is not success: error,
                                         rate_limited, blocked (by a guard) and
                                         cancelled all count
  prompt_tokens          PROMPT          tokens as the providers reported them
  completion_tokens      COMPLETION
  total_tokens           TOTAL
  cached_prompt_tokens   CACHED_PROMPT   prompt tokens read from the provider's cache
  cache_creation_tokens  CACHE_CREATION  prompt tokens written to it
  reasoning_tokens       REASONING
  cost_usd               COST_USD        the recorded costs added up (calls of a model
                                         without a price add nothing)
  p50_duration_ms        P50_MS          nearest-rank percentiles of duration_ms: the
  p95_duration_ms        P95_MS          smallest of the group's durations that 50% (95%)
                                         of them are not above (null, `-`: no records)

Rows are ordered by their group values (missing values last); without --by there is one row,
of zeros when no record matches. Records still on their way to the database (the writer's
queue, the journal of a gateway that is down) are not counted yet.";

/// The options of `gateway usage`.
#[derive(clap::Args, Debug)]
pub(super) struct UsageArgs {
    /// Only this project's invocations.
    #[arg(long, value_name = "PROJECT_ID")]
    pub(super) project: Option<String>,
    /// Invocations created at or after this: a date (YYYY-MM-DD, UTC midnight) or an RFC 3339
    /// time (2026-05-01T12:00:00Z, 2026-05-01T14:00:00+02:00); default: all time.
    #[arg(long, value_name = "DATE", value_parser = parse_time)]
    pub(super) since: Option<i64>,
    /// Invocations created before this (exclusive): a date or time as for --since; default: no
    /// end.
    #[arg(long, value_name = "DATE", value_parser = parse_time)]
    pub(super) until: Option<i64>,
    /// A row per value of: day (the UTC date), model, route, user, key (its stored prefix) or
    /// project; several, comma-separated (day,model), for a row per combination. Default: one
    /// row for everything.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "GROUP,...")]
    pub(super) by: Vec<ByArg>,
    /// Print a JSON document instead of the table.
    #[arg(long)]
    pub(super) json: bool,
}

impl UsageArgs {
    /// The groups asked for, each once, in the order given.
    pub(super) fn groups(&self) -> Vec<GroupBy> {
        let mut groups = Vec::new();
        for group in self.by.iter().map(|by| by.group()) {
            if !groups.contains(&group) {
                groups.push(group);
            }
        }
        groups
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum ByArg {
    /// The UTC date of the record's creation.
    Day,
    /// The UTC hour of the record's creation (its start, RFC 3339).
    Hour,
    Model,
    /// The route id.
    Route,
    /// The caller's user id.
    User,
    /// The stored prefix of the project key used.
    Key,
    Project,
}

impl ByArg {
    pub(super) fn group(self) -> GroupBy {
        match self {
            ByArg::Day => GroupBy::Day,
            ByArg::Hour => GroupBy::Hour,
            ByArg::Model => GroupBy::Model,
            ByArg::Route => GroupBy::Route,
            ByArg::User => GroupBy::User,
            ByArg::Key => GroupBy::Key,
            ByArg::Project => GroupBy::Project,
        }
    }
}

const EXPORT_ABOUT: &str = "\
Write the invocation records of a period to stdout, oldest first (by created_at, then id), for
analysis elsewhere. Records are read a thousand at a time: an export of any length holds one
page in memory.

--format jsonl (the default): one JSON object a line, the record as `invocations show` and
GET /invocations/{id} present it (request and response bodies, attempts, guards) plus keyPrefix.

--format csv: a header line, then one line a record (RFC 4180 quoting), without bodies:
  id, created_at, project_id, key_prefix, user_id, route, plugin, model, type, stream, status,
  http_status, duration_ms, prompt_tokens, completion_tokens, total_tokens,
  cached_prompt_tokens, cache_creation_tokens, reasoning_tokens, cost_usd, error,
  image_prompt_tokens, audio_prompt_tokens, guards, cache, saved_cost_usd, search_units, images,
  audio_seconds, characters
created_at is RFC 3339 (UTC, milliseconds); a missing value is an empty field (the image and
audio tokens, part of prompt_tokens, are there only where the provider tells them; a rerank's
search units where its provider bills them; images on an image generation's; the seconds of
audio a transcription was billed by, where its provider bills them; the characters of a
speech's input text). guards is what
each guard decided (the JSON array of the JSON lines), empty when no guard ran. cache is hit, miss or skip on a route that caches,
saved_cost_usd what a hit's answer cost when it was stored.

Records hold only the prefix of a project key, never a whole key, nor a provider key.";

#[derive(Subcommand)]
pub(super) enum InvocationsCommand {
    /// List invocations, newest first.
    List {
        #[arg(long)]
        project: Option<String>,
        #[arg(long)]
        user: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Show one invocation record as JSON.
    Show { id: String },
    /// Write the invocation records of a period to stdout, oldest first, as JSON lines or CSV.
    #[command(long_about = EXPORT_ABOUT)]
    Export {
        /// Records created at or after this: a date (YYYY-MM-DD, UTC midnight) or an RFC 3339
        /// time (2026-05-01T12:00:00Z, 2026-05-01T14:00:00+02:00).
        #[arg(long, value_name = "DATE", value_parser = parse_time)]
        since: i64,
        /// Records created before this (exclusive): a date or time as for --since; default:
        /// no end.
        #[arg(long, value_name = "DATE", value_parser = parse_time)]
        until: Option<i64>,
        /// Only this project's records.
        #[arg(long, value_name = "PROJECT_ID")]
        project: Option<String>,
        /// How to write the records: JSON lines (bodies included) or CSV (flat, no bodies).
        #[arg(long, value_enum, default_value_t = ExportFormat::Jsonl)]
        format: ExportFormat,
    },
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;
    use crate::limits::LimitSet;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    fn parse(args: &[&str]) -> Result<Command, clap::Error> {
        let mut full = vec!["gateway"];
        full.extend_from_slice(args);
        Cli::try_parse_from(full).map(|cli| cli.command)
    }

    #[test]
    fn limit_flags_become_an_update() {
        let Ok(Command::Project {
            command: ProjectCommand::Limit { project_id, limits },
        }) = parse(&[
            "project",
            "limit",
            "p1",
            "--rpm",
            "0",
            "--daily-budget-usd",
            "2.5",
        ])
        else {
            panic!("not parsed as `project limit`");
        };
        assert_eq!(project_id, "p1");
        assert_eq!(
            limits.update(),
            LimitUpdate {
                rpm: Some(0),
                daily_budget_usd: Some(2.5),
                ..LimitUpdate::default()
            }
        );
        assert!(!limits.is_empty());
        assert!(LimitArgs::default().is_empty());
    }

    #[test]
    fn project_guards_are_shown_set_or_cleared() {
        let guards = |args: &[&str]| match parse(args) {
            Ok(Command::Project {
                command:
                    ProjectCommand::Guards {
                        project_id,
                        set,
                        clear,
                    },
            }) => Ok((project_id, set, clear)),
            Ok(_) => panic!("not parsed as `project guards`"),
            Err(e) => Err(e.kind()),
        };
        assert_eq!(
            guards(&["project", "guards", "p1"]),
            Ok(("p1".into(), None, false))
        );
        assert_eq!(
            guards(&["project", "guards", "p1", "--set", "pii,words"]),
            Ok(("p1".into(), Some(vec!["pii".into(), "words".into()]), false))
        );
        assert_eq!(
            guards(&["project", "guards", "p1", "--clear"]),
            Ok(("p1".into(), None, true))
        );
        assert_eq!(
            guards(&["project", "guards", "p1", "--set", "pii", "--clear"]),
            Err(clap::error::ErrorKind::ArgumentConflict)
        );
        assert!(guards(&["project", "guards", "p1", "--set"]).is_err());
        assert!(guards(&["project", "guards"]).is_err());
    }

    #[test]
    fn project_tools_are_shown_set_or_cleared() {
        let tools = |args: &[&str]| match parse(args) {
            Ok(Command::Project {
                command:
                    ProjectCommand::Tools {
                        project_id,
                        set,
                        clear,
                    },
            }) => Ok((project_id, set, clear)),
            Ok(_) => panic!("not parsed as `project tools`"),
            Err(e) => Err(e.kind()),
        };
        assert_eq!(
            tools(&["project", "tools", "p1"]),
            Ok(("p1".into(), None, false))
        );
        // Split on commas, each glob trimmed.
        assert_eq!(
            tools(&["project", "tools", "p1", "--set", "github__*, calc__add"]),
            Ok((
                "p1".into(),
                Some(vec!["github__*".into(), "calc__add".into()]),
                false
            ))
        );
        assert_eq!(
            tools(&["project", "tools", "p1", "--clear"]),
            Ok(("p1".into(), None, true))
        );
        assert_eq!(
            tools(&["project", "tools", "p1", "--set", "calc__*", "--clear"]),
            Err(clap::error::ErrorKind::ArgumentConflict)
        );
        // An empty glob: refused by parsing.
        for args in [
            &["project", "tools", "p1", "--set", "calc__*,,github__*"][..],
            &["project", "tools", "p1", "--set", " "],
            &["project", "tools", "p1", "--set"],
            &["project", "tools"],
        ] {
            assert!(tools(args).is_err(), "{args:?} was accepted");
        }
    }

    #[test]
    fn bad_budgets_models_and_expiries_are_refused_by_parsing() {
        for args in [
            &["key", "create", "p", "--daily-budget-usd=-1"][..],
            &["key", "create", "p", "--monthly-budget-usd", "NaN"],
            &["key", "create", "p", "--monthly-budget-usd", "inf"],
            &["key", "create", "p", "--models", "gpt-4o"],
            &["key", "create", "p", "--models", "openai/"],
            &["key", "create", "p", "--routes", "a,,b"],
            &["key", "create", "p", "--expires", "2001-01-01"],
            &["key", "limit", "gw_12345678", "--tpm=-5"],
        ] {
            assert!(parse(args).is_err(), "{args:?} was accepted");
        }
    }

    #[test]
    fn key_create_reads_its_scope() {
        let Ok(Command::Key {
            command:
                KeyCommand::Create {
                    routes,
                    models,
                    expires,
                    limits,
                    ..
                },
        }) = parse(&[
            "key",
            "create",
            "p",
            "--routes",
            "a,b",
            "--models",
            "a/x,c/y",
            "--expires",
            "1d",
            "--tpm",
            "100",
        ])
        else {
            panic!("not parsed as `key create`");
        };
        assert_eq!(routes, ["a", "b"]);
        assert_eq!(models, ["a/x", "c/y"]);
        assert!(expires.is_some_and(|at| at > now_ms()));
        assert_eq!(limits.update().apply(LimitSet::default()).tpm, Some(100));
    }

    #[test]
    fn usage_reads_its_groups_once_each_in_order_and_its_times() {
        let Ok(Command::Usage(args)) = parse(&[
            "usage",
            "--by",
            "day,model",
            "--by",
            "model,key",
            "--since",
            "2026-05-01",
            "--until",
            "2026-05-01T12:00:00+02:00",
            "--json",
        ]) else {
            panic!("not parsed as `usage`");
        };
        assert_eq!(args.groups(), [GroupBy::Day, GroupBy::Model, GroupBy::Key]);
        assert_eq!(args.since, Some(1_777_593_600_000));
        assert_eq!(args.until, Some(1_777_593_600_000 + 10 * 3_600_000));
        assert!(args.json);
        let Ok(Command::Usage(args)) = parse(&["usage"]) else {
            panic!("not parsed as `usage`");
        };
        assert!(args.groups().is_empty());
        assert_eq!((args.since, args.until, args.project), (None, None, None));
    }

    #[test]
    fn a_bad_time_is_refused_naming_its_flag() {
        for (args, flag) in [
            (&["usage", "--since", "last week"][..], "--since"),
            (&["usage", "--until", "2026-02-30"], "--until"),
            (&["invocations", "export", "--since", "1/5/2026"], "--since"),
            (
                &[
                    "invocations",
                    "export",
                    "--since",
                    "2026-05-01",
                    "--until",
                    "x",
                ],
                "--until",
            ),
            (&["invocations", "export", "--format", "csv"], "--since"),
        ] {
            let error = parse(args)
                .err()
                .unwrap_or_else(|| panic!("{args:?} was accepted"));
            assert!(error.to_string().contains(flag), "{args:?}: {error}");
        }
        let Ok(Command::Invocations {
            command: InvocationsCommand::Export { format, since, .. },
        }) = parse(&["invocations", "export", "--since", "2026-05-01"])
        else {
            panic!("not parsed as `invocations export`");
        };
        assert_eq!((format, since), (ExportFormat::Jsonl, 1_777_593_600_000));
    }
}
