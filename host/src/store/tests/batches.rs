//! Batches: lines leased by one runner at a time and answered once (an answer from a runner
//! whose lease another took is refused), leases taken at once never overlap, cancel and expiry
//! close the lines not in flight, one runner finishes a batch, a refused batch keeps no lines.

use std::collections::BTreeSet;

use super::Harness;
use crate::store::{BatchPage, BatchStatus, Finished, NewBatch, NewLine, Store};

const NOW: i64 = 1_800_000_000_000;

async fn batch(store: &Store, project: &str, lines: u32) -> String {
    batch_of(store, project, "batch_", lines).await
}

/// A batch of `lines` whose id begins with `prefix` (one API's), made a millisecond after the
/// one made before it.
async fn batch_of(store: &Store, project: &str, prefix: &str, lines: u32) -> String {
    static MADE: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
    let made = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let batch = NewBatch {
        id: format!("{prefix}{}", uuid::Uuid::now_v7().simple()),
        project_id: project.into(),
        key_hash: [7; 32],
        endpoint: "/v1/chat/completions".into(),
        input_file_id: "file-x".into(),
        completion_window: "24h".into(),
        metadata: Some(r#"{"a":"b"}"#.into()),
        created_at_ms: NOW + made,
        expires_at_ms: NOW + 86_400_000,
        output_expires_secs: None,
    };
    store.create_batch(&batch).await.unwrap();
    let lines: Vec<NewLine> = (0..lines)
        .map(|seq| NewLine {
            seq,
            custom_id: format!("c-{seq}"),
            body: format!("{{\"n\":{seq},\"text\":\"é\u{1F600}\"}}"),
        })
        .collect();
    store
        .put_batch_lines(&batch.id, lines.clone())
        .await
        .unwrap();
    assert!(
        store
            .start_batch(&batch.id, lines.len() as u32, NOW)
            .await
            .unwrap()
    );
    batch.id
}

fn seqs(lines: &[crate::store::LeasedLine]) -> Vec<u32> {
    lines.iter().map(|line| line.seq).collect()
}

pub(super) async fn lines_are_leased_by_one_runner_and_answered_once(h: &Harness) {
    let store = h.open().await;
    let project = store.create_project("batches").await.unwrap().id;
    let id = batch(&store, &project, 3).await;
    let running = store.running_batches(10).await.unwrap();
    assert_eq!(running.len(), 1);
    assert_eq!(running[0].status, BatchStatus::InProgress);
    assert_eq!(running[0].key_hash, vec![7; 32]);

    let a = store
        .lease_lines(&id, "a", NOW, NOW + 1000, 2)
        .await
        .unwrap();
    assert_eq!(seqs(&a), [0, 1]);
    assert_eq!(a[0].custom_id, "c-0");
    assert_eq!(a[1].body, "{\"n\":1,\"text\":\"é\u{1F600}\"}");
    let b = store
        .lease_lines(&id, "b", NOW, NOW + 1000, 5)
        .await
        .unwrap();
    assert_eq!(seqs(&b), [2]);
    assert!(
        store
            .lease_lines(&id, "c", NOW, NOW + 1000, 5)
            .await
            .unwrap()
            .is_empty()
    );

    assert!(
        store
            .end_line(&id, 0, "a", true, "out-0".into())
            .await
            .unwrap()
    );
    // Not b's, and not again.
    assert!(!store.end_line(&id, 0, "b", true, "x".into()).await.unwrap());
    assert!(!store.end_line(&id, 0, "a", true, "x".into()).await.unwrap());
    // a's lease of line 1 runs out (a died): c takes it, and a's late answer is refused.
    let c = store
        .lease_lines(&id, "c", NOW + 2000, NOW + 3000, 5)
        .await
        .unwrap();
    assert_eq!(seqs(&c), [1, 2]);
    assert!(
        !store
            .end_line(&id, 1, "a", true, "late".into())
            .await
            .unwrap()
    );
    // b's lease ran out too and c took its line: b's renewal and answer come too late.
    store.renew_leases("b", NOW + 9000).await.unwrap();
    assert!(
        !store
            .end_line(&id, 2, "b", true, "late".into())
            .await
            .unwrap()
    );
    let running = store.batch(&project, &id).await.unwrap().unwrap();
    assert_eq!(
        (running.total, running.completed, running.failed),
        (3, 1, 0)
    );
    // Lines pending: not to be finished yet.
    assert!(!store.begin_finishing(&id, NOW + 2500, NOW).await.unwrap());
    assert!(
        store
            .end_line(&id, 1, "c", false, "err-1".into())
            .await
            .unwrap()
    );
    assert!(
        store
            .end_line(&id, 2, "c", true, "out-2".into())
            .await
            .unwrap()
    );

    let stored = store.batch(&project, &id).await.unwrap().unwrap();
    assert_eq!((stored.completed, stored.failed), (2, 1), "{stored:?}");
    assert!(store.begin_finishing(&id, NOW + 5000, NOW).await.unwrap());
    // Marked: another runner does not finish it too, until the mark is stale.
    assert!(!store.begin_finishing(&id, NOW + 6000, NOW).await.unwrap());
    let stored = store.batch(&project, &id).await.unwrap().unwrap();
    assert_eq!(stored.status, BatchStatus::Finalizing);
    assert_eq!(stored.finalizing_at_ms, Some(NOW + 5000));
    let results = store.line_results(&id, -1, 2).await.unwrap();
    assert_eq!(
        results.iter().map(|r| (r.seq, r.ok)).collect::<Vec<_>>(),
        [(0, true), (1, false)]
    );
    assert_eq!(results[0].result.as_deref(), Some("out-0"));
    let rest = store.line_results(&id, 1, 2).await.unwrap();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].result.as_deref(), Some("out-2"));

    let finished = Finished {
        status: BatchStatus::Completed,
        at_ms: NOW + 7000,
        output_file_id: Some("file-out".into()),
        error_file_id: Some("file-err".into()),
        completed: 2,
        failed: 1,
        closed: 0,
    };
    // A mark another runner took over is not this one's to finish.
    assert!(!store.finish_batch(&id, NOW + 1, &finished).await.unwrap());
    assert!(
        store
            .finish_batch(&id, NOW + 5000, &finished)
            .await
            .unwrap()
    );
    let stored = store.batch(&project, &id).await.unwrap().unwrap();
    assert_eq!(stored.status, BatchStatus::Completed);
    assert_eq!(stored.completed_at_ms, Some(NOW + 7000));
    assert_eq!((stored.completed, stored.failed, stored.total), (2, 1, 3));
    assert_eq!(stored.output_file_id.as_deref(), Some("file-out"));
    assert_eq!(stored.metadata.as_deref(), Some(r#"{"a":"b"}"#));
    assert!(store.line_results(&id, -1, 10).await.unwrap().is_empty());
    assert!(store.running_batches(10).await.unwrap().is_empty());
    // Another project's key sees none of it.
    let other = store.create_project("other").await.unwrap().id;
    assert!(store.batch(&other, &id).await.unwrap().is_none());
    assert!(
        store
            .batches(&other, "batch_", BatchPage::After(None), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .batches(&project, "batch_", BatchPage::After(None), 10)
            .await
            .unwrap()
            .len(),
        1
    );
}

pub(super) async fn leases_taken_at_once_never_overlap(h: &Harness) {
    let store = h.open().await;
    let project = store.create_project("batches").await.unwrap().id;
    let id = batch(&store, &project, 400).await;
    let tasks: Vec<_> = (0..4)
        .map(|runner| {
            let (store, id) = (store.clone(), id.clone());
            tokio::spawn(async move {
                let mut mine = Vec::new();
                loop {
                    let owner = format!("r{runner}");
                    let leased = store
                        .lease_lines(&id, &owner, NOW, NOW + 60_000, 7)
                        .await
                        .unwrap();
                    if leased.is_empty() {
                        return mine;
                    }
                    mine.extend(seqs(&leased));
                }
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    let distinct: BTreeSet<u32> = all.iter().copied().collect();
    assert_eq!(all.len(), 400, "a line leased twice");
    assert_eq!(distinct.len(), 400);
}

pub(super) async fn cancel_and_expiry_close_the_lines_not_in_flight(h: &Harness) {
    let store = h.open().await;
    let project = store.create_project("batches").await.unwrap().id;
    let id = batch(&store, &project, 4).await;
    let leased = store
        .lease_lines(&id, "a", NOW, NOW + 1000, 1)
        .await
        .unwrap();
    assert_eq!(seqs(&leased), [0]);
    // Given back to wait (a rate limit): not leased before its time, but closed by a cancel.
    let waiting = store
        .lease_lines(&id, "a", NOW, NOW + 1000, 1)
        .await
        .unwrap();
    store
        .release_line(&id, waiting[0].seq, "a", NOW + 500)
        .await
        .unwrap();
    assert_eq!(
        seqs(
            &store
                .lease_lines(&id, "b", NOW + 100, NOW + 1000, 1)
                .await
                .unwrap()
        ),
        [2]
    );
    assert!(
        !store.cancel_batch(&id, &id, NOW + 200).await.unwrap(),
        "another project"
    );
    assert!(store.cancel_batch(&project, &id, NOW + 200).await.unwrap());
    assert!(
        !store.cancel_batch(&project, &id, NOW + 300).await.unwrap(),
        "cancelled already"
    );
    let stored = store.batch(&project, &id).await.unwrap().unwrap();
    assert_eq!(stored.status, BatchStatus::Cancelling);
    assert_eq!(stored.cancelling_at_ms, Some(NOW + 200));
    // Lines 1 and 3 closed; 0 and 2 in flight, which end as they come.
    assert_eq!((stored.completed, stored.failed), (0, 2));
    assert!(!store.begin_finishing(&id, NOW + 300, NOW).await.unwrap());
    assert!(
        store
            .end_line(&id, 0, "a", true, "out".into())
            .await
            .unwrap()
    );
    // b's lease runs out (b died): the next close takes its line.
    store
        .close_lines(&id, "batch_cancelled", NOW + 2000)
        .await
        .unwrap();
    assert!(
        !store
            .end_line(&id, 2, "b", true, "late".into())
            .await
            .unwrap()
    );
    assert!(store.begin_finishing(&id, NOW + 2000, NOW).await.unwrap());
    let stored = store.batch(&project, &id).await.unwrap().unwrap();
    // Cancelling stays so while it is finished (OpenAI's statuses go on to cancelled).
    assert_eq!(stored.status, BatchStatus::Cancelling);
    assert_eq!((stored.completed, stored.failed), (1, 3));
    let results = store.line_results(&id, -1, 10).await.unwrap();
    let codes: Vec<Option<&str>> = results.iter().map(|r| r.error_code.as_deref()).collect();
    assert_eq!(
        codes,
        [
            None,
            Some("batch_cancelled"),
            Some("batch_cancelled"),
            Some("batch_cancelled")
        ]
    );
}

pub(super) async fn a_refused_batch_keeps_no_lines_and_a_stale_validation_fails(h: &Harness) {
    let store = h.open().await;
    let project = store.create_project("batches").await.unwrap().id;
    let id = batch(&store, &project, 0).await;
    store
        .put_batch_lines(
            &id,
            vec![NewLine {
                seq: 0,
                custom_id: "x".into(),
                body: "{}".into(),
            }],
        )
        .await
        .unwrap();
    // Started already: a refusal is only for a batch validating.
    store.fail_batch(&id, "[]", NOW).await.unwrap();
    assert_eq!(
        store.batch(&project, &id).await.unwrap().unwrap().status,
        BatchStatus::InProgress
    );

    let validating = NewBatch {
        id: format!("batch_{}", uuid::Uuid::now_v7().simple()),
        project_id: project.clone(),
        key_hash: [1; 32],
        endpoint: "/v1/embeddings".into(),
        input_file_id: "file-y".into(),
        completion_window: "24h".into(),
        metadata: None,
        created_at_ms: NOW,
        expires_at_ms: NOW + 1,
        output_expires_secs: Some(3600),
    };
    store.create_batch(&validating).await.unwrap();
    let lines = vec![NewLine {
        seq: 0,
        custom_id: "y".into(),
        body: "{}".into(),
    }];
    store.put_batch_lines(&validating.id, lines).await.unwrap();
    let errors = r#"[{"code":"invalid_json_line","line":7}]"#;
    store
        .fail_batch(&validating.id, errors, NOW + 5)
        .await
        .unwrap();
    let failed = store
        .batch(&project, &validating.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(failed.status, BatchStatus::Failed);
    assert_eq!(failed.failed_at_ms, Some(NOW + 5));
    assert_eq!(failed.errors.as_deref(), Some(errors));
    assert_eq!(failed.output_expires_secs, Some(3600));
    assert_eq!((failed.total, failed.completed, failed.failed), (0, 0, 0));
    assert!(
        store
            .line_results(&validating.id, -1, 10)
            .await
            .unwrap()
            .is_empty()
    );

    let stale = NewBatch {
        id: format!("batch_{}", uuid::Uuid::now_v7().simple()),
        ..validating
    };
    store.create_batch(&stale).await.unwrap();
    assert_eq!(
        store.fail_stale_batches(NOW + 10, NOW - 1).await.unwrap(),
        0
    );
    assert_eq!(
        store.fail_stale_batches(NOW + 10, NOW + 1).await.unwrap(),
        1
    );
    let failed = store.batch(&project, &stale.id).await.unwrap().unwrap();
    assert_eq!(failed.status, BatchStatus::Failed);
    assert!(failed.errors.unwrap().contains("validation_interrupted"));
}

pub(super) async fn each_api_lists_its_own_and_only_an_ended_batch_is_deleted(h: &Harness) {
    let store = h.open().await;
    let project = store.create_project("batches").await.unwrap().id;
    let mut openai = Vec::new();
    let mut anthropic = Vec::new();
    for _ in 0..3 {
        openai.push(batch_of(&store, &project, "batch_", 1).await);
        anthropic.push(batch_of(&store, &project, "msgbatch_", 1).await);
    }
    let page = |prefix, page, limit| list(&store, &project, prefix, page, limit);
    let newest_first = |made: &[String]| made.iter().rev().cloned().collect::<Vec<_>>();
    assert_eq!(
        page("batch_", BatchPage::After(None), 10).await,
        newest_first(&openai)
    );
    assert_eq!(
        page("msgbatch_", BatchPage::After(None), 10).await,
        newest_first(&anthropic)
    );
    // After: older; before: newer, still newest first, the nearest ones when limited.
    let (first, last) = (&anthropic[0], &anthropic[2]);
    assert_eq!(
        page("msgbatch_", BatchPage::After(Some(last)), 1).await,
        [anthropic[1].clone()]
    );
    assert_eq!(
        page("msgbatch_", BatchPage::Before(first), 10).await,
        [anthropic[2].clone(), anthropic[1].clone()]
    );
    assert_eq!(
        page("msgbatch_", BatchPage::Before(first), 1).await,
        [anthropic[1].clone()]
    );

    // An operator sees both APIs' together, the newest first.
    let all = store.project_batches(&project, 4).await.unwrap();
    let all: Vec<&str> = all.iter().map(|batch| batch.id.as_str()).collect();
    assert_eq!(all.len(), 4);
    assert!(all.contains(&anthropic[2].as_str()) && all.contains(&openai[2].as_str()));
    assert!(!all.contains(&anthropic[0].as_str()) && !all.contains(&openai[0].as_str()));

    // Running, it stays; cancelled and ended, it goes (another project's key deletes nothing).
    let id = &anthropic[0];
    assert!(!store.delete_batch(&project, id).await.unwrap());
    assert!(store.cancel_batch(&project, id, NOW).await.unwrap());
    assert!(store.begin_finishing(id, NOW + 1, NOW).await.unwrap());
    let finished = Finished {
        status: BatchStatus::Cancelled,
        at_ms: NOW + 2,
        output_file_id: Some("file-out".into()),
        error_file_id: None,
        completed: 0,
        failed: 1,
        closed: 1,
    };
    assert!(store.finish_batch(id, NOW + 1, &finished).await.unwrap());
    let stored = store.batch(&project, id).await.unwrap().unwrap();
    assert_eq!((stored.failed, stored.closed), (1, 1));
    let other = store.create_project("other").await.unwrap().id;
    assert!(!store.delete_batch(&other, id).await.unwrap());
    assert!(store.delete_batch(&project, id).await.unwrap());
    assert!(store.batch(&project, id).await.unwrap().is_none());
    assert!(!store.delete_batch(&project, id).await.unwrap());
}

async fn list(
    store: &Store,
    project: &str,
    prefix: &str,
    page: BatchPage<'_>,
    limit: u32,
) -> Vec<String> {
    let batches = store.batches(project, prefix, page, limit).await.unwrap();
    batches.into_iter().map(|batch| batch.id).collect()
}
