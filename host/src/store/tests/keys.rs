//! Projects, keys, their limits and scopes, and how a change reaches the caches.

use std::sync::Arc;

use super::{Harness, seen_within};
use crate::limits::LimitSet;
use crate::store::{KeyMatch, KeyRecord, KeyScope, KeySpec, LimitUpdate, Store, StoreError};

pub(super) fn limits(rpm: u32, tpm: u64, daily: f64, monthly: f64) -> LimitSet {
    LimitSet {
        rpm: Some(rpm),
        tpm: Some(tpm),
        daily_budget_usd: Some(daily),
        monthly_budget_usd: Some(monthly),
    }
}

pub(super) async fn keys_are_found_until_revoked_and_prefixes_are_literal(h: &Harness) {
    let store = h.open().await;
    let project = store.create_project("p").await.unwrap();
    store
        .insert_key(
            &project.id,
            "gw_abcdef123456",
            &[7; 32],
            &KeySpec::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        store.find_key(&[7; 32]).await.unwrap(),
        Some(KeyRecord {
            project_id: project.id.clone(),
            prefix: "gw_abcdef123456".into(),
            limits: LimitSet::default(),
            project_limits: LimitSet::default(),
            scope: KeyScope::default(),
            project_guards: Arc::from([]),
            project_tools: Arc::from([]),
        })
    );
    assert_eq!(store.revoke(&KeyMatch::of("gw_abcdef")).await.unwrap(), 1);
    assert!(store.find_key(&[7; 32]).await.unwrap().is_none());
    assert_eq!(store.revoke(&KeyMatch::of("gw_abcdef")).await.unwrap(), 0);

    store
        .insert_key(&project.id, "gw_ab%cd_ef", &[1; 32], &KeySpec::default())
        .await
        .unwrap();
    store
        .insert_key(&project.id, "gw_abXcdYef", &[2; 32], &KeySpec::default())
        .await
        .unwrap();
    assert_eq!(
        store.find_key(&[1; 32]).await.unwrap().unwrap().project_id,
        project.id
    );
    assert!(store.find_key(&[3; 32]).await.unwrap().is_none());
    assert!(matches!(
        store.insert_key("nope", "gw_x", &[4; 32], &KeySpec::default()).await,
        Err(StoreError::UnknownProject(id)) if id == "nope"
    ));

    // `%` and `_` match themselves only: the other key stays.
    assert_eq!(store.revoke(&KeyMatch::of("gw_ab%cd_")).await.unwrap(), 1);
    assert!(store.find_key(&[1; 32]).await.unwrap().is_none());
    assert!(store.find_key(&[2; 32]).await.unwrap().is_some());
    assert_eq!(store.revoke(&KeyMatch::of("gw_ab%cd_")).await.unwrap(), 0);

    assert_eq!(store.revoke(&KeyMatch::Hash([2; 32])).await.unwrap(), 1);
    assert!(store.find_key(&[2; 32]).await.unwrap().is_none());
    assert_eq!(store.revoke(&KeyMatch::Hash([2; 32])).await.unwrap(), 0);
}

