//! Files: an upload's reservation against its project's quota, its chunks read back in
//! order, listed in pages by one project only, deleted, and expired or abandoned ones swept.

use bytes::Bytes;
use uuid::Uuid;

use super::Harness;
use crate::store::files::STALE_UPLOAD_MS;
use crate::store::{FileQuery, FinishedUpload, NewUpload, Store};

const NOW: i64 = 1_800_000_000_000;

fn upload(project: &str, reserved: u64) -> NewUpload {
    NewUpload {
        id: format!("file-{}", Uuid::now_v7().simple()),
        project_id: project.into(),
        created_at_ms: NOW,
        reserved,
    }
}

fn finished(bytes: u64, purpose: &str) -> FinishedUpload {
    FinishedUpload {
        filename: "in.jsonl".into(),
        purpose: purpose.into(),
        bytes,
        expires_at_ms: None,
    }
}

/// Uploads `chunks` as a whole file of `project` with `purpose`; its id.
async fn whole(store: &Store, project: &str, chunks: &[&[u8]], purpose: &str) -> String {
    let bytes: usize = chunks.iter().map(|c| c.len()).sum();
    let new = upload(project, bytes as u64);
    assert!(store.begin_upload(&new, u64::MAX / 2).await.unwrap());
    for (seq, chunk) in chunks.iter().enumerate() {
        let data = Bytes::copy_from_slice(chunk);
        store
            .put_file_chunk(&new.id, seq as u32, data)
            .await
            .unwrap();
    }
    let done = store.finish_upload(&new, finished(bytes as u64, purpose));
    done.await.unwrap().unwrap().id
}

fn page(purpose: Option<&str>, after: Option<&str>, limit: u32, newest_first: bool) -> FileQuery {
    FileQuery {
        purpose: purpose.map(str::to_owned),
        after: after.map(str::to_owned),
        limit,
        newest_first,
        now_ms: NOW,
    }
}

pub(super) async fn a_file_is_read_back_chunk_by_chunk_by_its_project_only(h: &Harness) {
    let store = h.open().await;
    let project = store.create_project("files").await.unwrap().id;
    let other = store.create_project("other").await.unwrap().id;
    let new = upload(&project, 10);
    assert!(store.begin_upload(&new, 1000).await.unwrap());
    // Not whole yet: neither read nor listed.
    assert_eq!(store.file(&project, &new.id, NOW).await.unwrap(), None);
    let big = vec![0xffu8; 5];
    for (seq, chunk) in [&b"\x00\x01\n\"a"[..], &big].into_iter().enumerate() {
        let data = Bytes::copy_from_slice(chunk);
        store
            .put_file_chunk(&new.id, seq as u32, data)
            .await
            .unwrap();
    }
    let file = store
        .finish_upload(&new, finished(10, "batch"))
        .await
        .unwrap();
    let file = file.unwrap();
    assert_eq!((file.bytes, file.purpose.as_str()), (10, "batch"));
    // Another handle (replica) reads the same.
    let replica = h.open().await;
    assert_eq!(
        replica.file(&project, &new.id, NOW).await.unwrap(),
        Some(file.clone())
    );
    assert_eq!(replica.file(&other, &new.id, NOW).await.unwrap(), None);
    let mut read = Vec::new();
    for seq in 0.. {
        match replica.file_chunk(&new.id, seq).await.unwrap() {
            Some(chunk) => read.extend_from_slice(&chunk),
            None => break,
        }
    }
    assert_eq!(read, [&b"\x00\x01\n\"a"[..], &big].concat());

    // Made whole once: a second finish finds no upload.
    let again = store.finish_upload(&new, finished(10, "batch")).await;
    assert_eq!(again.unwrap(), None);
    // Another project's delete deletes nothing; its own deletes it and its chunks.
    assert!(!store.delete_file(&other, &new.id).await.unwrap());
    assert!(store.delete_file(&project, &new.id).await.unwrap());
    assert!(!store.delete_file(&project, &new.id).await.unwrap());
    assert_eq!(store.file(&project, &new.id, NOW).await.unwrap(), None);
    assert_eq!(store.file_chunk(&new.id, 0).await.unwrap(), None);
}

