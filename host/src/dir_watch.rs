//! Debounced watching of files in a directory, for hot reload of plugins and
//! of the config.
//!
//! A path is handed to the handler only once it has been quiet for a moment,
//! so a file being copied is not read half-written (and if it were, it would
//! fail validation and the previous version would keep serving).
//!
//! Only events that can change what a file holds are asked of the platform
//! ([`EVENT_KINDS`]): a writer closing a file, a rename, a file created or
//! removed, its permissions changed. Not every write: a log or a SQLite
//! database beside the config is written all the time, and on Linux the
//! watch is on the directory, so each of its writes would wake the watcher
//! (~13% of the gateway's CPU at saturation, BENCHMARKS.md). Not opening or
//! reading either: the handler itself reads the file it is handed, and so do
//! `cat`, `sha256sum` and every CLI call, so counting reads would reload
//! forever. A file written in place is handed over when its writer closes
//! it, complete.
//!
//! The directory itself may be deleted and made again, or replaced: the
//! watch is on the directory, not on its path, so it is placed again on the
//! new one, and every file that came or went meanwhile is handed over.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode, EventKind, MetadataKind, ModifyKind, RenameMode};
use notify::{EventKindMask, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};

/// How long a file must be quiet before it is handled.
const DEBOUNCE: Duration = Duration::from_millis(250);
/// How often the watched path is checked to still be the watched directory
/// (or, while it is missing, for its return).
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// What a watch asks the platform to report. On Linux this is the inotify mask itself
/// (`IN_CLOSE_WRITE`, `IN_MOVED_FROM`/`IN_MOVED_TO`, `IN_CREATE`, `IN_DELETE`, `IN_ATTRIB`,
/// and the directory's own deletion or move): no `IN_MODIFY` nor `IN_OPEN`, which every write
/// or read of any file in the directory sets off.
const EVENT_KINDS: EventKindMask = EventKindMask::ACCESS_CLOSE
    .union(EventKindMask::MODIFY_NAME)
    .union(EventKindMask::CREATE)
    .union(EventKindMask::REMOVE)
    // A `chmod` can make a file that could not be read readable; writes do not set it off.
    .union(EventKindMask::MODIFY_META);

/// The platform's watcher, reporting [`EVENT_KINDS`] to `handler`.
fn platform_watcher(
    handler: impl notify::EventHandler,
) -> notify::Result<notify::RecommendedWatcher> {
    notify::RecommendedWatcher::new(
        handler,
        notify::Config::default().with_event_kinds(EVENT_KINDS),
    )
}

/// How long a path must be quiet after `kind` before it is handled; `None`
/// for what cannot change a file's content.
fn settle_time(kind: &EventKind) -> Option<Duration> {
    match kind {
        // A file renamed into place is complete (the safe way to install one);
        // one its writer has closed is too, unless it is opened again to write
        // more, and then it is handled again.
        EventKind::Modify(ModifyKind::Name(RenameMode::To))
        | EventKind::Access(AccessKind::Close(AccessMode::Write)) => Some(Duration::ZERO),
        // notify's inotify backend reports a rename inside the directory as
        // `From` (the old name), `To` (the new one) and then `Both` (the two).
        // `Both` says nothing the other two did not, and handing the new name
        // over for it too could load the file twice: once for `To`, and again
        // if the `To` was handled before `Both` arrived.
        EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => None,
        // Opened, read, closed after reading; a read moves the access time.
        EventKind::Access(_)
        | EventKind::Modify(ModifyKind::Metadata(MetadataKind::AccessTime)) => None,
        // Other metadata counts: a `chmod` can make a file that could not be
        // read readable. (`touch` is how operators ask for a reload: it opens
        // the file to write and closes it.) A file created is handed over
        // again when its writer closes it; a write itself is not reported on
        // Linux, but may be elsewhere.
        EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_) | EventKind::Any => {
            Some(DEBOUNCE)
        }
        // Notices about the watch itself (a rescan is flagged separately).
        EventKind::Other => None,
    }
}

/// A directory's identity: a directory made again at the same path is another one.
type DirId = (u64, u64);

fn dir_id(dir: &Path) -> Option<DirId> {
    std::fs::metadata(dir)
        .ok()
        .filter(|m| m.is_dir())
        .map(|m| (m.dev(), m.ino()))
}

