//! Cross-checks the JSON parser and writer against serde_json as an oracle.
//!
//! Random documents (valid ones, then random mutations of them) are parsed by both. The
//! accept/reject decisions must agree, except where genward is stricter by design — and
//! then only with the documented error kinds (duplicate key, integer beyond 64 bits,
//! lone surrogate, depth). Accepted documents must give equal values, and every accepted
//! value must survive write → parse unchanged and be read identically by serde_json.

use genward::proto::json::{parse_with, Limits, Number, ParseErrorKind, Value};
use genward::testkit::rng::SplitMix64 as Rng;

/// Limits for the comparison: generous, except depth, which stays below serde_json's own
/// recursion limit of 128 so that the two never differ by that limit.
const ORACLE: Limits = Limits {
    max_len: 1 << 24,
    max_depth: 100,
    max_string_len: 1 << 24,
    max_elements: 1 << 24,
};

fn ws(rng: &mut Rng, out: &mut String) {
    if rng.chance(70) {
        return;
    }
    for _ in 0..rng.below_usize(3) {
        out.push(rng.pick(&[' ', '\t', '\n', '\r']));
    }
}

fn gen_number(rng: &mut Rng, out: &mut String) {
    match rng.below_usize(8) {
        0 => out.push_str(&rng.next_u64().to_string()),
        1 => out.push_str(&(rng.next_u64() as i64).to_string()),
        2 => out.push_str(&rng.below_usize(1000).to_string()),
        3 => out.push_str(rng.pick(&[
            "0",
            "-0",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775808",
            "-9223372036854775809",
            "99999999999999999999999",
            "1e308",
            "1e309",
            "-1e309",
            "1e-400",
            "0.0",
            "-0.0",
            "5e-324",
            "2.2250738585072014e-308",
            "1E+2",
            "1e007",
        ])),
        4 => out.push_str(
            &format!("{:?}", f64::from_bits(rng.next_u64()))
                .replace("inf", "1e999")
                .replace("NaN", "0"),
        ),
        _ => {
            if rng.chance(30) {
                out.push('-');
            }
            out.push_str(&rng.below_usize(100_000).to_string());
            if rng.chance(50) {
                out.push('.');
                out.push_str(&rng.below_usize(1_000_000).to_string());
            }
            if rng.chance(40) {
                out.push(rng.pick(&['e', 'E']));
                if rng.chance(50) {
                    out.push(rng.pick(&['+', '-']));
                }
                out.push_str(&rng.below_usize(400).to_string());
            }
        }
    }
}

fn gen_string(rng: &mut Rng, out: &mut String) {
    out.push('"');
    for _ in 0..rng.below_usize(12) {
        match rng.below_usize(14) {
            0 => {
                out.push_str(rng.pick(&["\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t"]))
            }
            1 => out.push_str(&format!("\\u{:04x}", rng.below_usize(0x10000))),
            2 => out.push_str(&format!("\\u{:04X}", rng.below_usize(0x800) + 0xd800)),
            3 => out.push_str("\\ud83d\\ude00"),
            4 => out.push(rng.pick(&['é', '€', '😀', '\u{7f}', '\u{2028}', '\u{fffd}'])),
            5 => out.push(rng.pick(&['k', 'e', 'y'])),
            _ => out.push(char::from(b' ' + rng.below_usize(95) as u8)),
        }
    }
    out.push('"');
}

fn gen_value(rng: &mut Rng, depth: usize, out: &mut String) {
    ws(rng, out);
    let container = depth < 6 && rng.chance(40);
    if container && rng.chance(50) {
        out.push('[');
        let n = rng.below_usize(5);
        for i in 0..n {
            if i > 0 {
                out.push(',');
            }
            gen_value(rng, depth + 1, out);
        }
        ws(rng, out);
        out.push(']');
    } else if container {
        out.push('{');
        let n = rng.below_usize(5);
        for i in 0..n {
            if i > 0 {
                out.push(',');
            }
            ws(rng, out);
            if rng.chance(60) {
                // Short keys from a small alphabet, so duplicates happen now and then.
                out.push_str(&format!(
                    "\"{}\"",
                    rng.pick(&["a", "b", "c", "id", "op", "\\u0061"])
                ));
            } else {
                gen_string(rng, out);
            }
            ws(rng, out);
            out.push(':');
            gen_value(rng, depth + 1, out);
        }
        ws(rng, out);
        out.push('}');
    } else {
        match rng.below_usize(6) {
            0 => out.push_str(rng.pick(&["null", "true", "false"])),
            1 | 2 => gen_number(rng, out),
            _ => gen_string(rng, out),
        }
    }
    ws(rng, out);
}

