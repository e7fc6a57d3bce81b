//! Freeing what a refused call brought, off the caller's path.
//!
//! A host that hands over arguments already parsed ([`RawArguments::Value`]) owns a value the
//! gate may refuse by its size without reading it (an object of a million keys, a 50 MB
//! string). The refusal costs microseconds; freeing such a value costs what building it did
//! (a million map nodes: a fifth of a second). The dispatcher hands the arguments of a call the
//! gate refused to one background thread that frees them, so the refusal returns at once.
//!
//! The hand-over is bounded: at most [`PENDING`] values wait for the thread; beyond that the
//! caller frees its own (the cost lands where the load comes from, memory stays bounded).

use std::sync::OnceLock;
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};

use crate::call::RawArguments;

/// How many refused arguments may wait to be freed.
const PENDING: usize = 4;

/// Something to free.
type Garbage = Box<dyn Send>;

/// The sender of the freeing thread, started on first use; `None` when it could not start.
fn freer() -> Option<&'static SyncSender<Garbage>> {
    static FREER: OnceLock<Option<SyncSender<Garbage>>> = OnceLock::new();
    FREER
        .get_or_init(|| {
            let (tx, rx) = sync_channel::<Garbage>(PENDING);
            std::thread::Builder::new()
                .name("toolguard-free".into())
                .spawn(move || rx.into_iter().for_each(drop))
                .ok()
                .map(|_| tx)
        })
        .as_ref()
}

/// Frees the arguments of a call the gate refused: parsed values on the freeing thread, text
/// (one allocation) here.
pub(crate) fn release(arguments: RawArguments) {
    if let RawArguments::Value(value) = arguments {
        free_later(Box::new(value));
    }
}

/// Hands `garbage` to the freeing thread, or frees it here when the thread is busy.
fn free_later(garbage: Garbage) {
    match freer() {
        Some(tx) => match tx.try_send(garbage) {
            Ok(()) => {}
            Err(TrySendError::Full(g) | TrySendError::Disconnected(g)) => drop(g),
        },
        None => drop(garbage),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::{Sender, channel};

    /// Says on which thread it is freed.
    struct Witness(Sender<Option<String>>);

    impl Drop for Witness {
        fn drop(&mut self) {
            let _ = self.0.send(std::thread::current().name().map(String::from));
        }
    }

    #[test]
    fn refused_values_are_freed_on_the_freeing_thread() {
        let (tx, rx) = channel();
        free_later(Box::new(Witness(tx)));
        assert_eq!(rx.recv().unwrap().as_deref(), Some("toolguard-free"));
        // Many hand-overs never block the caller: past the bound, the caller frees its own.
        let (tx, rx) = channel();
        for _ in 0..64 {
            free_later(Box::new(Witness(tx.clone())));
        }
        drop(tx);
        assert_eq!(rx.iter().count(), 64);
        // Text and values alike are accepted.
        release(RawArguments::Json("{}".into()));
        release(RawArguments::Value(serde_json::json!({"a": [1, 2]})));
    }
}
