//! Migrations: run once, and databases of older schemas keep what they hold.

use std::sync::Arc;

use uuid::Uuid;

use super::invocations::attempts;
use super::{Before, Harness};
use crate::limits::{LimitSet, Subject};
use crate::store::{
    CacheStatus, Invocation, InvocationStatus, KeyRecord, KeyScope, Migrated, Origin, Project,
    StoredResponse, TokenUsage,
};

pub(super) async fn reopening_does_not_rerun_migrations(h: &Harness) {
    let store = h.open().await;
    let known = h.known_version();
    assert_eq!(store.migrated(), Migrated { from: 0, to: known });
    store.create_project("p").await.unwrap();
    drop(store);
    let store = h.open().await;
    assert_eq!(
        store.migrated(),
        Migrated {
            from: known,
            to: known
        }
    );
    assert_eq!(store.project_count().await.unwrap(), 1);
    assert_eq!(h.schema_version().await, known);
}

/// The record both old schemas are given, and how the migrated database reads it.
const OLD_ID: &str = "0190b3a2-0000-7000-8000-000000000001";

pub(super) async fn a_v1_database_migrates_to_v2_and_keeps_its_keys_and_records(h: &Harness) {
    h.create_old_schema(Before::Limits).await;
    h.execute(&format!(
        "INSERT INTO projects (id, name, created_at) VALUES ('p1', 'old', 5);
         INSERT INTO api_keys (key_hash, prefix, project_id, created_at)
            VALUES ({}, 'gw_0123456789ab', 'p1', 6);
         INSERT INTO invocations (id, project_id, stream, status, http_status, cost_usd,
            created_at, duration_ms)
            VALUES ('{OLD_ID}', 'p1', false, 'success', 200, 0.5, 10, 1);",
        h.blob(&[7; 32])
    ))
    .await;
    let store = h.open().await;
    assert_eq!(
        store.migrated(),
        Migrated {
            from: h.version_of(Before::Limits),
            to: h.known_version()
        }
    );
    assert_eq!(
        store.find_key(&[7; 32]).await.unwrap(),
        Some(KeyRecord {
            project_id: "p1".into(),
            prefix: "gw_0123456789ab".into(),
            limits: LimitSet::default(),
            project_limits: LimitSet::default(),
            scope: KeyScope::default(),
            project_guards: Arc::from([]),
            project_tools: Arc::from([]),
        })
    );
    assert_eq!(
        store.projects().await.unwrap(),
        [Project {
            id: "p1".into(),
            name: "old".into(),
            created_at_ms: 5,
            limits: LimitSet::default(),
            guards: Vec::new(),
            tools: Vec::new(),
        }]
    );
    let id = Uuid::parse_str(OLD_ID).unwrap();
    let old = store.invocation(&id).await.unwrap().unwrap();
    assert_eq!((old.key_prefix, old.cost_usd), (None, Some(0.5)));
    assert!(old.attempts.is_empty());
    assert_eq!(
        store.spent_since(&Subject::Project("p1"), 0).await.unwrap(),
        0.5
    );
    assert_eq!(
        store
            .spent_since(&Subject::Key("gw_0123456789ab"), 0)
            .await
            .unwrap(),
        0.0
    );
}

pub(super) async fn a_v2_database_migrates_to_v3_and_keeps_its_records(h: &Harness) {
    h.create_old_schema(Before::Attempts).await;
    h.execute(&format!(
        "INSERT INTO projects (id, name, created_at) VALUES ('p1', 'old', 5);
         INSERT INTO invocations (id, project_id, stream, status, http_status, cost_usd,
            created_at, duration_ms, response, key_prefix)
            VALUES ('{OLD_ID}', 'p1', false, 'success', 200, 0.5, 10, 1, 'kept',
                    'gw_0123456789ab');"
    ))
    .await;
    let store = h.open().await;
    let before = h.version_of(Before::Attempts);
    assert_eq!(
        store.migrated(),
        Migrated {
            from: before,
            to: h.known_version()
        }
    );
    assert_eq!(h.schema_version().await, h.known_version());
    let id = Uuid::parse_str(OLD_ID).unwrap();
    let old = store.invocation(&id).await.unwrap().unwrap();
    assert_eq!(
        (
            old.project_id.as_deref(),
            old.key_prefix.as_deref(),
            old.response.as_deref(),
            old.cost_usd
        ),
        (Some("p1"), Some("gw_0123456789ab"), Some("kept"), Some(0.5))
    );
    assert!(old.attempts.is_empty());
    let new = Invocation {
        attempts: attempts(),
        ..Invocation::begun(Uuid::now_v7(), 20)
    };
    store
        .insert_invocations(std::slice::from_ref(&new))
        .unwrap();
    assert_eq!(store.invocation(&new.id).await.unwrap(), Some(new));
    assert_eq!(
        store.spent_since(&Subject::Project("p1"), 0).await.unwrap(),
        0.5
    );
}

