//! A name pattern of a capture control (which schemas, tables and columns a pipeline captures,
//! masks or routes): an exact name, or an anchored regular expression (the `regex` crate's
//! syntax) that must match the *whole* name, as Debezium's `table.include.list` entries do.
//!
//! Exact names compare byte for byte; a pattern is written explicitly (`{"regex": "…"}` in a
//! pipeline definition), so an exact name such as `shop.orders` never matches `shopXorders`.

use std::fmt;

/// The largest compiled pattern accepted (the `regex` crate's size limit), so a definition
/// cannot make a worker build an enormous automaton.
pub const MAX_PATTERN_BYTES: usize = 1 << 20;

/// An exact name or an anchored regular expression.
#[derive(Clone)]
pub enum NamePattern {
    /// Matches only this name.
    Exact(String),
    /// Matches a name the expression matches from its first to its last character.
    Regex {
        /// The expression as written.
        source: String,
        /// `^(?:source)$`, compiled.
        compiled: regex::Regex,
    },
}

/// A pattern that does not compile. Value-free: the pattern is configuration, but the regex
/// crate's message quotes it, so only the kind of problem is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NamePatternError {
    /// Not a valid expression in the `regex` crate's syntax.
    #[error("invalid pattern (not a valid regular expression)")]
    Syntax,
    /// Compiles to more than [`MAX_PATTERN_BYTES`].
    #[error("invalid pattern (too large once compiled)")]
    TooLarge,
    /// Empty.
    #[error("invalid pattern (empty)")]
    Empty,
}

impl NamePattern {
    /// An exact name.
    pub fn exact(name: impl Into<String>) -> Self {
        NamePattern::Exact(name.into())
    }

    /// An anchored regular expression: it must match the whole name.
    pub fn regex(source: &str) -> Result<Self, NamePatternError> {
        if source.is_empty() {
            return Err(NamePatternError::Empty);
        }
        let compiled = regex::RegexBuilder::new(&format!("^(?:{source})$"))
            .size_limit(MAX_PATTERN_BYTES)
            .build()
            .map_err(|e| match e {
                regex::Error::CompiledTooBig(_) => NamePatternError::TooLarge,
                _ => NamePatternError::Syntax,
            })?;
        Ok(NamePattern::Regex {
            source: source.to_string(),
            compiled,
        })
    }

    /// True if `name` is this exact name, or the expression matches all of it.
    pub fn matches(&self, name: &str) -> bool {
        match self {
            NamePattern::Exact(exact) => exact == name,
            NamePattern::Regex { compiled, .. } => compiled.is_match(name),
        }
    }

    /// The exact name, or the expression as written.
    pub fn as_str(&self) -> &str {
        match self {
            NamePattern::Exact(s) | NamePattern::Regex { source: s, .. } => s,
        }
    }

    /// True for an exact name.
    pub fn is_exact(&self) -> bool {
        matches!(self, NamePattern::Exact(_))
    }
}

impl PartialEq for NamePattern {
    fn eq(&self, other: &Self) -> bool {
        self.is_exact() == other.is_exact() && self.as_str() == other.as_str()
    }
}

impl Eq for NamePattern {}

impl fmt::Debug for NamePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NamePattern::Exact(s) => write!(f, "Exact({s:?})"),
            NamePattern::Regex { source, .. } => write!(f, "Regex({source:?})"),
        }
    }
}

/// True if any of `patterns` matches `name`.
pub fn any_matches(patterns: &[NamePattern], name: &str) -> bool {
    patterns.iter().any(|p| p.matches(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_names_match_only_themselves() {
        let p = NamePattern::exact("shop.orders");
        assert!(p.matches("shop.orders"));
        assert!(!p.matches("shopXorders"));
        assert!(!p.matches("shop.orders_1"));
        assert!(!p.matches("Shop.orders"));
    }

    #[test]
    fn expressions_are_anchored_at_both_ends() {
        let p = NamePattern::regex(r"shop\.orders_\d+").unwrap();
        assert!(p.matches("shop.orders_1"));
        assert!(p.matches("shop.orders_204"));
        assert!(!p.matches("shop.orders_"));
        assert!(!p.matches("shop.orders_1x"));
        assert!(!p.matches("xshop.orders_1"));
        // an alternation is anchored as a whole, not per branch
        let p = NamePattern::regex("a|b").unwrap();
        assert!(p.matches("a") && p.matches("b"));
        assert!(!p.matches("ab") && !p.matches("xa"));
        // case-insensitive only when asked
        assert!(!NamePattern::regex("shop").unwrap().matches("SHOP"));
        assert!(NamePattern::regex("(?i)shop").unwrap().matches("SHOP"));
    }

    #[test]
    fn bad_patterns_are_refused_by_kind() {
        assert_eq!(
            NamePattern::regex("orders_(").unwrap_err(),
            NamePatternError::Syntax
        );
        assert_eq!(NamePattern::regex("").unwrap_err(), NamePatternError::Empty);
        assert_eq!(
            NamePattern::regex(r"\w{1000}{1000}").unwrap_err(),
            NamePatternError::TooLarge
        );
        assert_eq!(
            NamePatternError::Syntax.to_string(),
            "invalid pattern (not a valid regular expression)"
        );
    }

    #[test]
    fn equality_is_by_kind_and_text() {
        assert_eq!(
            NamePattern::regex("a.b").unwrap(),
            NamePattern::regex("a.b").unwrap()
        );
        assert_ne!(
            NamePattern::regex("a.b").unwrap(),
            NamePattern::exact("a.b")
        );
        assert!(any_matches(
            &[NamePattern::exact("x"), NamePattern::regex("y+").unwrap()],
            "yyy"
        ));
    }
}