pub(super) async fn project_limits_round_trip_and_partial_updates_keep_the_rest(h: &Harness) {
    let store = h.open().await;
    let first = store.create_project("first").await.unwrap();
    let second = store.create_project("second").await.unwrap();
    assert_eq!(first.limits, LimitSet::default());
    assert_eq!(store.project(&first.id).await.unwrap(), Some(first.clone()));
    assert_eq!(store.project("nope").await.unwrap(), None);
    assert_eq!(
        store.projects().await.unwrap(),
        [first.clone(), second.clone()]
    );

    let set = store
        .update_project_limits(
            &first.id,
            &LimitUpdate::replace(limits(60, 1000, 1.5, 20.0)),
        )
        .await
        .unwrap();
    assert_eq!(set, limits(60, 1000, 1.5, 20.0));
    assert_eq!(store.project(&first.id).await.unwrap().unwrap().limits, set);
    // The other project is untouched.
    assert_eq!(
        store.project(&second.id).await.unwrap().unwrap().limits,
        LimitSet::default()
    );

    let partial = LimitUpdate {
        tpm: Some(5000),
        ..LimitUpdate::default()
    };
    let now = store
        .update_project_limits(&first.id, &partial)
        .await
        .unwrap();
    assert_eq!(now, limits(60, 5000, 1.5, 20.0));

    // 0 clears.
    let clear = LimitUpdate {
        rpm: Some(0),
        daily_budget_usd: Some(0.0),
        ..LimitUpdate::default()
    };
    let expected = LimitSet {
        rpm: None,
        daily_budget_usd: None,
        ..limits(60, 5000, 1.5, 20.0)
    };
    assert_eq!(
        store
            .update_project_limits(&first.id, &clear)
            .await
            .unwrap(),
        expected
    );
    assert_eq!(
        store.project(&first.id).await.unwrap().unwrap().limits,
        expected
    );
    assert_eq!(
        h.count("SELECT count(*) FROM projects WHERE rpm IS NULL")
            .await,
        2,
        "a cleared limit is NULL, not 0"
    );
    assert!(matches!(
        store.update_project_limits("nope", &partial).await,
        Err(StoreError::UnknownProject(id)) if id == "nope"
    ));

    // Values no valid limit (SQL by hand) read as no limit.
    h.execute(&format!(
        "UPDATE projects SET rpm = -5, tpm = 0, daily_budget_usd = 'NaN',
            monthly_budget_usd = -1 WHERE id = '{}'",
        first.id
    ))
    .await;
    assert_eq!(
        store.project(&first.id).await.unwrap().unwrap().limits,
        LimitSet::default()
    );
}

pub(super) async fn key_limits_round_trip_and_name_exactly_one_live_key(h: &Harness) {
    let store = h.open().await;
    let project = store.create_project("p").await.unwrap();
    let spec = KeySpec {
        // A zero given at creation is stored as no limit.
        limits: LimitSet {
            rpm: Some(0),
            ..limits(10, 100, 1.0, 2.0)
        },
        scope: KeyScope::default(),
    };
    store
        .insert_key(&project.id, "gw_shared0000001", &[1; 32], &spec)
        .await
        .unwrap();
    store
        .insert_key(
            &project.id,
            "gw_shared0000002",
            &[2; 32],
            &KeySpec::default(),
        )
        .await
        .unwrap();
    let expected = LimitSet {
        rpm: None,
        ..limits(10, 100, 1.0, 2.0)
    };
    let limits_of = |hash: [u8; 32]| {
        let store = &store;
        async move { store.find_key(&hash).await.unwrap().unwrap().limits }
    };
    assert_eq!(limits_of([1; 32]).await, expected);

    let update = LimitUpdate {
        rpm: Some(30),
        monthly_budget_usd: Some(0.0),
        ..LimitUpdate::default()
    };
    let (prefix, now) = store
        .update_limits_of(&KeyMatch::of("gw_shared0000001"), &update)
        .await
        .unwrap();
    assert_eq!(prefix, "gw_shared0000001");
    let expected = LimitSet {
        rpm: Some(30),
        monthly_budget_usd: None,
        ..expected
    };
    assert_eq!(now, expected);
    assert_eq!(limits_of([1; 32]).await, expected);
    // The other key is untouched.
    assert_eq!(limits_of([2; 32]).await, LimitSet::default());

    // By hash (a whole key).
    let (prefix, now) = store
        .update_limits_of(&KeyMatch::Hash([2; 32]), &update)
        .await
        .unwrap();
    assert_eq!((prefix.as_str(), now.rpm), ("gw_shared0000002", Some(30)));

    // `_` in what is given matches itself only, and is shown as given.
    let error = store
        .update_limits_of(&KeyMatch::of("gw_shared"), &update)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, StoreError::AmbiguousKey { prefix, count: 2 } if prefix == "gw_shared"),
        "{error}"
    );
    let error = store
        .update_limits_of(&KeyMatch::of("gw%shared"), &update)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, StoreError::UnknownKey(shown) if shown == "gw%shared"),
        "{error}"
    );

    // Revoked keys are not live: the prefix is no longer ambiguous.
    assert_eq!(store.revoke(&KeyMatch::Hash([2; 32])).await.unwrap(), 1);
    let (prefix, _) = store
        .update_limits_of(&KeyMatch::of("gw_shared"), &update)
        .await
        .unwrap();
    assert_eq!(prefix, "gw_shared0000001");
    assert!(matches!(
        store
            .update_limits_of(&KeyMatch::Hash([2; 32]), &update)
            .await,
        Err(StoreError::UnknownKey(_))
    ));
}

