//! The server cuts the PostgreSQL audit sink's sessions while it appends (as a restart, a
//! failover or `pg_terminate_backend` does): every append still succeeds on a fresh session, and
//! none is stored twice, also when a session was cut after its batch's commit was sent (the
//! retry learns, under the chain's lock, whether that commit happened). The chain verifies.
//! The store's own sessions are cut while it reserves idempotency keys: a reservation whose
//! statement committed but whose answer was lost is recognised as the caller's own when the
//! writer retries it, never answered as a key someone else holds.

#![cfg(feature = "postgres")]

mod store_support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use store_support::transfer_record as record;
use toolguard::audit::{AuditQuery, AuditSink};
use toolguard::postgres::{PgAuditSink, PgConfig, PgStore};

/// Terminates, every few milliseconds until `stop`, every session named `application`; how
/// many it terminated. The gaps between cuts go round from 3 to 12 ms: a fresh session then
/// sometimes lives long enough for a whole write, on a machine where opening it and writing
/// take longer than the shortest gap (with 3 ms every time, one such machine never finished an
/// audit batch within the sink's 10 s of retries).
async fn cutter(url: String, application: String, stop: Arc<AtomicBool>) -> u64 {
    let (admin, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect postgres");
    tokio::spawn(connection);
    let mut cut = 0;
    let mut round: u64 = 0;
    while !stop.load(Ordering::SeqCst) {
        let row = admin
            .query_one(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE application_name = $1",
                &[&application],
            )
            .await
            .expect("terminate sessions");
        cut += u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(3 + (round * 7) % 10)).await;
        round += 1;
    }
    cut
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(toolguard_pg), ignore = "set TOOLGUARD_PG_URL to run")]
async fn audit_appends_survive_their_sessions_being_cut_and_none_is_stored_twice() {
    let test = "audit_appends_survive_their_sessions_being_cut";
    let Some(url) = store_support::pg_url(test) else {
        return;
    };
    let schema = store_support::unique("cut_sessions");
    let application = format!("{schema}_sink");
    let sep = if url.contains('?') { '&' } else { '?' };
    let sink_config = PgConfig::new(format!("{url}{sep}application_name={application}"))
        .schema(schema.clone())
        .pool_size(2);
    let store = PgStore::connect(&PgConfig::new(url.clone()).schema(schema.clone()))
        .await
        .expect("connect postgres");
    let sink = Arc::new(PgAuditSink::connect(&sink_config).await.expect("the sink"));
    let stop = Arc::new(AtomicBool::new(false));
    let cutting = tokio::spawn(cutter(url, application, stop.clone()));
    let run = {
        let sink = sink.clone();
        tokio::spawn(async move {
            // Waves of concurrent appends, so that batches of many sizes meet the cuts.
            let mut seqs = Vec::new();
            for wave in 0..20u64 {
                let mut tasks = Vec::new();
                for i in 0..20u64 {
                    let sink = sink.clone();
                    let n = wave * 20 + i;
                    tasks.push(tokio::spawn(async move { sink.append(record(n)).await }));
                }
                for t in tasks {
                    seqs.push(t.await.expect("append task").expect("the append succeeded"));
                }
            }
            seqs
        })
    };
    let seqs = run.await;
    stop.store(true, Ordering::SeqCst);
    let cut = cutting.await.expect("the cutter");
    let entries = sink.by_time(0, u64::MAX, 10_000).await;
    let verified = sink.verify().await;
    let _ = store.drop_schema().await;
    let mut seqs = match seqs {
        Ok(seqs) => seqs,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    };
    assert!(cut > 0, "no session was cut");
    seqs.sort_unstable();
    assert_eq!(
        seqs,
        (1..=400).collect::<Vec<_>>(),
        "each append got its own entry"
    );
    let entries = entries.expect("the trail");
    let mut per_call: BTreeMap<String, usize> = BTreeMap::new();
    for e in &entries {
        *per_call.entry(e.record.call_id.to_string()).or_default() += 1;
    }
    assert_eq!(entries.len(), 400, "{cut} sessions cut");
    assert!(
        per_call.values().all(|n| *n == 1) && per_call.len() == 400,
        "a record stored twice or lost: {:?}",
        per_call
            .iter()
            .filter(|(_, n)| **n != 1)
            .collect::<Vec<_>>()
    );
    verified.expect("one intact chain");
    eprintln!("{cut} sessions cut during 400 appends");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(toolguard_pg), ignore = "set TOOLGUARD_PG_URL to run")]
async fn a_reservation_committed_before_its_session_was_cut_is_still_the_callers() {
    let test = "a_reservation_committed_before_its_session_was_cut";
    let Some(url) = store_support::pg_url(test) else {
        return;
    };
    let schema = store_support::unique("cut_reservations");
    let application = format!("{schema}_store");
    let sep = if url.contains('?') { '&' } else { '?' };
    let config = PgConfig::new(format!("{url}{sep}application_name={application}"))
        .schema(schema.clone())
        .pool_size(2);
    let store = Arc::new(PgStore::connect(&config).await.expect("connect postgres"));
    let stop = Arc::new(AtomicBool::new(false));
    let cutting = tokio::spawn(cutter(url, application, stop.clone()));
    let answers = tokio::spawn(store_support::reserve_fresh(store.clone(), 40, 25)).await;
    stop.store(true, Ordering::SeqCst);
    let cut = cutting.await.expect("the cutter");
    let answers = match answers {
        Ok(answers) => answers,
        Err(e) => {
            let _ = store.drop_schema().await;
            std::panic::resume_unwind(e.into_panic())
        }
    };
    // With the sessions left alone.
    let found = store_support::check_fresh(&*store, &answers).await;
    let _ = store.drop_schema().await;
    assert!(cut > 0, "no session was cut");
    assert!(
        found.foreign.is_empty(),
        "fresh keys answered as held by another caller ({cut} sessions cut): {found:?}"
    );
    assert!(
        found.unusable.is_empty(),
        "owner tokens that do not hold their keys: {found:?}"
    );
    assert!(found.reserved > 0, "nothing was reserved: {found:?}");
    eprintln!(
        "{cut} sessions cut during {} reservations: {} reserved, {} failed",
        answers.len(),
        found.reserved,
        found.failed
    );
}
