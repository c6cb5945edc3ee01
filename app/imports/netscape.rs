//! Reading a Netscape bookmark file, the HTML every browser and bookmark manager exports:
//! `<DT><H3>` opens a folder whose `<DL>` holds its entries, `<DT><A HREF=…>` is a bookmark
//! (`ADD_DATE`, `LAST_MODIFIED`, `TAGS`, and the states this service and Pinboard write),
//! and a `<DD>` after it is its description. Browsers write it loosely (tags left open,
//! attributes unquoted, entities, legacy encodings), so this reads tags, not a document
//! tree: a tolerant scan, one pass, no HTML parser's idea of where a `<DT>` ends.

use std::borrow::Cow;

use super::entry::{FileError, Parsed, Raw, epoch};

/// Reads `bytes` as a Netscape bookmark file.
pub fn parse(bytes: &[u8]) -> Result<Parsed, FileError> {
    let text = decode(bytes);
    let mut parsed = Parsed::default();
    let mut scan = Scanner::new(&text);
    let mut looks_right = false;
    // The folder each open `<DL>` lists (the enclosing one's for a `<DL>` no heading opened).
    let mut lists: Vec<Option<u32>> = Vec::new();
    let mut path: Vec<String> = Vec::new();
    // `<DL>`s that opened a folder, so that closing one leaves it.
    let mut opened: Vec<bool> = Vec::new();
    let mut heading: Option<String> = None;
    let mut capture = Capture::Nothing;
    let mut entry: Option<Raw> = None;

    while let Some(token) = scan.next() {
        match token {
            Token::Doctype(d) => {
                looks_right |= d.to_ascii_uppercase().contains("NETSCAPE-BOOKMARK-FILE");
            }
            Token::Text(t) => match &mut capture {
                Capture::Nothing => {}
                Capture::Heading(s) | Capture::Title(s) | Capture::Note(s) => s.push_str(t),
            },
            Token::Open { name, attrs, line } => {
                if matches!(name.as_str(), "DT" | "DL" | "H3" | "A") {
                    finish_note(&mut capture, &mut entry, &mut parsed)?;
                }
                match name.as_str() {
                    "H3" => capture = Capture::Heading(String::new()),
                    "DL" => {
                        looks_right = true;
                        let folder = match heading.take() {
                            Some(name) => {
                                path.push(name);
                                opened.push(true);
                                parsed.folder(&path)
                            }
                            None => {
                                opened.push(false);
                                lists.last().copied().flatten()
                            }
                        };
                        lists.push(folder);
                    }
                    "A" => {
                        let attrs = attributes(attrs);
                        let flag = |name: &str| attrs.iter().any(|(n, v)| n == name && v != "0");
                        let value = |name: &str| {
                            attrs
                                .iter()
                                .find(|(n, _)| n == name)
                                .map(|(_, v)| v.as_str())
                        };
                        entry = Some(Raw {
                            line: Some(line),
                            url: value("HREF").map(str::to_owned),
                            tags: value("TAGS")
                                .map(|t| t.split(',').map(str::to_owned).collect())
                                .unwrap_or_default(),
                            folder: lists.last().copied().flatten(),
                            created_at: value("ADD_DATE").and_then(epoch),
                            updated_at: value("LAST_MODIFIED").and_then(epoch),
                            unread: flag("TOREAD"),
                            archived: flag("ARCHIVED"),
                            favorite: flag("FAVORITE"),
                            ..Raw::default()
                        });
                        capture = Capture::Title(String::new());
                    }
                    "DD" if entry.is_some() && matches!(capture, Capture::Nothing) => {
                        capture = Capture::Note(String::new());
                    }
                    _ => {}
                }
            }
            Token::Close { name } => match name.as_str() {
                "H3" => {
                    if let Capture::Heading(s) = std::mem::take(&mut capture) {
                        heading = Some(text_of(&s));
                    }
                }
                "A" => {
                    if let (Capture::Title(s), Some(raw)) =
                        (std::mem::take(&mut capture), &mut entry)
                    {
                        raw.title = text_of(&s);
                    }
                    // Its description may follow; it is kept when the next entry starts.
                }
                "DL" => {
                    finish_note(&mut capture, &mut entry, &mut parsed)?;
                    lists.pop();
                    if opened.pop() == Some(true) {
                        path.pop();
                    }
                }
                _ => {}
            },
        }
    }
    finish_note(&mut capture, &mut entry, &mut parsed)?;
    if !looks_right {
        return Err(FileError::NotABookmarkFile(
            "neither <!DOCTYPE NETSCAPE-Bookmark-file-1> nor a <DL> list: this is not a \
             bookmark file"
                .to_owned(),
        ));
    }
    Ok(parsed)
}

