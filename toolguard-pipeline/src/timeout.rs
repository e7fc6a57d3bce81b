//! A time limit whose timer starts only when the limited future first waits.
//!
//! Most store operations of the memory backends, and many handlers, finish in their first poll:
//! for them `tokio::time::timeout` would still read the clock to place a timer that is never
//! used. [`limit`] polls the future first and reads the clock only when it has to wait.

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

impl<F: Future> Future for Limited<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Poll::Ready(value) = this.fut.poll(cx) {
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
}
