//! Single flight: in one process, calls with the same idempotency key and the same request
//! share one attempt. The first call (the pilot) goes to the idempotency store and, if it holds
//! the key, executes; the others (followers) never touch the store while it is in flight. A
//! follower that does not wait is answered `in_progress` at once; one that waits parks until
//! the pilot lands and replays the pilot's stored outcome, or, when the pilot ended without one
//! (a handler error, a store failure), boards again (one of them becomes the next pilot).
//!
//! So a hot key costs the store one reservation however many calls carry it: 10,000 concurrent
//! calls do not queue 10,000 times for a pool connection, and the pilot's own store calls
//! (reservation, settlement) never wait behind its followers. The waiting room is bounded
//! ([`MAX_WAITERS`] per flight); a call beyond it is answered `in_progress`. Other processes
//! still meet at the store, which decides between them as before.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use hashbrown::HashTable;
use tokio::sync::watch;

use crate::store::{ScopedKey, StoredOutcome};

/// Most calls that wait on one flight at a time.
pub(crate) const MAX_WAITERS: usize = 65_536;

/// A flight: the key and request digest its calls share.
type FlightKey = (ScopedKey, String);

/// How a flight ended.
#[derive(Debug, Clone)]
pub(crate) enum Landing {
    /// The outcome stored under the key: every follower replays it.
    Outcome(StoredOutcome),
    /// Nothing was stored (the key was released or never held): followers board again.
    Retry,
}

/// One attempt in flight.
struct Flight {
    /// How it landed, and the channel its followers wait on: made by the first follower that
    /// waits, so that a flight nobody follows (almost every one) makes no channel and tells no
    /// one when it lands.
    tower: Mutex<Tower>,
    waiters: AtomicUsize,
}

/// What a flight's followers learn from.
#[derive(Default)]
struct Tower {
    /// Set once the flight landed while a follower held it.
    landed: Option<Landing>,
    /// The channel waiting followers subscribe to.
    channel: Option<watch::Sender<Option<Landing>>>,
}

/// A flight on the board, with the hash its key was filed under.
struct Boarded {
    hash: u64,
    key: FlightKey,
    flight: Arc<Flight>,
}

/// The flights in the air. A call hashes its key once: the same hash finds the flight, files a
/// new one, and lets its pilot take it off the board (by identity, without comparing keys).
type Board = Arc<Mutex<HashTable<Boarded>>>;

/// The flights of one dispatcher.
#[derive(Default)]
pub(crate) struct Flights {
    board: Board,
    /// Keyed SipHash, as `HashMap`'s: the callers choose the keys.
    hashing: std::hash::RandomState,
}

/// What a call boarding a flight becomes.
pub(crate) enum Boarding {
    /// The first: it goes to the store, and lands the flight when it ends.
    Pilot(Pilot),
    /// A flight with its key and request is in the air.
    Follower(Follower),
}

/// What a follower learns.
#[derive(Debug)]
pub(crate) enum Followed {
    /// The pilot's stored outcome, to replay.
    Landed(StoredOutcome),
    /// The pilot stored nothing: board again.
    Retry,
    /// Still in flight (the caller does not wait, its wait ran out, or the waiting room is
    /// full).
    InProgress,
}

impl Flights {
    /// Boards the flight of `key` and `digest`: the pilot of a new one, or a follower of the
    /// one in the air.
    pub(crate) fn board(&self, key: &ScopedKey, digest: &str) -> Boarding {
        let mut h = self.hashing.build_hasher();
        for part in [&key.tenant, &key.subject, &key.tool, &key.key] {
            h.write_usize(part.len());
            h.write(part.as_bytes());
        }
        h.write(digest.as_bytes());
        let hash = h.finish();
        let mut board = self.board.lock().unwrap_or_else(PoisonError::into_inner);
        let same = |b: &Boarded| b.key.0 == *key && b.key.1 == digest;
        if let Some(boarded) = board.find(hash, same) {
            return Boarding::Follower(Follower(boarded.flight.clone()));
        }
        let flight = Arc::new(Flight {
            tower: Mutex::new(Tower::default()),
            waiters: AtomicUsize::new(0),
        });
        let boarded = Boarded {
            hash,
            key: (key.clone(), digest.to_owned()),
            flight: flight.clone(),
        };
        board.insert_unique(hash, boarded, |b| b.hash);
        Boarding::Pilot(Pilot {
            board: self.board.clone(),
            hash: Some(hash),
            flight,
        })
    }
}

/// A follower of a flight in the air.
pub(crate) struct Follower(Arc<Flight>);

