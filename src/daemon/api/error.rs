//! What an API request can fail with, and the status and JSON body each failure gets. A
//! parameter problem names the parameter; ClickHouse being down or slow is a 503 with
//! `Retry-After`, so a client backs off instead of hanging or seeing a 500.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::store::StoreError;

/// Seconds a client is told to wait after a 503.
pub const RETRY_AFTER_SECS: u64 = 5;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("parameter `{param}`: {reason}")]
    BadParam { param: String, reason: String },
    #[error("{what} not found")]
    NotFound { what: String },
    /// A 404 whose message says why in a whole sentence (the manual retry's refusals).
    #[error("{0}")]
    Missing(String),
    /// The request contradicts the stored state (a retry of a delivery that is not failed).
    #[error("{0}")]
    Conflict(String),
    #[error("missing or wrong bearer token")]
    Unauthorized,
    /// Known, but not allowed this request: a viewer's write, a forged form.
    #[error("{0}")]
    Forbidden(String),
    #[error("ClickHouse is unavailable: {0}")]
    Unavailable(String),
    #[error("the Kafka broker is unavailable: {0}")]
    BrokerUnavailable(String),
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    pub fn bad(param: &str, reason: impl Into<String>) -> ApiError {
        ApiError::BadParam { param: param.to_string(), reason: reason.into() }
    }

    pub fn not_found(what: impl Into<String>) -> ApiError {
        ApiError::NotFound { what: what.into() }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadParam { .. } => StatusCode::BAD_REQUEST,
            ApiError::NotFound { .. } | ApiError::Missing(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::Unavailable(_) | ApiError::BrokerUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn code(&self) -> &'static str {
        match self {
            ApiError::BadParam { .. } => "bad_parameter",
            ApiError::NotFound { .. } | ApiError::Missing(_) => "not_found",
            ApiError::Conflict(_) => "conflict",
            ApiError::Unauthorized => "unauthorized",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::Unavailable(_) | ApiError::BrokerUnavailable(_) => "unavailable",
            ApiError::Internal(_) => "internal",
        }
    }
}

/// ClickHouse's code for a query stopped by `max_execution_time`.
const TIMEOUT_EXCEEDED: &str = "Code: 159";

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        let text = e.to_string();
        // Credentials refused or a certificate not trusted: ClickHouse is unavailable to us
        // until the operator acts, as when it is down.
        if e.is_unreachable() || e.needs_the_operator() || text.contains(TIMEOUT_EXCEEDED) {
            ApiError::Unavailable(text)
        } else {
            ApiError::Internal(text)
        }
    }
}

/// The body of every error answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// `bad_parameter`, `not_found`, `conflict`, `unauthorized`, `forbidden`, `unavailable`
    /// or `internal`.
    pub code: String,
    /// The parameter at fault, for `bad_parameter`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameter: Option<String>,
    pub message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        match &self {
            ApiError::Internal(m) => tracing::error!(error = %m, "API request failed"),
            ApiError::Unavailable(m) => tracing::warn!(error = %m, "API request: ClickHouse unavailable"),
            ApiError::BrokerUnavailable(m) => tracing::warn!(error = %m, "API request: the broker is unavailable"),
            _ => {}
        }
        let parameter = match &self {
            ApiError::BadParam { param, .. } => Some(param.clone()),
            _ => None,
        };
        let body =
            ErrorBody { error: ErrorDetail { code: self.code().to_string(), parameter, message: self.to_string() } };
        let mut response = (status, axum::Json(body)).into_response();
        match self {
            ApiError::Unavailable(_) | ApiError::BrokerUnavailable(_) => {
                response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
            }
            ApiError::Unauthorized => {
                response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            _ => {}
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_has_its_status() {
        assert_eq!(ApiError::bad("limit", "too big").status(), StatusCode::BAD_REQUEST);
        assert_eq!(ApiError::not_found("trace").status(), StatusCode::NOT_FOUND);
        let r = ApiError::Unavailable("down".into()).into_response();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.headers()[header::RETRY_AFTER], RETRY_AFTER_SECS.to_string());
    }
}
