//! Quoting for the few places parameters cannot go (a `COPY (…) TO STDOUT` query, a
//! simple-protocol statement sent with others in one round trip).

/// A text value as an SQL string literal. `standard_conforming_strings` is on (the default
/// since Postgres 9.1), so only quotes need doubling.
pub fn literal(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

/// An identifier, quoted.
pub fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_and_identifiers_are_quoted_against_injection() {
        assert_eq!(literal("o'brien"), "'o''brien'");
        assert_eq!(literal(r"back\slash"), r"'back\slash'");
        assert_eq!(ident("we\"ird"), "\"we\"\"ird\"");
    }
}
