//! Tokens of the text format. Newlines are tokens: a statement ends at the
//! end of its line (a line may continue after a comma or an opening bracket).

use crate::diag::{Diagnostic, Span};

#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    Newline,
    /// `%name`, without the `%`.
    Local(String),
    /// `@name`, without the `@`.
    Global(String),
    /// A word: a keyword or a dotted mnemonic (`cp.async.bulk.shared::cta`).
    Word(String),
    Int(i64),
    /// A number with a fraction, kept as written (`8.6`, `1.5e3`).
    Float(String),
    LParen,
    RParen,
    LBrace,
    RBrace,
    LBracket,
    RBracket,
    Comma,
    Equals,
    Colon,
    Less,
    Greater,
    Arrow,
    Eof,
}

impl Tok {
    /// How the token is named in "expected ..., found ..." messages.
    pub fn describe(&self) -> String {
        match self {
            Tok::Newline => "end of line".into(),
            Tok::Local(n) => format!("`%{n}`"),
            Tok::Global(n) => format!("`@{n}`"),
            Tok::Word(w) => format!("`{w}`"),
            Tok::Int(i) => format!("`{i}`"),
            Tok::Float(f) => format!("`{f}`"),
            Tok::LParen => "`(`".into(),
            Tok::RParen => "`)`".into(),
            Tok::LBrace => "`{`".into(),
            Tok::RBrace => "`}`".into(),
            Tok::LBracket => "`[`".into(),
            Tok::RBracket => "`]`".into(),
            Tok::Comma => "`,`".into(),
            Tok::Equals => "`=`".into(),
            Tok::Colon => "`:`".into(),
            Tok::Less => "`<`".into(),
            Tok::Greater => "`>`".into(),
            Tok::Arrow => "`->`".into(),
            Tok::Eof => "end of file".into(),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub span: Span,
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Splits source text into tokens, or reports the first bad character.
pub fn lex(src: &str) -> Result<Vec<Token>, Diagnostic> {
    let bytes = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let start = i;
        let single = |tok: Tok| Token {
            tok,
            span: Span::new(start, start + 1),
        };
        match b {
            b' ' | b'\t' | b'\r' => i += 1,
            b'\n' => {
                out.push(single(Tok::Newline));
                i += 1;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'%' | b'@' => {
                i += 1;
                while i < bytes.len() && is_ident(bytes[i]) {
                    i += 1;
                }
                if i == start + 1 {
                    return Err(Diagnostic::error(
                        "E0001",
                        format!("expected a name after `{}`", b as char),
                        Span::new(start, start + 1),
                    )
                    .with_label("a name such as `%x` or `@tile` goes here"));
                }
                let name = src[start + 1..i].to_string();
                let tok = if b == b'%' {
                    Tok::Local(name)
                } else {
                    Tok::Global(name)
                };
                out.push(Token {
                    tok,
                    span: Span::new(start, i),
                });
            }
            b'-' if bytes.get(i + 1) == Some(&b'>') => {
                out.push(Token {
                    tok: Tok::Arrow,
                    span: Span::new(i, i + 2),
                });
                i += 2;
            }
            b'0'..=b'9' | b'-' => {
                let (tok, end) = lex_number(src, i)?;
                out.push(Token {
                    tok,
                    span: Span::new(start, end),
                });
                i = end;
            }
            _ if is_ident_start(b) => {
                i += 1;
                loop {
                    match bytes.get(i) {
                        Some(&c) if is_ident(c) => i += 1,
                        Some(b'.') if bytes.get(i + 1).is_some_and(|&c| is_ident(c)) => i += 1,
                        Some(b':')
                            if bytes.get(i + 1) == Some(&b':')
                                && bytes.get(i + 2).is_some_and(|&c| is_ident(c)) =>
                        {
                            i += 2
                        }
                        _ => break,
                    }
                }
                out.push(Token {
                    tok: Tok::Word(src[start..i].to_string()),
                    span: Span::new(start, i),
                });
            }
            _ => {
                let tok = match b {
                    b'(' => Tok::LParen,
                    b')' => Tok::RParen,
                    b'{' => Tok::LBrace,
                    b'}' => Tok::RBrace,
                    b'[' => Tok::LBracket,
                    b']' => Tok::RBracket,
                    b',' => Tok::Comma,
                    b'=' => Tok::Equals,
                    b':' => Tok::Colon,
                    b'<' => Tok::Less,
                    b'>' => Tok::Greater,
                    _ => {
                        let ch = src[i..].chars().next().unwrap_or('\u{fffd}');
                        return Err(Diagnostic::error(
                            "E0001",
                            format!("unexpected character `{}`", ch.escape_debug()),
                            Span::new(i, i + ch.len_utf8()),
                        )
                        .with_label("not part of the cpflow text format"));
                    }
                };
                out.push(single(tok));
                i += 1;
            }
        }
    }
    out.push(Token {
        tok: Tok::Eof,
        span: Span::new(src.len(), src.len()),
    });
    Ok(out)
}

fn lex_number(src: &str, start: usize) -> Result<(Tok, usize), Diagnostic> {
    let bytes = src.as_bytes();
    let mut i = start;
    if bytes[i] == b'-' {
        i += 1;
    }
    let digits_start = i;
    let hex = bytes.get(i) == Some(&b'0') && matches!(bytes.get(i + 1), Some(b'x' | b'X'));
    if hex {
        i += 2;
        while i < bytes.len() && bytes[i].is_ascii_hexdigit() {
            i += 1;
        }
    } else {
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
    }
    let bad = |msg: &str, end: usize| {
        Diagnostic::error(
            "E0001",
            msg.to_string(),
            Span::new(start, end.max(start + 1)),
        )
        .with_label("this number")
    };
    if i == digits_start || (hex && i == digits_start + 2) {
        return Err(bad("expected digits", i));
    }
    let mut is_float = false;
    if !hex && bytes.get(i) == Some(&b'.') && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) {
        is_float = true;
        i += 1;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        if matches!(bytes.get(i), Some(b'e' | b'E')) {
            let mut j = i + 1;
            if matches!(bytes.get(j), Some(b'+' | b'-')) {
                j += 1;
            }
            if bytes.get(j).is_some_and(u8::is_ascii_digit) {
                i = j;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
            }
        }
    }
    if bytes.get(i).is_some_and(|&c| is_ident(c)) {
        let mut end = i;
        while end < bytes.len() && is_ident(bytes[end]) {
            end += 1;
        }
        return Err(bad("a number must not run into a name", end));
    }
    let text = &src[start..i];
    if is_float {
        return Ok((Tok::Float(text.to_string()), i));
    }
    let negative = bytes[start] == b'-';
    let magnitude = if hex {
        u64::from_str_radix(&src[digits_start + 2..i], 16)
    } else {
        src[digits_start..i].parse::<u64>()
    };
    let value = magnitude.ok().and_then(|m| {
        if negative {
            0i64.checked_sub_unsigned(m)
        } else {
            i64::try_from(m).ok()
        }
    });
    match value {
        Some(v) => Ok((Tok::Int(v), i)),
        None => Err(bad("integer literal out of range (must fit in 64 bits)", i)),
    }
}
