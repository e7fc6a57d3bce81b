//! The Redis store's connections when the server closes them or does not answer.
//!
//! - The server closes the store's connections while it reserves idempotency keys (as a
//!   restart, a failover or `CLIENT KILL` does): the store reconnects and sends the reservation
//!   again, and a reservation whose command ran before its connection dropped finds the key held
//!   by its own owner token and is the caller's; a fresh key is never answered as held by
//!   someone else, and every key reserved is held by the token its caller got.
//! - A reply that does not come fails its command after the store's reply timeout, and the
//!   store answers again once the server does; a zero timeout is refused when it connects.
//!
//! The two tests take turns: one of them holds the server's writes.

#![cfg(feature = "redis")]

mod store_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use toolguard::redis::{RedisConfig, RedisStore};
use toolguard::store::IdempotencyStore;

/// Held by each test for its whole run.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Closes, every few milliseconds until `stop`, every connection of Redis user `user`; how many
/// it closed.
async fn cutter(url: String, user: String, stop: Arc<AtomicBool>) -> u64 {
    let client = redis::Client::open(url).expect("redis url");
    let mut admin = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect redis");
    let mut cut = 0;
    while !stop.load(Ordering::SeqCst) {
        let closed: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("USER")
            .arg(&user)
            .query_async(&mut admin)
            .await
            .expect("close connections");
        cut += u64::try_from(closed).unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    cut
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(toolguard_redis), ignore = "set TOOLGUARD_REDIS_URL to run")]
async fn a_reservation_whose_connection_dropped_is_still_the_callers() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let test = "a_reservation_whose_connection_dropped";
    let Some(url) = store_support::redis_url(test) else {
        return;
    };
    let Some((scheme, rest)) = url.split_once("://") else {
        panic!("TOOLGUARD_REDIS_URL `{url}` is not a redis:// URL");
    };
    if rest.split('/').next().unwrap_or_default().contains('@') {
        eprintln!("skipped {test}: TOOLGUARD_REDIS_URL carries credentials");
        return;
    }
    // The store logs in as a user of its own, whose connections alone are closed.
    let prefix = store_support::unique("cut_redis");
    let user = format!("{prefix}_store");
    let password = {
        use std::hash::{BuildHasher, Hasher};
        let unguessable = || {
            std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish()
        };
        format!("{:016x}{:016x}", unguessable(), unguessable())
    };
    let client = redis::Client::open(url.as_str()).expect("redis url");
    let mut admin = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect redis");
    redis::cmd("ACL")
        .arg("SETUSER")
        .arg(&user)
        .arg("reset")
        .arg("on")
        .arg(format!(">{password}"))
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .exec_async(&mut admin)
        .await
        .expect("a Redis user for the store");
    let store_url = format!("{scheme}://{user}:{password}@{rest}");
    // A command queued on a connection as it drops is never sent nor failed by the client
    // (seen about once in ten runs): the reply timeout fails it, and it is sent again.
    let config = RedisConfig::new(store_url, prefix.clone()).reply_timeout(Duration::from_secs(2));
    let store = Arc::new(
        RedisStore::connect_with(&config)
            .await
            .expect("connect redis"),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let cutting = tokio::spawn(cutter(url.clone(), user.clone(), stop.clone()));
    let answers = tokio::spawn(store_support::reserve_fresh(store.clone(), 40, 25)).await;
    stop.store(true, Ordering::SeqCst);
    let cut = cutting.await.expect("the cutter");
    // With the connections left alone.
    let found = match &answers {
        Ok(answers) => store_support::check_fresh(&*store, answers).await,
        Err(_) => store_support::FreshOutcome::default(),
    };
    let _ = store.clear().await;
    let _ = redis::cmd("ACL")
        .arg("DELUSER")
        .arg(&user)
        .exec_async(&mut admin)
        .await;
    let answers = match answers {
        Ok(answers) => answers,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    };
    assert!(cut > 0, "no connection was closed");
    assert!(
        found.foreign.is_empty(),
        "fresh keys answered as held by another caller ({cut} connections closed): {found:?}"
    );
    assert!(
        found.unusable.is_empty(),
        "owner tokens that do not hold their keys: {found:?}"
    );
    assert!(found.reserved > 0, "nothing was reserved: {found:?}");
    eprintln!(
        "{cut} connections closed during {} reservations: {} reserved, {} failed",
        answers.len(),
        found.reserved,
        found.failed
    );
}

/// Reserves fresh key `n` for an hour.
async fn reserve(
    store: &RedisStore,
    n: u64,
) -> toolguard::store::StoreResult<toolguard::store::Reservation> {
    let hour = Duration::from_secs(3600);
    let now = std::time::SystemTime::now();
    let key = store_support::fresh_key(n);
    store.reserve(&key, "digest", None, hour, hour, now).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(toolguard_redis), ignore = "set TOOLGUARD_REDIS_URL to run")]
async fn a_reply_that_does_not_come_fails_after_the_reply_timeout() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let test = "a_reply_that_does_not_come";
    let Some(url) = store_support::redis_url(test) else {
        return;
    };
    let zero = RedisConfig::new(url.as_str(), "unused").reply_timeout(Duration::ZERO);
    let refused = RedisStore::connect_with(&zero).await.err();
    assert!(
        refused
            .as_ref()
            .is_some_and(|e| e.to_string().contains("reply_timeout")),
        "a zero reply timeout is refused when the store connects: {refused:?}"
    );

    let timeout = Duration::from_millis(300);
    let config =
        RedisConfig::new(url.as_str(), store_support::unique("reply_redis")).reply_timeout(timeout);
    let store = RedisStore::connect_with(&config)
        .await
        .expect("connect redis");
    let client = redis::Client::open(url.as_str()).expect("redis url");
    let mut admin = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect redis");
    // The server holds every write for ten seconds: the reservation's `SET` is not answered.
    redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(10_000)
        .arg("WRITE")
        .exec_async(&mut admin)
        .await
        .expect("pause the writes");
    let asked = Instant::now();
    let held = reserve(&store, 1).await;
    let waited = asked.elapsed();
    redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .exec_async(&mut admin)
        .await
        .expect("let the writes go");
    let after = reserve(&store, 2).await;
    let _ = store.clear().await;

    let err = held.expect_err("a reservation the server does not answer fails");
    assert!(
        waited >= timeout && waited < Duration::from_secs(5),
        "it fails after the reply timeout (sent at most three times), long before the pause \
         ends: {waited:?} ({err})"
    );
    assert!(
        matches!(after, Ok(toolguard::store::Reservation::Reserved { .. })),
        "the store answers again once the server does: {after:?}"
    );
}
