//! What of an upstream MCP server beside its tools reaches the model, and what the upstream may
//! ask of the client: `[resources]`, `[prompts]` (exposed or hidden by URI or name pattern,
//! their contents a provenance source unless declared trusted), `[sampling]` and
//! `[elicitation]` (the upstream's requests allowed, held for a reviewer, or denied).
//!
//! Each section is closed by default: without `[resources]` no resource is listed or read,
//! without `[sampling]` every `sampling/createMessage` of the upstream is denied.
//!
//! ```toml
//! [resources]
//! expose = ["file:///srv/docs/*", "test://static/resource/*"]
//! hide = ["file:///srv/docs/private/*"]
//! trust = "untrusted"          # the default: contents read become a provenance source
//!
//! [prompts]
//! expose = ["*"]
//! hide = ["admin_*"]
//!
//! [sampling]
//! action = "approval"          # "allow", "approval" (a reviewer decides) or "deny"
//!
//! [elicitation]
//! action = "allow"
//! ```
//!
//! A pattern is matched against the whole URI or name; `*` stands for any run of characters
//! (also none, also `/`). `hide` wins over `expose`.

use serde::Deserialize;

use toolguard_pipeline::declare::OutputTrust;

/// `[resources]` or `[prompts]`: which of the upstream's resources (by URI) or prompts (by
/// name) are exposed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExposeSection {
    /// Patterns of what is exposed (`*` matches any run of characters); none: nothing is.
    #[serde(default)]
    pub expose: Vec<String>,
    /// Patterns of what stays hidden even when `expose` matches.
    #[serde(default)]
    pub hide: Vec<String>,
    /// Whether the contents come from outside the caller's trust (`"untrusted"`, the default:
    /// each read resource or fetched prompt becomes a provenance source of the session) or
    /// were produced by the upstream application itself (`"trusted"`).
    #[serde(default)]
    pub trust: Option<OutputTrust>,
}

impl ExposeSection {
    /// Whether `name` (a URI or a prompt name) is exposed.
    pub fn exposes(&self, name: &str) -> bool {
        self.expose.iter().any(|p| pattern_matches(p, name))
            && !self.hide.iter().any(|p| pattern_matches(p, name))
    }

    /// Whether anything at all can be exposed.
    pub fn exposes_any(&self) -> bool {
        !self.expose.is_empty()
    }

    /// Whether contents read through this section become provenance sources.
    pub fn untrusted(&self) -> bool {
        self.trust != Some(OutputTrust::Trusted)
    }

    pub(crate) fn check(&self, section: &str) -> Result<(), String> {
        for p in self.expose.iter().chain(&self.hide) {
            if p.is_empty() {
                return Err(format!(
                    "`[{section}]`: an empty pattern matches nothing: remove it, or use \"*\" for everything"
                ));
            }
        }
        Ok(())
    }
}

/// What the proxy does with one kind of request of the upstream (`action = "..."`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum UpstreamRequestAction {
    /// Passed on to the connected client.
    Allow,
    /// Held until a reviewer approves it over the reviewer endpoint (refused when refused or
    /// not decided within the upstream timeout).
    Approval,
    /// Refused (the default).
    #[default]
    Deny,
}

/// `[sampling]` or `[elicitation]`: what happens to the upstream's `sampling/createMessage` or
/// `elicitation/create` requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamRequestSection {
    /// `"allow"`, `"approval"` or `"deny"` (the default).
    #[serde(default)]
    pub action: UpstreamRequestAction,
}

/// Whether `pattern` (`*` = any run of characters) matches all of `text`.
pub fn pattern_matches(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Policy;

    fn parse(text: &str) -> Result<Policy, crate::PolicyError> {
        Policy::parse("policy.toml", text.to_owned())
    }

    #[test]
    fn the_sections_are_read_and_closed_by_default() {
        let none = parse("").expect("an empty file");
        assert!(!none.resources.exposes_any() && !none.prompts.exposes_any());
        assert_eq!(none.sampling.action, UpstreamRequestAction::Deny);
        assert_eq!(none.elicitation.action, UpstreamRequestAction::Deny);
        let all = parse(
            "[resources]\nexpose = [\"file:///*\"]\ntrust = \"trusted\"\n[prompts]\nexpose = [\"*\"]\nhide = [\"x\"]\n[sampling]\naction = \"approval\"\n[elicitation]\naction = \"allow\"\n",
        )
        .expect("valid sections");
        assert!(all.resources.exposes("file:///a") && !all.resources.untrusted());
        assert!(all.prompts.exposes("greet") && !all.prompts.exposes("x"));
        assert_eq!(all.sampling.action, UpstreamRequestAction::Approval);
        assert_eq!(all.elicitation.action, UpstreamRequestAction::Allow);
    }

    #[test]
    fn unknown_keys_and_values_of_the_sections_are_load_errors() {
        for (text, says) in [
            (
                "[resources]\nexposes = [\"*\"]\n",
                "unknown field `exposes`",
            ),
            (
                "[prompts]\nexpose = [\"*\"]\ntrusted = true\n",
                "unknown field `trusted`",
            ),
            (
                "[sampling]\naction = \"maybe\"\n",
                "unknown variant `maybe`",
            ),
            ("[elicitation]\nallow = true\n", "unknown field `allow`"),
            (
                "[resources]\ntrust = \"sometimes\"\n",
                "unknown variant `sometimes`",
            ),
            ("[resources]\nexpose = [\"\"]\n", "empty pattern"),
        ] {
            let error = parse(text).expect_err(text).to_string();
            assert!(error.contains(says), "{text}: {error}");
            assert!(error.starts_with("policy.toml:"), "{error}");
        }
    }

    #[test]
    fn patterns_match_the_whole_text_with_stars_for_any_run() {
        assert!(pattern_matches("*", ""));
        assert!(pattern_matches("*", "file:///a/b"));
        assert!(pattern_matches("file:///a/*", "file:///a/b/c"));
        assert!(!pattern_matches("file:///a/*", "file:///b/a/c"));
        assert!(pattern_matches(
            "test://*/resource/*",
            "test://static/resource/1"
        ));
        assert!(pattern_matches("greet", "greet"));
        assert!(!pattern_matches("greet", "greeting"));
        assert!(!pattern_matches("a*a", "a"));
        assert!(pattern_matches("a*a", "aa"));
    }

    #[test]
    fn hide_wins_over_expose_and_nothing_is_exposed_by_default() {
        let s = ExposeSection {
            expose: vec!["*".into()],
            hide: vec!["secret_*".into()],
            trust: None,
        };
        assert!(s.exposes("greet"));
        assert!(!s.exposes("secret_prompt"));
        assert!(!ExposeSection::default().exposes("greet"));
        assert!(s.untrusted());
    }
}
