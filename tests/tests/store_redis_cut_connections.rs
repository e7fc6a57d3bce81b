//! The server closes the Redis store's connections while it reserves idempotency keys (as a
//! restart, a failover or `CLIENT KILL` does): the store reconnects and sends the reservation
//! again, and a reservation whose command ran before its connection dropped finds the key held
//! by its own owner token and is the caller's; a fresh key is never answered as held by someone
//! else, and every key reserved is held by the token its caller got.

#![cfg(feature = "redis")]

mod store_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use toolguard::Status;
use toolguard::redis::RedisStore;
use toolguard::store::{IdempotencyStore, Reservation, ScopedKey, StoredOutcome};

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

fn key(n: u64) -> ScopedKey {
    ScopedKey {
        tenant: "acme".into(),
        subject: "alice".into(),
        tool: "transfer".into(),
        key: format!("key-{n}").into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(toolguard_redis), ignore = "set TOOLGUARD_REDIS_URL to run")]
async fn a_reservation_whose_connection_dropped_is_still_the_callers() {
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
    let store = Arc::new(
        RedisStore::connect(&store_url, prefix.clone())
            .await
            .expect("connect redis"),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let cutting = tokio::spawn(cutter(url.clone(), user.clone(), stop.clone()));
    const WAVES: u64 = 40;
    const PER_WAVE: u64 = 25;
    let run = {
        let store = store.clone();
        tokio::spawn(async move {
            // Every key is fresh and reserved once: nobody else can hold it.
            let hour = Duration::from_secs(3600);
            let mut answers = Vec::new();
            for wave in 0..WAVES {
                let mut tasks = Vec::new();
                for i in 0..PER_WAVE {
                    let store = store.clone();
                    let n = wave * PER_WAVE + i;
                    tasks.push(tokio::spawn(async move {
                        let now = SystemTime::now();
                        let answer = store
                            .reserve(&key(n), "digest", None, hour, hour, now)
                            .await;
                        (n, answer)
                    }));
                }
                for t in tasks {
                    answers.push(t.await.expect("reserve task"));
                }
            }
            answers
        })
    };
    let answers = run.await;
    stop.store(true, Ordering::SeqCst);
    let cut = cutting.await.expect("the cutter");
    let mut reserved = 0;
    let mut failed = 0;
    let mut foreign = Vec::new();
    let mut unusable = Vec::new();
    if let Ok(answers) = &answers {
        // With the connections left alone: each key reserved holds its caller's owner token (a
        // completion with it is applied).
        for (n, answer) in answers {
            match answer {
                Ok(Reservation::Reserved { owner }) => {
                    reserved += 1;
                    let outcome = StoredOutcome {
                        status: Status::Ok,
                        reason: None,
                        message: None,
                        output: None,
                        approval: None,
                        operation_id: None,
                    };
                    let hour = Duration::from_secs(3600);
                    let completed = store
                        .complete(&key(*n), owner, outcome, hour, SystemTime::now())
                        .await;
                    if !matches!(completed, Ok(true)) {
                        unusable.push((*n, completed));
                    }
                }
                Ok(Reservation::Existing(record)) => foreign.push((*n, record.clone())),
                // A reservation whose fate could not be told fails closed.
                Err(_) => failed += 1,
            }
        }
    }
    let _ = store.clear().await;
    let _ = redis::cmd("ACL")
        .arg("DELUSER")
        .arg(&user)
        .exec_async(&mut admin)
        .await;
    if let Err(e) = answers {
        std::panic::resume_unwind(e.into_panic());
    }
    assert!(cut > 0, "no connection was closed");
    assert!(
        foreign.is_empty(),
        "fresh keys answered as held by another caller ({cut} connections closed, {reserved} \
         reserved, {failed} failed): {foreign:?}"
    );
    assert!(
        unusable.is_empty(),
        "reservations whose owner token does not hold the key: {unusable:?}"
    );
    assert!(reserved > 0, "nothing was reserved ({failed} failed)");
    eprintln!(
        "{cut} connections closed during {} reservations: {reserved} reserved, {failed} failed",
        WAVES * PER_WAVE
    );
}
