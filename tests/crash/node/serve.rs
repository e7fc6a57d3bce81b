//! The dispatcher served over the harness's line protocol: one request line, one answer line.

use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use toolguard::{Dispatcher, OperationError, Principal, ToolCall, ToolOutcome};

use super::bank::Bank;
use super::protocol::{Answer, Request, TENANT, TOOL};

/// Binds 127.0.0.1 on a free port, prints `listening PORT`, and answers until killed.
pub(crate) async fn run(dispatcher: Arc<Dispatcher<Bank>>) -> Result<(), String> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    println!("listening {port}");
    loop {
        let (socket, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let dispatcher = dispatcher.clone();
        tokio::spawn(async move {
            let (read, mut write) = socket.into_split();
            let mut line = String::new();
            if BufReader::new(read).read_line(&mut line).await.is_err() {
                return;
            }
            let answer = match serde_json::from_str::<Request>(&line) {
                Ok(request) => answer(&dispatcher, request).await,
                Err(e) => Answer {
                    status: "malformed".into(),
                    reason: Some(e.to_string()),
                    ..Answer::default()
                },
            };
            let mut out = serde_json::to_vec(&answer).unwrap_or_default();
            out.push(b'\n');
            let _ = write.write_all(&out).await;
        });
    }
}

fn caller(subject: &str, session: &str) -> Principal {
    Principal::new(TENANT, subject, session)
}

fn teller(name: &str) -> Principal {
    Principal::new(TENANT, name, format!("desk-{name}")).with_role("approver")
}

fn of_outcome(o: ToolOutcome) -> Answer {
    Answer {
        status: o.status.as_str().to_owned(),
        reason: o.reason.map(|r| r.as_str().to_owned()),
        operation_id: o.operation_id.map(|id| id.to_string()),
        approval_id: o.approval.map(|a| a.approval_id),
        replayed: o.replayed,
        ..Answer::default()
    }
}

async fn answer(d: &Dispatcher<Bank>, request: Request) -> Answer {
    match request {
        Request::Transfer {
            key,
            call_id,
            subject,
            session,
            amount,
        } => {
            let args = serde_json::json!({ "reference": key, "amount": amount });
            let call = ToolCall::new(call_id, TOOL, args.to_string()).with_idempotency_key(key);
            of_outcome(d.dispatch(call, &caller(&subject, &session)).await)
        }
        Request::Status {
            subject,
            session,
            operation_id,
        } => match d
            .operation_status(&caller(&subject, &session), &operation_id)
            .await
        {
            Ok(report) => Answer {
                status: "ok".into(),
                state: serde_json::to_value(report.state)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned)),
                reconciled: report.reconciled,
                operation_id: Some(report.operation_id),
                ..Answer::default()
            },
            Err(OperationError::NotFound) => Answer {
                status: "not_found".into(),
                ..Answer::default()
            },
            Err(e) => Answer {
                status: "unavailable".into(),
                reason: Some(e.to_string()),
                ..Answer::default()
            },
        },
        Request::Pending => match d.approvals().pending(&teller("teller-0")).await {
            Ok(list) => Answer {
                status: "ok".into(),
                ids: list.into_iter().map(|r| r.id).collect(),
                ..Answer::default()
            },
            Err(e) => Answer {
                status: "unavailable".into(),
                reason: Some(e.to_string()),
                ..Answer::default()
            },
        },
        Request::Decide {
            id,
            teller: name,
            approve,
        } => {
            let who = teller(&name);
            let outcome = if approve {
                d.approvals().approve(&who, &id).await
            } else {
                d.approvals()
                    .reject(&who, &id, "declined by the harness")
                    .await
            };
            of_outcome(outcome)
        }
    }
}
