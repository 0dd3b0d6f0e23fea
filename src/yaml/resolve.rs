//! What a scalar means, as kubectl reads it: go-yaml v2 resolves plain scalars by
//! YAML 1.1 rules (`yes` and `on` are true, `0777` is 511, `1_000` is 1000), and
//! sigs.k8s.io/yaml then turns keys into strings and values into JSON. These are the
//! values the API server is sent, so they are the values meshward checks.

use super::Value;

const TAG_PREFIX: &str = "tag:yaml.org,2002:";

/// A scalar as go-yaml v2 decodes it into an `interface{}`.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Scalar {
    Null,
    Bool(bool),
    Int(i64),
    /// Over `i64::MAX`: go-yaml keeps it as a uint64.
    Uint(u64),
    Float(f64),
    Str(String),
}

/// go-yaml's name for what it resolved a scalar to (the `!!` tags).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Null,
    Bool,
    Int,
    Float,
    Str,
    Timestamp,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Bool => "bool",
            Kind::Int => "int",
            Kind::Float => "float",
            Kind::Str => "str",
            Kind::Timestamp => "timestamp",
        }
    }
}

/// Resolves one scalar event. `Err` carries go-yaml's complaint (a tag the text
/// does not fit, bad `!!binary` data), which makes kubectl reject the document.
pub(super) fn resolve(
    value: String,
    tag: Option<&str>,
    plain_implicit: bool,
) -> Result<Scalar, String> {
    let tag = tag.unwrap_or("");
    // Quoted and block scalars without a tag are strings.
    if tag.is_empty() && !plain_implicit {
        return Ok(Scalar::Str(value));
    }
    let wanted = match tag.strip_prefix(TAG_PREFIX) {
        None if tag.is_empty() => None,
        Some("binary") => return decode_binary(&value).map(Scalar::Str),
        Some("str") => return Ok(Scalar::Str(value)),
        Some(t @ ("bool" | "null" | "int" | "float" | "timestamp")) => Some(t),
        // `!`, a local tag or any other: go-yaml keeps the text as it is.
        _ => return Ok(Scalar::Str(value)),
    };
    let (kind, scalar) = resolve_plain(&value, wanted);
    match (wanted, kind, scalar) {
        (None, _, s) => Ok(s),
        (Some(w), k, s) if w == k.name() => Ok(s),
        (Some("float"), Kind::Int, Scalar::Int(i)) => Ok(Scalar::Float(i as f64)),
        (Some(w), k, _) => Err(format!(
            "cannot decode !!{} `{}` as a !!{w}",
            k.name(),
            excerpt(&value)
        )),
    }
}

/// go-yaml v2's `resolve` for an untagged plain scalar, or one tagged with a type it
/// knows: the first character says what the text may be.
fn resolve_plain(value: &str, wanted: Option<&str>) -> (Kind, Scalar) {
    let string = || (Kind::Str, Scalar::Str(value.to_string()));
    let hint = match value.as_bytes().first() {
        None => b'N',
        Some(b'+' | b'-') => b'S',
        Some(b'0'..=b'9') => b'D',
        Some(b'y' | b'Y' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'o' | b'O' | b'~') => b'M',
        Some(b'.') => b'.',
        Some(_) => return string(),
    };
    if let Some(special) = special(value) {
        return special;
    }
    match hint {
        b'.' if is_yaml_float(value) => match parse_float(value) {
            Some(f) => (Kind::Float, Scalar::Float(f)),
            None => string(),
        },
        b'D' | b'S' => number(value, wanted).unwrap_or_else(string),
        _ => string(),
    }
}

/// The words and symbols of go-yaml v2's resolve table.
fn special(value: &str) -> Option<(Kind, Scalar)> {
    Some(match value {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            (Kind::Bool, Scalar::Bool(true))
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            (Kind::Bool, Scalar::Bool(false))
        }
        "" | "~" | "null" | "Null" | "NULL" => (Kind::Null, Scalar::Null),
        ".nan" | ".NaN" | ".NAN" => (Kind::Float, Scalar::Float(f64::NAN)),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            (Kind::Float, Scalar::Float(f64::INFINITY))
        }
        "-.inf" | "-.Inf" | "-.INF" => (Kind::Float, Scalar::Float(f64::NEG_INFINITY)),
        _ => return None,
    })
}

