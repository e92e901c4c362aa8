//! Pipeline definitions on the command line: read from a JSON or YAML file (or standard
//! input), and printed as JSON or YAML. A parse error names the line and column, never the
//! content: a definition may hold a password.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use serde_json::Value;

use crate::cli_error::CliError;

/// The `-f FILE` option of `create`, `apply` and `validate`.
#[derive(Debug, Clone, Args)]
pub struct DefinitionFile {
    /// The definition: JSON, or YAML for a `.yaml`/`.yml` file; `-` reads standard input
    /// (JSON, else YAML).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: PathBuf,
}

/// How a definition is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Pretty JSON.
    Json,
    /// YAML.
    Yaml,
}

/// Which syntax a definition's text is read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Syntax {
    Json,
    Yaml,
    /// Standard input: JSON, else YAML.
    Either,
}

impl DefinitionFile {
    /// Reads and parses the definition.
    pub fn read(&self) -> Result<Value, CliError> {
        let stdin = self.file.as_os_str() == "-";
        let text = if stdin {
            std::io::read_to_string(std::io::stdin())
                .map_err(|e| CliError::Input(format!("cannot read standard input: {}", e.kind())))?
        } else {
            std::fs::read_to_string(&self.file).map_err(|e| {
                CliError::Input(format!("cannot read {}: {}", self.file.display(), e.kind()))
            })?
        };
        let origin = if stdin {
            "standard input".to_string()
        } else {
            self.file.display().to_string()
        };
        parse_definition(&text, syntax_of(&self.file), &origin)
    }
}

/// The syntax a file's name calls for: YAML for `.yaml`/`.yml`, either for `-`, else JSON.
fn syntax_of(path: &Path) -> Syntax {
    if path.as_os_str() == "-" {
        return Syntax::Either;
    }
    match path.extension().and_then(|e| e.to_str()) {
        Some(ext) if ext.eq_ignore_ascii_case("yaml") || ext.eq_ignore_ascii_case("yml") => {
            Syntax::Yaml
        }
        _ => Syntax::Json,
    }
}

/// Parses `text` as a definition: a mapping of fields. `origin` names it in errors.
fn parse_definition(text: &str, syntax: Syntax, origin: &str) -> Result<Value, CliError> {
    let error = |reason: String| CliError::Definition {
        origin: origin.to_string(),
        reason,
    };
    let value = match syntax {
        Syntax::Json => from_json(text).map_err(error)?,
        Syntax::Yaml => from_yaml(text).map_err(error)?,
        Syntax::Either => match from_json(text) {
            Ok(v) => v,
            // a text that looks like JSON gets the JSON error, and so does one that YAML reads
            // as anything but a mapping (a plain scalar: it was no YAML definition either)
            Err(json) => match from_yaml(text) {
                Ok(v) if v.is_object() => v,
                Ok(_) => return Err(error(json)),
                Err(_) if looks_like_json(text) => return Err(error(json)),
                Err(yaml) => return Err(error(yaml)),
            },
        },
    };
    if !value.is_object() {
        return Err(error(
            "holds no definition: a definition is a mapping of fields (a json object)".into(),
        ));
    }
    Ok(value)
}

fn looks_like_json(text: &str) -> bool {
    matches!(text.trim_start().chars().next(), Some('{' | '['))
}

fn from_json(text: &str) -> Result<Value, String> {
    // serde_json's syntax errors give a line and column and never quote the input
    serde_json::from_str(text).map_err(|e| format!("is not valid json: {e}"))
}

fn from_yaml(text: &str) -> Result<Value, String> {
    serde_yaml_ng::from_str(text).map_err(|e| {
        // the parser's problems are fixed phrases; serde's messages may quote a key or value
        let message = capstan_rest_api::redact_serde_message(&e.to_string());
        let message = match e.location() {
            Some(at) => {
                let own = format!(" at line {} column {}", at.line(), at.column());
                format!(
                    "line {} column {}: {}",
                    at.line(),
                    at.column(),
                    message.replacen(&own, "", 1)
                )
            }
            None => message,
        };
        format!("is not valid yaml: {message}")
    })
}

