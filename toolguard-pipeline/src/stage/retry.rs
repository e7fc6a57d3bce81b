//! Writes that settle what already happened, retried through a passing store fault: an approval
//! request marked executed, the outcome stored under an approved or reconciled operation's key,
//! an operation record brought up to date. Such a write cannot be undone by failing the call
//! (its action ran); left unwritten, it would leave a request `executing` or a key in flight
//! until someone asks again. Every such write is conditional or idempotent (a version, an
//! operation id, a record put whole), so that trying it again after a failure whose write
//! happened anyway changes nothing.
//!
//! A write is retried within one store deadline: a connection the server cut fails at once and
//! the next attempt, on a fresh connection, usually succeeds; a store that stalls has used the
//! deadline on its first attempt, and the call's answer does not wait for it any longer. A write
//! still not done then goes on being tried in the background ([`settle_later`]) for a while, so
//! that a store down or stalled for longer than the deadline still gets it when it answers
//! again, even if no one asks about the call again.
//!
//! The writes that decide whether an action runs (a reservation, a request moved to
//! `executing`, the `executing` record) are not retried: their failure stops the call, and the
//! caller retries it.

use std::time::Duration;

use tokio::time::Instant;

/// The first pause between attempts; each pause doubles, up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(10);

/// The longest pause between attempts.
const MAX_PAUSE: Duration = Duration::from_millis(500);

/// How long a write the call could not settle goes on being tried after the call answered.
const LATER_FOR: Duration = Duration::from_secs(120);

/// Runs `write` until it succeeds, or until another attempt would start after `budget` (the
/// store deadline); the last answer. `retried` tells `write` whether an earlier attempt failed
/// (its write may have happened all the same).
async fn settling<T, E, F, Fut>(budget: Duration, mut write: F) -> Result<T, E>
where
    F: FnMut(bool) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let started = Instant::now();
    let mut pause = FIRST_PAUSE;
    let mut retried = false;
    loop {
        match write(retried).await {
            Ok(done) => return Ok(done),
            Err(err) if started.elapsed() + pause > budget => return Err(err),
            Err(_) => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
                retried = true;
            }
        }
    }
}

/// Settles with `write` now ([`settling`] within `budget`), or, when the store still fails after
/// it, in the background ([`settle_later`], every attempt there told that an earlier one
/// failed): the answer of the write made in time, or the error that left it to the background.
/// `write` owns what it writes, since it may outlive the call.
pub(crate) async fn now_or_later<T, E, F, Fut>(
    what: &'static str,
    budget: Duration,
    mut write: F,
) -> Result<T, E>
where
    F: FnMut(bool) -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, E>> + Send + 'static,
{
    let err = match settling(budget, &mut write).await {
        Ok(done) => return Ok(done),
        Err(err) => err,
    };
    settle_later(what, move || {
        let attempt = write(true);
        async move { attempt.await.is_ok() }
    });
    Err(err)
}

/// Goes on trying a settling write that failed for a whole store deadline, in a task of its own
/// (the call has answered without it), with the pauses of [`settling`], until `write` says it
/// is done (`true`: written, or nothing is left to write) or [`LATER_FOR`] has passed: a store
/// that stalled or was down for longer than the deadline still gets the write when it answers
/// again. Outside a Tokio runtime nothing is tried.
fn settle_later<F, Fut>(what: &'static str, mut write: F)
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = bool> + Send + 'static,
{
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::error!(
            what,
            "a write to settle was dropped: no runtime to retry it on"
        );
        return;
    };
    runtime.spawn(async move {
        let started = Instant::now();
        let mut pause = FIRST_PAUSE;
        loop {
            tokio::time::sleep(pause).await;
            if write().await {
                tracing::info!(
                    what,
                    after_ms = started.elapsed().as_millis() as u64,
                    "settled late"
                );
                return;
            }
            if started.elapsed() + pause > LATER_FOR {
                tracing::error!(what, "a write to settle still fails; given up");
                return;
            }
            pause = (pause * 2).min(MAX_PAUSE);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test(start_paused = true)]
    async fn a_write_settled_later_is_tried_until_it_succeeds() {
        let attempts = Arc::new(AtomicU32::new(0));
        let counted = attempts.clone();
        settle_later("test", move || {
            let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
            async move { n >= 5 }
        });
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(attempts.load(Ordering::SeqCst), 5);
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_that_never_settles_is_given_up() {
        let attempts = Arc::new(AtomicU32::new(0));
        let counted = attempts.clone();
        settle_later("test", move || {
            counted.fetch_add(1, Ordering::SeqCst);
            async { false }
        });
        tokio::time::sleep(LATER_FOR + Duration::from_secs(1)).await;
        let tried = attempts.load(Ordering::SeqCst);
        assert!(tried > 100, "tried {tried} times");
        tokio::time::sleep(LATER_FOR).await;
        assert_eq!(attempts.load(Ordering::SeqCst), tried, "given up");
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_is_tried_until_it_succeeds() {
        let attempts = Cell::new(0);
        let done: Result<u32, &str> = settling(Duration::from_secs(2), |retried| {
            attempts.set(attempts.get() + 1);
            assert_eq!(retried, attempts.get() > 1);
            let n = attempts.get();
            async move { if n < 4 { Err("down") } else { Ok(n) } }
        })
        .await;
        assert_eq!(done, Ok(4));
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_that_keeps_failing_gives_up_within_the_budget() {
        let budget = Duration::from_secs(2);
        let started = Instant::now();
        let attempts = Cell::new(0u32);
        let done: Result<(), &str> = settling(budget, |_| {
            attempts.set(attempts.get() + 1);
            async { Err("down") }
        })
        .await;
        assert_eq!(done, Err("down"));
        let spent = started.elapsed();
        assert!(spent <= budget, "{spent:?}");
        // Pauses of 10, 20, ... 320, then 500 ms: 8 of them fit in 2 s, so 9 attempts.
        assert_eq!(attempts.get(), 9);
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_that_stalls_through_the_budget_is_not_tried_again() {
        let budget = Duration::from_millis(300);
        let attempts = Cell::new(0u32);
        let done: Result<(), &str> = settling(budget, |_| {
            attempts.set(attempts.get() + 1);
            async move {
                tokio::time::sleep(budget).await;
                Err("deadline")
            }
        })
        .await;
        assert_eq!(done, Err("deadline"));
        assert_eq!(attempts.get(), 1);
    }
}
