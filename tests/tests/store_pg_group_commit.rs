//! The PostgreSQL store writes operation records and idempotency completions through a writer
//! that commits everything queued with one statement: concurrent writes share a statement, yet
//! each caller learns exactly what its own write did, a key is completed once however many
//! completions race in one batch, and one write the server refuses fails alone. Reads of
//! provenance sources are batched the same way: concurrent reads of many sessions share one
//! statement, and each caller gets its own session's sources (a source that no longer parses
//! fails its own session's read only).

#![cfg(feature = "postgres")]

mod store_support;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::json;
use toolguard::Status;
use toolguard::postgres::{PgConfig, PgStore};
use toolguard::provenance::{ProvenanceStore, Source};
use toolguard::store::{
    IdempotencyStore, OperationRecord, OperationState, OperationStore, RecordState, Reservation,
    ScopedKey, StoredOutcome,
};

const TASKS: usize = 64;

async fn store(test: &str) -> Option<Arc<PgStore>> {
    let url = store_support::pg_url(test)?;
    let config = PgConfig::new(url)
        .schema(store_support::unique(test))
        .pool_size(4);
    Some(Arc::new(
        PgStore::connect(&config).await.expect("connect postgres"),
    ))
}

fn key(n: usize) -> ScopedKey {
    ScopedKey {
        tenant: "acme".into(),
        subject: "alice".into(),
        tool: "transfer".into(),
        key: format!("key-{n}").into(),
    }
}

fn outcome(n: usize) -> StoredOutcome {
    StoredOutcome {
        status: Status::Ok,
        reason: None,
        message: None,
        output: Some(json!({ "n": n })),
        approval: None,
        operation_id: Some(format!("op-{n}").into()),
    }
}

fn operation(id: &str, state: OperationState, n: usize) -> OperationRecord {
    OperationRecord {
        id: id.into(),
        tenant: "acme".into(),
        subject: "alice".into(),
        tool: "transfer".into(),
        call_id: format!("call-{n}"),
        state,
        outcome: None,
        arguments: Arc::new(json!({ "n": n })),
        idempotency: None,
        approval_id: None,
        updated_at_ms: n as u64,
    }
}

async fn reserve(store: &PgStore, n: usize) -> String {
    let now = SystemTime::now();
    let hour = Duration::from_secs(3600);
    match store
        .reserve(&key(n), "digest", None, hour, hour, now)
        .await
    {
        Ok(Reservation::Reserved { owner }) => owner,
        other => panic!("key {n} was free: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_each_see_their_own_writes() {
    let Some(store) = store("group_commit_calls").await else {
        return;
    };
    let mut tasks = Vec::new();
    for n in 0..TASKS {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let owner = reserve(&store, n).await;
            let id = format!("op-{n}");
            store
                .put(operation(&id, OperationState::Executing, n))
                .await
                .expect("put");
            let hour = Duration::from_secs(3600);
            let now = SystemTime::now();
            let done = store.complete(&key(n), &owner, outcome(n), hour, now).await;
            assert!(done.expect("complete"), "the owner completes key {n}");
            // A stale owner token completes nothing.
            let again = store
                .complete(&key(n), "stale", outcome(n), hour, now)
                .await;
            assert!(!again.expect("complete"), "key {n} is already done");
            let mut last = operation(&id, OperationState::Ok, n);
            last.outcome = Some(outcome(n));
            store.put(last.clone()).await.expect("put");
            (n, last)
        }));
    }
    for task in tasks {
        let (n, last) = task.await.expect("task");
        let now = SystemTime::now();
        let record = IdempotencyStore::get(&*store, &key(n), now)
            .await
            .expect("get")
            .expect("record");
        assert_eq!(
            record.state,
            RecordState::Done {
                outcome: outcome(n)
            },
            "key {n}"
        );
        let stored = OperationStore::get(&*store, &last.id).await.expect("get");
        assert_eq!(stored, Some(last), "operation {n} holds its last record");
    }
    let _ = store.drop_schema().await;
}

