//! Unit tests: every parse error with its offset, every limit at and past its bound, the
//! writer's escaping, and the typed accessors' messages.

use super::*;

fn err(input: &str) -> String {
    parse(input.as_bytes()).unwrap_err().to_string()
}

fn err_with(input: &[u8], limits: Limits) -> ParseError {
    parse_with(input, &limits).unwrap_err()
}

fn ok(input: &str) -> Value {
    parse(input.as_bytes()).unwrap()
}

#[test]
fn every_syntax_error_names_its_kind_and_byte() {
    let cases = [
        ("", "unexpected end of input at byte 0"),
        ("   ", "unexpected end of input at byte 3"),
        ("[1,", "unexpected end of input at byte 3"),
        ("{\"a\":1", "unexpected end of input at byte 6"),
        ("\"abc", "unexpected end of input at byte 4"),
        ("]", "expected a value at byte 0"),
        ("[1,]", "expected a value at byte 3"),
        ("{\"a\" 1}", "expected `:` at byte 5"),
        ("[1 2]", "expected `,` or `]` at byte 3"),
        ("{\"a\":1 \"b\":2}", "expected `,` or `}` at byte 7"),
        ("{\"a\":1,}", "expected a string key at byte 7"),
        ("{a:1}", "expected a string key at byte 1"),
        ("1 2", "trailing characters at byte 2"),
        ("{} x", "trailing characters at byte 3"),
        ("tru", "invalid literal at byte 0"),
        ("nul!", "invalid literal at byte 0"),
        ("[truex]", "expected `,` or `]` at byte 5"),
        ("01", "invalid number at byte 1"),
        ("-", "unexpected end of input at byte 1"),
        ("-x", "invalid number at byte 1"),
        ("1.", "unexpected end of input at byte 2"),
        ("1.e5", "invalid number at byte 2"),
        ("1e", "unexpected end of input at byte 2"),
        ("1e+x", "invalid number at byte 3"),
        ("+1", "expected a value at byte 0"),
        (".5", "expected a value at byte 0"),
        ("NaN", "expected a value at byte 0"),
        ("Infinity", "expected a value at byte 0"),
        ("-Infinity", "invalid number at byte 1"),
        ("18446744073709551616", "integer out of range at byte 0"),
        ("[-9223372036854775809]", "integer out of range at byte 1"),
        ("1e309", "number out of range at byte 0"),
        ("-1.5e400", "number out of range at byte 0"),
        ("\"ab\\x\"", "invalid escape at byte 3"),
        ("\"\\u12g4\"", "invalid \\u escape at byte 1"),
        ("\"\\u12", "unexpected end of input at byte 5"),
        ("\"\\", "unexpected end of input at byte 2"),
        ("\"\\ud800\"", "lone surrogate in \\u escape at byte 1"),
        (
            "\"\\ud800\\u0041\"",
            "lone surrogate in \\u escape at byte 1",
        ),
        ("\"x\\udc00\"", "lone surrogate in \\u escape at byte 2"),
        ("\"a\tb\"", "control character in string at byte 2"),
        ("\"a\nb\"", "control character in string at byte 2"),
        ("{\"a\":1,\"b\":2,\"a\":3}", "duplicate key at byte 13"),
        ("\u{feff}1", "expected a value at byte 0"),
    ];
    for (input, want) in cases {
        assert_eq!(err(input), want, "input {input:?}");
    }
}

#[test]
fn invalid_utf8_is_reported_where_it_starts() {
    let e = parse(b"\"ab\xc3\x28\"").unwrap_err();
    assert_eq!(
        e,
        ParseError {
            kind: ParseErrorKind::InvalidUtf8,
            offset: 3
        }
    );
    let e = parse(b"[\"\\n\xff\"]").unwrap_err();
    assert_eq!(
        e,
        ParseError {
            kind: ParseErrorKind::InvalidUtf8,
            offset: 4
        }
    );
    // Outside strings, non-ASCII cannot start anything.
    assert_eq!(
        parse(b"\xff").unwrap_err().kind,
        ParseErrorKind::ExpectedValue
    );
    // An overlong encoding and an encoded surrogate are not UTF-8 either.
    assert_eq!(
        parse(b"\"\xc0\xaf\"").unwrap_err().kind,
        ParseErrorKind::InvalidUtf8
    );
    assert_eq!(
        parse(b"\"\xed\xa0\x80\"").unwrap_err().kind,
        ParseErrorKind::InvalidUtf8
    );
}

