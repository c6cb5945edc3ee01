//! The consistency token over HTTP: `X-Consistency-Token` in (a client's latest token,
//! read from the header, or for the HTML UI from its cookie) and out (on every write), and
//! `X-Read-From` on every tenant read (see [`crate::sharding::consistency`]).

use axum::http::header::{COOKIE, SET_COOKIE};
use axum::http::request::Parts;
use axum::http::{HeaderName, HeaderValue};
use axum::response::Response;

use super::error::ApiError;
use super::request_facts::RequestFacts;
use crate::sharding::consistency::ConsistencyToken;

pub const TOKEN_HEADER: HeaderName = HeaderName::from_static("x-consistency-token");
pub const READ_FROM_HEADER: HeaderName = HeaderName::from_static("x-read-from");
/// Where the HTML UI keeps a browser's latest token, so that the page a form redirects to
/// shows what it wrote, whichever web replica serves it.
const COOKIE_NAME: &str = "consistency";

/// The token an authenticated tenant request brought, checked by the authentication layer.
#[derive(Debug, Clone)]
pub struct Brought(pub Option<ConsistencyToken>);

/// The token a request brings: its header (garbage there is a 400 naming it), else the UI's
/// cookie (garbage there is ignored: the browser did not choose it).
pub fn brought(parts: &Parts) -> Result<Option<ConsistencyToken>, ApiError> {
    if let Some(value) = parts.headers.get(TOKEN_HEADER) {
        let parsed = value
            .to_str()
            .ok()
            .map(ConsistencyToken::parse)
            .and_then(Result::ok);
        return match parsed {
            Some(token) => Ok(Some(token)),
            None => Err(ApiError::BadRequest {
                code: "invalid_consistency_token",
                message: format!(
                    "X-Consistency-Token {}",
                    crate::sharding::consistency::NotAToken
                ),
            }),
        };
    }
    Ok(parts
        .headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().strip_prefix(COOKIE_NAME)?.strip_prefix('='))
        .find_map(|value| ConsistencyToken::parse(value).ok()))
}

/// Labels an answer with what its session did: `X-Read-From` for a read, the write's
/// token (and, for the HTML UI, the cookie that keeps it).
pub fn label(response: &mut Response, facts: &RequestFacts, ui: bool) {
    if let Some(from) = facts.read_from()
        && let Ok(value) = HeaderValue::from_str(&from.header_value())
    {
        response.headers_mut().insert(READ_FROM_HEADER, value);
    }
    let Some(token) = facts.token() else {
        return;
    };
    let token = token.to_string();
    if let Ok(value) = HeaderValue::from_str(&token) {
        response.headers_mut().insert(TOKEN_HEADER, value);
    }
    if ui {
        let cookie = format!("{COOKIE_NAME}={token}; Path=/; HttpOnly; SameSite=Strict");
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            response.headers_mut().append(SET_COOKIE, value);
        }
    }
}