pub(super) async fn a_v3_database_migrates_to_v4_and_gains_kept_responses(h: &Harness) {
    h.create_old_schema(Before::Responses).await;
    h.execute(&format!(
        "INSERT INTO projects (id, name, created_at) VALUES ('p1', 'old', 5);
         INSERT INTO invocations (id, project_id, stream, status, http_status, cost_usd,
            created_at, duration_ms, response, key_prefix)
            VALUES ('{OLD_ID}', 'p1', false, 'success', 200, 0.5, 10, 1, 'kept',
                    'gw_0123456789ab');"
    ))
    .await;
    let store = h.open().await;
    let before = h.version_of(Before::Responses);
    assert_eq!(
        store.migrated(),
        Migrated {
            from: before,
            to: h.known_version()
        }
    );
    assert_eq!(h.schema_version().await, h.known_version());
    let id = Uuid::parse_str(OLD_ID).unwrap();
    let old = store.invocation(&id).await.unwrap().unwrap();
    assert_eq!(
        (old.project_id.as_deref(), old.response.as_deref()),
        (Some("p1"), Some("kept"))
    );
    assert_eq!(h.count("SELECT count(*) FROM responses").await, 0);
    let response = StoredResponse {
        id: "resp_0123456789abcdef0123456789abcdef".into(),
        project_id: "p1".into(),
        invocation_id: id,
        created_at_ms: 20,
        body: "{}".into(),
        context: "[]".into(),
        parent: None,
        conversation_bytes: 2,
        origin: Origin {
            route: Some("r".into()),
            model: Some("m".into()),
        },
    };
    store.put_response(response.clone()).await.unwrap();
    assert_eq!(
        store.response("p1", &response.id).await.unwrap(),
        Some(response)
    );
}

pub(super) async fn a_v4_database_migrates_to_v5_and_its_records_gain_image_and_audio_tokens(
    h: &Harness,
) {
    h.create_old_schema(Before::MediaTokens).await;
    h.execute(&format!(
        "INSERT INTO projects (id, name, created_at) VALUES ('p1', 'old', 5);
         INSERT INTO invocations (id, project_id, stream, status, http_status, prompt_tokens,
            completion_tokens, total_tokens, reasoning_tokens, cost_usd, created_at,
            duration_ms, key_prefix)
            VALUES ('{OLD_ID}', 'p1', false, 'success', 200, 10, 2, 12, 1, 0.5, 10, 1,
                    'gw_0123456789ab');"
    ))
    .await;
    let store = h.open().await;
    let before = h.version_of(Before::MediaTokens);
    assert_eq!(
        store.migrated(),
        Migrated {
            from: before,
            to: h.known_version()
        }
    );
    assert_eq!(h.schema_version().await, h.known_version());
    // The old record has none.
    let id = Uuid::parse_str(OLD_ID).unwrap();
    let old = store.invocation(&id).await.unwrap().unwrap();
    assert_eq!(
        old.usage,
        Some(TokenUsage {
            prompt_tokens: 10,
            completion_tokens: 2,
            total_tokens: 12,
            reasoning_tokens: Some(1),
            ..TokenUsage::default()
        })
    );
    // A new one keeps them.
    let usage = TokenUsage {
        prompt_tokens: 1000,
        completion_tokens: 10,
        total_tokens: 1010,
        image_prompt_tokens: Some(258),
        audio_prompt_tokens: Some(600),
        ..TokenUsage::default()
    };
    let new = Invocation {
        project_id: Some("p1".into()),
        usage: Some(usage),
        cost_usd: Some(0.25),
        ..Invocation::begun(Uuid::now_v7(), 20)
    };
    store
        .insert_invocations(std::slice::from_ref(&new))
        .unwrap();
    assert_eq!(store.invocation(&new.id).await.unwrap(), Some(new));
}