impl Follower {
    /// Waits until the flight lands or `until` passes (`None`: answers at once; `Some(None)`:
    /// no deadline).
    pub(crate) async fn follow(self, until: Option<Option<Instant>>) -> Followed {
        let Some(until) = until else {
            return Followed::InProgress;
        };
        let flight = self.0;
        if flight.waiters.fetch_add(1, Ordering::AcqRel) >= MAX_WAITERS {
            flight.waiters.fetch_sub(1, Ordering::AcqRel);
            return Followed::InProgress;
        }
        let mut rx = {
            let mut tower = flight.tower.lock().unwrap_or_else(PoisonError::into_inner);
            match &tower.landed {
                Some(landing) => watch::Sender::new(Some(landing.clone())).subscribe(),
                None => tower
                    .channel
                    .get_or_insert_with(|| watch::Sender::new(None))
                    .subscribe(),
            }
        };
        let landed = async {
            match rx.wait_for(Option::is_some).await {
                Ok(landing) => landing.clone(),
                // Every sender sends the landing before it is dropped, so this is not reached;
                // answered as a flight that stored nothing.
                Err(_) => Some(Landing::Retry),
            }
        };
        let landing = match until {
            None => landed.await,
            Some(u) => tokio::time::timeout_at(u.into(), landed)
                .await
                .ok()
                .flatten(),
        };
        flight.waiters.fetch_sub(1, Ordering::AcqRel);
        match landing {
            Some(Landing::Outcome(outcome)) => Followed::Landed(outcome),
            Some(Landing::Retry) => Followed::Retry,
            None => Followed::InProgress,
        }
    }
}

/// The call that flies a flight. It lands it with [`Pilot::land`]; dropped without landing
/// (the call stopped, or its future was dropped), it lands [`Landing::Retry`].
pub(crate) struct Pilot {
    board: Board,
    /// The hash its flight is filed under; `None` once landed.
    hash: Option<u64>,
    flight: Arc<Flight>,
}

impl Pilot {
    /// Ends the flight: its followers learn `landing`, and the next call with the key boards a
    /// new flight.
    pub(crate) fn land(mut self, landing: Landing) {
        self.land_once(landing);
    }

    fn land_once(&mut self, landing: Landing) {
        let Some(hash) = self.hash.take() else { return };
        let taken = {
            let mut board = self.board.lock().unwrap_or_else(PoisonError::into_inner);
            board
                .find_entry(hash, |b| Arc::ptr_eq(&b.flight, &self.flight))
                .ok()
                .map(|slot| slot.remove().0)
        };
        // Its key is dropped outside the lock.
        drop(taken);
        // Off the board, the flight can reach no new follower: held only here, nobody is
        // told (no channel was made, no landing is kept).
        if Arc::strong_count(&self.flight) == 1 {
            return;
        }
        let channel = {
            let mut tower = self
                .flight
                .tower
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            tower.landed = Some(landing.clone());
            tower.channel.take()
        };
        if let Some(channel) = channel {
            channel.send_replace(Some(landing));
        }
    }
}

impl Drop for Pilot {
    fn drop(&mut self) {
        self.land_once(Landing::Retry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Status;
    use std::time::Duration;

    fn key(k: &str) -> ScopedKey {
        ScopedKey {
            tenant: "acme".into(),
            subject: "alice".into(),
            tool: "pay".into(),
            key: k.into(),
        }
    }

    fn pilot(b: Boarding) -> Pilot {
        match b {
            Boarding::Pilot(p) => p,
            Boarding::Follower(_) => panic!("expected the pilot"),
        }
    }

    fn follower(b: Boarding) -> Follower {
        match b {
            Boarding::Follower(f) => f,
            Boarding::Pilot(_) => panic!("expected a follower"),
        }
    }

    #[tokio::test]
    async fn followers_replay_the_pilots_outcome_and_the_next_call_flies_again() {
        let flights = Flights::default();
        let p = pilot(flights.board(&key("k"), "d"));
        let waiting = follower(flights.board(&key("k"), "d"));
        let hasty = follower(flights.board(&key("k"), "d"));
        // Another request under the key, or another key, is a flight of its own.
        let _other = pilot(flights.board(&key("k"), "d2"));
        let _else = pilot(flights.board(&key("k2"), "d"));
        assert!(matches!(hasty.follow(None).await, Followed::InProgress));
        let task = tokio::spawn(waiting.follow(Some(None)));
        tokio::task::yield_now().await;
        p.land(Landing::Outcome(StoredOutcome::new(Status::Ok)));
        match task.await.unwrap() {
            Followed::Landed(o) => assert_eq!(o.status, Status::Ok),
            other => panic!("{other:?}"),
        }
        let _again = pilot(flights.board(&key("k"), "d"));
    }

    #[tokio::test]
    async fn a_dropped_pilot_sends_its_followers_back_to_board() {
        let flights = Flights::default();
        let p = pilot(flights.board(&key("k"), "d"));
        let f = follower(flights.board(&key("k"), "d"));
        drop(p);
        assert!(matches!(f.follow(Some(None)).await, Followed::Retry));
        let _next = pilot(flights.board(&key("k"), "d"));
    }

    #[tokio::test]
    async fn a_wait_that_runs_out_is_in_progress() {
        let flights = Flights::default();
        let _p = pilot(flights.board(&key("k"), "d"));
        let f = follower(flights.board(&key("k"), "d"));
        let until = Instant::now() + Duration::from_millis(20);
        assert!(matches!(
            f.follow(Some(Some(until))).await,
            Followed::InProgress
        ));
    }
}