/// What the watcher thread tells the debouncing task.
enum Signal {
    Changed(PathBuf, Duration),
    /// The directory watched by watch number `.0` was removed or moved away:
    /// that watch sees nothing more.
    DirGone(u64),
    /// Events were lost (the kernel's queue overflowed).
    Rescan,
}

type Wanted = Arc<dyn Fn(&Path) -> bool + Send + Sync>;

/// Why a directory cannot be watched.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("cannot watch {}: not a directory", .0.display())]
    NotADirectory(PathBuf),
    #[error("cannot watch {}: {source}", .dir.display())]
    Path {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot watch {}: {source}", .dir.display())]
    Notify { dir: PathBuf, source: notify::Error },
}

/// Keeps a watch alive; dropping it stops it.
pub struct DirWatcher {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for DirWatcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Watches `dir` (not recursively) and calls `handle` with each path that
/// `wanted` accepts, once it has settled (created, changed or removed).
///
/// If `dir` disappears, a warning naming it as `what` is logged (once), each
/// file known in it is handed to `handle` (it is gone now), and the path is
/// checked every [`CHECK_EVERY`] for the directory's return; then it is
/// watched again and each wanted file in it is handed to `handle`.
pub fn watch_dir<F, Fut>(
    what: &'static str,
    dir: &Path,
    wanted: impl Fn(&Path) -> bool + Send + Sync + 'static,
    handle: F,
) -> Result<DirWatcher, WatchError>
where
    F: Fn(PathBuf) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let wanted: Wanted = Arc::new(wanted);
    let (tx, rx) = mpsc::unbounded_channel::<Signal>();
    let id = dir_id(dir).ok_or_else(|| WatchError::NotADirectory(dir.to_owned()))?;
    let watcher = place_watch(dir, 0, &wanted, &tx)?;
    let known = listing(dir, &wanted);
    let task = tokio::spawn(
        Debouncer {
            what,
            dir: dir.to_owned(),
            wanted,
            tx,
            watch: Some((watcher, id)),
            generation: 0,
            lost: false,
            known,
            pending: HashMap::new(),
        }
        .run(rx, handle),
    );
    Ok(DirWatcher { task })
}

/// A notify watch on `dir`, numbered `generation` so that news from a watch
/// already replaced can be told apart.
fn place_watch(
    dir: &Path,
    generation: u64,
    wanted: &Wanted,
    tx: &mpsc::UnboundedSender<Signal>,
) -> Result<notify::RecommendedWatcher, WatchError> {
    // notify reports absolute paths; the handler gets them in the form `dir`
    // was given, as listing `dir` gives them (a relative `plugins_dir` loaded
    // at startup must be unloaded by the same name).
    let root = std::path::absolute(dir).map_err(|source| WatchError::Path {
        dir: dir.to_owned(),
        source,
    })?;
    let notify_error = |source| WatchError::Notify {
        dir: dir.to_owned(),
        source,
    };
    let (wanted, tx, given) = (wanted.clone(), tx.clone(), dir.to_owned());
    let watched = root.clone();
    let mut watcher = platform_watcher(move |event: notify::Result<notify::Event>| match event {
        Ok(event) => {
            // A send fails only once the task has ended: nobody listens then.
            if event.need_rescan() {
                let _ = tx.send(Signal::Rescan);
            }
            let leaves = matches!(
                event.kind,
                EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(RenameMode::From))
            );
            if leaves && event.paths.contains(&root) {
                let _ = tx.send(Signal::DirGone(generation));
                return;
            }
            let Some(settle) = settle_time(&event.kind) else {
                return;
            };
            let paths = event
                .paths
                .into_iter()
                .map(|path| match path.strip_prefix(&root) {
                    Ok(name) => given.join(name),
                    Err(_) => path,
                });
            for path in paths.filter(|p| wanted(p)) {
                let _ = tx.send(Signal::Changed(path, settle));
            }
        }
        Err(e) => tracing::warn!("file watch error: {e}"),
    })
    .map_err(notify_error)?;
    watcher
        .watch(&watched, RecursiveMode::NonRecursive)
        .map_err(notify_error)?;
    Ok(watcher)
}