pub(super) async fn a_v5_database_migrates_to_v6_and_projects_and_records_gain_guards(h: &Harness) {
    h.create_old_schema(Before::Guards).await;
    h.execute(&format!(
        "INSERT INTO projects (id, name, created_at, rpm) VALUES ('p1', 'old', 5, 60);
         INSERT INTO api_keys (key_hash, prefix, project_id, created_at)
            VALUES ({}, 'gw_0123456789ab', 'p1', 6);
         INSERT INTO invocations (id, project_id, stream, status, http_status, created_at,
            duration_ms) VALUES ('{OLD_ID}', 'p1', false, 'success', 200, 10, 1);",
        h.blob(&[7; 32])
    ))
    .await;
    let store = h.open().await;
    let before = h.version_of(Before::Guards);
    assert_eq!(
        store.migrated(),
        Migrated {
            from: before,
            to: h.known_version()
        }
    );
    assert_eq!(h.schema_version().await, h.known_version());
    // The old project has no guards, its key none either; its limits are kept.
    let project = store.project("p1").await.unwrap().unwrap();
    assert!(project.guards.is_empty());
    assert_eq!(project.limits.rpm, Some(60));
    let key = store.find_key(&[7; 32]).await.unwrap().unwrap();
    assert!(key.project_guards.is_empty());
    assert_eq!(key.project_limits.rpm, Some(60));
    // The old record has no guard outcomes; a new one keeps them.
    let id = Uuid::parse_str(OLD_ID).unwrap();
    assert!(
        store
            .invocation(&id)
            .await
            .unwrap()
            .unwrap()
            .guards
            .is_empty()
    );
    let new = Invocation {
        project_id: Some("p1".into()),
        status: InvocationStatus::Blocked,
        http_status: 400,
        guards: super::invocations::guard_outcomes(),
        ..Invocation::begun(Uuid::now_v7(), 20)
    };
    store
        .insert_invocations(std::slice::from_ref(&new))
        .unwrap();
    assert_eq!(store.invocation(&new.id).await.unwrap(), Some(new));
    // And the project takes guards.
    let guards = vec!["pii".to_owned(), "words".to_owned()];
    store.set_project_guards("p1", &guards).await.unwrap();
    assert_eq!(store.project("p1").await.unwrap().unwrap().guards, guards);
}

pub(super) async fn a_v6_database_migrates_to_v7_and_its_records_gain_the_cache_columns(
    h: &Harness,
) {
    h.create_old_schema(Before::Cache).await;
    h.execute(&format!(
        "INSERT INTO projects (id, name, created_at) VALUES ('p1', 'old', 5);
         INSERT INTO invocations (id, project_id, stream, status, http_status, cost_usd,
            created_at, duration_ms) VALUES ('{OLD_ID}', 'p1', false, 'success', 200, 0.5, 10, 1);"
    ))
    .await;
    let store = h.open().await;
    let before = h.version_of(Before::Cache);
    assert_eq!(
        store.migrated(),
        Migrated {
            from: before,
            to: h.known_version()
        }
    );
    assert_eq!(h.schema_version().await, h.known_version());
    // The old record was served without a cache; a new one keeps how it was.
    let id = Uuid::parse_str(OLD_ID).unwrap();
    let old = store.invocation(&id).await.unwrap().unwrap();
    assert_eq!(
        (old.cache, old.saved_cost_usd, old.cost_usd),
        (None, None, Some(0.5))
    );
    let new = Invocation {
        project_id: Some("p1".into()),
        status: InvocationStatus::Success,
        http_status: 200,
        cost_usd: Some(0.0),
        cache: Some(CacheStatus::Hit),
        saved_cost_usd: Some(0.0123),
        ..Invocation::begun(Uuid::now_v7(), 20)
    };
    store
        .insert_invocations(std::slice::from_ref(&new))
        .unwrap();
    assert_eq!(store.invocation(&new.id).await.unwrap(), Some(new));
    // A hit costs nothing: the project's spend is still the old record's.
    assert_eq!(
        store.spent_since(&Subject::Project("p1"), 0).await.unwrap(),
        0.5
    );
}