/// A scalar starting with a digit or sign: a timestamp (kept as text), an integer in
/// any of Go's notations (underscores dropped), or a float.
fn number(value: &str, wanted: Option<&str>) -> Option<(Kind, Scalar)> {
    if wanted == Some("timestamp") && is_timestamp(value) {
        return Some((Kind::Timestamp, Scalar::Str(value.to_string())));
    }
    let plain = value.replace('_', "");
    if let Some(i) = parse_int(&plain) {
        return Some((Kind::Int, Scalar::Int(i)));
    }
    if let Some(u) = parse_uint(&plain) {
        return Some((Kind::Int, Scalar::Uint(u)));
    }
    if is_yaml_float(&plain) {
        if let Some(f) = parse_float(&plain) {
            return Some((Kind::Float, Scalar::Float(f)));
        }
    }
    // go-yaml's own binary branch: also takes a sign after the prefix (`0b-101`).
    let binary = if let Some(rest) = plain.strip_prefix("0b") {
        rest.to_string()
    } else {
        format!("-{}", plain.strip_prefix("-0b")?)
    };
    if let Ok(i) = i64::from_str_radix(&binary, 2) {
        return Some((Kind::Int, Scalar::Int(i)));
    }
    u64::from_str_radix(&binary, 2)
        .ok()
        .map(|u| (Kind::Int, Scalar::Uint(u)))
}

/// Go's `strconv.ParseInt(s, 0, 64)`.
fn parse_int(s: &str) -> Option<i64> {
    let (negative, body) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let magnitude = i128::from(parse_unsigned(body)?);
    i64::try_from(if negative { -magnitude } else { magnitude }).ok()
}

/// Go's `strconv.ParseUint(s, 0, 64)`: no sign.
fn parse_uint(s: &str) -> Option<u64> {
    parse_unsigned(s)
}

/// Digits with Go's base prefixes: `0x`, `0o`, `0b`, or a leading `0` for octal.
fn parse_unsigned(s: &str) -> Option<u64> {
    let lower = s.get(..2).map(str::to_ascii_lowercase);
    let (radix, digits) = match lower.as_deref() {
        Some("0x") => (16, &s[2..]),
        Some("0o") => (8, &s[2..]),
        Some("0b") => (2, &s[2..]),
        _ if s.len() > 1 && s.starts_with('0') => (8, &s[1..]),
        _ => (10, s),
    };
    // from_str_radix takes a `+` Go does not.
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// go-yaml v2's float pattern: `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn is_yaml_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// A decimal float; Go reports overflow as an error, and go-yaml then keeps the text.
fn parse_float(s: &str) -> Option<f64> {
    s.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// The shapes of go-yaml v2's timestamp formats (`2006-1-2`, with an optional time),
/// which only matter where a `!!timestamp` tag asks for one.
fn is_timestamp(s: &str) -> bool {
    let (date, time) = match s.find(['T', 't', ' ']) {
        Some(i) => (&s[..i], Some((&s[i..i + 1], &s[i + 1..]))),
        None => (s, None),
    };
    let fields = |text: &str, sep: char, widths: &[(usize, usize)]| {
        let parts: Vec<&str> = text.split(sep).collect();
        parts.len() == widths.len()
            && parts.iter().zip(widths).all(|(p, (lo, hi))| {
                (*lo..=*hi).contains(&p.len()) && p.bytes().all(|c| c.is_ascii_digit())
            })
    };
    if !fields(date, '-', &[(4, 4), (1, 2), (1, 2)]) {
        return false;
    }
    let Some((sep, time)) = time else {
        return true;
    };
    // RFC 3339 with `T` needs a zone; the space-separated form has none.
    let (clock, zone_ok) = if sep == " " {
        (time, true)
    } else if let Some(c) = time.strip_suffix('Z') {
        (c, true)
    } else {
        match time.rfind(['+', '-']) {
            Some(i) => (&time[..i], fields(&time[i + 1..], ':', &[(2, 2), (2, 2)])),
            None => (time, false),
        }
    };
    let (clock, fraction) = match clock.split_once('.') {
        Some((c, f)) => (c, !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit())),
        None => (clock, true),
    };
    zone_ok && fraction && fields(clock, ':', &[(1, 2), (1, 2), (1, 2)])
}

/// `!!binary`: base64 as Go's standard encoding reads it (line breaks ignored,
/// padding required), turned into a string the way Go's JSON encoder does.
fn decode_binary(value: &str) -> Result<String, String> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    use base64::Engine;
    const GO_STD: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_padding_mode(DecodePaddingMode::RequireCanonical)
            .with_decode_allow_trailing_bits(true),
    );
    let compact: String = value.chars().filter(|c| *c != '\r' && *c != '\n').collect();
    let bytes = GO_STD
        .decode(compact)
        .map_err(|_| "!!binary value contains invalid base64 data".to_string())?;
    Ok(lossy_like_go(&bytes))
}