/// What the text between tags is read into.
#[derive(Default)]
enum Capture {
    #[default]
    Nothing,
    Heading(String),
    Title(String),
    Note(String),
}

/// Keeps the entry being read (with its description, if one was being read).
fn finish_note(
    capture: &mut Capture,
    entry: &mut Option<Raw>,
    parsed: &mut Parsed,
) -> Result<(), FileError> {
    match std::mem::take(capture) {
        Capture::Note(s) => {
            if let Some(raw) = entry.as_mut() {
                raw.notes = text_of(&s);
            }
        }
        // An `<A>` never closed: its text so far is its title.
        Capture::Title(s) => {
            if let Some(raw) = entry.as_mut() {
                raw.title = text_of(&s);
            }
        }
        other => *capture = other,
    }
    if let Some(raw) = entry.take() {
        parsed.push(raw)?;
    }
    Ok(())
}

/// Text between tags, entities decoded, white space at its ends dropped.
fn text_of(raw: &str) -> String {
    html_escape::decode_html_entities(raw).trim().to_owned()
}

/// The file as text: in the encoding its byte order mark says; otherwise in the one its
/// `<META … charset=…>` names; otherwise UTF-8, or Windows-1252 (what older browsers wrote)
/// when it is not valid UTF-8.
fn decode(bytes: &[u8]) -> Cow<'_, str> {
    if let Some((encoding, bom)) = encoding_rs::Encoding::for_bom(bytes) {
        return encoding.decode_without_bom_handling(&bytes[bom..]).0;
    }
    let declared = declared_charset(bytes).and_then(encoding_rs::Encoding::for_label);
    let encoding = match declared {
        Some(e) => e,
        None if std::str::from_utf8(bytes).is_ok() => encoding_rs::UTF_8,
        None => encoding_rs::WINDOWS_1252,
    };
    encoding.decode_without_bom_handling(bytes).0
}

/// The label after the first `charset=` of the file's head.
fn declared_charset(bytes: &[u8]) -> Option<&[u8]> {
    let head = &bytes[..bytes.len().min(4096)];
    let at = head
        .windows(8)
        .position(|w| w.eq_ignore_ascii_case(b"charset="))?;
    let rest = &head[at + 8..];
    let rest = rest.strip_prefix(b"\"").unwrap_or(rest);
    let end = rest
        .iter()
        .position(|b| matches!(b, b'"' | b'\'' | b' ' | b'>' | b';' | b'/'))
        .unwrap_or(rest.len());
    Some(&rest[..end]).filter(|l| !l.is_empty())
}

/// `NAME="value" NAME='value' NAME=value NAME` pairs: names upper-cased, values decoded.
fn attributes(raw: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = raw.trim_start();
    while !rest.is_empty() {
        let name_end = rest
            .find(|c: char| c == '=' || c.is_whitespace() || c == '/')
            .unwrap_or(rest.len());
        let name = rest[..name_end].to_ascii_uppercase();
        rest = rest[name_end..].trim_start();
        let mut value = String::new();
        if let Some(after) = rest.strip_prefix('=') {
            let after = after.trim_start();
            let (v, remaining) = match after.chars().next() {
                Some(q @ ('"' | '\'')) => match after[1..].find(q) {
                    Some(end) => (&after[1..1 + end], &after[end + 2..]),
                    None => (&after[1..], ""),
                },
                _ => {
                    let end = after.find(char::is_whitespace).unwrap_or(after.len());
                    (&after[..end], &after[end..])
                }
            };
            value = html_escape::decode_html_entities(v).into_owned();
            rest = remaining;
        } else if name.is_empty() {
            // A stray character (`/`): step over it.
            rest = &rest[rest.chars().next().map_or(0, char::len_utf8)..];
        }
        if !name.is_empty() {
            out.push((name, value));
        }
        rest = rest.trim_start();
    }
    out
}

enum Token<'a> {
    Doctype(&'a str),
    Open {
        name: String,
        attrs: &'a str,
        line: u32,
    },
    Close {
        name: String,
    },
    Text(&'a str),
}

/// Splits the text into tags and the text between them, counting lines.
struct Scanner<'a> {
    text: &'a str,
    at: usize,
    line: u32,
    /// How far `line` has counted.
    counted: usize,
}

impl<'a> Scanner<'a> {
    fn new(text: &'a str) -> Self {
        Self {
            text,
            at: 0,
            line: 1,
            counted: 0,
        }
    }

