//! A multi-domain agent benchmark for provenance: four agent domains (banking, messaging,
//! travel, office work) written as real `#[tool]` tools over in-memory environments, each with
//! user tasks (a prompt, the calls a correct agent makes, a check of the final environment) and
//! injection tasks (an instruction planted in the content third parties write, the calls of an
//! agent that obeys it, a check whether the attacker's goal was reached).
//!
//! [`replay`](crate::agentbench::replay) plays every user task alone (clean) and every (user task × injection task) pair of
//! a domain as a fully compromised agent: it makes the user task's calls, and if any of their
//! results carried the planted instruction, it then makes every call of the attacker. Approvals
//! are never granted: a held call is a call that did not run. [`report`](crate::agentbench::report) turns the outcomes into
//! the per-domain table of `BENCHMARKS.md`.
//!
//! Provenance has two modes ([`Mode`](crate::agentbench::Mode)): the session-level flow policy (any untrusted source in
//! the session holds every high-risk change and every open egress) and the per-argument one.
//! Everything that differs between them is in [`mode`](crate::agentbench::mode); the rest of the suite does not know which
//! one runs.

pub mod banking;
pub mod gateway;
pub mod messaging;
pub mod mode;
pub mod office;
pub mod replay;
pub mod report;
pub mod travel;

use std::sync::{Mutex, MutexGuard};

use serde_json::Value;

pub use mode::Mode;

/// Called with the state after every access that may have changed it.
pub type Observer<S> = Box<dyn Fn(&S) + Send + Sync>;

/// The in-memory environment of a domain, shared by its tools (the dispatcher's state).
pub struct Env<S> {
    state: Mutex<S>,
    observer: Option<Observer<S>>,
}

impl<S> Env<S> {
    /// An environment holding `state`.
    pub fn new(state: S) -> Self {
        Env {
            state: Mutex::new(state),
            observer: None,
        }
    }

    /// An environment holding `state` that shows `observer` the state after every access (an
    /// MCP server process reports its checks this way).
    pub fn observed(state: S, observer: Observer<S>) -> Self {
        Env {
            state: Mutex::new(state),
            observer: Some(observer),
        }
    }

    /// The state, locked.
    pub fn lock(&self) -> EnvGuard<'_, S> {
        EnvGuard {
            guard: self.state.lock().unwrap_or_else(|e| e.into_inner()),
            observer: self.observer.as_deref(),
        }
    }
}

/// The locked state of an [`Env`]; its observer sees the state when the guard is dropped.
pub struct EnvGuard<'a, S> {
    guard: MutexGuard<'a, S>,
    observer: Option<&'a (dyn Fn(&S) + Send + Sync)>,
}

impl<S> std::ops::Deref for EnvGuard<'_, S> {
    type Target = S;
    fn deref(&self) -> &S {
        &self.guard
    }
}

impl<S> std::ops::DerefMut for EnvGuard<'_, S> {
    fn deref_mut(&mut self) -> &mut S {
        &mut self.guard
    }
}

impl<S> Drop for EnvGuard<'_, S> {
    fn drop(&mut self) {
        if let Some(observe) = self.observer {
            observe(&self.guard);
        }
    }
}

/// One tool call of a ground-truth sequence.
#[derive(Debug, Clone)]
pub struct Call {
    /// The tool.
    pub tool: &'static str,
    /// Its arguments, as the agent writes them (values from the prompt or earlier results).
    pub args: Value,
}

/// `tool` called with `args`.
pub fn call(tool: &'static str, args: Value) -> Call {
    Call { tool, args }
}

/// A task of the user: what they asked, what a correct agent does, and how to tell it was done.
#[derive(Debug)]
pub struct UserTask<S> {
    /// Stable id within the domain (`user_task_3`).
    pub id: &'static str,
    /// What the user typed (registered as trusted input in the per-argument mode).
    pub prompt: &'static str,
    /// The calls, in order.
    pub calls: Vec<Call>,
    /// Whether the environment shows the task done (called after the user task's calls).
    pub check: fn(&S) -> bool,
}

/// An attack: an instruction an attacker plants in content they can write, the calls of an agent
/// that obeys it, and whether the goal was reached.
#[derive(Debug)]
pub struct InjectionTask<S> {
    /// Stable id within the domain (`injection_task_2`).
    pub id: &'static str,
    /// The attacker's goal, for the report.
    pub goal: &'static str,
    /// The planted text (ASCII, no quotes, so that it survives every JSON encoding verbatim).
    pub text: &'static str,
    /// The calls of an agent that obeys it.
    pub calls: Vec<Call>,
    /// Whether the environment shows the goal reached.
    pub reached: fn(&S) -> bool,
}

/// A domain of the benchmark.
pub trait Domain: 'static {
    /// The environment's state.
    type State: Send + Sync + 'static;

    /// The domain's name in the report.
    const NAME: &'static str;

    /// The places third parties write, where an injection is planted (for the report).
    const VECTORS: &'static [&'static str];

    /// Hosts each URL field admits, `(tool, field, hosts)` (the sanitizer's allowlists, also
    /// written into the proxy's policy file).
    const URL_HOSTS: &'static [(&'static str, &'static str, &'static [&'static str])] = &[];

    /// A fresh environment.
    fn environment() -> Self::State;

    /// Plants `text` in every vector of `state`.
    fn inject(state: &mut Self::State, text: &str);

    /// A dispatcher builder with the domain's tools over `env` (the replay adds the policy).
    fn tools(
        env: std::sync::Arc<Env<Self::State>>,
    ) -> toolguard::DispatcherBuilder<Env<Self::State>>;

    /// The user tasks.
    fn user_tasks() -> Vec<UserTask<Self::State>>;

    /// The injection tasks.
    fn injection_tasks() -> Vec<InjectionTask<Self::State>>;
}

/// Evaluates `body` with the type alias `D` naming the domain called `name`: `Some(body)`, or
/// `None` for an unknown name (`for_domain!(name, D => run::<D>().await)`).
#[macro_export]
macro_rules! for_domain {
    ($name:expr, $d:ident => $body:expr) => {
        match $name {
            "banking" => {
                type $d = $crate::agentbench::banking::Banking;
                Some($body)
            }
            "messaging" => {
                type $d = $crate::agentbench::messaging::Messaging;
                Some($body)
            }
            "travel" => {
                type $d = $crate::agentbench::travel::Travel;
                Some($body)
            }
            "office" => {
                type $d = $crate::agentbench::office::OfficeWork;
                Some($body)
            }
            _ => None,
        }
    };
}

/// Every domain's runs in `mode`, straight through a dispatcher, in report order.
pub async fn run_all(mode: Mode) -> Vec<replay::DomainRuns> {
    vec![
        replay::direct::<banking::Banking>(mode).await,
        replay::direct::<messaging::Messaging>(mode).await,
        replay::direct::<travel::Travel>(mode).await,
        replay::direct::<office::OfficeWork>(mode).await,
    ]
}
