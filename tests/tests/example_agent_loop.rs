//! Every claim the agent loop example prints holds.

#[path = "../../examples/common/claims.rs"]
mod claims;
#[path = "../../examples/agent_loop/embed.rs"]
mod embed;

#[tokio::test]
async fn every_agent_loop_claim_holds() {
    let claims = embed::run().await;
    let labels: Vec<&str> = claims.all().iter().map(|c| c.what.as_str()).collect();
    assert_eq!(
        labels, CLAIMS,
        "the example makes exactly these claims, in this order"
    );
    assert!(claims.failed().is_empty(), "failed: {:?}", claims.failed());
}

/// Every claim the example prints, in order.
const CLAIMS: &[&str] = &[
    "all three tools export to OpenAI, strict",
    "all three export to Anthropic, with an input_schema each",
    "three parallel calls in one response are all run and answered",
    "each answer is a role: tool message carrying its own tool_call_id, in call order",
    "the assistant message with its tool_calls goes back into the conversation first",
    "an ok result reaches the model as data: {\"status\":\"ok\",\"data\":...}",
    "bob's order and a missing order answer not_found, with the same text",
    "the not_found text reveals neither the order's existence nor its owner",
    "the cut-off argument string is malformed (invalid_json), and the model is told so",
    "the unknown tool answers unknown_tool without echoing its name",
    "a strict-mode null for the optional note passes: the canonical schema of an Option accepts null, so restore_call_nulls leaves it and validation agrees",
    "the pending answer carries the approval id in the text the model sees",
    "the parallel note runs while the cancellation waits",
    "the clerk's approval cancels the order; the model's retry replays ok",
    "the loop ends on the model's text answer",
    "every request sent the tools along",
    "a response the adapter cannot read (a tool call of type custom) ends the turn with the adapter's error: none of its calls runs, and the conversation gets no message whose call ids it could not answer",
    "a dispatch task that fails to join still answers its tool_call_id: outcome_unknown (failed for a read-only tool), reason dispatch_task_failed",
    "the four tool_use blocks of one message are answered in one user message",
    "the ok result has is_error: false",
    "the injected note is blocked (prompt_injection), is_error: true, payload not echoed",
    "the unknown tool answers unknown_tool with is_error: true",
    "an input that is not an object is malformed (not_an_object), is_error: true",
    "the pending cancellation is an error result carrying the approval id",
    "ORDER-5 is not cancelled, and no note was added to it",
    "the approval is bound to the provider path the call came by (anthropic, messages, msg_02)",
    "the loop ends on the model's text answer",
    "one terminal entry per call and decision (14 entries)",
    "the hash chain verifies",
    "the audit keeps the unknown tool's requested name for forensics",
    "the audit keeps why ORDER-8 was not found: foreign_subject",
    "the review read through read_review (output = \"untrusted\") becomes a source of the session",
    "the host marks a help-center passage it retrieved as untrusted (add_source)",
    "add_note then waits for a human (flow rule of the tool), naming the latest source",
    "a new conversation (clear_sources) adds the note unattended",
];