/// Invalid UTF-8 becomes U+FFFD byte by byte, as Go's JSON encoder writes it.
fn lossy_like_go(mut bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    loop {
        match std::str::from_utf8(bytes) {
            Ok(s) => {
                out.push_str(s);
                return out;
            }
            Err(e) => {
                let (valid, rest) = bytes.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                out.push('\u{FFFD}');
                bytes = &rest[1..];
            }
        }
    }
}

/// The value sigs.k8s.io/yaml puts in the JSON kubectl sends. `Err` for what JSON
/// cannot hold.
pub(super) fn to_value(scalar: Scalar) -> Result<Value, String> {
    Ok(match scalar {
        Scalar::Null => Value::Null,
        Scalar::Bool(b) => Value::Bool(b),
        Scalar::Int(i) => Value::Int(i),
        // The API machinery reads an integer over i64 back as a float.
        Scalar::Uint(u) => Value::Float(u as f64),
        Scalar::Float(f) if !f.is_finite() => {
            return Err(format!(
                "`{}` is not a number JSON can hold",
                go_float_key(f)
            ))
        }
        // Go writes a whole float without a fraction (`1.0` is sent as `1`), and the
        // API machinery reads that back as an integer.
        Scalar::Float(f)
            if f.fract() == 0.0
                && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&f) =>
        {
            Value::Int(f as i64)
        }
        Scalar::Float(f) => Value::Float(f),
        Scalar::Str(s) => Value::Str(s),
    })
}

/// The JSON field name sigs.k8s.io/yaml makes of a key; None for a null key, which
/// it refuses.
pub(super) fn key_string(scalar: Scalar) -> Option<String> {
    Some(match scalar {
        Scalar::Null => return None,
        Scalar::Bool(b) => b.to_string(),
        Scalar::Int(i) => i.to_string(),
        Scalar::Uint(u) => u.to_string(),
        Scalar::Float(f) => go_float_key(f),
        Scalar::Str(s) => s,
    })
}

