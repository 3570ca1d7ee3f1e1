//! The backend's own runtime (see the module's doc of [`super`]).

use crate::store::StoreError;

/// The backend's own runtime; shut down without waiting when dropped, which
/// may happen inside another runtime's task (where a blocking shutdown panics).
pub(super) struct OwnRuntime(Option<tokio::runtime::Runtime>);

impl OwnRuntime {
    pub(super) fn new() -> Result<OwnRuntime, StoreError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("postgres")
            .enable_all()
            .build()
            .map_err(|e| StoreError::Task(format!("cannot start PostgreSQL's runtime: {e}")))?;
        Ok(OwnRuntime(Some(runtime)))
    }

    pub(super) fn handle(&self) -> Option<&tokio::runtime::Handle> {
        self.0.as_ref().map(|runtime| runtime.handle())
    }
}

impl Drop for OwnRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}