/// A call's final operation record and its key's completion, written together: concurrent
/// calls each find both written, and a stale owner completes nothing while its record is still
/// written; with another operation store the record goes there, not into PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_takes_the_final_record_with_it() {
    let Some(store) = store("group_commit_with_record").await else {
        return;
    };
    let hour = Duration::from_secs(3600);
    let mut tasks = Vec::new();
    for n in 0..TASKS {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let owner = reserve(&store, n).await;
            let id = format!("op-{n}");
            let mut last = operation(&id, OperationState::Ok, n);
            last.outcome = Some(outcome(n));
            let now = SystemTime::now();
            let (written, done) = store
                .complete_with_record(
                    &key(n),
                    &owner,
                    outcome(n),
                    hour,
                    now,
                    last.clone(),
                    &*store,
                )
                .await;
            written.expect("record");
            assert!(done.expect("complete"), "the owner completes key {n}");
            (n, last)
        }));
    }
    for task in tasks {
        let (n, last) = task.await.expect("task");
        let record = IdempotencyStore::get(&*store, &key(n), SystemTime::now())
            .await
            .expect("get")
            .expect("record");
        let RecordState::Done { outcome: stored } = record.state else {
            panic!("key {n} holds its outcome: {record:?}");
        };
        assert_eq!(stored, outcome(n));
        let op = OperationStore::get(&*store, &last.id).await.expect("get");
        assert_eq!(op, Some(last), "operation {n} holds its final record");
    }

    // A stale owner: nothing completed, the record still written.
    let n = TASKS;
    let _owner = reserve(&store, n).await;
    let stale = operation("op-stale", OperationState::Ok, n);
    let (written, done) = store
        .complete_with_record(
            &key(n),
            "stale",
            outcome(n),
            hour,
            SystemTime::now(),
            stale.clone(),
            &*store,
        )
        .await;
    written.expect("record");
    assert!(!done.expect("complete"), "a stale owner completes nothing");
    let op = OperationStore::get(&*store, "op-stale").await.expect("get");
    assert_eq!(op, Some(stale));

    // Another operation store keeps the record; PostgreSQL's table does not get it.
    let n = TASKS + 1;
    let owner = reserve(&store, n).await;
    let memory = toolguard::store::MemoryStore::new();
    let elsewhere = operation("op-elsewhere", OperationState::Ok, n);
    let (written, done) = store
        .complete_with_record(
            &key(n),
            &owner,
            outcome(n),
            hour,
            SystemTime::now(),
            elsewhere.clone(),
            &memory,
        )
        .await;
    written.expect("record");
    assert!(done.expect("complete"));
    assert_eq!(
        OperationStore::get(&memory, "op-elsewhere")
            .await
            .expect("get"),
        Some(elsewhere)
    );
    assert_eq!(
        OperationStore::get(&*store, "op-elsewhere")
            .await
            .expect("get"),
        None
    );
    let _ = store.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_completions_of_one_key_complete_it_once() {
    let Some(store) = store("group_commit_race").await else {
        return;
    };
    for round in 0..20 {
        let owner = reserve(&store, round).await;
        let hour = Duration::from_secs(3600);
        let racers: Vec<_> = (0..8)
            .map(|i| {
                let (store, owner) = (store.clone(), owner.clone());
                tokio::spawn(async move {
                    let now = SystemTime::now();
                    store
                        .complete(&key(round), &owner, outcome(i), hour, now)
                        .await
                })
            })
            .collect();
        let mut won = Vec::new();
        for (i, racer) in racers.into_iter().enumerate() {
            if racer.await.expect("task").expect("complete") {
                won.push(i);
            }
        }
        assert_eq!(
            won.len(),
            1,
            "round {round}: exactly one completion wins, not {won:?}"
        );
        let record = IdempotencyStore::get(&*store, &key(round), SystemTime::now())
            .await
            .expect("get")
            .expect("record");
        assert_eq!(
            record.state,
            RecordState::Done {
                outcome: outcome(won[0])
            }
        );
    }
    let _ = store.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_the_server_refuses_fails_alone() {
    let Some(store) = store("group_commit_refused").await else {
        return;
    };
    for round in 0..10 {
        let mut tasks = Vec::new();
        for n in 0..16 {
            let store = store.clone();
            // PostgreSQL text cannot hold NUL: this record's write is refused.
            let id = match n {
                7 => format!("op-\u{0}-{round}"),
                _ => format!("op-{round}-{n}"),
            };
            tasks.push(tokio::spawn(async move {
                let result = store
                    .put(operation(&id, OperationState::Executing, n))
                    .await;
                (n, id, result)
            }));
        }
        for task in tasks {
            let (n, id, result) = task.await.expect("task");
            if n == 7 {
                assert!(result.is_err(), "the refused record reports its error");
            } else {
                result.unwrap_or_else(|e| panic!("record {n} was written: {e}"));
                let stored = OperationStore::get(&*store, &id).await.expect("get");
                assert_eq!(stored.map(|r| r.call_id), Some(format!("call-{n}")));
            }
        }
    }
    let _ = store.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_reservations_of_one_key_reserve_it_once() {
    let Some(store) = store("group_commit_reserve_race").await else {
        return;
    };
    let hour = Duration::from_secs(3600);
    for round in 0..20 {
        let n = 1_000 + round;
        let racers: Vec<_> = (0..8)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move {
                    let now = SystemTime::now();
                    store
                        .reserve(&key(n), "digest", None, hour, hour, now)
                        .await
                })
            })
            .collect();
        let mut owners = Vec::new();
        let mut held = Vec::new();
        for racer in racers {
            match racer.await.expect("task").expect("reserve") {
                Reservation::Reserved { owner } => owners.push(owner),
                Reservation::Existing(record) => held.push(record),
            }
        }
        assert_eq!(
            owners.len(),
            1,
            "round {round}: exactly one reservation wins"
        );
        for record in held {
            assert!(
                matches!(&record.state, RecordState::InFlight { owner, .. } if *owner == owners[0]),
                "round {round}: the others see the winner's record, not {record:?}"
            );
        }
    }
    let _ = store.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reservations_in_one_batch_each_judge_expiry_at_their_own_time() {
    let Some(store) = store("group_commit_reserve_time").await else {
        return;
    };
    let minute = Duration::from_secs(60);
    let start = SystemTime::now();
    for n in 0..16 {
        let reserved = store
            .reserve(&key(2_000 + n), "digest", None, minute, minute, start)
            .await
            .expect("reserve");
        assert!(matches!(reserved, Reservation::Reserved { .. }), "key {n}");
    }
    // Submitted together: the even ones come after the records expired and take them over,
    // the odd ones come while they are live and see them.
    let tasks: Vec<_> = (0..16)
        .map(|n| {
            let store = store.clone();
            tokio::spawn(async move {
                let later = if n % 2 == 0 { 2 * minute } else { minute / 2 };
                let now = start + later;
                let got = store
                    .reserve(&key(2_000 + n), "digest-2", None, minute, minute, now)
                    .await;
                (n, got)
            })
        })
        .collect();
    for task in tasks {
        let (n, got) = task.await.expect("task");
        match (n % 2, got.expect("reserve")) {
            (0, Reservation::Reserved { .. }) => {}
            (1, Reservation::Existing(record)) => assert_eq!(record.request_digest, "digest"),
            (_, other) => panic!("key {n}: {other:?}"),
        }
    }
    let _ = store.drop_schema().await;
}

