//! The quickstart prints what it should: each call's status, the audit trail, a verified chain.

#[path = "../../examples/quickstart.rs"]
mod quickstart;

#[tokio::test]
async fn quickstart_prints_each_status_and_a_verified_audit_trail() {
    let lines = quickstart::run().await;
    // Entry hashes cover the entry's time, so they differ per run: compare what precedes them.
    let shown: Vec<&str> = lines
        .iter()
        .map(|l| l.split(" hash=").next().unwrap_or(l).trim_end())
        .collect();
    let hashes = lines.iter().filter(|l| l.contains(" hash=")).count();
    assert_eq!(hashes, 9, "{lines:#?}");
    assert_eq!(shown, EXPECTED, "{lines:#?}");
}

const EXPECTED: &[&str] = &[
    "a good call                        -> ok                 2",
    "the same call retried              -> ok                 2 (replayed, nothing executed)",
    "duplicate keys                     -> malformed          arguments repeat a key",
    "a tool that does not exist         -> unknown_tool       no tool of that name is available",
    "an extra field claiming identity   -> invalid_arguments  1 argument error(s)",
    "an injection in an identifier      -> blocked            argument /note_id refused (identifier_charset)",
    "someone else's note                -> not_found          resource not found",
    "a note that does not exist         -> not_found          resource not found",
    "a good read                        -> ok                 {\"text\":\"alice's note\\nbuy milk\"}",
    "",
    "audit trail:",
    "  #1  append_line        ok                 stage=envelope    reason=-",
    "  #2  append_line        ok                 stage=idempotency reason=-",
    "  #3  read_note          malformed          stage=parse       reason=duplicate_key",
    "  #4  delete_everything  unknown_tool       stage=registry    reason=unknown_tool",
    "  #5  read_note          invalid_arguments  stage=validate    reason=schema",
    "  #6  read_note          blocked            stage=sanitize    reason=identifier_charset",
    "  #7  read_note          not_found          stage=execute     reason=foreign_subject",
    "  #8  read_note          not_found          stage=execute     reason=missing",
    "  #9  read_note          ok                 stage=envelope    reason=-",
    "hash chain verifies (9 entries)",
];