    fn line_at(&mut self, at: usize) -> u32 {
        self.line += self.text[self.counted..at].matches('\n').count() as u32;
        self.counted = at;
        self.line
    }

    fn next(&mut self) -> Option<Token<'a>> {
        let rest = &self.text[self.at..];
        if rest.is_empty() {
            return None;
        }
        let Some(lt) = rest.find('<') else {
            self.at = self.text.len();
            return Some(Token::Text(rest));
        };
        if lt > 0 {
            self.at += lt;
            return Some(Token::Text(&rest[..lt]));
        }
        let start = self.at;
        if let Some(comment) = rest.strip_prefix("<!--") {
            let end = comment
                .find("-->")
                .map_or(self.text.len(), |e| start + 4 + e + 3);
            self.at = end;
            // Whatever follows is read by the next call (no recursion: a file of a million
            // comments in a row would overflow the stack).
            return Some(Token::Text(""));
        }
        if let Some(decl) = rest.strip_prefix("<!") {
            let end = decl.find('>').unwrap_or(decl.len());
            self.at = start + 2 + end + 1;
            self.at = self.at.min(self.text.len());
            return Some(Token::Doctype(&decl[..end]));
        }
        let closing = rest[1..].starts_with('/');
        let name_from = if closing { 2 } else { 1 };
        let name_len = rest[name_from..]
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(rest.len() - name_from);
        if name_len == 0 {
            // A `<` that opens no tag is text.
            self.at += 1;
            return Some(Token::Text("<"));
        }
        let name = rest[name_from..name_from + name_len].to_ascii_uppercase();
        let attrs_from = name_from + name_len;
        let end = tag_end(&rest[attrs_from..]).map_or(rest.len(), |e| attrs_from + e);
        let attrs = &rest[attrs_from..end];
        let line = self.line_at(start);
        self.at = (start + end + 1).min(self.text.len());
        Some(if closing {
            Token::Close { name }
        } else {
            Token::Open { name, attrs, line }
        })
    }
}

/// Where a tag's `>` is, outside quoted attribute values.
fn tag_end(s: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '>') => return Some(i),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_read_quoted_single_quoted_unquoted_and_bare() {
        let got =
            attributes(r#" HREF="https://a.example/?x=1&amp;y=2" add_date=17 TAGS='a,b' PRIVATE "#);
        assert_eq!(
            got,
            [
                ("HREF".into(), "https://a.example/?x=1&y=2".into()),
                ("ADD_DATE".into(), "17".into()),
                ("TAGS".into(), "a,b".into()),
                ("PRIVATE".into(), String::new()),
            ]
        );
    }

    #[test]
    fn a_declared_legacy_charset_is_honoured() {
        let mut file = b"<!DOCTYPE NETSCAPE-Bookmark-file-1>\n<META HTTP-EQUIV=\"Content-Type\" CONTENT=\"text/html; charset=ISO-8859-1\">\n<DL><p>\n<DT><A HREF=\"https://a.example/\">Caf".to_vec();
        file.push(0xe9);
        file.extend_from_slice(b"</A>\n</DL>\n");
        let parsed = parse(&file).unwrap();
        assert_eq!(parsed.entries[0].title, "Caf\u{e9}");
    }

    #[test]
    fn a_byte_order_mark_wins_and_a_million_comments_in_a_row_are_read_without_recursion() {
        let mut utf16 = vec![0xff, 0xfe];
        let text = "<!DOCTYPE NETSCAPE-Bookmark-file-1><DL><DT><A HREF=\"https://a.example/\">\u{e9}t\u{e9}</A></DL>";
        for unit in text.encode_utf16() {
            utf16.extend_from_slice(&unit.to_le_bytes());
        }
        assert_eq!(parse(&utf16).unwrap().entries[0].title, "\u{e9}t\u{e9}");
        let mut file = "<!DOCTYPE NETSCAPE-Bookmark-file-1><DL>".to_owned();
        file.push_str(&"<!---->".repeat(1_000_000));
        file.push_str("<DT><A HREF=\"https://b.example/\">after</A></DL>");
        assert_eq!(parse(file.as_bytes()).unwrap().entries[0].title, "after");
    }

    #[test]
    fn text_that_is_not_a_bookmark_file_is_refused_whole() {
        assert!(matches!(
            parse(b"hello, world"),
            Err(FileError::NotABookmarkFile(_))
        ));
        assert!(matches!(
            parse(b"<html><body><p>hi</p></body></html>"),
            Err(FileError::NotABookmarkFile(_))
        ));
        let empty = parse(b"<!DOCTYPE NETSCAPE-Bookmark-file-1>").unwrap();
        assert!(empty.entries.is_empty());
    }
}
