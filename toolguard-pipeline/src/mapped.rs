//! A future whose output is passed through a function, holding the inner future once.
//!
//! Wrapping a future in an `async` block (`async move { fut.await.map_err(..) }`) keeps it
//! twice in the block's state: once as the captured value and once as the future being
//! awaited. On a call's path, where the store futures hold records of a few hundred bytes and
//! the whole pipeline is one future, that doubling is copied on every call; [`mapped`] holds
//! the inner future in place instead.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

pin_project_lite::pin_project! {
    /// See [`mapped`].
    pub(crate) struct Mapped<F, G> {
        #[pin]
        fut: F,
        then: Option<G>,
    }
}

/// `fut`, whose output is passed through `then` once it is ready.
pub(crate) fn mapped<F: Future, G: FnOnce(F::Output) -> T, T>(fut: F, then: G) -> Mapped<F, G> {
    Mapped {
        fut,
        then: Some(then),
    }
}

impl<F: Future, G: FnOnce(F::Output) -> T, T> Future for Mapped<F, G> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let this = self.project();
        let output = std::task::ready!(this.fut.poll(cx));
        let then = this
            .then
            .take()
            .expect("a `Mapped` future is not polled after it is ready");
        Poll::Ready(then(output))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_output_goes_through_the_function_once_ready() {
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        let waiting = tokio::spawn(mapped(rx, |r| r.map(|n| n * 2)));
        tx.send(21).unwrap();
        assert_eq!(waiting.await.unwrap(), Ok(42));
    }
}
