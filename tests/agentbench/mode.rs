//! The provenance mode under test: the only place where the session-level and the per-argument
//! flow policy differ.
//!
//! The per-argument mode is `FlowPolicy::per_argument()` with each user turn registered as
//! trusted input (`Dispatcher::add_trusted_input`); the domains' tools declare the role of each
//! argument of their state-changing and egress calls with `#[arg(role = "...")]`.

use toolguard::provenance::FlowPolicy;
use toolguard::{Dispatcher, Principal};

/// Which provenance the dispatcher applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Session-level taint (the strict mode): after any untrusted source, every high-risk
    /// change and every open egress waits for a human.
    Session,
    /// Per-argument origins (`FlowPolicy::per_argument()`): a destination or amount from
    /// untrusted content waits, so do a selector of a high-risk change, content copying a value
    /// or an address from untrusted content into a state change, content carrying session data
    /// to an untrusted destination, and a destination of egress or a high-risk change the user
    /// did not name; the rest runs.
    PerArgument,
}

impl Mode {
    /// Both modes, in report order.
    pub const ALL: [Mode; 2] = [Mode::Session, Mode::PerArgument];

    /// The modes the pipeline implements today.
    pub fn available() -> &'static [Mode] {
        &Mode::ALL
    }

    /// Whether this mode can run.
    pub fn is_available(self) -> bool {
        Mode::available().contains(&self)
    }

    /// The label of the report's columns.
    pub fn label(self) -> &'static str {
        match self {
            Mode::Session => "session-level",
            Mode::PerArgument => "per-argument",
        }
    }

    /// The flow policy of this mode.
    pub fn flow(self) -> FlowPolicy {
        match self {
            Mode::Session => FlowPolicy::default(),
            Mode::PerArgument => FlowPolicy::per_argument(),
        }
    }

    /// Registers what the user typed for this turn as trusted input (per-argument mode only:
    /// session-level provenance has no notion of trusted values).
    pub async fn user_turn<S: Send + Sync + 'static>(
        self,
        dispatcher: &Dispatcher<S>,
        principal: &Principal,
        prompt: &str,
    ) {
        match self {
            Mode::Session => {}
            Mode::PerArgument => dispatcher
                .add_trusted_input(principal, prompt)
                .await
                .expect("the memory store records trusted input"),
        }
    }
}
