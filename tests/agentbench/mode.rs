//! The provenance mode under test: the only place where the session-level and the per-argument
//! flow policy differ.
//!
//! The per-argument mode needs `FlowPolicy::per_argument()`, `Dispatcher::add_trusted_input`
//! and field roles (`#[arg(role = "...")]`). Until they exist, [`Mode::available`] lists the
//! session-level mode only and the report shows the per-argument column as not measured. Wiring
//! it is this file: return the precise policy from [`Mode::flow`], register each user turn in
//! [`Mode::user_turn`], and add `PerArgument` to [`Mode::available`]. The roles each domain's
//! tools will declare are listed in its `ROLES` table.

use toolguard::provenance::FlowPolicy;
use toolguard::{Dispatcher, Principal};

/// Which provenance the dispatcher applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Session-level taint (the strict mode): after any untrusted source, every high-risk
    /// change and every open egress waits for a human.
    Session,
    /// Per-argument origins: a destination or amount from untrusted content waits, content
    /// carrying session data to an untrusted destination is egress, the rest runs.
    PerArgument,
}

impl Mode {
    /// Both modes, in report order.
    pub const ALL: [Mode; 2] = [Mode::Session, Mode::PerArgument];

    /// The modes the pipeline implements today.
    pub fn available() -> &'static [Mode] {
        &[Mode::Session]
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
            // Not in the pipeline yet: `FlowPolicy::per_argument()`.
            Mode::PerArgument => FlowPolicy::default(),
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
            // Not in the pipeline yet: `dispatcher.add_trusted_input(principal, prompt)`.
            Mode::PerArgument => {
                let _ = (dispatcher, principal, prompt);
            }
        }
    }
}

/// What an argument is for, as the per-argument flow policy reads it (`#[arg(role = "...")]`
/// once the macro takes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Where money or data goes (a recipient, an account, an address, a URL).
    Destination,
    /// How much.
    Amount,
    /// Free text carried to the destination.
    Content,
    /// Which of the user's own objects the call acts on.
    Selector,
}

/// The role of each argument of a domain's state-changing and egress tools: `(tool, argument,
/// role)`.
pub type Roles = &'static [(&'static str, &'static str, Role)];
