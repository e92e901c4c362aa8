//! A secret field of a pipeline definition (the source password, a Kafka credential) holds
//! either the secret itself or a reference to where each worker finds it:
//!
//! - `${env:NAME}`: the worker's environment variable `NAME`;
//! - `${file:/absolute/path}`: the contents of a file on the worker (one trailing line break
//!   removed), e.g. a mounted Kubernetes secret.
//!
//! With a reference, the secret is never sent to the API, stored in Raft or replicated: the
//! definition holds only the reference, which the owner resolves when it starts the pipeline.
//! A literal secret that itself starts with `${` and ends with `}` is written with one more
//! `$` in front (`$${…}` stands for `${…}`).
//!
//! [`SecretRef::parse`] is pure; [`SecretRef::resolve`] reads through a [`SecretLookup`], which
//! the worker implements over its process environment and file system.

use std::path::Path;

/// A secret field's value, parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretRef<'a> {
    /// The secret itself (an escaped `$${…}` already unescaped).
    Literal(&'a str),
    /// `${env:NAME}`.
    Env(&'a str),
    /// `${file:PATH}`, an absolute path.
    File(&'a str),
}

/// Where a worker looks a reference up. The runtime's implementation reads the process
/// environment and files; tests pass maps.
pub trait SecretLookup {
    /// The environment variable `name`, if set.
    fn env(&self, name: &str) -> Option<String>;
    /// The contents of the file at `path`, or the I/O error's kind as text (never contents).
    fn file(&self, path: &Path) -> Result<String, String>;
}

/// A value that looks like a reference and is not a valid one. Names the rule broken, never
/// the value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SecretRefError {
    /// Neither `env:` nor `file:` after `${`.
    #[error("a reference is ${{env:NAME}} or ${{file:/absolute/path}} (a literal starting with ${{ is written $${{)")]
    UnknownKind,
    /// The variable name is empty or holds characters other than `[A-Za-z0-9_]`, or starts
    /// with a digit.
    #[error("an environment variable name is [A-Za-z_][A-Za-z0-9_]*")]
    BadEnvName,
    /// The file path is not absolute.
    #[error("a secret file path must be absolute")]
    RelativePath,
}

/// Why a reference could not be resolved on this worker. Names the variable or the file,
/// which are not secrets, and never a value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SecretUnavailable {
    /// The environment variable is not set on this worker.
    #[error("the environment variable {name} is not set on this worker")]
    EnvUnset {
        /// The variable.
        name: String,
    },
    /// The file could not be read.
    #[error("cannot read the secret file {path}: {reason}")]
    FileUnreadable {
        /// The file.
        path: String,
        /// The I/O error kind.
        reason: String,
    },
    /// The variable or file is empty.
    #[error("{source_name} is empty")]
    Empty {
        /// `environment variable NAME` or `file PATH`.
        source_name: String,
    },
}

impl SecretUnavailable {
    /// The stable code of every unresolvable reference.
    pub fn code(&self) -> &'static str {
        "secret_unavailable"
    }
}

