//! The batch runner: every gateway runs the lines of the batches in its store (`/v1/batches`,
//! [`crate::surfaces::openai::batches`]), whichever replica took them.
//!
//! It runs on a thread of its own, with its own single-threaded runtime, at a lower scheduling
//! priority than the serving threads (nice 10): a batch's lines take what CPU the interactive
//! requests leave, and never wait in a serving thread's queue ahead of them. At most
//! `batch_concurrency` lines are in flight at once, and one while the serving threads are
//! busy (`Share`): what a line costs beyond the runner's thread (its record, its upstream
//! connection) is then one line's.
//!
//! Lines are leased from the store a few at a time (PostgreSQL's `SKIP LOCKED` lets replicas
//! lease from one batch at once), the leases renewed while the lines run; a line goes through
//! the same flow as a caller's request with the batch's key ([`crate::flow::run_line`]), and
//! its answer is kept only if this runner still holds its lease, so that a line is answered
//! once into the output however gateways die (`line`). A line a limit or a busy upstream turned
//! away is given back to run again after the wait it was told. Once no line of a batch is
//! pending, one runner writes its output and error files (`output`).

mod line;
mod output;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::clock::now_ms;
use crate::state::AppState;
use crate::store::{BatchStatus, RunningBatch};

/// How often the runner looks for work when nothing told it of any.
const POLL: Duration = Duration::from_secs(1);
/// The most batches one look reads.
const BATCHES_PER_LOOK: u32 = 100;
/// What the runner's thread is niced to: below the serving threads (0).
const NICE: i32 = 10;
/// After the grace period, how long lines still running have to end and be recorded.
const ABORT_WAIT: Duration = Duration::from_secs(5);
/// The serving threads' busy share above which the runner keeps one line in flight.
const BUSY: f64 = 0.75;
/// The shortest stretch the share is read over (a look may follow another at once).
const SAMPLE: Duration = Duration::from_millis(100);

/// How many lines the runner may have in flight: `batch_concurrency`, or one while the serving
/// threads were busy over the last stretch (as their runtimes count their busy time). Only
/// ever one, not none: a batch keeps moving however busy the gateway.
struct Share {
    at: std::time::Instant,
    busy: Duration,
    busy_now: bool,
}

impl Share {
    fn new(state: &AppState) -> Share {
        Share {
            at: std::time::Instant::now(),
            busy: state.serving_load.busy().0,
            busy_now: false,
        }
    }

    fn slots(&mut self, state: &AppState, concurrency: u32) -> u32 {
        let now = std::time::Instant::now();
        let wall = now.duration_since(self.at);
        if wall >= SAMPLE {
            let (busy, workers) = state.serving_load.busy();
            let spent = busy.saturating_sub(self.busy).as_secs_f64();
            let share = spent / (wall.as_secs_f64() * workers.max(1) as f64);
            self.busy_now = share >= BUSY;
            (self.at, self.busy) = (now, busy);
        }
        if self.busy_now { 1 } else { concurrency }
    }
}

/// The runner's thread, until it is stopped.
pub struct Runner {
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Runner {
    /// Starts this gateway's runner.
    pub fn start(state: Arc<AppState>) -> std::io::Result<Runner> {
        let (stop, stopping) = watch::channel(false);
        let thread = std::thread::Builder::new()
            .name("batch".into())
            .spawn(move || {
                lower_priority();
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                match runtime {
                    Ok(runtime) => runtime.block_on(run(state, stopping)),
                    Err(e) => tracing::error!("batch runner: no runtime: {e}"),
                }
            })?;
        Ok(Runner {
            stop,
            thread: Some(thread),
        })
    }

    /// A handle that stops the runner when it is told to (shutdown): it leases no more lines,
    /// and gives the lines in flight the grace period to end.
    pub fn stopper(&self) -> impl FnOnce() + Send + 'static {
        let stop = self.stop.clone();
        move || {
            stop.send_replace(true);
        }
    }

    /// Stops the runner and waits for its thread.
    pub async fn stop(mut self) {
        self.stop.send_replace(true);
        if let Some(thread) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

/// Nices the calling thread (Linux's nice is a thread's): threads it starts inherit it.
fn lower_priority() {
    // SAFETY: gettid and setpriority have no preconditions; they only read and set this
    // thread's scheduling value.
    let done = unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, NICE)
    };
    if done != 0 {
        tracing::warn!(
            "batch runner: cannot lower its priority ({}): its lines compete with interactive requests",
            std::io::Error::last_os_error()
        );
    }
}

/// The lines this runner has in flight: each task's batch, by the task's id (a task that
/// panicked still gives its slot and its batch's count back).
type InFlight = HashMap<tokio::task::Id, String>;

/// How many of the lines in flight are `batch`'s.
fn of_batch(in_flight: &InFlight, batch: &str) -> usize {
    in_flight.values().filter(|id| *id == batch).count()
}