#[test]
fn duplicate_keys_are_found_in_large_objects_too() {
    let mut text = String::from("{");
    for i in 0..40 {
        text.push_str(&format!("\"k{i}\":{i},"));
    }
    let at = text.len();
    text.push_str("\"k33\":0}");
    assert_eq!(
        parse(text.as_bytes()).unwrap_err(),
        ParseError {
            kind: ParseErrorKind::DuplicateKey,
            offset: at
        }
    );
    // Equal after unescaping counts as a duplicate, in small and large objects.
    let mut large = String::from("{");
    for i in 0..40 {
        large.push_str(&format!("\"k{i}\":{i},"));
    }
    let at = large.len();
    large.push_str("\"\\u006b7\":0}");
    assert_eq!(parse(large.as_bytes()).unwrap_err().offset, at);
    let mut escaped_first = String::from("{\"\\u006b0\":0");
    for i in 1..40 {
        escaped_first.push_str(&format!(",\"k{i}\":{i}"));
    }
    let at = escaped_first.len() + 1;
    escaped_first.push_str(",\"k0\":0}");
    assert_eq!(parse(escaped_first.as_bytes()).unwrap_err().offset, at);
    assert_eq!(err("{\"a\":1,\"\\u0061\":2}"), "duplicate key at byte 7");
    // The same key in different objects is fine.
    ok("[{\"a\":1},{\"a\":2,\"b\":{\"a\":3}}]");
}

#[test]
fn input_length_limit() {
    let limits = Limits {
        max_len: 8,
        ..Limits::DEFAULT
    };
    assert_eq!(
        parse_with(b"12345678", &limits).unwrap(),
        Value::from(12345678u64)
    );
    let e = err_with(b"123456789", limits);
    assert_eq!(e.to_string(), "input longer than 8 bytes at byte 8");
    let big = vec![b' '; Limits::DEFAULT.max_len + 1];
    assert_eq!(
        parse(&big).unwrap_err().kind,
        ParseErrorKind::TooLong { limit: 1 << 20 }
    );
}

#[test]
fn depth_limit() {
    let nest = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    ok(&nest(32));
    assert_eq!(err(&nest(33)), "nesting deeper than 32 at byte 32");
    assert_eq!(
        err(&"{\"a\":".repeat(33)),
        "nesting deeper than 32 at byte 160"
    );
    let scalars_only = Limits {
        max_depth: 0,
        ..Limits::DEFAULT
    };
    assert!(parse_with(b"1", &scalars_only).is_ok());
    assert_eq!(
        err_with(b"[]", scalars_only).kind,
        ParseErrorKind::TooDeep { limit: 0 }
    );
    // An absurd configured depth is capped, so the parser cannot exhaust the stack.
    let huge = Limits {
        max_depth: usize::MAX,
        max_len: usize::MAX,
        ..Limits::DEFAULT
    };
    let deep = nest(100_000);
    assert_eq!(
        err_with(deep.as_bytes(), huge),
        ParseError {
            kind: ParseErrorKind::TooDeep {
                limit: MAX_DEPTH_CAP
            },
            offset: MAX_DEPTH_CAP
        }
    );
}

#[test]
fn string_length_limit_counts_unescaped_bytes() {
    let limits = Limits {
        max_string_len: 4,
        ..Limits::DEFAULT
    };
    assert!(parse_with(b"\"abcd\"", &limits).is_ok());
    assert!(parse_with(b"\"\\u00e9\\u00e9\"", &limits).is_ok()); // 4 bytes of UTF-8
    let e = err_with(b"[\"abcde\"]", limits);
    assert_eq!(e.to_string(), "string longer than 4 bytes at byte 1");
    assert_eq!(err_with(b"\"ab\\n\\n\\n\"", limits).offset, 0);
    // Keys count too.
    assert_eq!(err_with(b"{\"abcde\":1}", limits).offset, 1);
}

