//! A time limit whose timer starts only when the limited future first waits.
//!
//! Most store operations of the memory backends, and many handlers, finish in their first poll:
//! for them `tokio::time::timeout` would still read the clock to place a timer that is never
//! used. [`limit`] polls the future first and reads the clock only when it has to wait.
//!
//! While a limited future is polled, the limit is in force on that thread ([`in_force`]): the
//! futures it awaits, a store backend's commands among them, can tell that something will drop
//! them within that time and need no timer of their own.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// The limited future did not finish in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Elapsed;

/// Longest limit a timer is set for (a longer one, up to `Duration::MAX`, waits this long).
const LONGEST: Duration = Duration::from_secs(60 * 60 * 24 * 365 * 30);

/// `fut`, failing with [`Elapsed`] once `limit` has passed since it first waited.
pub(crate) fn limit<F: Future>(limit: Duration, fut: F) -> Limited<F> {
    Limited {
        fut,
        timer: None,
        limit,
        since: None,
    }
}

/// `fut`, failing with [`Elapsed`] once `limit` has passed since `since` (a moment already
/// read, such as the start of the work `fut` does).
pub(crate) fn limit_since<F: Future>(since: Instant, limit: Duration, fut: F) -> Limited<F> {
    Limited {
        fut,
        timer: None,
        limit,
        since: Some(since),
    }
}

pin_project_lite::pin_project! {
    /// The future of [`limit`] and [`limit_since`].
    pub(crate) struct Limited<F> {
        #[pin]
        fut: F,
        #[pin]
        timer: Option<tokio::time::Sleep>,
        limit: Duration,
        since: Option<Instant>,
    }
}

thread_local! {
    /// The shortest limit of the limited futures being polled on this thread.
    static IN_FORCE: Cell<Option<Duration>> = const { Cell::new(None) };
}

/// The shortest time limit among the limited futures being polled on this thread, if any: the
/// future being polled is dropped within it (its limit counts from its first wait, never later
/// than now).
pub(crate) fn in_force() -> Option<Duration> {
    IN_FORCE.with(Cell::get)
}

/// Puts back the limit in force before a limited future's poll, also when that poll panics.
struct Restore(Option<Duration>);

impl Drop for Restore {
    fn drop(&mut self) {
        IN_FORCE.with(|cell| cell.set(self.0));
    }
}

impl<F: Future> Future for Limited<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let limit = *this.limit;
        let polled = {
            let _restore = Restore(IN_FORCE.with(|cell| {
                let outer = cell.get();
                cell.set(Some(outer.map_or(limit, |o| o.min(limit))));
                outer
            }));
            this.fut.poll(cx)
        };
        if let Poll::Ready(value) = polled {
            return Poll::Ready(Ok(value));
        }
        if this.timer.is_none() {
            let since = this.since.unwrap_or_else(Instant::now);
            let deadline = since + (*this.limit).min(LONGEST);
            this.timer
                .set(Some(tokio::time::sleep_until(deadline.into())));
        }
        match this.timer.as_pin_mut() {
            Some(timer) => timer.poll(cx).map(|()| Err(Elapsed)),
            None => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A future that finishes in its first poll needs no timer: it runs on a runtime without a
    /// time driver, where placing a timer would panic.
    #[test]
    fn a_ready_future_sets_no_timer() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert_eq!(rt.block_on(limit(Duration::ZERO, async { 7 })), Ok(7));
        let since = Instant::now() - Duration::from_secs(5);
        let late = limit_since(since, Duration::from_millis(1), async { 8 });
        assert_eq!(rt.block_on(late), Ok(8), "a finished future is never late");
    }

    #[tokio::test]
    async fn a_waiting_future_is_cut_at_its_limit() {
        let started = Instant::now();
        let never = limit(Duration::from_millis(30), std::future::pending::<()>());
        assert_eq!(never.await, Err(Elapsed));
        assert!(started.elapsed() >= Duration::from_millis(30));
        let quick = limit(
            Duration::from_secs(5),
            tokio::time::sleep(Duration::from_millis(5)),
        );
        assert_eq!(quick.await, Ok(()));
    }

    /// The limit counts from `since`: work done before the first wait counts too.
    #[tokio::test]
    async fn a_limit_since_counts_from_the_given_moment() {
        let since = Instant::now() - Duration::from_millis(50);
        let started = Instant::now();
        let slow = limit_since(
            since,
            Duration::from_millis(60),
            tokio::time::sleep(Duration::from_secs(5)),
        );
        assert_eq!(slow.await, Err(Elapsed));
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    /// The longest limit waits without overflowing the clock.
    #[tokio::test]
    async fn the_longest_limit_does_not_overflow() {
        let forever = limit(Duration::MAX, tokio::time::sleep(Duration::from_millis(1)));
        assert_eq!(forever.await, Ok(()));
    }

    /// The futures a limited future awaits see its limit, the shortest one when limits nest,
    /// and nothing once its poll is over, also when the poll panicked.
    #[tokio::test]
    async fn a_limit_is_in_force_while_its_future_is_polled() {
        assert_eq!(in_force(), None);
        let seen = limit(Duration::from_secs(3), async {
            let outer = in_force();
            tokio::task::yield_now().await;
            let after_a_wait = in_force();
            let inner = limit(Duration::from_secs(1), async { in_force() }).await;
            let longer = limit(Duration::from_secs(9), async { in_force() }).await;
            (outer, after_a_wait, inner, longer, in_force())
        })
        .await;
        let (three, one) = (Some(Duration::from_secs(3)), Some(Duration::from_secs(1)));
        assert_eq!(seen, Ok((three, three, Ok(one), Ok(three), three)));
        assert_eq!(in_force(), None);

        // The test's runtime has one thread: the task panics on this one.
        let panicked = tokio::spawn(limit(Duration::from_secs(1), async {
            panic!("a store that panics")
        }));
        assert!(panicked.await.is_err_and(|e| e.is_panic()));
        assert_eq!(in_force(), None, "a panic leaves no limit behind");
    }
}
