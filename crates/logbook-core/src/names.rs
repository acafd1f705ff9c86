//! Validation of names that become parts of object paths.
//!
//! Nothing a user types may escape a table's root: no `..`, no separators, no
//! control characters, nothing hidden (`_` and `.` prefixes are logbook's own).

use crate::error::{Error, Result};

const MAX_LEN: usize = 128;

/// Check a table name: ASCII letters, digits, `_` and `-`, starting with a letter or digit.
///
/// ```
/// use logbook_core::names::validate_table_name;
/// assert!(validate_table_name("daily_revenue").is_ok());
/// assert!(validate_table_name("../etc").is_err());
/// ```
pub fn validate_table_name(name: &str) -> Result<()> {
    validate_identifier("table name", name)
}

/// Check a column name (same rules as a table name).
pub fn validate_column_name(name: &str) -> Result<()> {
    validate_identifier("column name", name)
}

/// Check a run id, which becomes part of staged directory names and the log.
pub fn validate_run_id(id: &str) -> Result<()> {
    validate_identifier("run id", id)
}

fn validate_identifier(what: &'static str, value: &str) -> Result<()> {
    let fail = |reason: &str| {
        Err(Error::InvalidName {
            what,
            value: value.to_string(),
            reason: reason.to_string(),
        })
    };
    if value.is_empty() {
        return fail("must not be empty");
    }
    if value.len() > MAX_LEN {
        return fail(&format!("longer than {MAX_LEN} bytes"));
    }
    if let Some(c) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-' || *c == '.'))
    {
        return fail(&format!(
            "contains {c:?}; use ASCII letters, digits, '_', '-' or '.'"
        ));
    }
    if value.contains("..") {
        return fail("must not contain '..'");
    }
    if !value.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return fail("must start with a letter or digit");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_escapes_and_controls() {
        for bad in [
            "",
            "..",
            "a/b",
            "a\\b",
            "_hidden",
            ".x",
            "a..b",
            "tab\tname",
            "nul\0",
            "é",
        ] {
            assert!(validate_table_name(bad).is_err(), "{bad:?} accepted");
        }
        for good in ["orders", "daily-revenue", "v1.2", "2026_report"] {
            assert!(validate_table_name(good).is_ok(), "{good:?} refused");
        }
    }
}