pub(super) async fn a_v7_database_migrates_to_v8_and_gains_console_sign_outs(h: &Harness) {
    h.create_old_schema(Before::SignOuts).await;
    h.execute("INSERT INTO projects (id, name, created_at) VALUES ('p1', 'old', 5);")
        .await;
    let store = h.open().await;
    let before = h.version_of(Before::SignOuts);
    assert_eq!(
        store.migrated(),
        Migrated {
            from: before,
            to: h.known_version()
        }
    );
    assert_eq!(h.schema_version().await, h.known_version());
    assert!(!store.session_signed_out(&[3; 32]).await.unwrap());
    store
        .sign_out_session(&[3; 32], crate::clock::now_ms() + 1_000)
        .await
        .unwrap();
    assert!(store.session_signed_out(&[3; 32]).await.unwrap());
    assert_eq!(store.project("p1").await.unwrap().unwrap().name, "old");
}

pub(super) async fn a_v8_database_migrates_to_v9_and_kept_responses_gain_their_route_and_model(
    h: &Harness,
) {
    h.create_old_schema(Before::ResponseOrigin).await;
    let (with_record, without) = (
        "resp_0123456789abcdef0123456789abcdef",
        "resp_fedcba9876543210fedcba9876543210",
    );
    h.execute(&format!(
        "INSERT INTO projects (id, name, created_at) VALUES ('p1', 'old', 5);
         INSERT INTO invocations (id, project_id, route, model, stream, status, http_status,
            created_at, duration_ms)
            VALUES ('{OLD_ID}', 'p1', 'openai', 'gpt-4o', false, 'success', 200, 10, 1);
         INSERT INTO responses (id, project_id, invocation_id, created_at, body, context)
            VALUES ('{with_record}', 'p1', '{OLD_ID}', 10, '{{}}', '[]'),
                   ('{without}', 'p1', '{}', 11, '{{}}', '[]');",
        Uuid::now_v7()
    ))
    .await;
    let store = h.open().await;
    let before = h.version_of(Before::ResponseOrigin);
    assert_eq!(
        store.migrated(),
        Migrated {
            from: before,
            to: h.known_version()
        }
    );
    assert_eq!(h.schema_version().await, h.known_version());
    // Filled from the record; without one, unknown.
    let origin = |route: &str, model: &str| Origin {
        route: Some(route.into()),
        model: Some(model.into()),
    };
    let kept = store.response("p1", with_record).await.unwrap().unwrap();
    assert_eq!(kept.origin, origin("openai", "gpt-4o"));
    assert_eq!(
        store
            .response_head("p1", with_record)
            .await
            .unwrap()
            .map(|head| head.origin),
        Some(origin("openai", "gpt-4o"))
    );
    let kept = store.response("p1", without).await.unwrap().unwrap();
    assert_eq!(kept.origin, Origin::default());
    assert_eq!(
        store
            .response_head("p1", without)
            .await
            .unwrap()
            .map(|head| head.origin),
        Some(Origin::default())
    );
    assert_eq!(store.response_head("p2", without).await.unwrap(), None);
}