/// `value` as text in `format` (YAML without a `---` header).
pub fn render(value: &Value, format: OutputFormat) -> Result<String, CliError> {
    match format {
        OutputFormat::Json => serde_json::to_string_pretty(value).map_err(|e| CliError::Render {
            format: "json",
            reason: e.to_string(),
        }),
        OutputFormat::Yaml => serde_yaml_ng::to_string(value)
            .map(|text| text.trim_end().to_string())
            .map_err(|e| CliError::Render {
                format: "yaml",
                reason: e.to_string(),
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SECRET: &str = "hunter2-pw";

    fn message(text: &str, syntax: Syntax) -> String {
        let e = parse_definition(text, syntax, "orders.yaml").unwrap_err();
        assert_eq!(e.code(), "invalid_definition");
        let m = e.to_string();
        assert!(!m.contains(SECRET), "{m}");
        m
    }

    #[test]
    fn the_syntax_follows_the_file_name() {
        assert_eq!(syntax_of(Path::new("a/b.yaml")), Syntax::Yaml);
        assert_eq!(syntax_of(Path::new("b.YML")), Syntax::Yaml);
        assert_eq!(syntax_of(Path::new("b.json")), Syntax::Json);
        assert_eq!(syntax_of(Path::new("b")), Syntax::Json);
        assert_eq!(syntax_of(Path::new("-")), Syntax::Either);
    }

    #[test]
    fn yaml_and_json_give_the_same_definition() {
        let yaml = "name: orders\nsource:\n  host: db\n  port: 3306\n  tls: {mode: disabled}\nkafka:\n  topics: [a, b]\n";
        let json = r#"{"name": "orders", "source": {"host": "db", "port": 3306,
            "tls": {"mode": "disabled"}}, "kafka": {"topics": ["a", "b"]}}"#;
        let expected = json!({"name": "orders", "source": {"host": "db", "port": 3306,
            "tls": {"mode": "disabled"}}, "kafka": {"topics": ["a", "b"]}});
        assert_eq!(parse_definition(yaml, Syntax::Yaml, "f").unwrap(), expected);
        assert_eq!(parse_definition(json, Syntax::Json, "f").unwrap(), expected);
        assert_eq!(
            parse_definition(yaml, Syntax::Either, "f").unwrap(),
            expected
        );
        assert_eq!(
            parse_definition(json, Syntax::Either, "f").unwrap(),
            expected
        );
    }

    #[test]
    fn errors_name_the_place_and_never_the_content() {
        let yaml = format!("name: orders\nsource:\n  password: {SECRET}\n   host: [db\n");
        assert_eq!(
            message(&yaml, Syntax::Yaml),
            "orders.yaml is not valid yaml: line 4 column 8: mapping values are not allowed in this context"
        );
        let json = format!("{{\"name\": \"orders\", \"password\": \"{SECRET}\",, }}");
        assert_eq!(
            message(&json, Syntax::Json),
            "orders.yaml is not valid json: key must be a string at line 1 column 45"
        );
        // standard input that looks like json gets the json error
        assert_eq!(
            message(&json, Syntax::Either),
            "orders.yaml is not valid json: key must be a string at line 1 column 45"
        );
        assert_eq!(
            message(&yaml, Syntax::Either),
            "orders.yaml is not valid yaml: line 4 column 8: mapping values are not allowed in this context"
        );
    }

    #[test]
    fn a_definition_is_a_mapping() {
        for (text, syntax) in [
            ("[1, 2]", Syntax::Json),
            ("- a\n- b\n", Syntax::Yaml),
            ("just words", Syntax::Yaml),
        ] {
            assert_eq!(
                message(text, syntax),
                "orders.yaml holds no definition: a definition is a mapping of fields (a json object)"
            );
        }
        // words on standard input: the json error, not a yaml string
        assert_eq!(
            message(SECRET, Syntax::Either),
            "orders.yaml is not valid json: expected value at line 1 column 1"
        );
    }

    #[test]
    fn definitions_print_as_json_or_yaml() {
        let v = json!({"name": "orders", "source": {"password": "<redacted>", "port": 3306}});
        assert_eq!(
            render(&v, OutputFormat::Yaml).unwrap(),
            "name: orders\nsource:\n  password: <redacted>\n  port: 3306"
        );
        assert_eq!(
            render(&v, OutputFormat::Json).unwrap(),
            "{\n  \"name\": \"orders\",\n  \"source\": {\n    \"password\": \"<redacted>\",\n    \"port\": 3306\n  }\n}"
        );
    }
}
