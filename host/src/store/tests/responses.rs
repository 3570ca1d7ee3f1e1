//! The Responses API's kept answers: round trips, one project's only, replaced, deleted, and
//! deleted by retention.

use std::time::Duration;

use uuid::Uuid;

use super::Harness;
use crate::store::retention::{Pass, pass};
use crate::store::{Conversation, Invocation, Origin, ResponseHead, Store, StoredResponse};

/// A kept response of `project`, created at `created_at_ms`, with a new id.
fn kept(project: &str, created_at_ms: i64) -> StoredResponse {
    let id = format!("resp_{}", Uuid::now_v7().simple());
    let context = r#"[{"role":"user","content":"hi"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hello"}]}]"#;
    StoredResponse {
        body: format!(r#"{{"id":"{id}","object":"response","status":"completed","output":[]}}"#),
        context: context.into(),
        parent: None,
        conversation_bytes: context.len() as u64,
        id,
        project_id: project.into(),
        invocation_id: Uuid::now_v7(),
        created_at_ms,
        origin: Origin {
            route: Some("openai".into()),
            model: Some("gpt-4o-mini".into()),
        },
    }
}

/// Which of `responses` are kept (as `project_id`'s), in their order.
async fn found(store: &Store, responses: &[&StoredResponse]) -> Vec<bool> {
    let mut found = Vec::new();
    for response in responses {
        let read = store.response(&response.project_id, &response.id).await;
        found.push(read.unwrap().is_some());
    }
    found
}

pub(super) async fn a_kept_response_is_read_back_by_its_project_only(h: &Harness) {
    let store = h.open().await;
    let mine = kept("p1", 1_700_000_000_123);
    store.put_response(mine.clone()).await.unwrap();
    assert_eq!(
        store.response("p1", &mine.id).await.unwrap(),
        Some(mine.clone())
    );
    // Another handle (another process or replica) reads it as well.
    let other = h.open().await;
    assert_eq!(
        other.response("p1", &mine.id).await.unwrap(),
        Some(mine.clone())
    );

    // What it was made with and its conversation's size, read alone.
    assert_eq!(
        store.response_head("p1", &mine.id).await.unwrap(),
        Some(ResponseHead {
            origin: mine.origin.clone(),
            conversation_bytes: mine.conversation_bytes
        })
    );
    assert_eq!(store.response_head("p2", &mine.id).await.unwrap(), None);

    // Another project's, an unknown id and the id in another case are absent alike.
    assert_eq!(store.response("p2", &mine.id).await.unwrap(), None);
    assert_eq!(store.response("", &mine.id).await.unwrap(), None);
    assert_eq!(
        store
            .response("p1", &format!("resp_{}", Uuid::now_v7().simple()))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store.response("p1", &mine.id.to_uppercase()).await.unwrap(),
        None
    );
    // What no stored id can be (SQL's wildcards, NUL) finds nothing, and is no error.
    for id in ["%", "resp_%", "_", "resp\0", "' OR 1=1 --"] {
        assert_eq!(store.response("p1", id).await.unwrap(), None, "{id:?}");
        assert_eq!(store.response_head("p1", id).await.unwrap(), None, "{id:?}");
        assert_eq!(store.conversation("p1", id).await.unwrap(), None, "{id:?}");
        assert!(!store.delete_response("p1", id).await.unwrap(), "{id:?}");
    }
    assert_eq!(store.response("p1\0", &mine.id).await.unwrap(), None);
    assert_eq!(h.count("SELECT count(*) FROM responses").await, 1);
    assert_eq!(
        h.text(&format!(
            "SELECT invocation_id FROM responses WHERE id = '{}'",
            mine.id
        ))
        .await,
        Some(mine.invocation_id.to_string())
    );
}

pub(super) async fn unicode_and_large_bodies_round_trip_exactly(h: &Harness) {
    let store = h.open().await;
    let text = "héllo 世界 🦀 שָׁלוֹם e\u{301} \u{FEFF}\u{10FFFF} \"quoted\" back\\slash\nnew\tline \
                \\u0000 escaped";
    let item = serde_json::json!({
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    });
    // A few hundred KB each: a long conversation continued.
    let items: Vec<_> = (0..1_500).map(|_| item.clone()).collect();
    let context = serde_json::to_string(&items).unwrap();
    assert!(context.len() > 200_000, "{}", context.len());
    let mut response = kept("projét ✓", 42);
    response.body = serde_json::json!({
        "id": response.id,
        "object": "response",
        "output": items[..1_000],
        "output_text": text.repeat(2_000),
    })
    .to_string();
    response.context = context;
    assert!(response.body.len() > 300_000, "{}", response.body.len());
    store.put_response(response.clone()).await.unwrap();
    let read = store
        .response("projét ✓", &response.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.body.len(), response.body.len());
    assert_eq!(read, response);
    assert_eq!(
        store.response("projet ✓", &response.id).await.unwrap(),
        None
    );
}

pub(super) async fn putting_an_id_again_replaces_what_it_keeps(h: &Harness) {
    let store = h.open().await;
    let first = kept("p1", 1_000);
    let neighbour = kept("p1", 1_000);
    store.put_response(first.clone()).await.unwrap();
    store.put_response(neighbour.clone()).await.unwrap();
    // A retried write of the same: harmless.
    store.put_response(first.clone()).await.unwrap();
    assert_eq!(
        store.response("p1", &first.id).await.unwrap(),
        Some(first.clone())
    );
    let replaced = StoredResponse {
        invocation_id: Uuid::now_v7(),
        created_at_ms: 2_000,
        body: r#"{"status":"incomplete"}"#.into(),
        context: "[]".into(),
        origin: Origin {
            route: Some("fallback".into()),
            model: Some("other".into()),
        },
        ..first.clone()
    };
    store.put_response(replaced.clone()).await.unwrap();
    assert_eq!(
        store.response("p1", &first.id).await.unwrap(),
        Some(replaced.clone())
    );
    assert_eq!(
        store.response("p1", &neighbour.id).await.unwrap(),
        Some(neighbour)
    );
    assert_eq!(h.count("SELECT count(*) FROM responses").await, 2);
    // Replaced whole: its new time is the one retention goes by.
    assert_eq!(store.delete_responses_before(1_500, 10).await.unwrap(), 1);
    assert_eq!(
        store.response("p1", &first.id).await.unwrap(),
        Some(replaced)
    );
}

pub(super) async fn a_response_is_deleted_once_and_only_by_its_project(h: &Harness) {
    let store = h.open().await;
    let mine = kept("p1", 1_000);
    let kept_too = kept("p1", 1_000);
    store.put_response(mine.clone()).await.unwrap();
    store.put_response(kept_too.clone()).await.unwrap();

    // Another project's delete finds nothing, and leaves the response.
    assert!(!store.delete_response("p2", &mine.id).await.unwrap());
    assert_eq!(
        h.count(&format!(
            "SELECT count(*) FROM responses WHERE id = '{}'",
            mine.id
        ))
        .await,
        1
    );
    assert_eq!(
        store.response("p1", &mine.id).await.unwrap(),
        Some(mine.clone())
    );

    assert!(store.delete_response("p1", &mine.id).await.unwrap());
    assert!(!store.delete_response("p1", &mine.id).await.unwrap());
    assert_eq!(store.response("p1", &mine.id).await.unwrap(), None);
    // Through another handle too.
    assert_eq!(h.open().await.response("p1", &mine.id).await.unwrap(), None);
    assert_eq!(
        store.response("p1", &kept_too.id).await.unwrap(),
        Some(kept_too)
    );
    assert_eq!(h.count("SELECT count(*) FROM responses").await, 1);

    // Deleted, it may be kept again (a retried write after a delete).
    store.put_response(mine.clone()).await.unwrap();
    assert_eq!(store.response("p1", &mine.id).await.unwrap(), Some(mine));
}

pub(super) async fn responses_before_a_cutoff_are_deleted_a_limit_at_a_time(h: &Harness) {
    let store = h.open().await;
    let cutoff = 1_700_000_000_000;
    // Of several projects: retention goes by age alone.
    let old: Vec<_> = (0..5)
        .map(|i| kept(if i % 2 == 0 { "p1" } else { "p2" }, cutoff - 1 - i * 1_000))
        .collect();
    // Made exactly at the cutoff is not older than it.
    let at_cutoff = kept("p1", cutoff);
    let new = kept("p2", cutoff + 1);
    for response in old.iter().chain([&at_cutoff, &new]) {
        store.put_response(response.clone()).await.unwrap();
    }
    assert_eq!(store.delete_responses_before(cutoff, 3).await.unwrap(), 3);
    assert_eq!(store.delete_responses_before(cutoff, 3).await.unwrap(), 2);
    assert_eq!(store.delete_responses_before(cutoff, 3).await.unwrap(), 0);
    let all: Vec<_> = old.iter().chain([&at_cutoff, &new]).collect();
    assert_eq!(
        found(&store, &all).await,
        [false, false, false, false, false, true, true]
    );
    assert_eq!(
        store.delete_responses_before(cutoff + 2, 0).await.unwrap(),
        0
    );
    assert_eq!(
        store.delete_responses_before(i64::MAX, 10).await.unwrap(),
        2
    );
    assert_eq!(h.count("SELECT count(*) FROM responses").await, 0);
}

pub(super) async fn a_retention_pass_deletes_old_responses_with_old_records(h: &Harness) {
    let store = h.open().await;
    let cutoff = 1_700_000_000_000;
    let old: Vec<_> = (0..12).map(|i| kept("p1", cutoff - 1 - i)).collect();
    let young: Vec<_> = [cutoff, cutoff + 1, i64::MAX]
        .into_iter()
        .map(|at| kept("p2", at))
        .collect();
    for response in old.iter().chain(&young) {
        store.put_response(response.clone()).await.unwrap();
    }
    let records: Vec<_> = (0..25)
        .map(|i| Invocation::begun(Uuid::now_v7(), cutoff - 1 - i))
        .chain([Invocation::begun(Uuid::now_v7(), cutoff)])
        .collect();
    store.insert_invocations(&records).unwrap();

    // Rounds of at most 10 of each: 10 and 10, 10 and 2 (the responses' end), 5 (the
    // records').
    let done = pass(&store, cutoff, 10, Duration::ZERO).await.unwrap();
    assert_eq!(
        done,
        Pass {
            deleted: 25,
            responses: 12,
            batches: 3
        }
    );
    let all: Vec<_> = old.iter().chain(&young).collect();
    let mut expected = vec![false; old.len()];
    expected.extend([true; 3]);
    assert_eq!(found(&store, &all).await, expected);
    assert_eq!(store.stored_ids().await, [records[25].id]);

    // Nothing left: one round that finds nothing of either.
    let again = pass(&store, cutoff, 10, Duration::ZERO).await.unwrap();
    assert_eq!(
        again,
        Pass {
            deleted: 0,
            responses: 0,
            batches: 1
        }
    );

    // Only responses old: the records' end is seen in the first round.
    let older: Vec<_> = (0..20).map(|i| kept("p3", 10 + i)).collect();
    for response in &older {
        store.put_response(response.clone()).await.unwrap();
    }
    let done = pass(&store, 100, 10, Duration::ZERO).await.unwrap();
    assert_eq!(
        done,
        Pass {
            deleted: 0,
            responses: 20,
            batches: 3
        }
    );
    assert_eq!(h.count("SELECT count(*) FROM responses").await, 3);
}

/// A turn of `parent`'s conversation: its own items only.
fn continuing(parent: &StoredResponse, context: &str) -> StoredResponse {
    StoredResponse {
        context: context.into(),
        parent: Some(parent.id.clone()),
        conversation_bytes: parent.conversation_bytes + context.len() as u64,
        ..kept(&parent.project_id, parent.created_at_ms + 1)
    }
}

pub(super) async fn a_conversation_is_read_through_its_parents_and_a_deleted_one_breaks_it(
    h: &Harness,
) {
    let store = h.open().await;
    let first = kept("p1", 1_000);
    let second = continuing(&first, r#"[{"role":"user","content":"two"}]"#);
    let third = continuing(&second, r#"[{"role":"user","content":"three"}]"#);
    // Another branch from the same turn: each continuation keeps its own turn only.
    let branch = continuing(&first, r#"[{"role":"user","content":"other"}]"#);
    for response in [&first, &second, &third, &branch] {
        store.put_response(response.clone()).await.unwrap();
    }
    let turns = |rs: &[&StoredResponse]| {
        Some(Conversation::Whole(
            rs.iter().map(|r| r.context.clone()).collect(),
        ))
    };
    assert_eq!(
        store.conversation("p1", &third.id).await.unwrap(),
        turns(&[&first, &second, &third])
    );
    assert_eq!(
        store.conversation("p1", &branch.id).await.unwrap(),
        turns(&[&first, &branch])
    );
    assert_eq!(
        store.conversation("p1", &first.id).await.unwrap(),
        turns(&[&first])
    );
    // Read through another handle too; another project reads none of it.
    assert_eq!(
        h.open().await.conversation("p1", &third.id).await.unwrap(),
        turns(&[&first, &second, &third])
    );
    assert_eq!(store.conversation("p2", &third.id).await.unwrap(), None);
    let head = store.response_head("p1", &third.id).await.unwrap().unwrap();
    let whole: usize = [&first, &second, &third]
        .iter()
        .map(|r| r.context.len())
        .sum();
    assert_eq!(head.conversation_bytes, whole as u64);

    // A deleted turn leaves the later ones readable, their conversation broken at it.
    assert!(store.delete_response("p1", &second.id).await.unwrap());
    assert_eq!(
        store.response("p1", &third.id).await.unwrap(),
        Some(third.clone())
    );
    assert_eq!(
        store.conversation("p1", &third.id).await.unwrap(),
        Some(Conversation::Broken {
            deleted: second.id.clone()
        })
    );
    assert_eq!(
        store.conversation("p1", &branch.id).await.unwrap(),
        turns(&[&first, &branch])
    );
    // The first turn gone by retention breaks the branch too.
    assert_eq!(store.delete_responses_before(1_001, 10).await.unwrap(), 1);
    assert_eq!(
        store.conversation("p1", &branch.id).await.unwrap(),
        Some(Conversation::Broken {
            deleted: first.id.clone()
        })
    );
}