impl<'a> SecretRef<'a> {
    /// Parses a secret field's value: a reference when it has the form `${…}`, else a literal.
    pub fn parse(value: &'a str) -> Result<Self, SecretRefError> {
        if let Some(escaped) = value.strip_prefix("$${") {
            if escaped.ends_with('}') {
                return Ok(SecretRef::Literal(&value[1..]));
            }
        }
        let Some(inner) = value
            .strip_prefix("${")
            .and_then(|rest| rest.strip_suffix('}'))
        else {
            return Ok(SecretRef::Literal(value));
        };
        if let Some(name) = inner.strip_prefix("env:") {
            let mut chars = name.chars();
            let first_ok = chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
            if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(SecretRefError::BadEnvName);
            }
            Ok(SecretRef::Env(name))
        } else if let Some(path) = inner.strip_prefix("file:") {
            if !path.starts_with('/') {
                return Err(SecretRefError::RelativePath);
            }
            Ok(SecretRef::File(path))
        } else {
            Err(SecretRefError::UnknownKind)
        }
    }

    /// True for `${env:…}` and `${file:…}`.
    pub fn is_reference(&self) -> bool {
        !matches!(self, SecretRef::Literal(_))
    }

    /// The secret: the literal, the variable's value, or the file's contents without one
    /// trailing line break. An empty result is refused (no account has an empty secret by
    /// accident).
    pub fn resolve(&self, lookup: &dyn SecretLookup) -> Result<String, SecretUnavailable> {
        let (value, source_name) = match *self {
            SecretRef::Literal(s) => return Ok(s.to_string()),
            SecretRef::Env(name) => (
                lookup
                    .env(name)
                    .ok_or_else(|| SecretUnavailable::EnvUnset {
                        name: name.to_string(),
                    })?,
                format!("the environment variable {name}"),
            ),
            SecretRef::File(path) => {
                let mut text = lookup.file(Path::new(path)).map_err(|reason| {
                    SecretUnavailable::FileUnreadable {
                        path: path.to_string(),
                        reason,
                    }
                })?;
                if text.ends_with('\n') {
                    text.pop();
                    if text.ends_with('\r') {
                        text.pop();
                    }
                }
                (text, format!("the secret file {path}"))
            }
        };
        if value.is_empty() {
            return Err(SecretUnavailable::Empty { source_name });
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    struct Maps {
        env: HashMap<&'static str, &'static str>,
        files: HashMap<&'static str, &'static str>,
    }

    impl SecretLookup for Maps {
        fn env(&self, name: &str) -> Option<String> {
            self.env.get(name).map(|s| s.to_string())
        }
        fn file(&self, path: &Path) -> Result<String, String> {
            self.files
                .get(path.to_str().unwrap_or_default())
                .map(|s| s.to_string())
                .ok_or_else(|| "entity not found".to_string())
        }
    }

    fn maps() -> Maps {
        Maps {
            env: HashMap::from([("DB_PW", "s3cret"), ("EMPTY", "")]),
            files: HashMap::from([
                ("/run/secrets/pw", "from-file\n"),
                ("/run/secrets/crlf", "crlf\r\n"),
                ("/run/secrets/two", "two\n\n"),
            ]),
        }
    }

    #[test]
    fn literals_stay_literal() {
        for v in ["hunter2", "", "${", "a${env:X}", "${env:X}b", "$"] {
            assert_eq!(SecretRef::parse(v), Ok(SecretRef::Literal(v)), "{v}");
        }
        assert_eq!(
            SecretRef::parse("$${env:X}"),
            Ok(SecretRef::Literal("${env:X}"))
        );
    }

    #[test]
    fn references_are_parsed() {
        assert_eq!(
            SecretRef::parse("${env:DB_PW}"),
            Ok(SecretRef::Env("DB_PW"))
        );
        assert_eq!(SecretRef::parse("${env:_x1}"), Ok(SecretRef::Env("_x1")));
        assert_eq!(
            SecretRef::parse("${file:/run/secrets/pw}"),
            Ok(SecretRef::File("/run/secrets/pw"))
        );
        assert!(SecretRef::parse("${env:A}").unwrap().is_reference());
        assert!(!SecretRef::parse("A").unwrap().is_reference());
    }

    #[test]
    fn malformed_references_are_refused() {
        assert_eq!(
            SecretRef::parse("${vault:x}"),
            Err(SecretRefError::UnknownKind)
        );
        assert_eq!(SecretRef::parse("${}"), Err(SecretRefError::UnknownKind));
        for bad in ["${env:}", "${env:1A}", "${env:A-B}", "${env:A B}"] {
            assert_eq!(
                SecretRef::parse(bad),
                Err(SecretRefError::BadEnvName),
                "{bad}"
            );
        }
        assert_eq!(
            SecretRef::parse("${file:secrets/pw}"),
            Err(SecretRefError::RelativePath)
        );
    }

    #[test]
    fn references_resolve_through_the_lookup() {
        let m = maps();
        let r = |v: &str| SecretRef::parse(v).unwrap().resolve(&m);
        assert_eq!(r("${env:DB_PW}").unwrap(), "s3cret");
        assert_eq!(r("${file:/run/secrets/pw}").unwrap(), "from-file");
        assert_eq!(r("${file:/run/secrets/crlf}").unwrap(), "crlf");
        assert_eq!(r("${file:/run/secrets/two}").unwrap(), "two\n");
        assert_eq!(r("plain").unwrap(), "plain");
        assert_eq!(r("$${env:DB_PW}").unwrap(), "${env:DB_PW}");
    }

    #[test]
    fn unavailable_secrets_name_where_they_were_looked_for_and_never_a_value() {
        let m = maps();
        let r = |v: &str| SecretRef::parse(v).unwrap().resolve(&m).unwrap_err();
        let e = r("${env:MISSING}");
        assert_eq!(e.code(), "secret_unavailable");
        assert_eq!(
            e.to_string(),
            "the environment variable MISSING is not set on this worker"
        );
        assert_eq!(
            r("${file:/nope}").to_string(),
            "cannot read the secret file /nope: entity not found"
        );
        assert_eq!(
            r("${env:EMPTY}").to_string(),
            "the environment variable EMPTY is empty"
        );
    }
}