pub(super) async fn errors_about_a_whole_key_name_only_its_prefix(h: &Harness) {
    let store = h.open().await;
    let project = store.create_project("p").await.unwrap();
    let key = store
        .create_key(&project.id, &KeySpec::default())
        .await
        .unwrap();
    let update = LimitUpdate {
        rpm: Some(5),
        ..LimitUpdate::default()
    };
    let (prefix, now) = store.update_key_limits(&key, &update).await.unwrap();
    assert_eq!(prefix, crate::keys::key_prefix(&key));
    assert_eq!(now.rpm, Some(5));
    assert_eq!(store.revoke_keys(&key).await.unwrap(), 1);
    let error = store.update_key_limits(&key, &update).await.unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, StoreError::UnknownKey(_)), "{text}");
    assert!(!text.contains(&key), "{text}");
    assert!(text.contains(crate::keys::key_prefix(&key)), "{text}");
}

pub(super) async fn key_scopes_and_expiry_round_trip(h: &Harness) {
    let store = h.open().await;
    let project = store.create_project("p").await.unwrap();
    let scope = KeyScope {
        routes: vec!["openai".into(), "odd \"route\"".into()],
        models: vec!["anthropic/claude-3-5-haiku".into()],
        expires_at_ms: Some(1_900_000_000_000),
        tools: vec!["github__*".into(), "calc__add".into()],
    };
    let spec = KeySpec {
        limits: LimitSet::default(),
        scope: scope.clone(),
    };
    store
        .insert_key(&project.id, "gw_scoped0000001", &[1; 32], &spec)
        .await
        .unwrap();
    store
        .insert_key(
            &project.id,
            "gw_open000000001",
            &[2; 32],
            &KeySpec::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        store.find_key(&[1; 32]).await.unwrap().unwrap().scope,
        scope
    );
    assert_eq!(
        store.find_key(&[2; 32]).await.unwrap().unwrap().scope,
        KeyScope::default()
    );
    // No scope: NULLs, not empty lists.
    assert_eq!(
        h.count(
            "SELECT count(*) FROM api_keys WHERE prefix = 'gw_open000000001'
             AND routes IS NULL AND models IS NULL AND expires_at IS NULL"
        )
        .await,
        1
    );
}

/// The rpm limit of key `[9; 32]`'s project, as `store` serves it.
async fn project_rpm(store: &Store) -> Option<u32> {
    let record = store.find_key(&[9; 32]).await.unwrap().unwrap();
    record.project_limits.rpm
}

/// Inserts key `[9; 32]` of `project_id` behind the store's back, so that no notification of
/// it can empty a cache in the middle of what follows.
async fn insert_key_behind_the_back(h: &Harness, project_id: &str) {
    h.execute(&format!(
        "INSERT INTO api_keys (key_hash, prefix, project_id, created_at)
         VALUES ({}, 'gw_0123456789ab', '{project_id}', 0)",
        h.blob(&[9; 32])
    ))
    .await;
}