async fn run(state: Arc<AppState>, mut stopping: watch::Receiver<bool>) {
    let owner = format!("runner-{}", uuid::Uuid::now_v7().simple());
    let mut lines: JoinSet<()> = JoinSet::new();
    let mut in_flight = InFlight::default();
    let mut renewed = tokio::time::Instant::now();
    let mut look_now = true;
    let mut share = Share::new(&state);
    loop {
        if *stopping.borrow() {
            break;
        }
        let live = state.live();
        let concurrency = share.slots(&state, live.config.batch_concurrency.get());
        let lease = Duration::from_secs(live.config.batch_lease_secs.get());
        drop(live);
        if renewed.elapsed() >= lease / 3 && !in_flight.is_empty() {
            let until = now_ms().saturating_add(millis(lease));
            if let Err(e) = state.store.renew_leases(&owner, until).await {
                tracing::warn!("batch runner: renewing its leases failed: {e}");
            }
            renewed = tokio::time::Instant::now();
        }
        if look_now
            && let Err(e) = look(
                &state,
                &owner,
                &mut lines,
                &mut in_flight,
                concurrency,
                lease,
            )
            .await
        {
            tracing::warn!("batch runner: {e}");
        }
        look_now = tokio::select! {
            _ = stopping.changed() => false,
            () = state.batch_wake.notified() => true,
            () = tokio::time::sleep(POLL) => true,
            Some(done) = lines.join_next_with_id(), if !lines.is_empty() => {
                ended(&mut in_flight, done);
                // Whatever else ended meanwhile frees its slot too.
                while let Some(done) = lines.try_join_next_with_id() {
                    ended(&mut in_flight, done);
                }
                // Leased again once half the slots are free: a look (its reads and a lease)
                // for a few lines at a time, not one per line.
                in_flight.len() <= concurrency as usize / 2
            }
        };
    }
    // Stopping: no more leases; the lines in flight get the grace period, then end (recorded
    // as cancelled, given back to be run again).
    let grace = Duration::from_secs(state.live().config.shutdown_grace_secs);
    let drained = async { while lines.join_next().await.is_some() {} };
    if tokio::time::timeout(grace, drained).await.is_err() {
        state.abort_in_flight();
        let drained = async { while lines.join_next().await.is_some() {} };
        let _ = tokio::time::timeout(ABORT_WAIT, drained).await;
    }
}

fn ended(in_flight: &mut InFlight, done: Result<(tokio::task::Id, ()), tokio::task::JoinError>) {
    let id = match done {
        Ok((id, ())) => id,
        Err(e) => {
            tracing::error!("batch runner: a line's task failed: {e}");
            e.id()
        }
    };
    in_flight.remove(&id);
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// One look at the store: lines leased into the free slots, the oldest batch first; batches
/// past their window or cancelled closed; batches with nothing pending finished.
async fn look(
    state: &Arc<AppState>,
    owner: &str,
    lines: &mut JoinSet<()>,
    in_flight: &mut InFlight,
    concurrency: u32,
    lease: Duration,
) -> Result<(), crate::store::StoreError> {
    let batches = state.store.running_batches(BATCHES_PER_LOOK).await?;
    for batch in batches {
        let now = now_ms();
        match batch.status {
            // Being read by the request that creates it (a stale one is failed by retention).
            BatchStatus::Validating => continue,
            BatchStatus::InProgress if now >= batch.expires_at_ms => {
                state
                    .store
                    .close_lines(&batch.id, "batch_expired", now)
                    .await?;
            }
            BatchStatus::InProgress => {
                let free = (concurrency as usize).saturating_sub(in_flight.len());
                if free > 0 {
                    let until = now.saturating_add(millis(lease));
                    let leased = (state.store)
                        .lease_lines(&batch.id, owner, now, until, free as u32)
                        .await?;
                    if !leased.is_empty() {
                        let batch = Arc::new(batch);
                        for leased in leased {
                            let task =
                                line::run(state.clone(), owner.to_owned(), batch.clone(), leased);
                            in_flight.insert(lines.spawn(task).id(), batch.id.clone());
                        }
                        continue;
                    }
                }
                // Lines of it still running here: nothing to finish yet.
                if of_batch(in_flight, &batch.id) > 0 {
                    continue;
                }
            }
            BatchStatus::Cancelling => {
                state
                    .store
                    .close_lines(&batch.id, "batch_cancelled", now)
                    .await?;
            }
            BatchStatus::Finalizing => {}
            // Not read by `running_batches`.
            BatchStatus::Failed
            | BatchStatus::Completed
            | BatchStatus::Expired
            | BatchStatus::Cancelled => continue,
        }
        finish(state, &batch, lease).await?;
    }
    Ok(())
}

/// Finishes `batch` if no line of it is pending and no other runner is finishing it.
async fn finish(
    state: &AppState,
    batch: &RunningBatch,
    lease: Duration,
) -> Result<(), crate::store::StoreError> {
    let now = now_ms();
    // A runner that marked it and died: taken over after a few leases' time.
    let stale_before = now.saturating_sub(millis(lease * 5));
    if !state
        .store
        .begin_finishing(&batch.id, now, stale_before)
        .await?
    {
        return Ok(());
    }
    let finished = output::write(state, batch).await?;
    if !state.store.finish_batch(&batch.id, now, &finished).await? {
        tracing::warn!(
            batch = batch.id,
            "another gateway took over finishing the batch; its files from here are left to expire"
        );
        return Ok(());
    }
    let api = api(&batch.endpoint);
    (state.metrics).batch_finished(api, finished.status.as_str());
    let never_run = if finished.status == BatchStatus::Cancelled {
        "cancelled"
    } else {
        "expired"
    };
    (state.metrics).batch_lines(api, never_run, finished.closed);
    Ok(())
}

/// The API a batch of `endpoint` was made through, as the metrics and the admin API name it.
pub fn api(endpoint: &str) -> &'static str {
    if endpoint == crate::surfaces::anthropic::batches::ENDPOINT {
        "anthropic"
    } else {
        "openai"
    }
}