#[test]
fn element_limit_counts_every_value() {
    let limits = Limits {
        max_elements: 4,
        ..Limits::DEFAULT
    };
    assert!(parse_with(b"[1,[2]]", &limits).is_ok()); // four values
    let e = err_with(b"[1,2,3,4]", limits);
    assert_eq!(e.to_string(), "more than 4 values at byte 7");
    assert!(parse_with(b"{\"a\":1,\"b\":2,\"c\":3}", &limits).is_ok());
    assert_eq!(
        err_with(b"{\"a\":1,\"b\":2,\"c\":3,\"d\":4}", limits).offset,
        23
    );
}

#[test]
fn integers_are_exact_and_floats_stay_floats() {
    assert_eq!(ok("0"), Value::Number(Number::U64(0)));
    assert_eq!(ok("-0"), Value::Number(Number::U64(0)));
    assert_eq!(ok("18446744073709551615"), Value::from(u64::MAX));
    assert_eq!(ok("-9223372036854775808"), Value::from(i64::MIN));
    assert_eq!(ok("-1"), Value::Number(Number::I64(-1)));
    assert_eq!(ok("1.0"), Value::Number(Number::F64(1.0)));
    assert_eq!(ok("1e2"), Value::Number(Number::F64(100.0)));
    assert_eq!(ok("-0.0"), Value::Number(Number::F64(-0.0)));
    assert_eq!(ok("1E-400"), Value::Number(Number::F64(0.0)));
    assert_eq!(ok("2.5E+3"), Value::Number(Number::F64(2500.0)));
}