pub(super) async fn a_limit_change_through_another_handle_is_seen_by_every_handle(h: &Harness) {
    let (first, second) = (h.open().await, h.open().await);
    first.wait_until_listening().await;
    second.wait_until_listening().await;
    let project = first.create_project("p").await.unwrap();
    insert_key_behind_the_back(h, &project.id).await;
    // Both cache the key (with its project's limits).
    assert_eq!(project_rpm(&first).await, None);
    assert_eq!(project_rpm(&second).await, None);
    // Cached: a change behind the store's back goes unseen (so what follows is seen through
    // invalidation, not a fresh read).
    h.execute("UPDATE projects SET rpm = 1").await;
    assert_eq!(project_rpm(&first).await, None);

    let set = LimitUpdate {
        rpm: Some(7),
        ..LimitUpdate::default()
    };
    second
        .update_project_limits(&project.id, &set)
        .await
        .unwrap();
    // At once on the handle that made it.
    assert_eq!(project_rpm(&second).await, Some(7));
    let took = seen_within(h.propagation(), "the project's new limit", || async {
        project_rpm(&first).await == Some(7)
    })
    .await;
    eprintln!("the other handle saw the limit after {took:?}");

    second.update_key_limits("gw_0123", &set).await.unwrap();
    seen_within(h.propagation(), "the key's new limit", || async {
        first.find_key(&[9; 32]).await.unwrap().unwrap().limits.rpm == Some(7)
    })
    .await;
}

pub(super) async fn a_revoke_through_another_handle_is_seen(h: &Harness) {
    let (first, second) = (h.open().await, h.open().await);
    first.wait_until_listening().await;
    let project = first.create_project("p").await.unwrap();
    insert_key_behind_the_back(h, &project.id).await;
    assert!(first.find_key(&[9; 32]).await.unwrap().is_some());

    // Cached: a change behind the store's back (no NOTIFY, no stamp) goes unseen.
    h.execute("UPDATE api_keys SET revoked_at = 1").await;
    assert!(first.find_key(&[9; 32]).await.unwrap().is_some());
    h.execute("UPDATE api_keys SET revoked_at = NULL").await;

    assert_eq!(second.revoke_keys("gw_0123").await.unwrap(), 1);
    let took = seen_within(h.propagation(), "the revocation", || async {
        first.find_key(&[9; 32]).await.unwrap().is_none()
    })
    .await;
    eprintln!("the other handle refused the key after {took:?}");
}