/// The field name of an already built value (a key given by an alias).
pub(super) fn key_of_value(value: &Value) -> Option<String> {
    Some(match value {
        Value::Str(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => go_float_key(*f),
        Value::Null | Value::Seq(_) | Value::Map(_) => return None,
    })
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 32)`, with go-yaml's names for the
/// infinities: how sigs.k8s.io/yaml writes a float key.
fn go_float_key(f: f64) -> String {
    if f.is_nan() {
        return ".nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { ".inf" } else { "-.inf" }.into();
    }
    let short = format!("{:e}", f as f32);
    let (mantissa, exp) = short.split_once('e').unwrap_or((&short, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let dot = if rest.is_empty() { "" } else { "." };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{dot}{rest}e{esign}{:02}", exp.abs());
    }
    // Point position: digits before it.
    let point = exp + 1;
    let text = if point <= 0 {
        format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
    } else {
        let point = point as usize;
        if digits.len() <= point {
            format!("{digits}{}", "0".repeat(point - digits.len()))
        } else {
            format!("{}.{}", &digits[..point], &digits[point..])
        }
    };
    format!("{sign}{text}")
}

fn excerpt(s: &str) -> String {
    match s.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(s: &str) -> Scalar {
        resolve(s.to_string(), None, true).expect("resolves")
    }

    #[test]
    fn yaml_1_1_words_are_booleans_and_nulls() {
        for t in ["y", "Yes", "ON", "true"] {
            assert_eq!(plain(t), Scalar::Bool(true), "{t}");
        }
        for f in ["n", "NO", "off", "False"] {
            assert_eq!(plain(f), Scalar::Bool(false), "{f}");
        }
        for n in ["", "~", "null", "NULL"] {
            assert_eq!(plain(n), Scalar::Null, "{n:?}");
        }
        // Not in the table: strings.
        for s in ["yEs", "nil", "none", "Y2"] {
            assert_eq!(plain(s), Scalar::Str(s.into()), "{s}");
        }
    }

    #[test]
    fn go_integer_notations() {
        let cases = [
            ("0777", 511),
            ("0o17", 15),
            ("0x1F", 31),
            ("-0x10", -16),
            ("0b101", 5),
            ("-0b101", -5),
            ("1_000", 1000),
            ("+7", 7),
            ("08", 8), // not octal: read as the float 8
        ];
        for (text, want) in cases {
            let got = to_value(plain(text)).expect("value");
            assert_eq!(got, Value::Int(want), "{text}");
        }
        assert_eq!(plain("18446744073709551615"), Scalar::Uint(u64::MAX));
        assert_eq!(plain("0x"), Scalar::Str("0x".into()));
        assert_eq!(plain("0x+5"), Scalar::Str("0x+5".into()));
    }

    #[test]
    fn floats_and_what_json_receives() {
        assert_eq!(to_value(plain("1.5")), Ok(Value::Float(1.5)));
        assert_eq!(to_value(plain("1e3")), Ok(Value::Int(1000)));
        assert_eq!(to_value(plain(".5")), Ok(Value::Float(0.5)));
        assert_eq!(to_value(plain("1.0")), Ok(Value::Int(1)));
        assert_eq!(plain("1e400"), Scalar::Str("1e400".into()));
        assert!(to_value(plain(".inf")).is_err());
        assert!(to_value(plain(".NaN")).is_err());
        assert_eq!(plain("1.2.3"), Scalar::Str("1.2.3".into()));
        assert_eq!(plain("2001-12-14"), Scalar::Str("2001-12-14".into()));
    }

    #[test]
    fn tags() {
        let tagged = |tag: &str, v: &str| resolve(v.into(), Some(tag), false);
        assert_eq!(
            tagged("tag:yaml.org,2002:str", "123"),
            Ok(Scalar::Str("123".into()))
        );
        assert_eq!(tagged("tag:yaml.org,2002:int", "12"), Ok(Scalar::Int(12)));
        assert_eq!(
            tagged("tag:yaml.org,2002:float", "3"),
            Ok(Scalar::Float(3.0))
        );
        assert!(tagged("tag:yaml.org,2002:int", "abc")
            .unwrap_err()
            .contains("as a !!int"));
        assert_eq!(tagged("!custom", "123"), Ok(Scalar::Str("123".into())));
        assert_eq!(
            tagged("tag:yaml.org,2002:binary", "aGVs\nbG8="),
            Ok(Scalar::Str("hello".into()))
        );
        assert!(tagged("tag:yaml.org,2002:binary", "aGVsbG8").is_err());
        assert_eq!(
            tagged(
                "tag:yaml.org,2002:timestamp",
                "2001-12-14T21:59:43.10-05:00"
            ),
            Ok(Scalar::Str("2001-12-14T21:59:43.10-05:00".into()))
        );
        assert!(tagged("tag:yaml.org,2002:timestamp", "2001-12-14T21:59:43").is_err());
        // Quoted without a tag: always a string.
        assert_eq!(
            resolve("true".into(), None, false),
            Ok(Scalar::Str("true".into()))
        );
    }

    #[test]
    fn keys_as_sigs_yaml_writes_them() {
        let key = |s: &str| key_string(plain(s));
        assert_eq!(key("yes").as_deref(), Some("true"));
        assert_eq!(key("0x10").as_deref(), Some("16"));
        assert_eq!(key("1.5").as_deref(), Some("1.5"));
        assert_eq!(key("1.0").as_deref(), Some("1"));
        assert_eq!(key("1e6").as_deref(), Some("1e+06"));
        assert_eq!(key("123456").as_deref(), Some("123456"));
        assert_eq!(key("0.0001").as_deref(), Some("0.0001"));
        assert_eq!(key("0.00001").as_deref(), Some("1e-05"));
        assert_eq!(key("0.1").as_deref(), Some("0.1"));
        assert_eq!(key("-.inf").as_deref(), Some("-.inf"));
        assert_eq!(key("~"), None);
    }

    #[test]
    fn invalid_utf8_from_binary_is_replaced_per_byte() {
        assert_eq!(lossy_like_go(b"a\xe2\x82b"), "a\u{FFFD}\u{FFFD}b");
    }
}
