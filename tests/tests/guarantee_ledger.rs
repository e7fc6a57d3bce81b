//! Ledger reservations bound what approval-gated calls move in total, on every session-ledger
//! backend: memory, SQLite (feature `sqlite`), PostgreSQL (feature `postgres`,
//! `TOOLGUARD_PG_URL`) and Redis (feature `redis`, `TOOLGUARD_REDIS_URL`).
//!
//! The pattern each test attacks: N approval-gated calls whose sum exceeds a Deny-mode limit.
//! Each opens with `reserve` (refused when over), is approved with `commit` (exactly once, never
//! more than reserved) and released on rejection or expiry.

mod store_support;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use store_support::Backend;
use toolguard::store::{HoldCommit, ScopeLimit};

const HOUR: Duration = Duration::from_secs(3600);

fn limit(scope: &str, limit: u64) -> ScopeLimit {
    ScopeLimit {
        scope: scope.into(),
        limit,
        window: HOUR,
    }
}

/// A pending reservation counts against the limit in `admit`, `total` and `reserve`; release
/// gives the room back.
async fn reservation_counts_until_released(b: Arc<Backend>) {
    let l = &b.ledger;
    let now = SystemTime::now();
    let until = now + HOUR;
    let lim = [limit("s:session", 100)];
    assert!(l.reserve("op-1", 60, &lim, until, now).await.unwrap());
    assert_eq!(l.total("s:session", HOUR, now).await.unwrap(), 60);
    assert!(
        !l.reserve("op-2", 50, &lim, until, now).await.unwrap(),
        "60 + 50 > 100"
    );
    assert!(
        !l.admit("e-1", 50, &lim, now).await.unwrap(),
        "admit counts the hold"
    );
    assert!(l.admit("e-2", 40, &lim, now).await.unwrap());
    assert_eq!(l.total("s:session", HOUR, now).await.unwrap(), 100);
    // A second reserve of a held entry changes nothing.
    assert!(l.reserve("op-1", 60, &lim, until, now).await.unwrap());
    assert_eq!(l.total("s:session", HOUR, now).await.unwrap(), 100);
    assert!(l.release("op-1").await.unwrap());
    assert!(!l.release("op-1").await.unwrap(), "released once");
    assert_eq!(l.total("s:session", HOUR, now).await.unwrap(), 40);
    assert!(l.reserve("op-2", 60, &lim, until, now).await.unwrap());
    assert_eq!(
        l.commit("op-1", 60, now).await.unwrap(),
        HoldCommit::Missing
    );
}

/// Commit books the reserved amount once, in every scope held, and never more than reserved.
async fn commit_books_once_and_never_more(b: Arc<Backend>) {
    let l = &b.ledger;
    let now = SystemTime::now();
    let until = now + HOUR;
    let lim = [limit("c:session", 100), limit("c:subject", 500)];
    assert!(l.reserve("op-1", 60, &lim, until, now).await.unwrap());
    assert_eq!(
        l.commit("op-1", 61, now).await.unwrap(),
        HoldCommit::Exceeds { reserved: 60 }
    );
    assert_eq!(
        l.total("c:session", HOUR, now).await.unwrap(),
        60,
        "unchanged"
    );
    assert_eq!(
        l.commit("op-1", 50, now).await.unwrap(),
        HoldCommit::Committed
    );
    assert_eq!(
        l.commit("op-1", 50, now).await.unwrap(),
        HoldCommit::Missing
    );
    assert!(
        !l.release("op-1").await.unwrap(),
        "a committed hold is gone"
    );
    assert_eq!(l.total("c:session", HOUR, now).await.unwrap(), 50);
    assert_eq!(l.total("c:subject", HOUR, now).await.unwrap(), 50);
    // The booked amount is an ordinary entry: it leaves the window like one.
    let later = now + HOUR + Duration::from_secs(1);
    assert_eq!(l.total("c:session", HOUR, later).await.unwrap(), 0);
}

/// An expired reservation no longer counts and can no longer be committed.
async fn expired_reservation_neither_counts_nor_commits(b: Arc<Backend>) {
    let l = &b.ledger;
    let now = SystemTime::now();
    let lim = [limit("x:session", 100)];
    assert!(
        l.reserve("op-1", 80, &lim, now + Duration::from_secs(10), now)
            .await
            .unwrap()
    );
    let after = now + Duration::from_secs(11);
    assert_eq!(l.total("x:session", HOUR, after).await.unwrap(), 0);
    assert_eq!(
        l.commit("op-1", 80, after).await.unwrap(),
        HoldCommit::Missing
    );
    assert!(
        l.reserve("op-2", 100, &lim, after + HOUR, after)
            .await
            .unwrap()
    );
    assert_eq!(l.total("x:session", HOUR, after).await.unwrap(), 100);
}