/// The ids of what `store` holds for session `s`, oldest first.
async fn source_ids(store: &PgStore, s: usize) -> Result<Vec<String>, String> {
    ProvenanceStore::sources(store, &format!("session-{s}"))
        .await
        .map(|v| v.into_iter().map(|src| src.id).collect())
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_source_reads_each_get_their_own_session() {
    let Some(store) = store("group_commit_sources").await else {
        return;
    };
    // Session `s` holds `s` sources (session 0 none), added out of time order.
    const SESSIONS: usize = 8;
    let mut expected: Vec<Vec<String>> = vec![Vec::new(); SESSIONS];
    for (s, ids) in expected.iter_mut().enumerate() {
        let mut sources: Vec<Source> = (0..s)
            .map(|j| Source::host(format!("doc {s}/{j}"), 1_000 + j as u64))
            .collect();
        ids.extend(sources.iter().map(|src| src.id.clone()));
        sources.reverse();
        for src in &sources {
            store
                .add_source(&format!("session-{s}"), src)
                .await
                .expect("add source");
        }
    }
    let read_all = |store: Arc<PgStore>| async move {
        let tasks: Vec<_> = (0..TASKS)
            .map(|n| {
                let store = store.clone();
                tokio::spawn(async move { (n % SESSIONS, source_ids(&store, n % SESSIONS).await) })
            })
            .collect();
        let mut answers = Vec::new();
        for t in tasks {
            answers.push(t.await.expect("task"));
        }
        answers
    };
    for round in 0..5 {
        for (s, ids) in read_all(store.clone()).await {
            assert_eq!(ids.as_ref(), Ok(&expected[s]), "round {round}, session {s}");
        }
    }

    // A source of session 3 that no longer parses fails session 3's reads, and no other's.
    let c = store.pool().get().await.expect("session");
    c.execute(
        "UPDATE toolguard_provenance SET body = '{' WHERE session = 'session-3'",
        &[],
    )
    .await
    .expect("tamper");
    for (s, ids) in read_all(store.clone()).await {
        match s {
            3 => assert!(ids.is_err(), "the altered session's read fails: {ids:?}"),
            _ => assert_eq!(ids.as_ref(), Ok(&expected[s]), "session {s}"),
        }
    }
    drop(c);
    let _ = store.drop_schema().await;
}
