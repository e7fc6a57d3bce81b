//! The Redis store's connections when the server closes them or does not answer.
//!
//! - The server closes the store's connections while it reserves idempotency keys (as a
//!   restart, a failover or `CLIENT KILL` does): the store reconnects and sends the reservation
//!   again, and a reservation whose command ran before its connection dropped finds the key held
//!   by its own owner token and is the caller's; a fresh key is never answered as held by
//!   someone else, and every key reserved is held by the token its caller got.
//! - A reply that does not come fails its command after the store's reply timeout, and the
//!   store answers again once the server does; a zero timeout is refused when it connects.
//!   Under the dispatcher, a store deadline shorter than the reply timeout decides (the
//!   command has no timer of its own), and a longer one leaves it to the reply timeout.
//! - The server refuses the store's logins for longer than the client tries to reconnect: once
//!   it accepts them again, the store's commands are answered again.
//!
//! The tests take turns: one of them holds the server's writes.

#![cfg(feature = "redis")]

mod store_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use toolguard::redis::{RedisConfig, RedisStore};
use toolguard::store::IdempotencyStore;

/// Held by each test for its whole run.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A connection of the test's own to the server at `url`.
async fn admin(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .expect("redis url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect redis")
}

/// A Redis user of the test's own that the store logs in as, so that the store's connections
/// alone are closed, or its logins alone refused.
struct StoreUser {
    name: String,
    password: String,
    /// The test's URL, logging in as this user.
    url: String,
}

impl StoreUser {
    /// Made for `prefix` on the server at `url`, its logins accepted; `None` (the test is
    /// skipped) when `url` carries credentials of its own.
    async fn new(
        url: &str,
        prefix: &str,
        test: &str,
        admin: &mut redis::aio::MultiplexedConnection,
    ) -> Option<Self> {
        let Some((scheme, rest)) = url.split_once("://") else {
            panic!("TOOLGUARD_REDIS_URL `{url}` is not a redis:// URL");
        };
        if rest.split('/').next().unwrap_or_default().contains('@') {
            eprintln!("skipped {test}: TOOLGUARD_REDIS_URL carries credentials");
            return None;
        }
        let name = format!("{prefix}_store");
        let password = {
            use std::hash::{BuildHasher, Hasher};
            let unguessable = || {
                std::collections::hash_map::RandomState::new()
                    .build_hasher()
                    .finish()
            };
            format!("{:016x}{:016x}", unguessable(), unguessable())
        };
        let url = format!("{scheme}://{name}:{password}@{rest}");
        let user = StoreUser {
            name,
            password,
            url,
        };
        user.logins(admin, true).await;
        Some(user)
    }

    /// Accepts the user's logins (`on`), or refuses them.
    async fn logins(&self, admin: &mut redis::aio::MultiplexedConnection, on: bool) {
        redis::cmd("ACL")
            .arg("SETUSER")
            .arg(&self.name)
            .arg("reset")
            .arg(if on { "on" } else { "off" })
            .arg(format!(">{}", self.password))
            .arg("~*")
            .arg("&*")
            .arg("+@all")
            .exec_async(admin)
            .await
            .expect("a Redis user for the store");
    }

    async fn remove(&self, admin: &mut redis::aio::MultiplexedConnection) {
        let _ = redis::cmd("ACL")
            .arg("DELUSER")
            .arg(&self.name)
            .exec_async(admin)
            .await;
    }
}

/// Closes, every few milliseconds until `stop`, every connection of Redis user `user`; how many
/// it closed.
async fn cutter(url: String, user: String, stop: Arc<AtomicBool>) -> u64 {
    let mut admin = admin(&url).await;
    let mut cut = 0;
    while !stop.load(Ordering::SeqCst) {
        cut += close_connections(&mut admin, &user).await;
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    cut
}

/// Closes every connection of Redis user `user`; how many.
async fn close_connections(admin: &mut redis::aio::MultiplexedConnection, user: &str) -> u64 {
    let closed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("USER")
        .arg(user)
        .query_async(admin)
        .await
        .expect("close connections");
    u64::try_from(closed).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(toolguard_redis), ignore = "set TOOLGUARD_REDIS_URL to run")]
async fn a_reservation_whose_connection_dropped_is_still_the_callers() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let test = "a_reservation_whose_connection_dropped";
    let Some(url) = store_support::redis_url(test) else {
        return;
    };
    let mut admin = admin(&url).await;
    // The store logs in as a user of its own, whose connections alone are closed.
    let prefix = store_support::unique("cut_redis");
    let Some(user) = StoreUser::new(&url, &prefix, test, &mut admin).await else {
        return;
    };
    // A command queued on a connection as it drops is never sent nor failed by the client
    // (seen about once in ten runs): the reply timeout fails it, and it is sent again.
    let config =
        RedisConfig::new(user.url.as_str(), prefix.clone()).reply_timeout(Duration::from_secs(2));
    let store = Arc::new(
        RedisStore::connect_with(&config)
            .await
            .expect("connect redis"),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let cutting = tokio::spawn(cutter(url.clone(), user.name.clone(), stop.clone()));
    let answers = tokio::spawn(store_support::reserve_fresh(store.clone(), 40, 25)).await;
    stop.store(true, Ordering::SeqCst);
    let cut = cutting.await.expect("the cutter");
    // With the connections left alone.
    let found = match &answers {
        Ok(answers) => store_support::check_fresh(&*store, answers).await,
        Err(_) => store_support::FreshOutcome::default(),
    };
    let _ = store.clear().await;
    user.remove(&mut admin).await;
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
    let mut admin = admin(&url).await;
    // The server holds every write for ten seconds: the reservation's `SET` is not answered.
    pause_writes(&mut admin).await;
    let asked = Instant::now();
    let held = reserve(&store, 1).await;
    let waited = asked.elapsed();
    unpause(&mut admin).await;
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

/// Holds the server's writes for ten seconds.
async fn pause_writes(admin: &mut redis::aio::MultiplexedConnection) {
    redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(10_000)
        .arg("WRITE")
        .exec_async(admin)
        .await
        .expect("pause the writes");
}

async fn unpause(admin: &mut redis::aio::MultiplexedConnection) {
    redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .exec_async(admin)
        .await
        .expect("let the writes go");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(toolguard_redis), ignore = "set TOOLGUARD_REDIS_URL to run")]
