//! Risk levels and field kinds by name, as a declaration spells them (`risk = "high"`,
//! `kind = "email"`), with the kinds that are refused outright (rule 7).

use crate::suggest::suggestion_and_list;

/// How much harm a wrong call of a tool can do, as declared (`risk = "high"`).
///
/// The one risk type of the crate family: the runtime re-exports it (`toolguard::Risk`), the
/// `#[tool]` macro parses it and the rules read it. With the `serde` feature it is serialized in
/// snake case (`"low"`, `"high"`), as tool specs and stored records spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "snake_case")
)]
pub enum Risk {
    /// Harmless, e.g. reading public data (`low`, the default).
    #[default]
    Low,
    /// Limited harm, e.g. reading the caller's private data (`medium`).
    Medium,
    /// Real harm, e.g. moving money, sending mail (`high`).
    High,
    /// Always needs a human, e.g. deleting an account (`critical`).
    Critical,
}

impl Risk {
    /// The valid spellings.
    pub const NAMES: [&'static str; 4] = ["low", "medium", "high", "critical"];

    /// Parses a spelling.
    pub fn from_name(s: &str) -> Option<Risk> {
        match s {
            "low" => Some(Risk::Low),
            "medium" => Some(Risk::Medium),
            "high" => Some(Risk::High),
            "critical" => Some(Risk::Critical),
            _ => None,
        }
    }

    /// Parses a spelling, or says what is wrong with a "did you mean".
    pub fn parse(s: &str) -> Result<Risk, String> {
        Risk::from_name(s).ok_or_else(|| {
            format!(
                "unknown risk level `{s}`{}",
                suggestion_and_list(s, &Risk::NAMES, "risk levels")
            )
        })
    }

    /// High or critical: the level where the stricter rules (1, 5, 8, 16) apply.
    pub fn is_high(self) -> bool {
        matches!(self, Risk::High | Risk::Critical)
    }

    /// The snake_case name (`low`, `medium`, `high`, `critical`), as declared and serialized.
    pub fn as_str(self) -> &'static str {
        self.name()
    }

    /// The spelling (the same as [`Risk::as_str`]).
    pub fn name(self) -> &'static str {
        match self {
            Risk::Low => "low",
            Risk::Medium => "medium",
            Risk::High => "high",
            Risk::Critical => "critical",
        }
    }

    /// The variant name of the runtime's `Risk`.
    pub fn variant(self) -> &'static str {
        match self {
            Risk::Low => "Low",
            Risk::Medium => "Medium",
            Risk::High => "High",
            Risk::Critical => "Critical",
        }
    }
}

/// What a field holds (the runtime's `FieldKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `identifier`.
    Identifier,
    /// `text`.
    Text,
    /// `name`.
    Name,
    /// `email`.
    Email,
    /// `url`.
    Url,
    /// `path`.
    Path,
    /// `money`.
    Money,
    /// No string content (numbers, booleans, enums, ...).
    Opaque,
}

/// Kind spellings refused with a reason (rule 7): a model-written command or query.
pub const REFUSED_KINDS: [&str; 2] = ["shell", "sql"];

impl Kind {
    /// The spellings `kind = "..."` accepts.
    pub const NAMES: [&'static str; 7] = [
        "identifier",
        "text",
        "name",
        "email",
        "url",
        "path",
        "money",
    ];

    /// Parses a spelling.
    pub fn from_name(s: &str) -> Option<Kind> {
        match s {
            "identifier" => Some(Kind::Identifier),
            "text" => Some(Kind::Text),
            "name" => Some(Kind::Name),
            "email" => Some(Kind::Email),
            "url" => Some(Kind::Url),
            "path" => Some(Kind::Path),
            "money" => Some(Kind::Money),
            _ => None,
        }
    }

    /// The message for a spelling that is neither a kind nor a refused kind, with a "did you
    /// mean" (rule 10). Refused kinds (`shell`, `sql`) are reported by [`crate::decl::check`].
    pub fn unknown(s: &str) -> String {
        format!(
            "unknown field kind `{s}`{}",
            suggestion_and_list(s, &Kind::NAMES, "kinds")
        )
    }

    /// The variant name of the runtime's `FieldKind`.
    pub fn variant(self) -> &'static str {
        match self {
            Kind::Identifier => "Identifier",
            Kind::Text => "Text",
            Kind::Name => "Name",
            Kind::Email => "Email",
            Kind::Url => "Url",
            Kind::Path => "Path",
            Kind::Money => "Money",
            Kind::Opaque => "Opaque",
        }
    }

    /// Kinds whose strings the runtime keeps short by itself, so they need no `max_len` (rule 5):
    /// identifiers (`Sanitizer::identifier_max_len` by default), e-mail addresses and URLs.
    /// `money` and `opaque` are not among them: a string of either kind (a currency code, text
    /// inside an opaque value) needs its own bound like any text.
    pub fn is_bounded(self) -> bool {
        matches!(self, Kind::Identifier | Kind::Email | Kind::Url)
    }
}