fn gen_document(rng: &mut Rng) -> Vec<u8> {
    let mut out = String::new();
    if rng.chance(3) {
        // Deep nesting around the depth limit.
        let n = 90 + rng.below_usize(50);
        out.push_str(&"[".repeat(n));
        out.push_str(&"]".repeat(n));
    } else {
        gen_value(rng, 0, &mut out);
    }
    out.into_bytes()
}

fn mutate(rng: &mut Rng, doc: &[u8]) -> Vec<u8> {
    const BYTES: &[u8] =
        b"{}[],:\"\\/-+.eE0123456789 \t\n\rabfnrtu\x00\x01\x1f\x7f\x80\xbf\xc3\xe2\xed\xf0\xff";
    let mut d = doc.to_vec();
    for _ in 0..1 + rng.below_usize(3) {
        let at = if d.is_empty() {
            0
        } else {
            rng.below_usize(d.len() + 1)
        };
        match rng.below_usize(5) {
            0 if at < d.len() => {
                d.remove(at);
            }
            1 => d.insert(at, rng.pick(BYTES)),
            2 if at < d.len() => d[at] = rng.pick(BYTES),
            3 => d.truncate(at),
            _ => {
                let end = (at + rng.below_usize(8)).min(d.len());
                let piece = d[at.min(end)..end].to_vec();
                d.splice(at..at, piece);
            }
        }
    }
    d
}

/// Where genward is stricter than serde_json, by design.
fn documented_strictness(kind: ParseErrorKind) -> bool {
    matches!(
        kind,
        ParseErrorKind::DuplicateKey
            | ParseErrorKind::IntegerOutOfRange
            | ParseErrorKind::LoneSurrogate
            | ParseErrorKind::TooDeep { .. }
    )
}

fn floats_agree(a: f64, b: f64) -> bool {
    // serde_json is built with `float_roundtrip`, so both sides round correctly.
    a.to_bits() == b.to_bits()
}

fn same(ours: &Value, theirs: &serde_json::Value) -> bool {
    use serde_json::Value as S;
    match (ours, theirs) {
        (Value::Null, S::Null) => true,
        (Value::Bool(a), S::Bool(b)) => a == b,
        (Value::Str(a), S::String(b)) => a == b,
        (Value::Number(Number::U64(a)), S::Number(b)) if b.is_u64() => b.as_u64() == Some(*a),
        // serde_json reads `-0` as the float -0.0; genward keeps it the integer 0.
        (Value::Number(Number::U64(0)), S::Number(b)) if b.is_f64() => b.as_f64() == Some(0.0),
        (Value::Number(Number::I64(a)), S::Number(b)) if b.is_i64() => b.as_i64() == Some(*a),
        (Value::Number(Number::F64(a)), S::Number(b)) if b.is_f64() => {
            floats_agree(*a, b.as_f64().unwrap_or(f64::NAN))
        }
        (Value::Array(a), S::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y))
        }
        (Value::Object(a), S::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| same(v, w)))
        }
        _ => false,
    }
}

#[derive(Default, Debug)]
struct Tally {
    both_accept: usize,
    both_reject: usize,
    stricter: usize,
}

