//! The build-time name check: every tool or field name a builder option mentions must be
//! registered, or `build()` names the unknown one and the nearest registered name. A typo
//! (`sendnote` for `send_note`) would otherwise silently disable a limit or an allowlist.

use std::collections::BTreeMap;

use super::BuildError;
use crate::sanitize::Sanitizer;
use crate::stage::authorize::Authorizer;
use crate::stage::core::Registered;
use crate::stage::policy::RiskPolicy;

/// Checks the names of the policy, sanitizer, authorizer and idempotency TTL options.
pub(super) fn check<'a, S: Send + Sync + 'static>(
    tools: &BTreeMap<String, Registered<S>>,
    policy: &RiskPolicy,
    sanitizer: &Sanitizer,
    authorizer: &dyn Authorizer,
    ttl_tools: impl Iterator<Item = &'a String>,
) -> Result<(), BuildError> {
    let known = |option: &'static str, tool: &str| -> Result<&Registered<S>, BuildError> {
        tools.get(tool).ok_or_else(|| BuildError::UnknownTool {
            option,
            tool: tool.to_owned(),
            nearest: nearest(tool, tools.keys().map(String::as_str)),
        })
    };
    for tool in sorted(policy.configured_tools()) {
        known("RiskPolicy", tool)?;
    }
    for tool in sorted(ttl_tools.map(String::as_str)) {
        known("idempotency_ttl", tool)?;
    }
    let authorized = authorizer.configured_tools();
    for tool in sorted(authorized.iter().map(String::as_str)) {
        known("Authorizer", tool)?;
    }
    let mut fields: Vec<(&'static str, &str, &str)> = sanitizer
        .configured_fields()
        .map(|(t, f)| ("Sanitizer", t, f))
        .chain(
            policy
                .current_flow()
                .configured_fields()
                .map(|(t, f)| ("FlowPolicy", t, f)),
        )
        .collect();
    fields.sort_unstable();
    for (option, tool, field) in fields {
        let spec = known(option, tool)?.spec();
        if spec.field(field).is_none() {
            return Err(BuildError::UnknownField {
                option,
                tool: tool.to_owned(),
                field: field.to_owned(),
                nearest: nearest(field, spec.fields.iter().map(|f| f.name.as_str())),
            });
        }
    }
    Ok(())
}

/// Checks the tool names and values of a detection configuration.
pub(super) fn check_detection<S: Send + Sync + 'static>(
    tools: &BTreeMap<String, Registered<S>>,
    detection: &crate::detect::Detection,
) -> Result<(), BuildError> {
    for tool in sorted(detection.configured_tools()) {
        if !tools.contains_key(tool) {
            return Err(BuildError::UnknownTool {
                option: "Detection",
                tool: tool.to_owned(),
                nearest: nearest(tool, tools.keys().map(String::as_str)),
            });
        }
    }
    detection.check(|name| tools.get(name).map(Registered::spec))?;
    Ok(())
}

/// `names` in a stable order, so the first unknown name reported does not vary between runs.
fn sorted<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut names: Vec<&str> = names.collect();
    names.sort_unstable();
    names
}

/// The candidate nearest to `name` by edit distance, if it is near (at most a third of the
/// longer name's length, and at least 1).
pub(super) fn nearest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<String> {
    candidates
        .map(|c| (distance(name, c), c))
        .filter(|(d, c)| *d <= (name.chars().count().max(c.chars().count()) / 3).max(1))
        .min()
        .map(|(_, c)| c.to_owned())
}

/// ` (did you mean `x`?)` for a nearest name, else a hint to register the tool or fix the name.
pub(super) fn hint(nearest: &Option<String>) -> String {
    match nearest {
        Some(n) => format!("; did you mean `{n}`?"),
        None => "; register it or correct the name".to_owned(),
    }
}

/// Levenshtein distance over characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_names_a_close_tool_and_nothing_for_a_stranger() {
        let tools = ["send_note", "transfer_funds"];
        assert_eq!(
            nearest("sendnote", tools.into_iter()).as_deref(),
            Some("send_note")
        );
        assert_eq!(
            nearest("send_nte", tools.into_iter()).as_deref(),
            Some("send_note")
        );
        assert_eq!(nearest("delete_everything", tools.into_iter()), None);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
    }
}
