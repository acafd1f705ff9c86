//! What a statement runs as: an analyst's view of the warehouse, or a run
//! context at a logical date with a dimension mode.
//!
//! Settings come from three places, the later overriding the earlier:
//! the client's session (`SET logbook.logical_date = '2026-03-15'`, kept
//! server-side under the `logbook_session` cookie), then per-call headers
//! (`x-logbook-logical-date`, `x-logbook-dimensions`) for clients without
//! cookies.

use chrono::NaiveDate;
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use logbook_core::DimensionMode;
use logbook_datafusion::datafusion;
use logbook_datafusion::QueryOptions;
use serde::{Deserialize, Serialize};
use tonic::metadata::MetadataMap;
use tonic::Status;

/// The header that sets the logical date for one call.
pub const LOGICAL_DATE_HEADER: &str = "x-logbook-logical-date";
/// The header that sets the dimension mode for one call.
pub const DIMENSIONS_HEADER: &str = "x-logbook-dimensions";

/// How one statement resolves tables.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    /// The run's logical date; `None` for analysts (dimensions show history).
    pub logical_date: Option<NaiveDate>,
    /// How dimensions resolve at the logical date (`as-of` when unset).
    pub dimensions: Option<DimensionMode>,
}

impl Settings {
    /// The query layer's options, refusing a dimension mode without a date
    /// (it would silently do nothing).
    pub fn query_options(&self) -> Result<QueryOptions, Status> {
        if self.dimensions.is_some() && self.logical_date.is_none() {
            return Err(Status::failed_precondition(
                "logbook.dimensions applies inside a run: SET logbook.logical_date = 'YYYY-MM-DD' first",
            ));
        }
        Ok(QueryOptions {
            logical_date: self.logical_date,
            dimensions: self.dimensions,
            pins: Default::default(),
            // A statement is planned at `GetFlightInfo` and run at `DoGet`:
            // both read the versions the ticket records.
            read_as_opened: true,
            point: None,
            stage: None,
        })
    }

    /// Apply one `SET`.
    pub fn apply(&mut self, set: &SetStatement) {
        match set {
            SetStatement::LogicalDate(d) => self.logical_date = *d,
            SetStatement::Dimensions(m) => self.dimensions = *m,
        }
    }

    /// These settings with the call's headers applied on top.
    pub fn with_headers(mut self, headers: &MetadataMap) -> Result<Self, Status> {
        if let Some(v) = header(headers, LOGICAL_DATE_HEADER)? {
            self.logical_date = parse_date(&v).map_err(Status::invalid_argument)?;
        }
        if let Some(v) = header(headers, DIMENSIONS_HEADER)? {
            self.dimensions = parse_mode(&v).map_err(Status::invalid_argument)?;
        }
        Ok(self)
    }
}

fn header(headers: &MetadataMap, name: &str) -> Result<Option<String>, Status> {
    headers
        .get(name)
        .map(|v| {
            v.to_str()
                .map(|s| s.trim().to_string())
                .map_err(|_| Status::invalid_argument(format!("header {name} is not text")))
        })
        .transpose()
}

/// A `SET logbook.<name> = <value>` statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetStatement {
    /// `SET logbook.logical_date = '2026-03-15'` (or `DEFAULT` to leave the run).
    LogicalDate(Option<NaiveDate>),
    /// `SET logbook.dimensions = 'current'` (`as-of`, `current` or `DEFAULT`).
    Dimensions(Option<DimensionMode>),
}

/// The settings `SET` knows, for error messages.
const KNOWN: &str = "logbook.logical_date, logbook.dimensions";

/// Parse `sql` as a `SET`: `None` when it is not one, an error naming the
/// setting or value when it is a `SET` logbook does not accept.
///
/// ```
/// use logbook_flight::settings::{parse_set, SetStatement};
/// let set = parse_set("SET logbook.logical_date = '2026-03-15'").unwrap().unwrap();
/// assert_eq!(set, SetStatement::LogicalDate(Some("2026-03-15".parse().unwrap())));
/// assert!(parse_set("SELECT 1").is_none());
/// assert!(parse_set("SET logbook.timezone = 'UTC'").unwrap().is_err());
/// ```
pub fn parse_set(sql: &str) -> Option<Result<SetStatement, String>> {
    let tokens = Tokenizer::new(&GenericDialect {}, sql).tokenize().ok()?;
    let mut words = tokens
        .into_iter()
        .filter(|t| !matches!(t, Token::Whitespace(_) | Token::SemiColon));
    match words.next()? {
        Token::Word(w) if w.value.eq_ignore_ascii_case("set") => {}
        _ => return None,
    }
    let rest: Vec<Token> = words.collect();
    Some(parse_assignment(&rest))
}

