//! Topic names: a template with `{prefix}`, `{db}` and `{table}` placeholders.
//!
//! Substituted database and table names have every character outside `[a-zA-Z0-9._-]`
//! replaced by `_` (one `_` per Unicode character); the template's own text must already be
//! legal. A rendered name must be at most 249 characters and not `.` or `..` (Kafka's rules).

use std::fmt;

/// Kafka's maximum topic name length.
pub const MAX_TOPIC_LEN: usize = 249;

/// The default template: `<prefix>.<db>.<table>`.
pub const DEFAULT_TOPIC_TEMPLATE: &str = "{prefix}.{db}.{table}";

#[derive(Clone, PartialEq, Eq, Debug)]
enum Part {
    Literal(String),
    Prefix,
    Db,
    Table,
}

/// A parsed, checked topic template bound to its prefix.
#[derive(Clone, PartialEq, Eq)]
pub struct TopicTemplate {
    prefix: String,
    parts: Vec<Part>,
}

/// True for characters Kafka allows in a topic name.
pub fn is_legal_topic_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// Replaces every character outside `[a-zA-Z0-9._-]` by `_`.
pub fn sanitize_topic_part(s: &str) -> String {
    s.chars()
        .map(|c| if is_legal_topic_char(c) { c } else { '_' })
        .collect()
}

/// Why a rendered topic name is illegal.
pub(crate) fn check_topic_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("topic name is empty");
    }
    if name == "." || name == ".." {
        return Err("topic name may not be . or ..");
    }
    if name.len() > MAX_TOPIC_LEN {
        return Err("topic name is longer than 249 characters");
    }
    if !name.chars().all(is_legal_topic_char) {
        return Err("topic name has characters outside [a-zA-Z0-9._-]");
    }
    Ok(())
}

impl TopicTemplate {
    /// Parses `template` for `prefix`. The prefix must itself be a legal topic name; literal
    /// template text must use legal characters only; placeholders are `{prefix}`, `{db}`,
    /// `{table}`.
    pub fn parse(prefix: &str, template: &str) -> Result<Self, &'static str> {
        check_topic_name(prefix).map_err(|_| "topic prefix must be a legal topic name")?;
        let mut parts = Vec::new();
        let mut rest = template;
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix('{') {
                let end = after.find('}').ok_or("unclosed { in topic template")?;
                parts.push(match &after[..end] {
                    "prefix" => Part::Prefix,
                    "db" => Part::Db,
                    "table" => Part::Table,
                    _ => return Err("unknown placeholder in topic template"),
                });
                rest = &after[end + 1..];
            } else {
                let end = rest.find('{').unwrap_or(rest.len());
                let literal = &rest[..end];
                if !literal.chars().all(is_legal_topic_char) {
                    return Err("topic template text has characters outside [a-zA-Z0-9._-]");
                }
                parts.push(Part::Literal(literal.to_string()));
                rest = &rest[end..];
            }
        }
        if !parts.contains(&Part::Table) {
            return Err("topic template must contain {table}");
        }
        Ok(TopicTemplate {
            prefix: prefix.to_string(),
            parts,
        })
    }

    /// The prefix (also the `source.name` of every event and the transaction topic's prefix).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The topic of table `db.table`.
    pub fn render(&self, db: &str, table: &str) -> Result<String, &'static str> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Literal(s) => out.push_str(s),
                Part::Prefix => out.push_str(&self.prefix),
                Part::Db => out.push_str(&sanitize_topic_part(db)),
                Part::Table => out.push_str(&sanitize_topic_part(table)),
            }
        }
        check_topic_name(&out)?;
        Ok(out)
    }
}

impl fmt::Debug for TopicTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TopicTemplate")
            .field("prefix", &self.prefix)
            .field("parts", &self.parts)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_template_sanitizes_names() {
        let t = TopicTemplate::parse("cdc", DEFAULT_TOPIC_TEMPLATE).unwrap();
        assert_eq!(t.render("shop", "orders").unwrap(), "cdc.shop.orders");
        assert_eq!(t.render("my shop", "café$").unwrap(), "cdc.my_shop.caf__");
    }

    #[test]
    fn templates_are_checked() {
        assert!(TopicTemplate::parse("cdc", "{prefix}.{schema}.{table}").is_err());
        assert!(TopicTemplate::parse("cdc", "{prefix}.{db}").is_err());
        assert!(TopicTemplate::parse("cdc", "{prefix}/{table}").is_err());
        assert!(TopicTemplate::parse("c c", DEFAULT_TOPIC_TEMPLATE).is_err());
        assert!(TopicTemplate::parse("cdc", "{prefix.{table}").is_err());
        let t = TopicTemplate::parse("cdc", "all-{table}").unwrap();
        assert_eq!(t.render("x", "t").unwrap(), "all-t");
        let long = "x".repeat(300);
        assert!(t.render("x", &long).is_err());
    }
}
