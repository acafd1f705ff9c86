//! Bearer-token authentication: with a token configured, every call must
//! carry `authorization: Bearer <token>` or is refused `Unauthenticated`.

use std::sync::Arc;

use tonic::{Request, Status};

/// A tonic interceptor that checks the bearer token of every call.
#[derive(Clone)]
pub struct BearerAuth {
    token: Option<Arc<[u8]>>,
}

impl std::fmt::Debug for BearerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BearerAuth")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl BearerAuth {
    /// Check calls against `token`; `None` lets every call through.
    pub fn new(token: Option<&str>) -> Self {
        Self {
            token: token.map(|t| Arc::from(t.as_bytes())),
        }
    }

    /// Whether `request` may proceed.
    pub fn check<T>(&self, request: &Request<T>) -> Result<(), Status> {
        let Some(expected) = &self.token else {
            return Ok(());
        };
        let given = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let (scheme, token) = v.trim().split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            })
            .ok_or_else(|| {
                Status::unauthenticated(
                    "this server needs a token: send the header `authorization: Bearer <token>`",
                )
            })?;
        if constant_time_eq(given.as_bytes(), expected) {
            Ok(())
        } else {
            Err(Status::unauthenticated(
                "the bearer token is not this server's token",
            ))
        }
    }
}

impl tonic::service::Interceptor for BearerAuth {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        self.check(&request)?;
        Ok(request)
    }
}

/// Compared in constant time (`subtle`), so timing does not reveal a prefix.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    subtle::ConstantTimeEq::ct_eq(a, b).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(header: Option<&str>) -> Request<()> {
        let mut r = Request::new(());
        if let Some(h) = header {
            r.metadata_mut().insert("authorization", h.parse().unwrap());
        }
        r
    }

    #[test]
    fn only_the_right_token_passes() {
        let auth = BearerAuth::new(Some("s3cret"));
        assert!(auth.check(&call(Some("Bearer s3cret"))).is_ok());
        assert!(auth.check(&call(Some("bearer  s3cret "))).is_ok());
        for bad in [
            None,
            Some("Bearer s3cre"),
            Some("Basic s3cret"),
            Some("s3cret"),
        ] {
            let err = auth.check(&call(bad)).unwrap_err();
            assert_eq!(err.code(), tonic::Code::Unauthenticated, "{bad:?}");
        }
        assert!(BearerAuth::new(None).check(&call(None)).is_ok());
    }
}