fn parse_assignment(tokens: &[Token]) -> Result<SetStatement, String> {
    let (name, value) = match tokens {
        [Token::Word(ns), Token::Period, Token::Word(name), eq, value]
            if ns.value.eq_ignore_ascii_case("logbook") && is_assign(eq) =>
        {
            (name.value.to_ascii_lowercase(), value)
        }
        _ => {
            return Err(format!(
                "unsupported SET: write SET <setting> = '<value>' with one of {KNOWN}"
            ))
        }
    };
    let value = match value {
        Token::SingleQuotedString(s) => s.clone(),
        Token::Word(w) => w.value.clone(),
        other => return Err(format!("logbook.{name}: {other} is not a value")),
    };
    match name.as_str() {
        "logical_date" => parse_date(&value)
            .map(SetStatement::LogicalDate)
            .map_err(|e| format!("logbook.logical_date: {e}")),
        "dimensions" => parse_mode(&value)
            .map(SetStatement::Dimensions)
            .map_err(|e| format!("logbook.dimensions: {e}")),
        other => Err(format!(
            "unknown setting logbook.{other}: the settings are {KNOWN}"
        )),
    }
}

fn is_assign(t: &Token) -> bool {
    matches!(t, Token::Eq) || matches!(t, Token::Word(w) if w.value.eq_ignore_ascii_case("to"))
}

fn is_default(v: &str) -> bool {
    v.is_empty() || v.eq_ignore_ascii_case("default") || v.eq_ignore_ascii_case("none")
}

fn parse_date(v: &str) -> Result<Option<NaiveDate>, String> {
    if is_default(v) {
        return Ok(None);
    }
    v.parse()
        .map(Some)
        .map_err(|_| format!("{v:?} is not a date (YYYY-MM-DD, or DEFAULT to leave the run)"))
}

fn parse_mode(v: &str) -> Result<Option<DimensionMode>, String> {
    if is_default(v) {
        return Ok(None);
    }
    v.parse().map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(sql: &str) -> Result<SetStatement, String> {
        parse_set(sql).expect("a SET")
    }

    #[test]
    fn parses_the_forms_clients_send() {
        let d: NaiveDate = "2026-03-15".parse().unwrap();
        assert_eq!(
            set("set LOGBOOK.LOGICAL_DATE to '2026-03-15';"),
            Ok(SetStatement::LogicalDate(Some(d)))
        );
        assert_eq!(
            set("SET logbook.logical_date = DEFAULT"),
            Ok(SetStatement::LogicalDate(None))
        );
        assert_eq!(
            set("SET logbook.dimensions = 'current'"),
            Ok(SetStatement::Dimensions(Some(DimensionMode::Current)))
        );
    }

    #[test]
    fn refuses_what_it_cannot_honour() {
        assert!(set("SET logbook.logical_date = '2026-02-30'")
            .unwrap_err()
            .contains("not a date"));
        assert!(set("SET logbook.dimensions = 'restated'")
            .unwrap_err()
            .contains("logbook.dimensions"));
        assert!(set("SET datafusion.execution.batch_size = 10")
            .unwrap_err()
            .contains("unsupported SET"));
        assert!(parse_set("SELECT 'SET'").is_none());
    }

    #[test]
    fn headers_override_the_session() {
        let mut headers = MetadataMap::new();
        headers.insert(LOGICAL_DATE_HEADER, "2026-03-01".parse().unwrap());
        let s = Settings {
            logical_date: Some("2026-01-01".parse().unwrap()),
            dimensions: Some(DimensionMode::Current),
        }
        .with_headers(&headers)
        .unwrap();
        assert_eq!(s.logical_date, Some("2026-03-01".parse().unwrap()));
        assert_eq!(s.dimensions, Some(DimensionMode::Current));
        let mut bad = MetadataMap::new();
        bad.insert(DIMENSIONS_HEADER, "sideways".parse().unwrap());
        assert!(Settings::default().with_headers(&bad).is_err());
    }

    #[test]
    fn a_mode_without_a_date_is_refused() {
        let s = Settings {
            logical_date: None,
            dimensions: Some(DimensionMode::Current),
        };
        assert!(s.query_options().is_err());
    }
}