pub(super) async fn a_v9_database_migrates_to_v10_and_its_kept_conversations_continue_whole(
    h: &Harness,
) {
    h.create_old_schema(Before::ResponseTurns).await;
    // Kept before: the whole conversation in one response's context.
    let (old, context) = (
        "resp_0123456789abcdef0123456789abcdef",
        r#"[{"role":"user","content":"héllo"},{"type":"message","role":"assistant","content":[]}]"#,
    );
    h.execute(&format!(
        "INSERT INTO projects (id, name, created_at) VALUES ('p1', 'old', 5);
         INSERT INTO responses (id, project_id, invocation_id, created_at, body, context, route,
            model)
            VALUES ('{old}', 'p1', '{}', 10, '{{}}', '{context}', 'r', 'm');",
        Uuid::now_v7()
    ))
    .await;
    let store = h.open().await;
    let before = h.version_of(Before::ResponseTurns);
    // It migrates from where it was to the last migration of both.
    assert_eq!(
        store.migrated(),
        Migrated {
            from: before,
            to: h.known_version()
        }
    );
    assert_eq!(h.schema_version().await, h.known_version());
    // It is its conversation's only turn, its size in bytes (not characters) told.
    let kept = store.response("p1", old).await.unwrap().unwrap();
    assert_eq!(
        (kept.parent, kept.conversation_bytes),
        (None, context.len() as u64)
    );
    assert_eq!(
        store.response_head("p1", old).await.unwrap(),
        Some(crate::store::ResponseHead {
            origin: Origin {
                route: Some("r".into()),
                model: Some("m".into()),
            },
            conversation_bytes: context.len() as u64,
        })
    );
    assert_eq!(
        store.conversation("p1", old).await.unwrap(),
        Some(crate::store::Conversation::Whole(vec![context.to_owned()]))
    );
}

pub(super) async fn a_v11_database_migrates_to_v12_and_projects_gain_tools(h: &Harness) {
    h.create_old_schema(Before::ProjectTools).await;
    h.execute(&format!(
        "INSERT INTO projects (id, name, created_at, guards) VALUES ('p1', 'old', 5, {});
         INSERT INTO api_keys (key_hash, prefix, project_id, created_at, tools)
            VALUES ({}, 'gw_0123456789ab', 'p1', 6, {});",
        h.list(&["pii"]),
        h.blob(&[7; 32]),
        h.list(&["calc__*"]),
    ))
    .await;
    let store = h.open().await;
    let before = h.version_of(Before::ProjectTools);
    // It migrates from where it was to the last migration of both.
    assert_eq!(
        store.migrated(),
        Migrated {
            from: before,
            to: h.known_version()
        }
    );
    assert_eq!(h.schema_version().await, h.known_version());
    // The old project may use every tool; its guards, and its key's own tools, are kept.
    let project = store.project("p1").await.unwrap().unwrap();
    assert!(project.tools.is_empty());
    assert_eq!(project.guards, ["pii"]);
    let key = store.find_key(&[7; 32]).await.unwrap().unwrap();
    assert!(key.project_tools.is_empty());
    assert_eq!(key.scope.tools, ["calc__*"]);
    assert!(key.allows_tool("calc__add") && !key.allows_tool("github__search"));
    // And the project takes tools, which its key is then held to as well.
    let tools = vec!["github__*".to_owned(), "calc__add".to_owned()];
    store.set_project_tools("p1", &tools).await.unwrap();
    assert_eq!(store.project("p1").await.unwrap().unwrap().tools, tools);
    let key = store.find_key(&[7; 32]).await.unwrap().unwrap();
    assert!(key.allows_tool("calc__add") && !key.allows_tool("calc__sub"));
}

pub(super) async fn a_v12_database_migrates_to_v13_and_its_records_gain_search_units(h: &Harness) {
    h.create_old_schema(Before::SearchUnits).await;
    h.execute(&format!(
        "INSERT INTO invocations (id, project_id, type, stream, status, http_status,
            prompt_tokens, completion_tokens, total_tokens, created_at, duration_ms)
            VALUES ('{OLD_ID}', 'p1', 'embeddings', false, 'success', 200, 7, 0, 7, 10, 1);"
    ))
    .await;
    let store = h.open().await;
    let before = h.version_of(Before::SearchUnits);
    // It migrates from where it was to the last migration of both.
    assert_eq!(
        store.migrated(),
        Migrated {
            from: before,
            to: h.known_version()
        }
    );
    assert_eq!(h.schema_version().await, h.known_version());
    // An old record has none; a new one keeps them.
    let old = store
        .invocation(&OLD_ID.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    let usage = old.usage.expect("its usage");
    assert_eq!((usage.prompt_tokens, usage.search_units), (7, None));
    let new = Invocation {
        kind: Some("rerank".into()),
        usage: Some(TokenUsage {
            search_units: Some(2),
            ..TokenUsage::default()
        }),
        ..Invocation::begun(Uuid::now_v7(), 20)
    };
    store
        .insert_invocations(std::slice::from_ref(&new))
        .unwrap();
    let kept = store.invocation(&new.id).await.unwrap().unwrap();
    assert_eq!(kept.usage.and_then(|u| u.search_units), Some(2));
}