/// The wanted files in `dir` now (none if it cannot be read).
fn listing(dir: &Path, wanted: &Wanted) -> HashSet<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|path| wanted(path))
                .collect()
        })
        .unwrap_or_default()
}

struct Debouncer {
    what: &'static str,
    dir: PathBuf,
    wanted: Wanted,
    tx: mpsc::UnboundedSender<Signal>,
    /// The live watch and the directory it is on; `None` while the directory is missing.
    watch: Option<(notify::RecommendedWatcher, DirId)>,
    /// Counts the watches placed.
    generation: u64,
    /// The directory could not be watched at the last attempt (and that was logged).
    lost: bool,
    /// Wanted files seen in the directory: what to hand over when it goes.
    known: HashSet<PathBuf>,
    /// Paths waiting to be quiet, and when they will have been.
    pending: HashMap<PathBuf, Instant>,
}

impl Debouncer {
    async fn run<F, Fut>(mut self, mut rx: mpsc::UnboundedReceiver<Signal>, handle: F)
    where
        F: Fn(PathBuf) -> Fut,
        Fut: Future<Output = ()>,
    {
        let mut check = tokio::time::interval(CHECK_EVERY);
        check.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            let next_due = self.pending.values().min().copied();
            tokio::select! {
                signal = rx.recv() => match signal {
                    Some(Signal::Changed(path, settle)) => {
                        self.known.insert(path.clone());
                        self.pending.insert(path, Instant::now() + settle);
                    }
                    // From a watch replaced since: already dealt with.
                    Some(Signal::DirGone(generation)) if generation != self.generation => {}
                    Some(Signal::DirGone(_)) => self.rewatch(),
                    Some(Signal::Rescan) => self.rescan(),
                    // `self.tx` keeps the channel open.
                    None => return,
                },
                _ = check.tick() => {
                    let now = dir_id(&self.dir);
                    if self.watch.as_ref().map(|(_, id)| *id) != now {
                        self.rewatch();
                    }
                }
                _ = async {
                    match next_due {
                        Some(due) => tokio::time::sleep_until(due).await,
                        None => std::future::pending().await,
                    }
                } => {
                    let now = Instant::now();
                    let due: Vec<PathBuf> = self
                        .pending
                        .iter()
                        .filter(|(_, at)| **at <= now)
                        .map(|(path, _)| path.clone())
                        .collect();
                    for path in due {
                        self.pending.remove(&path);
                        handle(path.clone()).await;
                        if !path.exists() {
                            self.known.remove(&path);
                        }
                    }
                }
            }
        }
    }

    /// The watch is gone, or on a directory no longer at the path: watches
    /// what is there now, if anything, and hands over what may have changed.
    fn rewatch(&mut self) {
        let was_watching = self.watch.is_some();
        // Before placing another: the old one may still report the old directory's files.
        self.watch = None;
        self.generation += 1;
        self.watch = match dir_id(&self.dir) {
            None => {
                if !self.lost {
                    tracing::warn!(dir = %self.dir.display(),
                        "the {} is missing: checking every {CHECK_EVERY:?} for its return",
                        self.what);
                }
                None
            }
            Some(id) => match place_watch(&self.dir, self.generation, &self.wanted, &self.tx) {
                Ok(watcher) => {
                    if self.lost {
                        tracing::info!(dir = %self.dir.display(), "the {} is watched again", self.what);
                    }
                    Some((watcher, id))
                }
                Err(e) => {
                    if !self.lost {
                        tracing::warn!("{e}; trying again every {CHECK_EVERY:?}");
                    }
                    None
                }
            },
        };
        self.lost = self.watch.is_none();
        // Not while the directory stays unwatchable: nothing came or went that can be seen.
        if was_watching || self.watch.is_some() {
            self.rescan();
        }
    }

    /// Hands over every wanted file known or present: events about them may be lost.
    fn rescan(&mut self) {
        let due = Instant::now() + DEBOUNCE;
        self.known.extend(listing(&self.dir, &self.wanted));
        for path in &self.known {
            self.pending.insert(path.clone(), due);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file installed by renaming it into place (the way the README asks
    /// for) is handed over once, at once, for its new name; its old name goes
    /// through the usual debounce.
    #[test]
    fn a_rename_inside_the_directory_hands_the_new_name_over_once() {
        let rename = |mode| EventKind::Modify(ModifyKind::Name(mode));
        assert_eq!(settle_time(&rename(RenameMode::From)), Some(DEBOUNCE));
        assert_eq!(settle_time(&rename(RenameMode::To)), Some(Duration::ZERO));
        assert_eq!(settle_time(&rename(RenameMode::Both)), None);
        // Other platforms report a rename without saying which side this is.
        assert_eq!(settle_time(&rename(RenameMode::Any)), Some(DEBOUNCE));
    }

    /// Every event the platform's watcher reports on `dir`, until one about `last` that
    /// `is_last` accepts arrives (a file's events arrive in the order they happened, so
    /// whatever earlier writes set off is in by then). A generous bound: the event must come.
    fn events_until(
        rx: &std::sync::mpsc::Receiver<notify::Result<notify::Event>>,
        last: &Path,
        is_last: impl Fn(&EventKind) -> bool,
    ) -> Vec<notify::Event> {
        let mut seen = Vec::new();
        loop {
            let event = rx
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("no closing event for {last:?}; got {seen:#?}"))
                .expect("a watch event");
            let done = event.paths.iter().any(|p| p.ends_with(last)) && is_last(&event.kind);
            seen.push(event);
            if done {
                return seen;
            }
        }
    }

    fn watching(
        dir: &Path,
    ) -> (
        notify::RecommendedWatcher,
        std::sync::mpsc::Receiver<notify::Result<notify::Event>>,
    ) {
        let (tx, rx) = std::sync::mpsc::channel();
        let mut watcher = platform_watcher(move |event| {
            let _ = tx.send(event);
        })
        .expect("a watcher");
        watcher
            .watch(dir, RecursiveMode::NonRecursive)
            .expect("watch the directory");
        (watcher, rx)
    }

    /// A log or a database beside the config, written and read all the time, does not wake the
    /// watcher at all; nor does the config being written, until its writer closes it.
    #[test]
    fn writes_and_reads_of_files_in_the_directory_are_not_reported_until_closed() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let (log, config) = (
            dir.path().join("gateway.log"),
            dir.path().join("gateway.toml"),
        );
        std::fs::write(&log, "").unwrap();
        std::fs::write(&config, "listen = \"127.0.0.1:0\"\n").unwrap();
        let (_watcher, rx) = watching(dir.path());

        let mut appending = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        for line in 0..2_000 {
            writeln!(appending, "line {line}").unwrap();
            if line % 100 == 0 {
                appending.sync_data().unwrap();
                std::fs::read(&log).unwrap();
                std::fs::read(&config).unwrap();
            }
        }
        let mut editing = std::fs::OpenOptions::new()
            .append(true)
            .open(&config)
            .unwrap();
        for _ in 0..100 {
            editing.write_all(b"# a comment\n").unwrap();
        }
        drop(editing);

        let closed =
            |kind: &EventKind| *kind == EventKind::Access(AccessKind::Close(AccessMode::Write));
        let seen = events_until(&rx, &config, closed);
        assert_eq!(
            seen.len(),
            1,
            "only the config's close is reported: {seen:#?}"
        );
        drop(appending);
    }

    /// What editors and `gateway prices import` do: write another file, rename it over the
    /// config. The config's new name is reported (and the temporary file's events, which
    /// `wanted` leaves out).
    #[test]
    fn a_file_renamed_over_the_config_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("gateway.toml");
        std::fs::write(&config, "a = 1\n").unwrap();
        let (_watcher, rx) = watching(dir.path());
        let temporary = dir.path().join("gateway.toml.swp");
        std::fs::write(&temporary, "a = 2\n").unwrap();
        std::fs::rename(&temporary, &config).unwrap();
        let renamed = |kind: &EventKind| settle_time(kind) == Some(Duration::ZERO);
        let seen = events_until(&rx, &config, renamed);
        assert!(
            seen.iter().all(|e| e
                .paths
                .iter()
                .all(|p| p.ends_with("gateway.toml.swp") || p.ends_with("gateway.toml"))),
            "{seen:#?}"
        );
    }
}
