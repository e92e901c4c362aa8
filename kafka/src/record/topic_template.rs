//! Topic names: a template with `{prefix}`, `{db}` and `{table}` placeholders.
//!
//! Substituted database and table names have every character outside `[a-zA-Z0-9._-]`
//! replaced by `_` (one `_` per Unicode character); the template's own text must already be
//! legal. A rendered name must be at most 249 characters and not `.` or `..` (Kafka's rules).

use std::fmt;

use capstan_core::change::TableId;

use super::topic_router::TopicRouter;

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
    /// Routing rules, which take precedence over the template.
    router: TopicRouter,
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
        let t = Self::parse_any(prefix, template)?;
        if !t.has_table() {
            return Err("topic template must contain {table}");
        }
        Ok(t)
    }

    /// [`Self::parse`] without requiring `{table}`: for a pipeline whose routing rules cover
    /// every table it captures (the caller checks that).
    pub fn parse_any(prefix: &str, template: &str) -> Result<Self, &'static str> {
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
        Ok(TopicTemplate {
            prefix: prefix.to_string(),
            parts,
            router: TopicRouter::default(),
        })
    }

    /// True if the template has a `{table}` placeholder.
    pub fn has_table(&self) -> bool {
        self.parts.contains(&Part::Table)
    }

    /// This template with routing rules, which take precedence over it.
    pub fn with_router(mut self, router: TopicRouter) -> Self {
        self.router = router;
        self
    }

    /// The routing rules.
    pub fn router(&self) -> &TopicRouter {
        &self.router
    }

    /// The topic of `table` and whether a routing rule chose it: the rule's topic, else the
    /// template's (refused when the template has no `{table}`: that table has no topic of
    /// its own).
    pub fn destination(&self, table: &TableId) -> Result<(String, bool), &'static str> {
        if let Some(topic) = self.router.route(table)? {
            return Ok((topic.to_string(), true));
        }
        if !self.has_table() {
            return Err("table is not routed and the topic template has no {table}");
        }
        Ok((self.render(&table.schema, &table.table)?, false))
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
            .field("router", &self.router)
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
    fn routes_take_precedence_and_a_template_without_table_needs_them() {
        use super::super::topic_router::TopicRoute;
        use capstan_core::name_pattern::NamePattern;
        let router = TopicRouter::new(vec![TopicRoute {
            tables: vec![NamePattern::regex(r"shop\.orders_\d+").unwrap()],
            topic: "cdc.shop.orders_all".into(),
        }]);
        let t = TopicTemplate::parse("cdc", DEFAULT_TOPIC_TEMPLATE)
            .unwrap()
            .with_router(router.clone());
        let id = |s: &str, n: &str| TableId::new(s, n);
        assert_eq!(
            t.destination(&id("shop", "orders_3")).unwrap(),
            ("cdc.shop.orders_all".to_string(), true)
        );
        assert_eq!(
            t.destination(&id("shop", "items")).unwrap(),
            ("cdc.shop.items".to_string(), false)
        );
        let merged = TopicTemplate::parse_any("cdc", "{prefix}.{db}")
            .unwrap()
            .with_router(router);
        assert!(!merged.has_table());
        assert_eq!(
            merged.destination(&id("shop", "orders_1")).unwrap().0,
            "cdc.shop.orders_all"
        );
        assert_eq!(
            merged.destination(&id("shop", "items")),
            Err("table is not routed and the topic template has no {table}")
        );
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
