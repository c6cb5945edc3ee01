//! How the members feature's refusals answer: one mapping into the API's errors.

use axum::http::StatusCode;
use serde_json::json;

use crate::pg::control::LookupError;
use crate::tenancy::members::{MemberError, MemberInputError};
use crate::web::error::{ApiError, Reply};

/// A members operation's failure.
#[derive(Debug, thiserror::Error)]
pub enum MembersError {
    #[error("validation failed")]
    Invalid(Vec<MemberInputError>),
    #[error(transparent)]
    Refused(MemberError),
    #[error("the control database did not answer")]
    Control(#[from] LookupError),
}

impl From<MemberError> for MembersError {
    fn from(e: MemberError) -> Self {
        MembersError::Refused(e)
    }
}

impl From<MembersError> for ApiError {
    fn from(e: MembersError) -> Self {
        let message = e.to_string();
        let reply = match e {
            MembersError::Invalid(problems) => Reply::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "validation_failed",
                problems
                    .iter()
                    .map(|p| format!("{}: {p}", p.field()))
                    .collect::<Vec<_>>()
                    .join("; "),
            )
            .detail(
                "fields",
                problems
                    .iter()
                    .map(|p| json!({"field": p.field(), "message": p.to_string()}))
                    .collect::<Vec<_>>(),
            ),
            MembersError::Refused(MemberError::NotFound) => {
                return ApiError::NotFound("no member of this tenant has that id");
            }
            MembersError::Refused(MemberError::DuplicateEmail) => {
                Reply::new(StatusCode::CONFLICT, "duplicate_email", message)
            }
            MembersError::Refused(MemberError::LastAdmin) => {
                Reply::new(StatusCode::CONFLICT, "last_admin", message)
            }
            MembersError::Refused(MemberError::Disabled) => {
                Reply::new(StatusCode::CONFLICT, "member_disabled", message)
            }
            MembersError::Refused(MemberError::NoAdmin) => {
                Reply::new(StatusCode::CONFLICT, "no_admin", message)
            }
            MembersError::Refused(MemberError::Db(cause)) => {
                return ApiError::Internal(cause.into());
            }
            MembersError::Control(cause) => {
                tracing::warn!(%cause, "members: the control database did not answer");
                return ApiError::ControlUnavailable;
            }
        };
        ApiError::Feature(Box::new(reply))
    }
}
