//! What a site reached only over TLS tells browsers (`[tenancy] secure_cookies = true`):
//! come back over TLS only (`Strict-Transport-Security`), and keep this site's cookies to
//! it. Every cookie the app sets goes out as `__Host-<name>` and `Secure`: a browser keeps
//! such a cookie only from a secure origin, for exactly this host, so neither a plain-HTTP
//! page on the path nor a sibling subdomain can plant one (a CSRF token or a session of an
//! attacker's choosing). Coming in, only `__Host-` cookies are read, under their plain
//! names; any other cookie is dropped before a handler sees it. Handlers, the CSRF check
//! and the sessions keep naming cookies plainly: the prefix is decided here, once.

use axum::http::header::{COOKIE, SET_COOKIE, STRICT_TRANSPORT_SECURITY};
use axum::http::{HeaderMap, HeaderValue, Request, Response};

const PREFIX: &str = "__Host-";

/// A year: browsers refuse plain HTTP to this host for that long after any answer.
const HSTS: &str = "max-age=31536000";

/// Leaves only the request's `__Host-` cookies, named without the prefix.
pub fn cookies_in<B>(mut req: Request<B>) -> Request<B> {
    let kept = prefixed_cookies(req.headers());
    let headers = req.headers_mut();
    headers.remove(COOKIE);
    if let Some(value) = kept.and_then(|v| HeaderValue::from_str(&v).ok()) {
        headers.insert(COOKIE, value);
    }
    req
}

fn prefixed_cookies(headers: &HeaderMap) -> Option<String> {
    let kept: Vec<&str> = headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().strip_prefix(PREFIX))
        .collect();
    (!kept.is_empty()).then(|| kept.join("; "))
}

/// Sends every cookie as `__Host-<name>`, `Secure`, and asks for TLS from now on.
pub fn cookies_out<B>(mut res: Response<B>) -> Response<B> {
    let headers = res.headers_mut();
    let set: Vec<HeaderValue> = headers
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| cookie::Cookie::parse(v.to_owned()).ok())
        .filter_map(|mut c| {
            c.set_name(format!("{PREFIX}{}", c.name()));
            c.set_secure(true);
            // What the prefix requires; the app's cookies have both already.
            c.set_path("/");
            c.unset_domain();
            HeaderValue::from_str(&c.to_string()).ok()
        })
        .collect();
    headers.remove(SET_COOKIE);
    for value in set {
        headers.append(SET_COOKIE, value);
    }
    headers.insert(STRICT_TRANSPORT_SECURITY, HeaderValue::from_static(HSTS));
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_prefixed_cookies_come_in_and_under_their_plain_names() {
        let req = Request::builder()
            .header(COOKIE, "csrf=planted; __Host-csrf=mine")
            .header(COOKIE, "__Host-session=signed; other=1")
            .body(())
            .unwrap();
        let req = cookies_in(req);
        let cookies: Vec<_> = req.headers().get_all(COOKIE).iter().collect();
        assert_eq!(cookies, ["csrf=mine; session=signed"]);
        let none = cookies_in(
            Request::builder()
                .header(COOKIE, "csrf=planted")
                .body(())
                .unwrap(),
        );
        assert!(none.headers().get(COOKIE).is_none());
    }

    #[test]
    fn every_cookie_goes_out_prefixed_and_secure_with_hsts() {
        let res = Response::builder()
            .header(SET_COOKIE, "csrf=abc; HttpOnly; SameSite=Strict; Path=/")
            .header(SET_COOKIE, "session=; Path=/; Max-Age=0")
            .body(())
            .unwrap();
        let res = cookies_out(res);
        let set: Vec<_> = res
            .headers()
            .get_all(SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect();
        assert_eq!(set.len(), 2);
        assert!(
            set[0].starts_with("__Host-csrf=abc;") && set[0].contains("Secure"),
            "{set:?}"
        );
        assert!(
            set[1].starts_with("__Host-session=;") && set[1].contains("Max-Age=0"),
            "{set:?}"
        );
        assert_eq!(res.headers()[STRICT_TRANSPORT_SECURITY], HSTS);
    }
}
