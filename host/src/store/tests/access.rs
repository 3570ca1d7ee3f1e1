//! Personal admin tokens and the audit log, as both backends keep them: a token is found by
//! its hash only, its use noted at most once a minute, revoked by its prefix; audit events
//! read back whole, filtered and paged in both orders, refuse an UPDATE, and are deleted by
//! retention only.

use super::Harness;
use crate::access::{Grant, Role};
use crate::store::{AuditEvent, AuditFilter, NewAdminToken, Outcome};

fn new_token(grant: Grant) -> NewAdminToken {
    NewAdminToken {
        name: "ci deploys".into(),
        grant,
        created_by: "admin_token".into(),
        expires_at_ms: Some(crate::clock::now_ms() + 3_600_000),
    }
}

pub(super) async fn an_admin_token_is_found_by_its_hash_and_revoked_by_its_prefix(h: &Harness) {
    let store = h.open().await;
    let secret = crate::keys::generate_admin_token();
    let grant = Grant::new(Role::ProjectViewer, Some("proj-a")).unwrap();
    let made = store
        .create_admin_token(&secret, &new_token(grant.clone()))
        .await
        .unwrap();
    assert_eq!(made.prefix, crate::keys::key_prefix(&secret));
    assert_eq!(made.grant, grant);
    // Only the hash and the prefix are stored: the token is nowhere in the database.
    let stored = h
        .count(&format!(
            "SELECT count(*) FROM admin_tokens WHERE token_hash = '{}'",
            crate::encoding::hex(&crate::keys::hash_key(&secret))
        ))
        .await;
    assert_eq!(stored, 1);
    assert_eq!(
        h.count(&format!(
            "SELECT count(*) FROM admin_tokens WHERE token_hash = '{secret}' OR prefix = '{secret}' OR name = '{secret}'"
        ))
        .await,
        0
    );

    let now = crate::clock::now_ms();
    let found = store.use_admin_token(&secret, now).await.unwrap().unwrap();
    assert!(found.live(now));
    assert_eq!(found.grant, grant);
    assert_eq!(found.last_used_at_ms, None, "read before it was noted");
    let again = store
        .use_admin_token(&secret, now + 1_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.last_used_at_ms, Some(now), "noted once");
    let later = store
        .use_admin_token(&secret, now + 61_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        later.last_used_at_ms,
        Some(now),
        "not again within a minute"
    );
    let listed = store.admin_tokens().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].last_used_at_ms, Some(now + 61_000));
    assert!(
        store
            .use_admin_token("gwa_not-a-token", now)
            .await
            .unwrap()
            .is_none()
    );

    assert_eq!(store.revoke_admin_tokens(&made.prefix).await.unwrap(), 1);
    assert_eq!(store.revoke_admin_tokens(&made.prefix).await.unwrap(), 0);
    let revoked = store.use_admin_token(&secret, now).await.unwrap().unwrap();
    assert!(!revoked.live(now) && revoked.revoked_at_ms.is_some());

    // Expired, and a role written by hand that the gateway does not know: neither opens.
    let other = crate::keys::generate_admin_token();
    let mut expiring = new_token(Grant::Viewer);
    expiring.expires_at_ms = Some(now + 10);
    store.create_admin_token(&other, &expiring).await.unwrap();
    assert!(
        !store
            .use_admin_token(&other, now + 10)
            .await
            .unwrap()
            .unwrap()
            .live(now + 10)
    );
    h.execute("UPDATE admin_tokens SET role = 'root'").await;
    assert!(store.use_admin_token(&other, now).await.unwrap().is_none());
    assert!(store.admin_tokens().await.unwrap().is_empty());
    // A name is needed, and no control characters in it.
    let mut unnamed = new_token(Grant::Viewer);
    unnamed.name = " ".into();
    assert!(store.create_admin_token(&other, &unnamed).await.is_err());
}

fn event(at_ms: i64, action: &str, outcome: Outcome) -> AuditEvent {
    AuditEvent {
        id: uuid::Uuid::now_v7(),
        at_ms,
        actor: "token:gwa_0123456789ab".into(),
        role: "project_admin:p".into(),
        via: "api".into(),
        address: Some("127.0.0.1".into()),
        action: action.into(),
        endpoint: "PUT /admin/projects/{id}/limits".into(),
        target: Some("project:p".into()),
        before: Some(serde_json::json!({"limits": {"rpm": 5}})),
        after: Some(serde_json::json!({"limits": {"rpm": 9, "note": "ünï\u{0}"}})),
        outcome,
        status: 200,
        request_id: Some(uuid::Uuid::now_v7()),
    }
}