async fn under_a_dispatcher_the_shorter_of_its_deadline_and_the_reply_timeout_decides() {
    use toolguard::{Dispatcher, MemoryAuditSink, Status, ToolCall};
    use toolguard_tests::{CreditPoints, Ledger, alice};

    let _turn = ONE_AT_A_TIME.lock().await;
    let Some(url) = store_support::redis_url("under_a_dispatcher") else {
        return;
    };
    let mut admin = admin(&url).await;
    // (store deadline, reply timeout): the store deadline decides in the first case, the reply
    // timeout (the reservation sent at most three times) in the second.
    let cases = [
        (Duration::from_millis(400), Duration::from_secs(30)),
        (Duration::from_secs(30), Duration::from_millis(300)),
    ];
    let mut seen = Vec::new();
    for (n, (deadline, reply_timeout)) in cases.into_iter().enumerate() {
        let prefix = store_support::unique("deadline_redis");
        let config = RedisConfig::new(url.as_str(), prefix).reply_timeout(reply_timeout);
        let store = Arc::new(RedisStore::connect_with(&config).await.expect("connect"));
        let dispatcher = Dispatcher::builder(Ledger::seeded())
            .tool(CreditPoints)
            .audit(MemoryAuditSink::new())
            .idempotency_store(store.clone())
            .store_deadline(deadline)
            .build()
            .expect("dispatcher");
        let call = |id: &str| {
            ToolCall::new(
                id,
                "credit_points",
                serde_json::json!({"points": 5, "idempotency_key": format!("deadline-case-{n}-{id}")}),
            )
        };
        pause_writes(&mut admin).await;
        let asked = Instant::now();
        let held = dispatcher.dispatch(call("held"), &alice()).await;
        let waited = asked.elapsed();
        unpause(&mut admin).await;
        let after = dispatcher.dispatch(call("after"), &alice()).await;
        let _ = store.clear().await;
        seen.push((deadline, reply_timeout, held.status, waited, after.status));
    }
    for (deadline, reply_timeout, held, waited, after) in seen {
        let decides = deadline.min(reply_timeout);
        assert_eq!(
            held,
            Status::Unavailable,
            "a store that does not answer fails the call closed ({deadline:?} deadline, \
             {reply_timeout:?} reply timeout)"
        );
        assert!(
            waited >= decides && waited < decides * 3 + Duration::from_secs(2),
            "the call waits for the shorter bound ({decides:?}), long before the pause ends: \
             {waited:?} ({deadline:?} deadline, {reply_timeout:?} reply timeout)"
        );
        assert_eq!(
            after,
            Status::Ok,
            "the store answers again once the server does"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(toolguard_redis), ignore = "set TOOLGUARD_REDIS_URL to run")]
async fn a_connection_that_could_not_log_in_for_a_while_is_replaced() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let test = "a_connection_that_could_not_log_in";
    let Some(url) = store_support::redis_url(test) else {
        return;
    };
    let mut admin = admin(&url).await;
    let prefix = store_support::unique("login_redis");
    let Some(user) = StoreUser::new(&url, &prefix, test, &mut admin).await else {
        return;
    };
    let config = RedisConfig::new(user.url.as_str(), prefix).connections(1);
    let store = RedisStore::connect_with(&config)
        .await
        .expect("connect redis");
    let first = reserve(&store, 1).await;
    // The server refuses the store's logins (as it answers `LOADING` while it reads its data
    // after a restart) for longer than the client tries to reconnect by itself (six tries,
    // about six seconds), and closes its connection.
    user.logins(&mut admin, false).await;
    let closed = close_connections(&mut admin, &user.name).await;
    let refused_for = Instant::now() + Duration::from_secs(8);
    let (mut n, mut refused) = (100, 0);
    while Instant::now() < refused_for {
        n += 1;
        if reserve(&store, n).await.is_err() {
            refused += 1;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    user.logins(&mut admin, true).await;
    let accepted_again = Instant::now();
    let mut answers = Vec::new();
    while accepted_again.elapsed() < Duration::from_secs(15) {
        n += 1;
        let answer = reserve(&store, n).await;
        let done = answer.is_ok();
        answers.push(answer.map_err(|e| e.to_string()));
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let _ = store.clear().await;
    user.remove(&mut admin).await;

    assert!(first.is_ok(), "{first:?}");
    assert!(
        closed > 0 && refused > 0,
        "{closed} closed, {refused} refused"
    );
    assert!(
        matches!(
            answers.last(),
            Some(Ok(toolguard::store::Reservation::Reserved { .. }))
        ),
        "once the server accepts the store's logins again, its commands are answered \
         (15 s after, {} tries; the last: {:?})",
        answers.len(),
        answers.last()
    );
}