/// Five approval-gated calls of 30 under a limit of 100: three open, two are refused, and
/// approvers racing on every request (ten commits each) book each once: 90 moved in total.
async fn racing_approvers_move_at_most_the_limit(b: Arc<Backend>) {
    let now = SystemTime::now();
    let until = now + HOUR;
    let lim = [limit("r:session", 100)];
    let mut opened = Vec::new();
    for i in 0..5 {
        let entry = format!("op-{i}");
        if b.ledger
            .reserve(&entry, 30, &lim, until, now)
            .await
            .unwrap()
        {
            opened.push(entry);
        }
    }
    assert_eq!(opened.len(), 3);
    let mut tasks = Vec::new();
    for entry in opened
        .iter()
        .chain(["op-3".to_owned(), "op-4".to_owned()].iter())
    {
        for _ in 0..10 {
            let (b, entry) = (b.clone(), entry.clone());
            tasks.push(tokio::spawn(async move {
                b.ledger.commit(&entry, 30, now).await.unwrap()
            }));
        }
    }
    let mut committed = 0;
    for t in tasks {
        if t.await.unwrap() == HoldCommit::Committed {
            committed += 1;
        }
    }
    assert_eq!(committed, 3, "one commit per opened request");
    assert_eq!(b.ledger.total("r:session", HOUR, now).await.unwrap(), 90);
}

/// Twenty requests of 10 reserving at once under a limit of 100: exactly ten hold.
async fn racing_reservations_never_overbook(b: Arc<Backend>) {
    let now = SystemTime::now();
    let until = now + HOUR;
    let mut tasks = Vec::new();
    for i in 0..20 {
        let b = b.clone();
        tasks.push(tokio::spawn(async move {
            let lim = [limit("q:session", 100), limit("q:subject", 1000)];
            b.ledger
                .reserve(&format!("op-{i}"), 10, &lim, until, now)
                .await
                .unwrap()
        }));
    }
    let mut held = 0;
    for t in tasks {
        held += usize::from(t.await.unwrap());
    }
    assert_eq!(held, 10);
    assert_eq!(b.ledger.total("q:session", HOUR, now).await.unwrap(), 100);
    assert_eq!(b.ledger.total("q:subject", HOUR, now).await.unwrap(), 100);
}

/// Commits racing unattended admissions: five held requests of 10 and twenty admissions of 10
/// under a limit of 100. However they interleave, exactly five admissions fit and the total ends
/// at 100 (an admission never sees a hold gone before its booking is there).
async fn commits_racing_admissions_never_overbook(b: Arc<Backend>) {
    let now = SystemTime::now();
    let until = now + HOUR;
    let lim = [limit("m:session", 100)];
    for i in 0..5 {
        assert!(
            b.ledger
                .reserve(&format!("op-{i}"), 10, &lim, until, now)
                .await
                .unwrap()
        );
    }
    let mut commits = Vec::new();
    let mut admits = Vec::new();
    for i in 0..20 {
        let b2 = b.clone();
        admits.push(tokio::spawn(async move {
            let lim = [limit("m:session", 100)];
            b2.ledger
                .admit(&format!("e-{i}"), 10, &lim, now)
                .await
                .unwrap()
        }));
        if i < 5 {
            let b2 = b.clone();
            commits.push(tokio::spawn(async move {
                b2.ledger.commit(&format!("op-{i}"), 10, now).await.unwrap()
            }));
        }
    }
    for c in commits {
        assert_eq!(c.await.unwrap(), HoldCommit::Committed);
    }
    let mut admitted = 0;
    for a in admits {
        admitted += usize::from(a.await.unwrap());
    }
    assert_eq!(admitted, 5);
    assert_eq!(b.ledger.total("m:session", HOUR, now).await.unwrap(), 100);
}

macro_rules! ledger_suite {
    ($backend:ident, #[$attr:meta]) => {
        mod $backend {
            ledger_suite!(@tests $backend, #[$attr]:
                reservation_counts_until_released,
                commit_books_once_and_never_more,
                expired_reservation_neither_counts_nor_commits,
                racing_approvers_move_at_most_the_limit,
                racing_reservations_never_overbook,
                commits_racing_admissions_never_overbook,
            );
        }
    };
    (@tests $backend:ident, #[$attr:meta]: $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            #[$attr]
            async fn $name() {
                let backend = crate::store_support::$backend(stringify!($name)).await;
                crate::store_support::run(backend, crate::$name).await;
            }
        )*
    };
}

ledger_suite!(memory, #[cfg_attr(any(), ignore)]);
#[cfg(feature = "sqlite")]
ledger_suite!(sqlite, #[cfg_attr(any(), ignore)]);
#[cfg(feature = "postgres")]
ledger_suite!(postgres, #[cfg_attr(not(toolguard_pg), ignore = "set TOOLGUARD_PG_URL to run")]);
#[cfg(feature = "redis")]
ledger_suite!(redis, #[cfg_attr(not(toolguard_redis), ignore = "set TOOLGUARD_REDIS_URL to run")]);