pub(super) async fn audit_events_read_back_filtered_and_paged_and_refuse_changes(h: &Harness) {
    let store = h.open().await;
    let mut events = Vec::new();
    for i in 0..5 {
        let outcome = if i == 3 {
            Outcome::Refused
        } else {
            Outcome::Ok
        };
        let action = if i % 2 == 0 {
            "key.create"
        } else {
            "project.limits.set"
        };
        let mut e = event(1_000 + i, action, outcome);
        if i == 4 {
            (e.address, e.target, e.before, e.after, e.request_id) = (None, None, None, None, None);
        }
        store.append_audit_event(&e).await.unwrap();
        events.push(e);
    }
    let all = |newest_first| AuditFilter {
        newest_first,
        limit: 100,
        ..AuditFilter::default()
    };
    assert_eq!(store.audit_events(&all(false)).await.unwrap(), events);
    let mut reversed = events.clone();
    reversed.reverse();
    assert_eq!(store.audit_events(&all(true)).await.unwrap(), reversed);

    // Pages of two, each after the last of the one before, in both orders.
    for newest_first in [false, true] {
        let mut read = Vec::new();
        let mut after = None;
        loop {
            let page = store
                .audit_events(&AuditFilter {
                    after,
                    limit: 2,
                    ..all(newest_first)
                })
                .await
                .unwrap();
            after = page.last().map(|e| e.id);
            let done = page.len() < 2;
            read.extend(page);
            if done {
                break;
            }
        }
        let expected = if newest_first { &reversed } else { &events };
        assert_eq!(&read, expected);
    }

    let filtered = store
        .audit_events(&AuditFilter {
            since_ms: Some(1_001),
            until_ms: Some(1_004),
            action: Some("project.limits.set".into()),
            ..all(false)
        })
        .await
        .unwrap();
    assert_eq!(filtered, vec![events[1].clone(), events[3].clone()]);
    let refused = AuditFilter {
        outcome: Some(Outcome::Refused),
        actor: Some(events[0].actor.clone()),
        ..all(false)
    };
    assert_eq!(
        store.audit_events(&refused).await.unwrap(),
        vec![events[3].clone()]
    );

    // Append-only: the database itself refuses a change to an event.
    let changed = match h
        .try_execute("UPDATE audit_events SET outcome = 'ok'")
        .await
    {
        Ok(()) => "changed".to_owned(),
        Err(message) => message,
    };
    assert!(changed.contains("append-only"), "{changed}");
    assert_eq!(store.audit_events(&refused).await.unwrap().len(), 1);

    // Retention deletes the old ones, a batch at a time, and nothing else.
    let deleted = crate::store::retention::audit_pass(&store, 1_003, 2, std::time::Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(deleted, 3);
    assert_eq!(
        store.audit_events(&all(false)).await.unwrap(),
        events[3..].to_vec()
    );
}

pub(super) async fn users_hold_the_roles_an_owner_gave_them(h: &Harness) {
    let store = h.open().await;
    let viewer = Grant::Viewer;
    let team = Grant::new(Role::ProjectAdmin, Some("p1")).unwrap();
    assert!(
        store
            .add_user_grant(" Alice@Example.com ", &viewer, "admin_token")
            .await
            .unwrap()
    );
    assert!(
        store
            .add_user_grant("alice@example.com", &team, "admin_token")
            .await
            .unwrap()
    );
    // Given twice: held once.
    assert!(
        !store
            .add_user_grant("ALICE@example.com", &viewer, "cli:ops")
            .await
            .unwrap()
    );
    store
        .add_user_grant("bob@example.com", &Grant::Owner, "cli:ops")
        .await
        .unwrap();
    let alice: Vec<Grant> = store
        .user_grants(Some("alice@EXAMPLE.com"))
        .await
        .unwrap()
        .into_iter()
        .map(|g| g.grant)
        .collect();
    assert_eq!(alice, [team.clone(), viewer.clone()]);
    let all = store.user_grants(None).await.unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(all[0].email, "alice@example.com");
    assert_eq!(all[0].created_by, "admin_token");
    assert!(
        store
            .add_user_grant("not an email", &viewer, "x")
            .await
            .is_err()
    );

    assert_eq!(
        store
            .remove_user_grants("alice@example.com", Some(&viewer))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .user_grants(Some("alice@example.com"))
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        store
            .remove_user_grants("alice@example.com", None)
            .await
            .unwrap(),
        1
    );
    assert!(
        store
            .user_grants(Some("alice@example.com"))
            .await
            .unwrap()
            .is_empty()
    );
    // A role written by hand that the gateway does not know holds nothing.
    h.execute("UPDATE users SET role = 'root'").await;
    assert!(store.user_grants(None).await.unwrap().is_empty());
}