pub(super) async fn a_v13_database_migrates_to_v14_and_its_records_gain_images(h: &Harness) {
    h.create_old_schema(Before::Images).await;
    h.execute(&format!(
        "INSERT INTO invocations (id, project_id, type, stream, status, http_status,
            prompt_tokens, completion_tokens, total_tokens, created_at, duration_ms, search_units)
            VALUES ('{OLD_ID}', 'p1', 'rerank', false, 'success', 200, 7, 0, 7, 10, 1, 1);"
    ))
    .await;
    let store = h.open().await;
    let before = h.version_of(Before::Images);
    // It migrates from where it was to the last migration of both.
    assert_eq!(
        store.migrated(),
        Migrated {
            from: before,
            to: h.known_version()
        }
    );
    assert_eq!(h.schema_version().await, h.known_version());
    // An old record has none; a new one keeps them.
    let old = store
        .invocation(&OLD_ID.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    let usage = old.usage.expect("its usage");
    assert_eq!((usage.search_units, usage.images), (Some(1), None));
    let new = Invocation {
        kind: Some("images".into()),
        usage: Some(TokenUsage {
            images: Some(3),
            ..TokenUsage::default()
        }),
        ..Invocation::begun(Uuid::now_v7(), 20)
    };
    store
        .insert_invocations(std::slice::from_ref(&new))
        .unwrap();
    let kept = store.invocation(&new.id).await.unwrap().unwrap();
    assert_eq!(kept.usage.and_then(|u| u.images), Some(3));
}

pub(super) async fn a_v14_database_migrates_to_v15_and_its_records_gain_audio_seconds(h: &Harness) {
    h.create_old_schema(Before::AudioSeconds).await;
    h.execute(&format!(
        "INSERT INTO invocations (id, project_id, type, stream, status, http_status,
            prompt_tokens, completion_tokens, total_tokens, created_at, duration_ms, images)
            VALUES ('{OLD_ID}', 'p1', 'images', false, 'success', 200, 0, 0, 0, 10, 1, 2);"
    ))
    .await;
    let store = h.open().await;
    let before = h.version_of(Before::AudioSeconds);
    // It migrates from where it was to the last migration of both.
    assert_eq!(
        store.migrated(),
        Migrated {
            from: before,
            to: h.known_version()
        }
    );
    assert_eq!(h.schema_version().await, h.known_version());
    // An old record has none; a new one keeps them.
    let old = store
        .invocation(&OLD_ID.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    let usage = old.usage.expect("its usage");
    assert_eq!((usage.images, usage.audio_seconds), (Some(2), None));
    let new = Invocation {
        kind: Some("transcription".into()),
        usage: Some(TokenUsage {
            audio_seconds: Some(61),
            ..TokenUsage::default()
        }),
        ..Invocation::begun(Uuid::now_v7(), 20)
    };
    store
        .insert_invocations(std::slice::from_ref(&new))
        .unwrap();
    let kept = store.invocation(&new.id).await.unwrap().unwrap();
    assert_eq!(kept.usage.and_then(|u| u.audio_seconds), Some(61));
}

