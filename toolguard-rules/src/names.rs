//! Rules over names: identity and authority names (rule 4), money-like names (rule 3) and the
//! portable tool name (rule 9).

/// Identity or authority words a parameter name may not be, alone, in the plural (`s`) or with an
/// `id`/`ids` suffix. Names are compared after removing case, `_`, `-` and `r#` (so `TenantId`,
/// `tenant_ids`, `USERS` and `isAdmin` all match). A longer word that merely starts with one of
/// them (`subject_line`, `username_hint`, `roleplay`) is an ordinary name.
pub const IDENTITY_WORDS: [&str; 8] = [
    "tenant",
    "subject",
    "user",
    "role",
    "admin",
    "isadmin",
    "approver",
    "principal",
];

/// Words that name an identity only as an id (`owner_id`, `org_ids`, `organizationId`): the bare
/// word (`owner` of a repository, `org` of a project) is an ordinary argument.
pub const IDENTITY_ID_WORDS: [&str; 4] = ["owner", "org", "organization", "organisation"];

/// Names refused exactly as written (after the same normalization).
pub const IDENTITY_EXACT: [&str; 1] = ["approved"];

/// Words that make a parameter name money-like (rule 3): `total_usd`, `unitPrice`, `FEES`.
pub const MONEY_WORDS: [&str; 7] = [
    "amount", "price", "cost", "fee", "total", "balance", "cents",
];

/// The longest tool name providers accept.
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// Whether a parameter or property named `name` claims identity or authority (rule 4), which
/// only the authenticated principal may carry.
pub fn is_identity_name(name: &str) -> bool {
    let n: String = name
        .strip_prefix("r#")
        .unwrap_or(name)
        .chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect();
    if IDENTITY_EXACT.contains(&n.as_str()) {
        return true;
    }
    let stem_in = |suffixes: &[&str], words: &[&str]| {
        suffixes
            .iter()
            .filter_map(|s| n.strip_suffix(s))
            .any(|stem| words.contains(&stem))
    };
    stem_in(&["", "s", "id", "ids"], &IDENTITY_WORDS) || stem_in(&["id", "ids"], &IDENTITY_ID_WORDS)
}

/// The words of an identifier: split at `_`, `-` (any non-alphanumeric character) and
/// lower-to-upper case changes, lowercased; a leading `r#` is ignored.
pub fn words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut prev_lower = false;
    for c in name.strip_prefix("r#").unwrap_or(name).chars() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        prev_lower = c.is_lowercase() || c.is_numeric();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Whether one word of `name` is a money word or its plural (rule 3).
pub fn is_money_name(name: &str) -> bool {
    words(name).iter().any(|w| {
        MONEY_WORDS.contains(&w.as_str())
            || w.strip_suffix('s')
                .is_some_and(|s| MONEY_WORDS.contains(&s))
    })
}

/// Whether `name` is a tool name every provider accepts (rule 9):
/// `^[a-zA-Z][a-zA-Z0-9_-]{0,63}$`.
pub fn is_valid_tool_name(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() => {}
        _ => return false,
    }
    name.len() <= MAX_TOOL_NAME_LEN
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Whether `name` is an argument name every provider accepts for a key argument:
/// `^[a-zA-Z][a-zA-Z0-9_]{0,63}$` (a tool name without `-`).
pub fn is_valid_argument_name(name: &str) -> bool {
    is_valid_tool_name(name) && !name.contains('-')
}

/// A valid tool name close to `name`: characters other than letters, digits and `-` become `_`, leading non-letters are
/// dropped, and the result is cut to 64 characters (`my_tool` if nothing is left).
pub fn suggest_tool_name(name: &str) -> String {
    let mapped: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut s = mapped
        .trim_start_matches(|c: char| !c.is_ascii_alphabetic())
        .to_owned();
    if s.is_empty() {
        s.push_str("my_tool");
    }
    s.truncate(MAX_TOOL_NAME_LEN);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_names_are_refused_in_every_spelling() {
        for name in [
            "tenant",
            "tenants",
            "tenant_ids",
            "TenantId",
            "TENANT_ID",
            "owner_id",
            "user",
            "users",
            "userIds",
            "USER_ID",
            "principal",
            "org_id",
            "organization_id",
            "approvers",
            "is_admin",
            "isAdmin",
            "r#role",
            "approved",
        ] {
            assert!(is_identity_name(name), "{name}");
        }
        for name in [
            "subject_line",
            "username_hint",
            "owner",
            "org",
            "account_id",
            "roleplay",
            "",
        ] {
            assert!(!is_identity_name(name), "{name}");
        }
    }

    #[test]
    fn money_names_are_found_by_word() {
        for name in [
            "amount",
            "total_usd",
            "unitPrice",
            "FEE_CENTS",
            "costs",
            "BALANCE",
        ] {
            assert!(is_money_name(name), "{name}");
        }
        for name in ["ratio", "subtotalish", "coffee", "count", ""] {
            assert!(!is_money_name(name), "{name}");
        }
        assert_eq!(words("r#unitPrice_USD"), ["unit", "price", "usd"]);
    }

    #[test]
    fn tool_names_follow_the_provider_pattern() {
        assert!(is_valid_tool_name("transfer_funds"));
        assert!(is_valid_tool_name(&"a".repeat(64)));
        assert!(!is_valid_tool_name(&"a".repeat(65)));
        assert!(!is_valid_tool_name("1x"));
        // MCP servers name tools `get-sum`; every provider accepts the hyphen.
        assert!(is_valid_tool_name("send-mail"));
        assert!(!is_valid_tool_name("send.mail"));
        assert!(!is_valid_tool_name("-x"));
        assert!(!is_valid_tool_name("é"));
        assert!(!is_valid_tool_name(""));
        assert_eq!(suggest_tool_name("send.mail"), "send_mail");
        assert_eq!(suggest_tool_name("9 lives"), "lives");
        assert_eq!(suggest_tool_name("__"), "my_tool");
        assert!(is_valid_tool_name(&suggest_tool_name(&"x-".repeat(80))));
    }
}
