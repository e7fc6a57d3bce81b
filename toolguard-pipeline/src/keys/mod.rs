//! Keys: the host's secret MAC keys ([`HostKeys`]) that make digests, approval seals and the
//! audit chain unforgeable for anyone without them, and the rule that idempotency keys are
//! accepted only as written ([`check_idempotency_key`]).

mod host;
mod idempotency;

pub use host::{HostKeys, KeyError, MIN_SECRET_LEN};
pub use idempotency::{MAX_IDEMPOTENCY_KEY_LEN, check_idempotency_key};