pub(super) async fn a_v15_database_migrates_to_v16_and_its_records_gain_characters(h: &Harness) {
    h.create_old_schema(Before::Characters).await;
    h.execute(&format!(
        "INSERT INTO invocations (id, project_id, type, stream, status, http_status,
            prompt_tokens, completion_tokens, total_tokens, created_at, duration_ms,
            audio_seconds)
            VALUES ('{OLD_ID}', 'p1', 'transcription', false, 'success', 200, 0, 0, 0, 10, 1, 61);"
    ))
    .await;
    let store = h.open().await;
    let before = h.version_of(Before::Characters);
    assert_eq!(
        store.migrated(),
        Migrated {
            from: before,
            to: h.known_version()
        }
    );
    assert_eq!(h.schema_version().await, h.known_version());
    // An old record has none; a new one keeps them.
    let old = store
        .invocation(&OLD_ID.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    let usage = old.usage.expect("its usage");
    assert_eq!((usage.audio_seconds, usage.characters), (Some(61), None));
    let new = Invocation {
        kind: Some("speech".into()),
        usage: Some(TokenUsage {
            characters: Some(1234),
            ..TokenUsage::default()
        }),
        ..Invocation::begun(Uuid::now_v7(), 20)
    };
    store
        .insert_invocations(std::slice::from_ref(&new))
        .unwrap();
    let kept = store.invocation(&new.id).await.unwrap().unwrap();
    assert_eq!(kept.usage.and_then(|u| u.characters), Some(1234));
}

pub(super) async fn a_v16_database_migrates_to_v17_and_gains_admin_tokens_and_the_audit_log(
    h: &Harness,
) {
    h.create_old_schema(Before::Access).await;
    let store = h.open().await;
    let before = h.version_of(Before::Access);
    assert_eq!(
        store.migrated(),
        Migrated {
            from: before,
            to: h.known_version()
        }
    );
    assert_eq!(h.schema_version().await, h.known_version());
    assert!(store.admin_tokens().await.unwrap().is_empty());
    let filter = crate::store::AuditFilter {
        limit: 10,
        ..Default::default()
    };
    assert!(store.audit_events(&filter).await.unwrap().is_empty());
}

pub(super) async fn a_v17_database_migrates_to_v18_and_gains_users(h: &Harness) {
    h.create_old_schema(Before::Users).await;
    let store = h.open().await;
    let before = h.version_of(Before::Users);
    assert_eq!(
        store.migrated(),
        Migrated {
            from: before,
            to: h.known_version()
        }
    );
    assert_eq!(h.schema_version().await, h.known_version());
    assert!(store.user_grants(None).await.unwrap().is_empty());
}

pub(super) async fn a_v18_database_migrates_to_v19_and_gains_files(h: &Harness) {
    h.create_old_schema(Before::Files).await;
    let store = h.open().await;
    let before = h.version_of(Before::Files);
    assert_eq!(store.migrated().from, before);
    assert_eq!(h.schema_version().await, h.known_version());
    let project = store.create_project("files").await.unwrap().id;
    let upload = crate::store::NewUpload {
        id: format!("file-{}", Uuid::now_v7().simple()),
        project_id: project.clone(),
        created_at_ms: 1,
        reserved: 1,
    };
    assert!(store.begin_upload(&upload, 10).await.unwrap());
    let query = crate::store::FileQuery {
        purpose: None,
        after: None,
        limit: 10,
        newest_first: true,
        now_ms: 2,
    };
    assert!(store.files(&project, &query).await.unwrap().is_empty());
}

pub(super) async fn a_v19_database_migrates_to_v20_and_gains_batches(h: &Harness) {
    h.create_old_schema(Before::Batches).await;
    let store = h.open().await;
    let before = h.version_of(Before::Batches);
    // Batches were the last migration of both.
    assert_eq!(
        store.migrated(),
        Migrated {
            from: before,
            to: before + 1
        }
    );
    assert_eq!(h.known_version(), before + 1);
    assert_eq!(h.schema_version().await, h.known_version());
    let project = store.create_project("batches").await.unwrap().id;
    assert!(
        store
            .batches(&project, "batch_", crate::store::BatchPage::After(None), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.running_batches(10).await.unwrap().is_empty());
    // Records gained their batch and line.
    let new = Invocation {
        batch_id: Some("batch_1".into()),
        custom_id: Some("line".into()),
        ..Invocation::begun(Uuid::now_v7(), 20)
    };
    store
        .insert_invocations(std::slice::from_ref(&new))
        .unwrap();
    assert_eq!(store.invocation(&new.id).await.unwrap(), Some(new));
}
