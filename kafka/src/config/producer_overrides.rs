//! A pipeline's extra librdkafka producer properties, and which of them are secrets.
//!
//! Some properties are credentials (`sasl.password`, `ssl.key.password`,
//! `sasl.oauthbearer.client.secret`, `ssl.key.pem`, …). They are write-only: `Debug` shows
//! `<redacted>` for their values, and the REST API (the worker's replies) shows the same
//! placeholder and keeps the stored value when the placeholder is sent back. Which keys are
//! secret is decided by [`is_secret_property`] alone, so every place agrees.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::{Deref, DerefMut};

use serde::{Deserialize, Serialize};

/// The placeholder shown instead of a secret value.
pub const REDACTED: &str = "<redacted>";

/// Words that make a property name a secret's: a name containing any of them (compared
/// without case) has its value shown as [`REDACTED`]. Deliberately broad: a key path
/// (`ssl.key.location`) or a token endpoint URL is hidden too, which costs nothing.
const SECRET_WORDS: [&str; 6] = ["password", "secret", "key", "token", "credential", "jaas"];

/// Properties whose value can hold a secret without naming one in the property's name.
const SECRET_PROPERTIES: [&str; 1] = [
    // free-form `principal=… scope=… clientSecret=…` text of the unsecured OAUTHBEARER token
    "sasl.oauthbearer.config",
];

/// True when the value of the librdkafka property `key` may be a credential.
pub fn is_secret_property(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|w| key.contains(w)) || SECRET_PROPERTIES.contains(&key.as_str())
}

/// Extra librdkafka producer properties (`kafka.producer_overrides`): a map from property to
/// value whose `Debug` hides every secret value.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ProducerOverrides(BTreeMap<String, String>);

impl ProducerOverrides {
    /// Overrides from a map.
    pub fn new(map: BTreeMap<String, String>) -> Self {
        ProducerOverrides(map)
    }
}

impl Deref for ProducerOverrides {
    type Target = BTreeMap<String, String>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl DerefMut for ProducerOverrides {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl fmt::Debug for ProducerOverrides {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(k, v)| {
                let shown = if is_secret_property(k) {
                    REDACTED
                } else {
                    v.as_str()
                };
                (k, shown)
            }))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_secret_and_ordinary_settings_are_not() {
        for key in [
            "sasl.password",
            "SASL.PASSWORD",
            "sasl.oauthbearer.client.secret",
            "sasl.oauthbearer.config",
            "ssl.key.password",
            "ssl.keystore.password",
            "ssl.key.pem",
            "ssl_key",
            "sasl.oauthbearer.token.endpoint.url",
            "some.credentials",
        ] {
            assert!(is_secret_property(key), "{key}");
        }
        for key in [
            "sasl.username",
            "sasl.mechanism",
            "security.protocol",
            "linger.ms",
            "compression.type",
            "ssl.ca.location",
            "ssl.certificate.pem",
        ] {
            assert!(!is_secret_property(key), "{key}");
        }
    }

    #[test]
    fn debug_hides_secret_values_only() {
        let o = ProducerOverrides::new(
            [
                ("sasl.password".to_string(), "hunter2".to_string()),
                ("linger.ms".to_string(), "20".to_string()),
            ]
            .into(),
        );
        let shown = format!("{o:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(
            shown.contains("<redacted>") && shown.contains("\"20\""),
            "{shown}"
        );
    }
}