pub(super) async fn uploads_are_held_to_their_projects_quota_while_they_run(h: &Harness) {
    let store = h.open().await;
    let project = store.create_project("quota").await.unwrap().id;
    let other = store.create_project("other").await.unwrap().id;
    let first = upload(&project, 600);
    assert!(store.begin_upload(&first, 1000).await.unwrap());
    // The first upload's reservation counts while it runs.
    let second = upload(&project, 500);
    assert!(!store.begin_upload(&second, 1000).await.unwrap());
    // Another project's quota is its own.
    assert!(
        store
            .begin_upload(&upload(&other, 1000), 1000)
            .await
            .unwrap()
    );
    // Made whole with fewer bytes than it reserved, it holds only those.
    store
        .put_file_chunk(&first.id, 0, Bytes::from_static(b"0123456789"))
        .await
        .unwrap();
    let file = store.finish_upload(&first, finished(10, "batch")).await;
    assert!(file.unwrap().is_some());
    assert!(store.begin_upload(&second, 1000).await.unwrap());
    // An abandoned upload gives its reservation back, and is gone.
    let third = upload(&project, 491);
    assert!(!store.begin_upload(&third, 1000).await.unwrap());
    store.abandon_upload(&second.id).await.unwrap();
    assert!(store.begin_upload(&third, 1000).await.unwrap());
    let gone = store.finish_upload(&second, finished(1, "batch")).await;
    assert_eq!(gone.unwrap(), None);
    // Exactly full is allowed.
    assert!(
        store
            .begin_upload(&upload(&project, 499), 1000)
            .await
            .unwrap()
    );
    assert!(
        !store
            .begin_upload(&upload(&project, 1), 1000)
            .await
            .unwrap()
    );
}

pub(super) async fn files_are_listed_in_pages_either_way_and_by_purpose(h: &Harness) {
    let store = h.open().await;
    let project = store.create_project("list").await.unwrap().id;
    let other = store.create_project("other").await.unwrap().id;
    let mut ids = Vec::new();
    for purpose in ["batch", "user_data", "batch", "batch"] {
        ids.push(whole(&store, &project, &[b"x"], purpose).await);
    }
    whole(&store, &other, &[b"y"], "batch").await;
    // An upload still running is not listed.
    assert!(store.begin_upload(&upload(&project, 1), 100).await.unwrap());
    let newest = listed(&store, &project, page(None, None, 10, true)).await;
    assert_eq!(
        newest,
        [
            ids[3].clone(),
            ids[2].clone(),
            ids[1].clone(),
            ids[0].clone()
        ]
    );
    let next = listed(&store, &project, page(None, Some(&ids[2]), 10, true)).await;
    assert_eq!(next, [ids[1].clone(), ids[0].clone()]);
    let oldest = listed(&store, &project, page(None, None, 2, false)).await;
    assert_eq!(oldest, [ids[0].clone(), ids[1].clone()]);
    let then = listed(&store, &project, page(None, Some(&ids[1]), 2, false)).await;
    assert_eq!(then, [ids[2].clone(), ids[3].clone()]);
    let batch = listed(&store, &project, page(Some("batch"), None, 10, true)).await;
    assert_eq!(batch, [ids[3].clone(), ids[2].clone(), ids[0].clone()]);
    let none = listed(&store, &project, page(Some("vision"), None, 10, true)).await;
    assert!(none.is_empty());
}

/// The ids of the files `query` lists.
async fn listed(store: &Store, project: &str, query: FileQuery) -> Vec<String> {
    let files = store.files(project, &query).await.unwrap();
    files.into_iter().map(|f| f.id).collect()
}

pub(super) async fn expired_files_and_abandoned_uploads_are_swept(h: &Harness) {
    let store = h.open().await;
    let project = store.create_project("sweep").await.unwrap().id;
    let expiring = upload(&project, 1);
    assert!(store.begin_upload(&expiring, 100).await.unwrap());
    store
        .put_file_chunk(&expiring.id, 0, Bytes::from_static(b"e"))
        .await
        .unwrap();
    let mut done = finished(1, "batch");
    done.expires_at_ms = Some(NOW + 1000);
    store.finish_upload(&expiring, done).await.unwrap().unwrap();
    let kept = whole(&store, &project, &[b"k"], "batch").await;
    // An upload begun long ago and never made whole, and one begun now.
    let mut stale = upload(&project, 5);
    stale.created_at_ms = NOW - STALE_UPLOAD_MS - 1;
    assert!(store.begin_upload(&stale, 100).await.unwrap());
    let running = upload(&project, 5);
    assert!(store.begin_upload(&running, 100).await.unwrap());

    assert!(
        store
            .file(&project, &expiring.id, NOW)
            .await
            .unwrap()
            .is_some()
    );
    // Once expired it is read as gone, before any sweep.
    let later = NOW + 1000;
    assert_eq!(
        store.file(&project, &expiring.id, later).await.unwrap(),
        None
    );
    let query = FileQuery {
        now_ms: later,
        ..page(None, None, 10, true)
    };
    assert_eq!(store.files(&project, &query).await.unwrap().len(), 1);

    // A limit at a time.
    assert_eq!(store.delete_expired_files(later, 1).await.unwrap(), 1);
    assert_eq!(store.delete_expired_files(later, 10).await.unwrap(), 1);
    assert_eq!(store.delete_expired_files(later, 10).await.unwrap(), 0);
    assert_eq!(store.file_chunk(&expiring.id, 0).await.unwrap(), None);
    assert!(store.file(&project, &kept, later).await.unwrap().is_some());
    // The running upload is still there: its reservation still counts.
    assert!(
        !store
            .begin_upload(&upload(&project, 96), 100)
            .await
            .unwrap()
    );
    assert!(
        store
            .begin_upload(&upload(&project, 94), 100)
            .await
            .unwrap()
    );
}