/// What a field does in an action, for provenance per argument (`role = "destination"`): the
/// flow policy decides by the role of a field whose value came from untrusted content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum Role {
    /// Where the action sends money or data: a recipient, an account, an address, a URL
    /// (`destination`).
    Destination,
    /// How much the action moves (`amount`).
    Amount,
    /// What the action carries: a body, a message, a memo (`content`).
    Content,
    /// Which thing the action works on: an id, a name, a path (`selector`).
    Selector,
}

impl Role {
    /// The valid spellings.
    pub const NAMES: [&'static str; 4] = ["destination", "amount", "content", "selector"];

    /// Parses a spelling.
    pub fn from_name(s: &str) -> Option<Role> {
        match s {
            "destination" => Some(Role::Destination),
            "amount" => Some(Role::Amount),
            "content" => Some(Role::Content),
            "selector" => Some(Role::Selector),
            _ => None,
        }
    }

    /// Parses a spelling, or says what is wrong with a "did you mean".
    pub fn parse(s: &str) -> Result<Role, String> {
        Role::from_name(s).ok_or_else(|| {
            format!(
                "unknown field role `{s}`{}",
                suggestion_and_list(s, &Role::NAMES, "roles")
            )
        })
    }

    /// The snake_case name, as declared and serialized.
    pub fn name(self) -> &'static str {
        match self {
            Role::Destination => "destination",
            Role::Amount => "amount",
            Role::Content => "content",
            Role::Selector => "selector",
        }
    }

    /// The variant name of the runtime's `Role`.
    pub fn variant(self) -> &'static str {
        match self {
            Role::Destination => "Destination",
            Role::Amount => "Amount",
            Role::Content => "Content",
            Role::Selector => "Selector",
        }
    }

    /// The role a field of `kind` has when it declares none: e-mail addresses and URLs are
    /// destinations, money is an amount, free text is content, anything else selects.
    pub fn default_for(kind: Kind, amount: bool) -> Role {
        match kind {
            _ if amount => Role::Amount,
            Kind::Email | Kind::Url => Role::Destination,
            Kind::Money => Role::Amount,
            Kind::Text => Role::Content,
            Kind::Identifier | Kind::Name | Kind::Path | Kind::Opaque => Role::Selector,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_round_trip_and_misspellings_get_a_suggestion() {
        for name in Role::NAMES {
            assert_eq!(Role::from_name(name).map(Role::name), Some(name));
        }
        let err = Role::parse("destinaton").unwrap_err();
        assert!(err.contains("did you mean `destination`"), "{err}");
        assert_eq!(Role::default_for(Kind::Email, false), Role::Destination);
        assert_eq!(Role::default_for(Kind::Opaque, true), Role::Amount);
    }

    #[test]
    fn spellings_round_trip_and_misspellings_get_a_suggestion() {
        for name in Risk::NAMES {
            assert_eq!(Risk::from_name(name).map(Risk::name), Some(name));
        }
        for name in Kind::NAMES {
            assert!(Kind::from_name(name).is_some(), "{name}");
        }
        assert!(
            Risk::parse("hgh")
                .unwrap_err()
                .contains("did you mean `high`")
        );
        assert_eq!(Risk::parse("critical"), Ok(Risk::Critical));
        assert!(Kind::unknown("emai").contains("did you mean `email`"));
        assert!(!Kind::unknown("shellscript").contains("did you mean"));
        assert!(Kind::from_name("shell").is_none());
        assert!(Risk::High.is_high() && Risk::Critical.is_high() && !Risk::Medium.is_high());
        assert!(Kind::Email.is_bounded() && !Kind::Text.is_bounded() && !Kind::Path.is_bounded());
        assert!(!Kind::Money.is_bounded() && !Kind::Opaque.is_bounded());
        assert_eq!(Risk::High.as_str(), "high");
        assert!(Risk::Low < Risk::Medium && Risk::High < Risk::Critical);
        assert_eq!(Risk::default(), Risk::Low);
    }

    #[cfg(feature = "serde")]
    #[test]
    fn risk_is_stored_in_snake_case() {
        for risk in [Risk::Low, Risk::Medium, Risk::High, Risk::Critical] {
            let json = serde_json::to_value(risk).unwrap();
            assert_eq!(json, serde_json::Value::from(risk.as_str()));
            assert_eq!(serde_json::from_value::<Risk>(json).unwrap(), risk);
        }
        let err = serde_json::from_str::<Risk>("\"extreme\"").unwrap_err();
        assert!(
            err.to_string().contains("unknown variant `extreme`"),
            "{err}"
        );
    }
}
