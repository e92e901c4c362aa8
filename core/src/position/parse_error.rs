//! Why a position text was refused, and where.
//!
//! Errors name the byte offset and what was expected there; they never echo the input.

use std::fmt;

/// What was wrong at [`ParseError::offset`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ParseErrorKind {
    /// Not a 36-character hyphenated UUID.
    InvalidUuid,
    /// Not a tag (`[a-z_][a-z0-9_]*`, at most 32 characters).
    InvalidTag,
    /// Not a decimal number in range.
    InvalidNumber,
    /// A number was zero where GTIDs start at 1.
    ZeroSequence,
    /// A number exceeded the largest sequence number allowed.
    NumberTooLarge,
    /// An interval `a-b` with `a > b`.
    ReversedInterval,
    /// A UUID with no interval after it.
    MissingInterval,
    /// A MariaDB GTID that is not `domain-server-seq`.
    InvalidMariadbGtid,
    /// A MariaDB position with two entries for one replication domain.
    DuplicateDomain,
    /// A single GTID was expected but the text holds a set or an interval.
    NotSingleGtid,
    /// An unexpected character.
    UnexpectedCharacter,
}

impl ParseErrorKind {
    /// A stable snake_case code for this kind.
    pub fn code(self) -> &'static str {
        match self {
            ParseErrorKind::InvalidUuid => "invalid_uuid",
            ParseErrorKind::InvalidTag => "invalid_tag",
            ParseErrorKind::InvalidNumber => "invalid_number",
            ParseErrorKind::ZeroSequence => "zero_sequence",
            ParseErrorKind::NumberTooLarge => "number_too_large",
            ParseErrorKind::ReversedInterval => "reversed_interval",
            ParseErrorKind::MissingInterval => "missing_interval",
            ParseErrorKind::InvalidMariadbGtid => "invalid_mariadb_gtid",
            ParseErrorKind::DuplicateDomain => "duplicate_domain",
            ParseErrorKind::NotSingleGtid => "not_single_gtid",
            ParseErrorKind::UnexpectedCharacter => "unexpected_character",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            ParseErrorKind::InvalidUuid => {
                "expected a server uuid (8-4-4-4-12 hexadecimal digits)"
            }
            ParseErrorKind::InvalidTag => {
                "expected a tag of 1 to 32 letters, digits or underscores, not starting with a digit"
            }
            ParseErrorKind::InvalidNumber => "expected a decimal number",
            ParseErrorKind::ZeroSequence => "sequence numbers start at 1",
            ParseErrorKind::NumberTooLarge => "number out of range",
            ParseErrorKind::ReversedInterval => "interval start is greater than its end",
            ParseErrorKind::MissingInterval => "expected at least one interval after the uuid",
            ParseErrorKind::InvalidMariadbGtid => "expected domain-server-sequence",
            ParseErrorKind::DuplicateDomain => "a replication domain appears twice",
            ParseErrorKind::NotSingleGtid => "expected exactly one gtid",
            ParseErrorKind::UnexpectedCharacter => "unexpected character",
        }
    }
}

/// A refused position text: what was wrong and the byte offset where it was found.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
#[error("invalid position at byte {offset}: {}", kind.describe())]
pub struct ParseError {
    /// Byte offset into the input where the problem was found.
    pub offset: usize,
    /// What was wrong.
    pub kind: ParseErrorKind,
}

impl ParseError {
    pub(crate) fn new(offset: usize, kind: ParseErrorKind) -> Self {
        ParseError { offset, kind }
    }

    /// A stable snake_case code.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }
}

impl fmt::Display for ParseErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}
