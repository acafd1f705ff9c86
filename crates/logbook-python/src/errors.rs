//! Python exceptions, one class per kind of failure, so a job can tell
//! "fix your input" from "another writer won" from "retry".

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

use logbook_core::ErrorKind;
use std::sync::Arc;

use arrow_schema::ArrowError;
use logbook_datafusion::datafusion::error::DataFusionError;
use logbook_datafusion::QueryError;

create_exception!(
    pylogbook,
    LogbookError,
    PyException,
    "Any error from logbook."
);
create_exception!(
    pylogbook,
    InvalidInputError,
    LogbookError,
    "The data, schema, name or option is wrong: fix it; retrying will not help."
);
create_exception!(pylogbook, ConflictError, LogbookError, "Another writer committed a conflicting change (e.g. the same date): re-run from a fresh snapshot.");
create_exception!(
    pylogbook,
    NotFoundError,
    LogbookError,
    "The table, version or object does not exist."
);
create_exception!(
    pylogbook,
    AlreadyExistsError,
    LogbookError,
    "The thing to create exists already."
);
create_exception!(
    pylogbook,
    CorruptError,
    LogbookError,
    "The table's stored state is damaged: run `logbook check`, do not write."
);
create_exception!(
    pylogbook,
    UnsupportedError,
    LogbookError,
    "The store cannot give the guarantees logbook needs."
);
create_exception!(
    pylogbook,
    TransientError,
    LogbookError,
    "Storage failed; retrying the same call may succeed."
);
create_exception!(
    pylogbook,
    SqlError,
    LogbookError,
    "The SQL did not plan or run; the message is DataFusion's."
);

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("LogbookError", py.get_type::<LogbookError>())?;
    m.add("InvalidInputError", py.get_type::<InvalidInputError>())?;
    m.add("ConflictError", py.get_type::<ConflictError>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add("AlreadyExistsError", py.get_type::<AlreadyExistsError>())?;
    m.add("CorruptError", py.get_type::<CorruptError>())?;
    m.add("UnsupportedError", py.get_type::<UnsupportedError>())?;
    m.add("TransientError", py.get_type::<TransientError>())?;
    m.add("SqlError", py.get_type::<SqlError>())?;
    Ok(())
}

/// A logbook error as the Python exception of its kind.
pub(crate) fn core(e: logbook_core::Error) -> PyErr {
    let msg = e.to_string();
    match e.kind() {
        ErrorKind::InvalidInput => InvalidInputError::new_err(msg),
        ErrorKind::Conflict => ConflictError::new_err(msg),
        ErrorKind::NotFound => NotFoundError::new_err(msg),
        ErrorKind::AlreadyExists => AlreadyExistsError::new_err(msg),
        ErrorKind::Corrupt => CorruptError::new_err(msg),
        ErrorKind::Unsupported => UnsupportedError::new_err(msg),
        ErrorKind::Transient => TransientError::new_err(msg),
        _ => LogbookError::new_err(msg),
    }
}

/// A query error: the table layer's by its kind, DataFusion's as `SqlError`.
pub(crate) fn query(e: QueryError) -> PyErr {
    match e {
        QueryError::Logbook(e) => core(e),
        QueryError::Sql(e) => sql(e),
    }
}

/// A cluster error: a bad address is invalid input, planning errors as
/// without a cluster; an unreachable cluster or a failed job is a plain
/// `LogbookError` with Ballista's reason (whether a retry helps is not
/// known: a file vacuumed away fails again).
pub(crate) fn cluster(e: logbook_cluster::ClusterError) -> PyErr {
    use logbook_cluster::ClusterError;
    match e {
        ClusterError::Config(msg) => InvalidInputError::new_err(msg),
        ClusterError::Plan(e) => sql(e),
        other => LogbookError::new_err(other.to_string()),
    }
}

/// A DataFusion error; one that wraps a logbook error keeps its kind, and
/// a storage error is transient.
pub(crate) fn sql(e: DataFusionError) -> PyErr {
    match e {
        DataFusionError::External(inner) => boxed("the query", inner),
        DataFusionError::Context(_, inner) => sql(*inner),
        DataFusionError::Shared(inner) => match Arc::try_unwrap(inner) {
            Ok(e) => sql(e),
            Err(shared) => SqlError::new_err(shared.to_string()),
        },
        DataFusionError::ArrowError(inner, _) => arrow("the query", *inner),
        e @ (DataFusionError::ObjectStore(_) | DataFusionError::IoError(_)) => {
            TransientError::new_err(e.to_string())
        }
        other => SqlError::new_err(other.to_string()),
    }
}

/// An Arrow error while doing `what`: one that wraps a logbook or DataFusion
/// error keeps its kind; I/O is transient; bad data is invalid input.
pub(crate) fn arrow(what: &str, e: ArrowError) -> PyErr {
    match e {
        ArrowError::ExternalError(inner) => boxed(what, inner),
        e @ ArrowError::IoError(..) => TransientError::new_err(format!("{what}: {e}")),
        e @ (ArrowError::SchemaError(_)
        | ArrowError::CastError(_)
        | ArrowError::InvalidArgumentError(_)
        | ArrowError::ParseError(_)) => InvalidInputError::new_err(format!("{what}: {e}")),
        other => LogbookError::new_err(format!("{what}: {other}")),
    }
}

fn boxed(what: &str, inner: Box<dyn std::error::Error + Send + Sync>) -> PyErr {
    let inner = match inner.downcast::<logbook_core::Error>() {
        Ok(e) => return core(*e),
        Err(inner) => inner,
    };
    let inner = match inner.downcast::<DataFusionError>() {
        Ok(e) => return sql(*e),
        Err(inner) => inner,
    };
    match inner.downcast::<ArrowError>() {
        Ok(e) => arrow(what, *e),
        Err(inner) => LogbookError::new_err(format!("{what}: {inner}")),
    }
}

/// A bad argument, named.
pub(crate) fn invalid(msg: impl Into<String>) -> PyErr {
    InvalidInputError::new_err(msg.into())
}