/// `names` as owned ids.
fn ids(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

pub(super) async fn project_guards_round_trip_in_order_and_travel_with_the_keys(h: &Harness) {
    let store = h.open().await;
    let first = store.create_project("first").await.unwrap();
    let second = store.create_project("second").await.unwrap();
    assert!(first.guards.is_empty());
    store
        .insert_key(&first.id, "gw_guarded000001", &[5; 32], &KeySpec::default())
        .await
        .unwrap();
    assert!(
        store
            .find_key(&[5; 32])
            .await
            .unwrap()
            .unwrap()
            .project_guards
            .is_empty()
    );

    // In the order given (not sorted), replacing what was there.
    let set = ids(&["words", "pii"]);
    store.set_project_guards(&first.id, &set).await.unwrap();
    let read = store.project(&first.id).await.unwrap().unwrap();
    assert_eq!(read.guards, set);
    assert_eq!(read.name, "first");
    assert_eq!(store.projects().await.unwrap()[0].guards, set);
    // The key's cached record is the project's new one at once.
    let record = store.find_key(&[5; 32]).await.unwrap().unwrap();
    assert_eq!(&record.project_guards[..], &set[..]);
    // The other project is untouched.
    assert!(
        store
            .project(&second.id)
            .await
            .unwrap()
            .unwrap()
            .guards
            .is_empty()
    );
    let replaced = ids(&["pii"]);
    store
        .set_project_guards(&first.id, &replaced)
        .await
        .unwrap();
    assert_eq!(
        &store
            .find_key(&[5; 32])
            .await
            .unwrap()
            .unwrap()
            .project_guards[..],
        &replaced[..]
    );

    // Limits and guards are changed apart: neither undoes the other.
    store
        .update_project_limits(&first.id, &LimitUpdate::replace(limits(60, 1000, 1.0, 2.0)))
        .await
        .unwrap();
    let read = store.project(&first.id).await.unwrap().unwrap();
    assert_eq!(read.guards, replaced);
    assert_eq!(read.limits, limits(60, 1000, 1.0, 2.0));

    // Cleared: none, stored as NULL (not an empty list).
    store.set_project_guards(&first.id, &[]).await.unwrap();
    assert!(
        store
            .project(&first.id)
            .await
            .unwrap()
            .unwrap()
            .guards
            .is_empty()
    );
    assert!(
        store
            .find_key(&[5; 32])
            .await
            .unwrap()
            .unwrap()
            .project_guards
            .is_empty()
    );
    assert_eq!(
        h.count("SELECT count(*) FROM projects WHERE guards IS NULL")
            .await,
        2
    );

    // Refused: an unknown project, ids the store would not keep, an id twice.
    assert!(matches!(
        store.set_project_guards("nope", &ids(&["pii"])).await,
        Err(StoreError::UnknownProject(id)) if id == "nope"
    ));
    for refused in [
        ids(&["pii", "pii"]),
        ids(&["pi\ni"]),
        ids(&[""]),
        vec!["g".repeat(300)],
    ] {
        assert!(
            matches!(
                store.set_project_guards(&first.id, &refused).await,
                Err(StoreError::Invalid {
                    field: "guards",
                    ..
                })
            ),
            "{refused:?}"
        );
    }
    assert!(
        store
            .project(&first.id)
            .await
            .unwrap()
            .unwrap()
            .guards
            .is_empty()
    );
}

/// The guards of key `[9; 32]`'s project, as `store` serves them.
async fn project_guards(store: &Store) -> Vec<String> {
    let record = store.find_key(&[9; 32]).await.unwrap().unwrap();
    record.project_guards.to_vec()
}

pub(super) async fn a_guards_change_through_another_handle_is_seen_by_every_handle(h: &Harness) {
    let (first, second) = (h.open().await, h.open().await);
    first.wait_until_listening().await;
    second.wait_until_listening().await;
    let project = first.create_project("p").await.unwrap();
    insert_key_behind_the_back(h, &project.id).await;
    assert!(project_guards(&first).await.is_empty());
    assert!(project_guards(&second).await.is_empty());
    // Cached: a change behind the store's back goes unseen (so what follows is seen through
    // invalidation, not a fresh read).
    h.execute(&format!("UPDATE projects SET guards = {}", h.list(&["x"])))
        .await;
    assert!(project_guards(&first).await.is_empty());

    let set = ids(&["pii", "words"]);
    second.set_project_guards(&project.id, &set).await.unwrap();
    // At once on the handle that made it.
    assert_eq!(project_guards(&second).await, set);
    let took = seen_within(h.propagation(), "the project's new guards", || async {
        project_guards(&first).await == set
    })
    .await;
    eprintln!("the other handle saw the guards after {took:?}");

    second.set_project_guards(&project.id, &[]).await.unwrap();
    seen_within(h.propagation(), "the project's cleared guards", || async {
        project_guards(&first).await.is_empty()
    })
    .await;
}

pub(super) async fn project_tools_round_trip_and_travel_with_the_keys(h: &Harness) {
    let store = h.open().await;
    let first = store.create_project("first").await.unwrap();
    let second = store.create_project("second").await.unwrap();
    assert!(first.tools.is_empty());
    let scoped = KeySpec {
        scope: KeyScope {
            tools: ids(&["github__*", "fs__read"]),
            ..KeyScope::default()
        },
        ..KeySpec::default()
    };
    store
        .insert_key(&first.id, "gw_tooled0000001", &[6; 32], &scoped)
        .await
        .unwrap();
    let record = store.find_key(&[6; 32]).await.unwrap().unwrap();
    assert!(record.project_tools.is_empty());
    // No project tools: the key's own decide.
    assert!(record.allows_tool("github__search"));
    assert!(record.allows_tool("fs__read"));
    assert!(!record.allows_tool("calc__add"));

    // Stored in the order given, replacing what was there; the key's cached record is the
    // project's new one at once, and the key is held to both.
    let set = ids(&["github__*", "calc__add"]);
    store.set_project_tools(&first.id, &set).await.unwrap();
    let read = store.project(&first.id).await.unwrap().unwrap();
    assert_eq!((read.tools, read.name), (set.clone(), "first".to_owned()));
    assert_eq!(store.projects().await.unwrap()[0].tools, set);
    let record = store.find_key(&[6; 32]).await.unwrap().unwrap();
    assert_eq!(&record.project_tools[..], &set[..]);
    assert_eq!(record.scope.tools, ids(&["github__*", "fs__read"]));
    assert!(record.allows_tool("github__search"));
    assert!(
        !record.allows_tool("fs__read"),
        "the project's tools leave it out"
    );
    assert!(
        !record.allows_tool("calc__add"),
        "the key's own leave it out"
    );
    // The other project is untouched.
    assert!(
        store
            .project(&second.id)
            .await
            .unwrap()
            .unwrap()
            .tools
            .is_empty()
    );

    // Limits, guards and tools are changed apart: none undoes another.
    store
        .set_project_guards(&first.id, &ids(&["pii"]))
        .await
        .unwrap();
    store
        .update_project_limits(&first.id, &LimitUpdate::replace(limits(60, 1000, 1.0, 2.0)))
        .await
        .unwrap();
    let read = store.project(&first.id).await.unwrap().unwrap();
    assert_eq!(
        (read.tools, read.guards, read.limits),
        (set.clone(), ids(&["pii"]), limits(60, 1000, 1.0, 2.0))
    );
    let record = store.find_key(&[6; 32]).await.unwrap().unwrap();
    assert_eq!(
        (&record.project_tools[..], &record.project_guards[..]),
        (&set[..], &ids(&["pii"])[..])
    );

    // Refused: an unknown project, globs the store would not keep, an empty one, one twice;
    // nothing changes.
    assert!(matches!(
        store.set_project_tools("nope", &ids(&["calc__*"])).await,
        Err(StoreError::UnknownProject(id)) if id == "nope"
    ));
    for refused in [
        ids(&["calc__*", "calc__*"]),
        ids(&["calc\n__*"]),
        ids(&[""]),
        vec![format!("calc__{}", "x".repeat(300))],
    ] {
        assert!(
            matches!(
                store.set_project_tools(&first.id, &refused).await,
                Err(StoreError::Invalid { field: "tools", .. })
            ),
            "{refused:?}"
        );
    }
    assert_eq!(store.project(&first.id).await.unwrap().unwrap().tools, set);

    // Cleared: all of them again, stored as NULL (not an empty list); the guards stay.
    store.set_project_tools(&first.id, &[]).await.unwrap();
    let read = store.project(&first.id).await.unwrap().unwrap();
    assert!(read.tools.is_empty());
    assert_eq!(read.guards, ids(&["pii"]));
    let record = store.find_key(&[6; 32]).await.unwrap().unwrap();
    assert!(record.project_tools.is_empty());
    assert!(record.allows_tool("fs__read"));
    assert_eq!(
        h.count("SELECT count(*) FROM projects WHERE tools IS NULL")
            .await,
        2
    );
}

/// The tools of key `[9; 32]`'s project, as `store` serves them.
async fn project_tools(store: &Store) -> Vec<String> {
    let record = store.find_key(&[9; 32]).await.unwrap().unwrap();
    record.project_tools.to_vec()
}

pub(super) async fn a_tools_change_through_another_handle_is_seen_by_every_handle(h: &Harness) {
    let (first, second) = (h.open().await, h.open().await);
    first.wait_until_listening().await;
    second.wait_until_listening().await;
    let project = first.create_project("p").await.unwrap();
    insert_key_behind_the_back(h, &project.id).await;
    assert!(project_tools(&first).await.is_empty());
    assert!(project_tools(&second).await.is_empty());
    // Cached: a change behind the store's back goes unseen (so what follows is seen through
    // invalidation, not a fresh read).
    h.execute(&format!(
        "UPDATE projects SET tools = {}",
        h.list(&["x__*"])
    ))
    .await;
    assert!(project_tools(&first).await.is_empty());

    let set = ids(&["calc__*", "github__search"]);
    second.set_project_tools(&project.id, &set).await.unwrap();
    // At once on the handle that made it.
    assert_eq!(project_tools(&second).await, set);
    let took = seen_within(h.propagation(), "the project's new tools", || async {
        project_tools(&first).await == set
    })
    .await;
    eprintln!("the other handle saw the tools after {took:?}");
    let record = first.find_key(&[9; 32]).await.unwrap().unwrap();
    assert!(record.allows_tool("calc__add") && !record.allows_tool("fs__read"));

    second.set_project_tools(&project.id, &[]).await.unwrap();
    seen_within(h.propagation(), "the project's cleared tools", || async {
        project_tools(&first).await.is_empty()
    })
    .await;
}

/// A key's record with `project` as its project's tools and `key` as its own.
fn tooled(project: &[&str], key: &[&str]) -> KeyRecord {
    KeyRecord {
        project_id: "p".into(),
        prefix: "gw_0123456789ab".into(),
        limits: LimitSet::default(),
        project_limits: LimitSet::default(),
        scope: KeyScope {
            tools: ids(key),
            ..KeyScope::default()
        },
        project_guards: Arc::from([]),
        project_tools: Arc::from(ids(project)),
    }
}

#[test]
fn a_tool_is_allowed_when_the_project_and_the_key_both_allow_it() {
    // Neither names tools: every tool.
    assert!(tooled(&[], &[]).allows_tool("any__thing"));
    // Either alone decides.
    let project_only = tooled(&["github__*"], &[]);
    assert!(project_only.allows_tool("github__search"));
    assert!(!project_only.allows_tool("calc__add"));
    let key_only = tooled(&[], &["calc__add"]);
    assert!(key_only.allows_tool("calc__add"));
    assert!(!key_only.allows_tool("calc__sub"));
    // Both: what both allow, not what either does.
    let both = tooled(&["github__*", "calc__*"], &["calc__add", "fs__*"]);
    assert!(both.allows_tool("calc__add"));
    assert!(!both.allows_tool("calc__sub"), "the key leaves it out");
    assert!(!both.allows_tool("fs__read"), "the project leaves it out");
    assert!(!both.allows_tool("github__search"), "the key leaves it out");
    // The key's scope alone still says what the key's own globs allow.
    assert!(both.scope.allows_tool("fs__read"));
}

pub(super) async fn a_projects_keys_are_listed_newest_first_revoked_ones_too(h: &Harness) {
    let store = h.open().await;
    let project = store.create_project("p").await.unwrap();
    let other = store.create_project("other").await.unwrap();
    let scoped = KeySpec {
        limits: limits(5, 100, 1.0, 2.0),
        scope: KeyScope {
            routes: vec!["openai".into()],
            models: vec![],
            expires_at_ms: Some(1_900_000_000_000),
            tools: vec![],
        },
    };
    let first = store
        .create_key(&project.id, &KeySpec::default())
        .await
        .unwrap();
    // Keys made in one millisecond are still told apart (by prefix), and listed once each.
    std::thread::sleep(std::time::Duration::from_millis(2));
    let second = store.create_key(&project.id, &scoped).await.unwrap();
    store
        .create_key(&other.id, &KeySpec::default())
        .await
        .unwrap();
    store
        .revoke_keys(crate::keys::key_prefix(&first))
        .await
        .unwrap();

    let keys = store.project_keys(&project.id).await.unwrap();
    let prefixes: Vec<&str> = keys.iter().map(|key| key.prefix.as_str()).collect();
    assert_eq!(
        prefixes,
        [
            crate::keys::key_prefix(&second),
            crate::keys::key_prefix(&first)
        ]
    );
    assert_eq!(keys[0].limits, scoped.limits);
    assert_eq!(keys[0].scope, scoped.scope);
    assert_eq!(keys[0].revoked_at_ms, None);
    assert!(keys[1].revoked_at_ms.is_some());
    assert!(keys[0].created_at_ms >= keys[1].created_at_ms);
    assert!(store.project_keys("nope").await.unwrap().is_empty());
}
