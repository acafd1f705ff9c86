//! Prepared statements: the SQL a client prepared and the parameters it
//! bound, under an opaque handle until the client closes it.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use arrow_array::RecordBatch;
use datafusion::common::ScalarValue;
use logbook_core::clock::IdGenerator;
use logbook_datafusion::datafusion;
use tonic::Status;

/// One prepared statement.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The SQL, `?` already numbered.
    pub sql: String,
    /// The bound parameters (`$1` first), once bound.
    pub params: Option<Vec<ScalarValue>>,
}

impl Prepared {
    /// A digest of the bound parameters: a ticket records it, so that a
    /// fetch planned again can tell whether they are still the ones it was
    /// described with (clients send them again with every execution).
    pub fn params_digest(&self) -> u64 {
        let mut h = std::hash::DefaultHasher::new();
        for value in self.params.iter().flatten() {
            // A value's hash leaves out its type (a NULL is a NULL).
            (value.data_type(), value).hash(&mut h);
        }
        self.params.is_some().hash(&mut h);
        h.finish()
    }
}

/// Every open prepared statement.
#[derive(Debug)]
pub struct PreparedStatements {
    ids: Arc<dyn IdGenerator>,
    capacity: usize,
    map: Mutex<HashMap<String, Prepared>>,
}

impl PreparedStatements {
    /// At most `capacity` open at once.
    pub fn new(ids: Arc<dyn IdGenerator>, capacity: usize) -> Self {
        Self {
            ids,
            capacity,
            map: Mutex::new(HashMap::new()),
        }
    }

    /// Register `sql`; returns its handle.
    pub fn create(&self, sql: String) -> Result<String, Status> {
        let mut map = self.map.lock().expect("prepared lock");
        if map.len() >= self.capacity {
            return Err(Status::resource_exhausted(format!(
                "{} prepared statements are open, this server's limit: close some",
                self.capacity
            )));
        }
        let handle = self.ids.next_id().simple().to_string();
        map.insert(handle.clone(), Prepared { sql, params: None });
        Ok(handle)
    }

    /// The statement under `handle`.
    pub fn get(&self, handle: &str) -> Result<Prepared, Status> {
        self.map
            .lock()
            .expect("prepared lock")
            .get(handle)
            .cloned()
            .ok_or_else(|| unknown(handle))
    }

    /// Bind the parameters of one row of `batches` to `handle`.
    pub fn bind(&self, handle: &str, batches: &[RecordBatch]) -> Result<(), Status> {
        let params = one_row(batches)?;
        let mut map = self.map.lock().expect("prepared lock");
        let p = map.get_mut(handle).ok_or_else(|| unknown(handle))?;
        p.params = Some(params);
        Ok(())
    }

    /// Forget `handle`.
    pub fn close(&self, handle: &str) -> Result<(), Status> {
        self.map
            .lock()
            .expect("prepared lock")
            .remove(handle)
            .map(|_| ())
            .ok_or_else(|| unknown(handle))
    }
}

fn unknown(handle: &str) -> Status {
    Status::not_found(format!(
        "prepared statement {handle:?} is not open on this server (closed, or the server restarted): prepare it again"
    ))
}

/// The values of the single parameter row the client sent.
fn one_row(batches: &[RecordBatch]) -> Result<Vec<ScalarValue>, Status> {
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    let batch = match batches.iter().find(|b| b.num_rows() > 0) {
        Some(b) if rows == 1 => b,
        _ => {
            return Err(Status::invalid_argument(format!(
                "bind exactly one row of parameters per execution (got {rows})"
            )))
        }
    };
    batch
        .columns()
        .iter()
        .enumerate()
        .map(|(i, c)| {
            ScalarValue::try_from_array(c, 0).map_err(|e| {
                Status::invalid_argument(format!("parameter ${}: {}", i + 1, e.strip_backtrace()))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Int64Array;
    use arrow_schema::{DataType, Field, Schema};
    use logbook_core::clock::SequentialIds;

    fn row(values: Vec<i64>) -> RecordBatch {
        let schema = Schema::new(vec![Field::new("$1", DataType::Int64, true)]);
        RecordBatch::try_new(Arc::new(schema), vec![Arc::new(Int64Array::from(values))]).unwrap()
    }

    #[test]
    fn bind_then_close() {
        let p = PreparedStatements::new(Arc::new(SequentialIds::default()), 2);
        let h = p.create("SELECT $1".into()).unwrap();
        p.bind(&h, &[row(vec![7])]).unwrap();
        assert_eq!(
            p.get(&h).unwrap().params,
            Some(vec![ScalarValue::Int64(Some(7))])
        );
        let digest = p.get(&h).unwrap().params_digest();
        p.bind(&h, &[row(vec![7])]).unwrap();
        assert_eq!(p.get(&h).unwrap().params_digest(), digest, "the same again");
        p.bind(&h, &[row(vec![8])]).unwrap();
        assert_ne!(p.get(&h).unwrap().params_digest(), digest);
        let typed = |params| Prepared {
            sql: String::new(),
            params: Some(params),
        };
        let (int, text) = (ScalarValue::Int64(None), ScalarValue::Utf8(None));
        assert_ne!(
            typed(vec![int]).params_digest(),
            typed(vec![text]).params_digest(),
            "a NULL of another type is another parameter"
        );
        p.close(&h).unwrap();
        assert_eq!(p.get(&h).unwrap_err().code(), tonic::Code::NotFound);
    }

    #[test]
    fn limits_and_bad_binds_are_refused() {
        let p = PreparedStatements::new(Arc::new(SequentialIds::default()), 1);
        let h = p.create("SELECT $1".into()).unwrap();
        assert_eq!(
            p.create("SELECT 2".into()).unwrap_err().code(),
            tonic::Code::ResourceExhausted
        );
        let err = p.bind(&h, &[row(vec![1, 2])]).unwrap_err();
        assert!(err.message().contains("exactly one row"));
        assert!(p.get(&h).unwrap().params.is_none());
    }
}
