//! [`LogFormat`]: how the worker writes its log lines, from `CAPSTAN_LOG_FORMAT` (`text`, the
//! default: `key=value` fields, coloured on a terminal; `json`: one JSON object a line, the
//! event's fields at the top level, for log collectors). Which lines are written is still
//! `CAPSTAN_LOG`'s filter.

/// The environment variable that chooses the format.
pub const LOG_FORMAT_VAR: &str = "CAPSTAN_LOG_FORMAT";

/// The format of the worker's log lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines with `key=value` fields.
    #[default]
    Text,
    /// One JSON object a line (`timestamp`, `level`, `target`, `message` and the fields).
    Json,
}

/// `CAPSTAN_LOG_FORMAT` names no format.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{LOG_FORMAT_VAR} must be `text` or `json`, not {given:?}")]
pub struct LogFormatError {
    /// What the variable held (at most 32 characters of it).
    given: String,
}

impl LogFormatError {
    /// A stable snake_case code.
    pub fn code(&self) -> &'static str {
        "invalid_log_format"
    }
}

impl LogFormat {
    /// The format `value` (the variable's value, `None` when unset) asks for: `text` when
    /// unset or empty; `text` or `json` in any case, around spaces; anything else is refused.
    pub fn from_var(value: Option<&str>) -> Result<LogFormat, LogFormatError> {
        let v = value.map(str::trim).unwrap_or("");
        if v.is_empty() || v.eq_ignore_ascii_case("text") {
            Ok(LogFormat::Text)
        } else if v.eq_ignore_ascii_case("json") {
            Ok(LogFormat::Json)
        } else {
            Err(LogFormatError {
                given: v.chars().take(32).collect(),
            })
        }
    }

    /// The format this process's environment asks for (a value that is not unicode is
    /// refused like any other).
    pub fn from_env() -> Result<LogFormat, LogFormatError> {
        match std::env::var(LOG_FORMAT_VAR) {
            Ok(v) => LogFormat::from_var(Some(&v)),
            Err(std::env::VarError::NotPresent) => Ok(LogFormat::Text),
            Err(std::env::VarError::NotUnicode(_)) => Err(LogFormatError {
                given: "<not unicode>".into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_by_default_json_on_request_anything_else_refused() {
        assert_eq!(LogFormat::from_var(None), Ok(LogFormat::Text));
        assert_eq!(LogFormat::from_var(Some("")), Ok(LogFormat::Text));
        assert_eq!(LogFormat::from_var(Some("text")), Ok(LogFormat::Text));
        assert_eq!(LogFormat::from_var(Some(" TEXT ")), Ok(LogFormat::Text));
        assert_eq!(LogFormat::from_var(Some("json")), Ok(LogFormat::Json));
        assert_eq!(LogFormat::from_var(Some("Json\n")), Ok(LogFormat::Json));
        for bad in ["xml", "jsonl", "text,json", "1"] {
            let e = LogFormat::from_var(Some(bad)).unwrap_err();
            assert_eq!(e.code(), "invalid_log_format");
            let message = e.to_string();
            assert!(message.contains("CAPSTAN_LOG_FORMAT"), "{message}");
            assert!(message.contains("`text` or `json`"), "{message}");
            assert!(message.contains(bad), "{message}");
        }
        let long = "y".repeat(100);
        let e = LogFormat::from_var(Some(&long)).unwrap_err();
        assert!(e.to_string().len() < 100, "{e}");
    }
}
