//! Keys: the host's secret MAC keys ([`HostKeys`]) that make digests, approval seals and the
//! audit chain unforgeable for anyone without them, read from a key file or the environment
//! ([`file`](mod@file) describes the format and rotation), and the rule that idempotency keys are accepted
//! only as written ([`check_idempotency_key`]).

pub mod file;
mod host;
mod idempotency;

pub use file::{HOST_KEYS_ENV, KeyFileError, generate_key_file, rotate_key_file};
pub use host::{HostKeys, KeyError, MIN_SECRET_LEN};
pub use idempotency::{MAX_IDEMPOTENCY_KEY_LEN, check_idempotency_key};
