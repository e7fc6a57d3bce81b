//! The high-risk transfer tool of a dispatcher process, and its side-effect log: one line per
//! executed transfer, appended (`O_APPEND`, one `write`) before the handler returns, so that it
//! survives the process being killed at any instant after it.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use toolguard::{Reconciled, ToolContext, ToolError, tool};

use super::points::{Point, Points};
use super::protocol::{Effect, read_effects};

/// The state of a dispatcher process: its side-effect log and crash points.
#[derive(Debug)]
pub(crate) struct Bank {
    node: u32,
    log: PathBuf,
    file: Mutex<File>,
    points: Arc<Points>,
}

impl Bank {
    /// Opens (appending) the side-effect log at `log`.
    pub(crate) fn open(node: u32, log: &Path, points: Arc<Points>) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(log)?;
        Ok(Bank {
            node,
            log: log.to_owned(),
            file: Mutex::new(file),
            points,
        })
    }

    /// Appends `effect` as one line in one write.
    fn append(&self, effect: &Effect) -> Result<(), ToolError> {
        let mut line = serde_json::to_vec(effect).map_err(|e| ToolError::failed(e.to_string()))?;
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        file.write_all(&line)
            .map_err(|e| ToolError::failed(format!("side-effect log: {e}")))
    }
}

/// What a transfer returns.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub(crate) struct Receipt {
    /// The transfer's reference.
    reference: String,
    /// Cents moved.
    amount: u64,
}

/// What became of an operation whose process died: the side-effect log knows.
async fn landed(
    ctx: &ToolContext<Bank>,
    _args: &TransferArgs,
) -> Result<Reconciled<Receipt>, ToolError> {
    let Some(op) = ctx.operation_id() else {
        return Ok(Reconciled::Unknown);
    };
    let effects = read_effects(&ctx.state().log)
        .map_err(|e| ToolError::failed(format!("side-effect log: {e}")))?;
    Ok(match effects.iter().find(|e| e.operation_id == op) {
        Some(e) => Reconciled::Completed(Receipt {
            reference: e.reference.clone(),
            amount: e.amount,
        }),
        None => Reconciled::NotExecuted,
    })
}

/// Moves money out of the caller's account; amounts over $500.00 wait for a teller.
#[tool(
    risk = "high",
    idempotent(key = "host"),
    approval_over = 50_000,
    timeout_ms = 1000,
    reconcile = landed
)]
pub(crate) async fn transfer(
    ctx: &ToolContext<Bank>,
    /// The transfer's reference (the client sends its idempotency key).
    #[arg(kind = "identifier", max_len = 64)]
    reference: String,
    /// Amount in cents.
    #[arg(amount, min = 1, max = 1_000_000)]
    amount: u64,
) -> Result<Receipt, ToolError> {
    let bank = ctx.state();
    bank.points.hit(Point::HandlerBeforeEffect);
    let effect = Effect {
        operation_id: ctx.operation_id().unwrap_or_default().to_owned(),
        reference: reference.clone(),
        subject: ctx.subject().to_owned(),
        session: ctx.principal().session_id.to_string(),
        amount,
        node: bank.node,
    };
    bank.append(&effect)?;
    bank.points.hit(Point::HandlerAfterEffect);
    Ok(Receipt { reference, amount })
}