fn check(doc: &[u8], tally: &mut Tally) {
    let ours = parse_with(doc, &ORACLE);
    let theirs = serde_json::from_slice::<serde_json::Value>(doc);
    let show = || String::from_utf8_lossy(doc).into_owned();
    match (&ours, &theirs) {
        (Ok(a), Ok(b)) => {
            assert!(
                same(a, b),
                "values differ for {:?}\nours:   {a:?}\ntheirs: {b:?}",
                show()
            );
            tally.both_accept += 1;
            let written = a.to_bytes();
            assert_eq!(
                parse_with(&written, &ORACLE).as_ref(),
                Ok(a),
                "round trip of {:?}",
                show()
            );
            let reread: serde_json::Value = serde_json::from_slice(&written)
                .unwrap_or_else(|e| panic!("serde rejects our output {written:?}: {e}"));
            assert!(
                same(a, &reread),
                "serde reads our output differently: {:?}",
                show()
            );
        }
        (Err(_), Err(_)) => tally.both_reject += 1,
        (Err(e), Ok(_)) => {
            assert!(
                documented_strictness(e.kind),
                "we reject, serde accepts: {e} in {:?}",
                show()
            );
            tally.stricter += 1;
        }
        (Ok(v), Err(e)) => panic!("we accept, serde rejects ({e}): {:?} -> {v:?}", show()),
    }
}

#[test]
fn parser_agrees_with_serde_json_on_generated_and_mutated_documents() {
    let mut rng = Rng::new(0x67e7_a4d0_5eed_0001);
    let mut tally = Tally::default();
    for _ in 0..12_000 {
        let doc = gen_document(&mut rng);
        check(&doc, &mut tally);
        for _ in 0..4 {
            let m = mutate(&mut rng, &doc);
            check(&m, &mut tally);
        }
    }
    eprintln!("serde_json cross-check: {tally:?}");
    // The run must exercise every outcome, or it proves little.
    assert!(tally.both_accept > 10_000, "{tally:?}");
    assert!(tally.both_reject > 10_000, "{tally:?}");
    assert!(tally.stricter > 100, "{tally:?}");
}

#[test]
fn each_documented_strictness_is_one_serde_json_accepts() {
    for doc in [
        r#"{"a":1,"a":2}"#,
        "18446744073709551616",
        "-9223372036854775809",
        &format!("{}{}", "[".repeat(101), "]".repeat(101)),
    ] {
        assert!(
            serde_json::from_str::<serde_json::Value>(doc).is_ok(),
            "{doc}"
        );
        let e = parse_with(doc.as_bytes(), &ORACLE).unwrap_err();
        assert!(documented_strictness(e.kind), "{doc}: {e}");
    }
}

fn random_value(rng: &mut Rng, depth: usize) -> Value {
    match rng.below_usize(if depth < 5 { 9 } else { 7 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.chance(50)),
        2 => Value::Number(Number::U64(rng.next_u64() >> rng.below_usize(64))),
        3 => Value::from(-((rng.next_u64() >> 1) as i64) - 1),
        4 => {
            let f = f64::from_bits(rng.next_u64());
            Value::Number(Number::F64(if f.is_finite() { f } else { 0.5 }))
        }
        5 | 6 => {
            let s: String = (0..rng.below_usize(10))
                .map(|_| {
                    // Any scalar value, biased towards the ones that need escaping.
                    if rng.chance(40) {
                        char::from(rng.below_usize(0x80) as u8)
                    } else {
                        char::from_u32(rng.below_usize(0x11_0000) as u32).unwrap_or('\u{fffd}')
                    }
                })
                .collect();
            Value::Str(s)
        }
        7 => Value::Array(
            (0..rng.below_usize(4))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
        _ => {
            let mut o = genward::proto::json::Object::new();
            for _ in 0..rng.below_usize(4) {
                let key = format!("k{}", rng.below_usize(6));
                o.insert(key, random_value(rng, depth + 1));
            }
            Value::Object(o)
        }
    }
}

#[test]
fn written_values_parse_back_equal_in_both_parsers() {
    let mut rng = Rng::new(42);
    for _ in 0..20_000 {
        let v = random_value(&mut rng, 0);
        let text = v.to_bytes();
        assert_eq!(parse_with(&text, &ORACLE).as_ref(), Ok(&v));
        let theirs: serde_json::Value = serde_json::from_slice(&text).expect("serde accepts");
        assert!(same(&v, &theirs), "{}", String::from_utf8_lossy(&text));
    }
}
