//! Client sessions: the settings a client `SET`, kept under a cookie.
//!
//! Flight SQL has no session of its own; clients that keep cookies (ADBC
//! with `adbc.flight.sql.rpc.with_cookie_middleware`, the JDBC driver) send
//! back the `logbook_session` cookie the server set on their first `SET`.
//! A cookie this server does not know (it restarted, or the session was
//! evicted) is refused rather than silently run without the client's
//! settings: the same query would give a different, plausible answer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use logbook_core::clock::IdGenerator;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::Status;

use crate::settings::{SetStatement, Settings};

/// The cookie naming a client's session.
pub const COOKIE: &str = "logbook_session";

/// Every live session's settings.
#[derive(Debug)]
pub struct Sessions {
    ids: Arc<dyn IdGenerator>,
    capacity: usize,
    map: Mutex<HashMap<String, (Settings, Instant)>>,
}

impl Sessions {
    /// At most `capacity` sessions; the least recently used is evicted.
    pub fn new(ids: Arc<dyn IdGenerator>, capacity: usize) -> Self {
        Self {
            ids,
            capacity: capacity.max(1),
            map: Mutex::new(HashMap::new()),
        }
    }

    /// The settings a call runs with: its session's, then its headers'.
    pub fn resolve(&self, headers: &MetadataMap) -> Result<Settings, Status> {
        let base = match session_id(headers) {
            None => Settings::default(),
            Some(id) => {
                let mut map = self.map.lock().expect("sessions lock");
                let (settings, used) = map.get_mut(&id).ok_or_else(|| unknown(&id))?;
                *used = Instant::now();
                settings.clone()
            }
        };
        base.with_headers(headers)
    }

    /// Apply a `SET` to the call's session (a new one when the call has
    /// none or an unknown one); returns the `Set-Cookie` value to send back.
    pub fn apply(
        &self,
        headers: &MetadataMap,
        set: &SetStatement,
    ) -> MetadataValue<tonic::metadata::Ascii> {
        let mut map = self.map.lock().expect("sessions lock");
        let id = session_id(headers)
            .filter(|id| map.contains_key(id))
            .unwrap_or_else(|| self.ids.next_id().simple().to_string());
        if !map.contains_key(&id) && map.len() >= self.capacity {
            if let Some(oldest) = map
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone())
            {
                map.remove(&oldest);
            }
        }
        let entry = map
            .entry(id.clone())
            .or_insert_with(|| (Settings::default(), Instant::now()));
        entry.0.apply(set);
        entry.1 = Instant::now();
        format!("{COOKIE}={id}; Path=/; HttpOnly")
            .parse()
            .expect("a session id is ASCII")
    }

    /// Apply a `SET` to the session the call already holds: for calls that
    /// cannot send a cookie back (updates).
    pub fn apply_existing(&self, headers: &MetadataMap, set: &SetStatement) -> Result<(), Status> {
        let id = session_id(headers).ok_or_else(|| {
            Status::failed_precondition(
                "SET through an update call cannot start a session: execute it as a query, with cookies enabled in the client",
            )
        })?;
        let mut map = self.map.lock().expect("sessions lock");
        let (settings, used) = map.get_mut(&id).ok_or_else(|| unknown(&id))?;
        settings.apply(set);
        *used = Instant::now();
        Ok(())
    }

    /// How many sessions are live.
    pub fn len(&self) -> usize {
        self.map.lock().expect("sessions lock").len()
    }

    /// Whether no session is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn unknown(id: &str) -> Status {
    Status::failed_precondition(format!(
        "session {COOKIE}={id} is unknown to this server (it restarted or the session expired): SET your logbook settings again"
    ))
}

/// The session id in the call's `cookie` headers, if any.
fn session_id(headers: &MetadataMap) -> Option<String> {
    headers
        .get_all("cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use logbook_core::clock::SequentialIds;

    fn with_cookie(set_cookie: &MetadataValue<tonic::metadata::Ascii>) -> MetadataMap {
        let cookie = set_cookie.to_str().unwrap().split(';').next().unwrap();
        let mut h = MetadataMap::new();
        h.insert("cookie", format!("other=1; {cookie}").parse().unwrap());
        h
    }

    #[test]
    fn a_set_is_seen_by_later_calls_of_the_same_session_only() {
        let s = Sessions::new(Arc::new(SequentialIds::default()), 10);
        let date = "2026-03-15".parse().unwrap();
        let cookie = s.apply(&MetadataMap::new(), &SetStatement::LogicalDate(Some(date)));
        assert_eq!(
            s.resolve(&with_cookie(&cookie)).unwrap().logical_date,
            Some(date)
        );
        assert_eq!(s.resolve(&MetadataMap::new()).unwrap().logical_date, None);
    }

    #[test]
    fn an_unknown_session_is_refused_and_the_oldest_evicted() {
        let s = Sessions::new(Arc::new(SequentialIds::default()), 1);
        let first = s.apply(&MetadataMap::new(), &SetStatement::Dimensions(None));
        let second = s.apply(&MetadataMap::new(), &SetStatement::Dimensions(None));
        assert_eq!(s.len(), 1);
        let err = s.resolve(&with_cookie(&first)).unwrap_err();
        assert!(err.message().contains("SET your logbook settings again"));
        assert!(s.resolve(&with_cookie(&second)).is_ok());
    }
}