#[test]
fn strings_decode_every_escape_and_surrogate_pairs() {
    let v = ok(r#""\"\\\/\b\f\n\r\t\u0000\u00e9\u20ac\ud83d\ude00 é""#);
    assert_eq!(v, Value::from("\"\\/\u{8}\u{c}\n\r\t\0é€😀 é"));
    assert_eq!(ok(" \t\r\n\"x\" \n"), Value::from("x"));
}

#[test]
fn objects_keep_member_order() {
    let v = ok(r#"{"z":1,"a":2,"m":3}"#);
    let keys: Vec<&str> = v.as_object().unwrap().iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["z", "a", "m"]);
}

#[test]
fn writer_escapes_per_rfc_and_round_trips() {
    let mut out = Vec::new();
    write_str("a\"b\\c\n\r\t\u{8}\u{c}\u{1}\u{1f}\u{7f}é😀/", &mut out);
    assert_eq!(
        std::str::from_utf8(&out).unwrap(),
        "\"a\\\"b\\\\c\\n\\r\\t\\b\\f\\u0001\\u001f\u{7f}é😀/\""
    );
    let doc = r#"{"a":[1,-2,3.5,1e300,-0.0,true,false,null,"\u0000"],"b":{},"c":[]}"#;
    let v = ok(doc);
    let written = v.to_bytes();
    assert_eq!(parse(&written).unwrap(), v);
    assert_eq!(
        std::str::from_utf8(&written).unwrap(),
        r#"{"a":[1,-2,3.5,1e300,-0.0,true,false,null,"\u0000"],"b":{},"c":[]}"#
    );
}

#[test]
fn writer_keeps_extreme_numbers_exact() {
    for n in [
        Number::U64(u64::MAX),
        Number::I64(i64::MIN),
        Number::F64(f64::MAX),
        Number::F64(f64::MIN_POSITIVE),
        Number::F64(5e-324),
        Number::F64(1e16),
        Number::F64(0.1),
    ] {
        let v = Value::Number(n);
        assert_eq!(parse(&v.to_bytes()).unwrap(), v, "{n:?}");
    }
    assert_eq!(Value::Number(Number::F64(f64::NAN)).to_bytes(), b"null");
}

#[test]
fn accessors_name_the_field_and_both_types() {
    let v = ok(r#"{"s":"x","n":5,"neg":-5,"f":1.5,"b":true,"z":null,
                   "argv":["a",2],"big":18446744073709551615,"o":{},"a":[]}"#);
    let o = v.as_object().unwrap();
    let msg = |r: Result<(), FieldError>| r.unwrap_err().to_string();

    assert_eq!(o.req_str("s").unwrap(), "x");
    assert_eq!(o.req_u64("n").unwrap(), 5);
    assert_eq!(o.req_i64("neg").unwrap(), -5);
    assert!(o.req_bool("b").unwrap());
    assert!(o.req_object("o").unwrap().is_empty());
    assert!(o.req_array("a").unwrap().is_empty());
    assert_eq!(o.opt_u64("absent").unwrap(), None);
    assert_eq!(o.opt_u64("z").unwrap(), None, "null reads as absent");

    assert_eq!(
        msg(o.req_u64("s").map(drop)),
        "field `s`: expected unsigned integer, got string"
    );
    assert_eq!(
        msg(o.opt_u64("neg").map(drop)),
        "field `neg`: expected unsigned integer, got negative integer"
    );
    assert_eq!(
        msg(o.req_u64("f").map(drop)),
        "field `f`: expected unsigned integer, got non-integer number"
    );
    assert_eq!(
        msg(o.req_i64("big").map(drop)),
        "field `big`: integer out of range"
    );
    assert_eq!(
        msg(o.req_str("n").map(drop)),
        "field `n`: expected string, got integer"
    );
    assert_eq!(msg(o.req_str("z").map(drop)), "field `z`: missing");
    assert_eq!(msg(o.req_str("nope").map(drop)), "field `nope`: missing");
    assert_eq!(
        msg(o.req_bool("o").map(drop)),
        "field `o`: expected boolean, got object"
    );
    assert_eq!(
        msg(o.req_object("a").map(drop)),
        "field `a`: expected object, got array"
    );
    assert_eq!(
        msg(o.req_array("b").map(drop)),
        "field `b`: expected array, got boolean"
    );
    assert_eq!(
        msg(o.req_array_of_str("argv").map(drop)),
        "field `argv[1]`: expected string, got integer"
    );
    assert_eq!(o.opt_array_of_str("missing").unwrap(), None);
    let keys: Vec<&str> = o.iter().map(|(k, _)| k).collect();
    assert!(o.check_fields(&keys).is_ok());
    assert_eq!(msg(o.check_fields(&["s", "n"])), "unknown field `neg`");
}

#[test]
fn object_editing_keeps_keys_unique() {
    let mut o = Object::new();
    o.insert("a", 1u64);
    o.insert("b", "x");
    o.insert("a", 2u64);
    assert_eq!(o.len(), 2);
    assert_eq!(o.get("a"), Some(&Value::from(2u64)));
    assert_eq!(o.remove("a"), Some(Value::from(2u64)));
    assert_eq!(Value::from(o).to_bytes(), br#"{"b":"x"}"#);
}

#[test]
fn spans_give_every_member_and_element_its_position() {
    use crate::proto::json::{parse_with_spans, Limits, Span};
    let text = b"{\"a\": {\"b\": [1, {\"c\": true}]},\n \"d\": \"x\"}";
    let (value, spans) = parse_with_spans(text, &Limits::DEFAULT).unwrap();
    assert_eq!(
        value,
        parse(text).unwrap(),
        "the same value as without spans"
    );
    assert_eq!(spans.get("a"), Some(Span { key: 1, value: 6 }));
    assert_eq!(spans.get("a.b"), Some(Span { key: 7, value: 12 }));
    assert_eq!(spans.get("a.b[0]"), Some(Span { key: 13, value: 13 }));
    assert_eq!(spans.get("a.b[1]"), Some(Span { key: 16, value: 16 }));
    assert_eq!(spans.get("a.b[1].c"), Some(Span { key: 17, value: 22 }));
    assert_eq!(spans.get("d"), Some(Span { key: 32, value: 37 }));
    assert_eq!(spans.get("e"), None);
    // Errors are the same as without spans.
    let bad = b"{\"a\": [1,]}";
    assert_eq!(
        parse_with_spans(bad, &Limits::DEFAULT).unwrap_err(),
        parse(bad).unwrap_err()
    );
}
