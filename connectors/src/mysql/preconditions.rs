//! The server settings capstan depends on, read at every connect and checked by a pure
//! function: each violation is its own value-free halt.

use super::source_error::SourceError;
use capstan_core::position::Flavor;

/// The global settings checked at connect (as the server reports them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerSettings {
    /// The server flavour.
    pub flavor: Flavor,
    /// `@@global.log_bin` (`1`/`ON`).
    pub log_bin: String,
    /// `@@global.binlog_format`.
    pub binlog_format: String,
    /// `@@global.binlog_row_image`.
    pub binlog_row_image: String,
    /// `@@global.binlog_row_metadata`.
    pub binlog_row_metadata: String,
    /// `@@global.binlog_row_value_options` (MySQL only; empty on MariaDB).
    pub binlog_row_value_options: String,
    /// `@@global.gtid_mode` (MySQL) or `@@global.gtid_strict_mode` (MariaDB).
    pub gtid_mode: String,
}

fn is_on(v: &str) -> bool {
    v.eq_ignore_ascii_case("ON") || v == "1"
}

impl ServerSettings {
    /// Checks every precondition, in a fixed order; the first violation is returned.
    pub fn check(&self) -> Result<(), SourceError> {
        if !is_on(&self.log_bin) {
            return Err(SourceError::LogBinOff);
        }
        if !self.binlog_format.eq_ignore_ascii_case("ROW") {
            return Err(SourceError::BinlogFormatNotRow);
        }
        if !self.binlog_row_image.eq_ignore_ascii_case("FULL") {
            return Err(SourceError::BinlogRowImageNotFull);
        }
        if !self.binlog_row_metadata.eq_ignore_ascii_case("FULL") {
            return Err(SourceError::BinlogRowMetadataNotFull);
        }
        if !self.binlog_row_value_options.is_empty() {
            return Err(SourceError::BinlogRowValueOptionsNotEmpty);
        }
        match self.flavor {
            // ON_PERMISSIVE still writes anonymous transactions
            Flavor::Mysql if !self.gtid_mode.eq_ignore_ascii_case("ON") => {
                Err(SourceError::GtidModeNotOn)
            }
            Flavor::Mariadb if !is_on(&self.gtid_mode) => Err(SourceError::GtidStrictModeOff),
            _ => Ok(()),
        }
    }

    /// The query that reads the settings of `flavor` (one row, six text columns).
    pub fn query(flavor: Flavor) -> &'static str {
        match flavor {
            Flavor::Mysql => {
                "SELECT CAST(@@global.log_bin AS CHAR), @@global.binlog_format, \
                 @@global.binlog_row_image, @@global.binlog_row_metadata, \
                 @@global.binlog_row_value_options, @@global.gtid_mode"
            }
            Flavor::Mariadb => {
                "SELECT CAST(@@global.log_bin AS CHAR), @@global.binlog_format, \
                 @@global.binlog_row_image, @@global.binlog_row_metadata, '', \
                 CAST(@@global.gtid_strict_mode AS CHAR)"
            }
        }
    }

    /// The settings from the row [`ServerSettings::query`] returns.
    pub fn from_row(flavor: Flavor, row: Vec<String>) -> Result<ServerSettings, SourceError> {
        let [log_bin, format, image, metadata, value_options, gtid]: [String; 6] =
            row.try_into()
                .map_err(|_| SourceError::PreconditionQueryFailed)?;
        Ok(ServerSettings {
            flavor,
            log_bin,
            binlog_format: format,
            binlog_row_image: image,
            binlog_row_metadata: metadata,
            binlog_row_value_options: value_options,
            gtid_mode: gtid,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good(flavor: Flavor) -> ServerSettings {
        ServerSettings {
            flavor,
            log_bin: "1".into(),
            binlog_format: "ROW".into(),
            binlog_row_image: "FULL".into(),
            binlog_row_metadata: "FULL".into(),
            binlog_row_value_options: String::new(),
            gtid_mode: match flavor {
                Flavor::Mysql => "ON".into(),
                Flavor::Mariadb => "1".into(),
            },
        }
    }

    fn code(s: &ServerSettings) -> &'static str {
        s.check().map(|_| "ok").unwrap_or_else(|e| e.code())
    }

    #[test]
    fn each_violation_has_its_own_code() {
        for flavor in [Flavor::Mysql, Flavor::Mariadb] {
            assert_eq!(code(&good(flavor)), "ok");
            let mut s = good(flavor);
            s.binlog_format = "MIXED".into();
            assert_eq!(code(&s), "binlog_format_not_row");
            let mut s = good(flavor);
            s.binlog_row_image = "MINIMAL".into();
            assert_eq!(code(&s), "binlog_row_image_not_full");
            let mut s = good(flavor);
            s.binlog_row_metadata = "MINIMAL".into();
            assert_eq!(code(&s), "binlog_row_metadata_not_full");
            let mut s = good(flavor);
            s.binlog_row_value_options = "PARTIAL_JSON".into();
            assert_eq!(code(&s), "binlog_row_value_options_not_empty");
            let mut s = good(flavor);
            s.log_bin = "0".into();
            assert_eq!(code(&s), "log_bin_off");
        }
        let mut s = good(Flavor::Mysql);
        s.gtid_mode = "ON_PERMISSIVE".into();
        assert_eq!(code(&s), "gtid_mode_not_on");
        let mut s = good(Flavor::Mariadb);
        s.gtid_mode = "0".into();
        assert_eq!(code(&s), "gtid_strict_mode_off");
    }
}
