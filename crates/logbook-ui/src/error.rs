//! Errors as HTTP answers: what the caller asked for that does not exist
//! is 404, a malformed name or date is 400, anything else 500.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// A request that could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum UiError {
    /// No such table, partition or stage.
    #[error("{0}")]
    NotFound(String),
    /// A malformed table name, stage name or date.
    #[error("{0}")]
    BadRequest(String),
    /// The warehouse could not answer.
    #[error("{0}")]
    Failed(String),
}

/// Only a missing table is the caller's 404 and only a malformed name the
/// caller's 400: a missing data file or an undecodable one is the
/// warehouse's failure (500), whatever its kind says to a writer.
impl From<logbook_core::Error> for UiError {
    fn from(e: logbook_core::Error) -> Self {
        match &e {
            // Without the warehouse's location: the page may be shared.
            logbook_core::Error::TableNotFound { table, .. } => {
                UiError::NotFound(format!("no table {table:?}"))
            }
            logbook_core::Error::InvalidName { .. } => UiError::BadRequest(e.to_string()),
            _ => UiError::Failed(e.to_string()),
        }
    }
}

impl UiError {
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            UiError::NotFound(_) => StatusCode::NOT_FOUND,
            UiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            UiError::Failed(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// JSON for `/api`, a page for the rest (see `pages::error_page`).
impl IntoResponse for UiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.to_string() });
        (self.status(), axum::Json(body)).into_response()
    }
}
