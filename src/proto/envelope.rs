//! The request envelope (`id`, `op`, arguments) and the success response line.
//!
//! A request is one JSON object per line: `{"id": 1, "op": "get", "session": "web"}`.
//! `id` is optional, a non-negative integer or a string of at most
//! [`MAX_ID_LEN`] bytes, and is echoed verbatim in the response (as `null` when absent or
//! unusable). Everything except `id` and `op` are the operation's arguments, decoded by
//! the operation with the accessors of [`Object`].

use super::error::{ErrorCode, ProtoError};
use super::json::{
    parse_with, write_str, write_u64, FieldError, Limits, Number, ObjWriter, Object, Value,
};

/// The longest accepted string `id`, in bytes.
pub const MAX_ID_LEN: usize = 128;

/// A request's `id`, echoed in its response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RequestId {
    /// No usable id: absent, or the request could not be read far enough to find it.
    #[default]
    Null,
    /// A numeric id.
    U64(u64),
    /// A string id.
    Str(String),
}

impl RequestId {
    /// Appends the id as a JSON value.
    pub fn write(&self, out: &mut Vec<u8>) {
        match self {
            RequestId::Null => out.extend_from_slice(b"null"),
            RequestId::U64(n) => write_u64(*n, out),
            RequestId::Str(s) => write_str(s, out),
        }
    }
}

/// A decoded request envelope.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The id to echo.
    pub id: RequestId,
    /// The operation name, not yet checked against the known operations.
    pub op: String,
    /// All other members, in order.
    pub args: Object,
}

/// A request that cannot be decoded, with the id to answer it under (when one was found).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestError {
    /// The id, [`RequestId::Null`] if it could not be read.
    pub id: RequestId,
    /// Always [`ErrorCode::BadRequest`], with a specific message.
    pub error: ProtoError,
}

impl Request {
    /// Decodes one request line (without its newline) under `limits`.
    pub fn decode(line: &[u8], limits: &Limits) -> Result<Request, RequestError> {
        let fail = |id: RequestId, error: ProtoError| RequestError { id, error };
        let mut args = match parse_with(line, limits) {
            Ok(Value::Object(obj)) => obj,
            Ok(other) => {
                let msg = format!("a request must be a JSON object, got {}", other.type_name());
                return Err(fail(
                    RequestId::Null,
                    ProtoError::new(ErrorCode::BadRequest, msg),
                ));
            }
            Err(e) => return Err(fail(leading_id(line), e.into())),
        };
        let id = match args.remove("id") {
            None | Some(Value::Null) => RequestId::Null,
            Some(Value::Number(Number::U64(n))) => RequestId::U64(n),
            Some(Value::Str(s)) if s.len() <= MAX_ID_LEN => RequestId::Str(s),
            Some(Value::Str(_)) => {
                let e = FieldError::invalid("id", format!("longer than {MAX_ID_LEN} bytes"));
                return Err(fail(RequestId::Null, e.into()));
            }
            Some(v) => {
                let msg = format!(
                    "field `id`: expected unsigned integer or string, got {}",
                    v.type_name()
                );
                return Err(fail(
                    RequestId::Null,
                    ProtoError::new(ErrorCode::BadRequest, msg),
                ));
            }
        };
        let op = match args.req_str("op") {
            Ok(op) => op.to_owned(),
            Err(e) => return Err(fail(id, e.into())),
        };
        args.remove("op");
        Ok(Request { id, op, args })
    }
}

/// The `id` of a line that is not valid JSON, when the object opens with it as written
/// by every client (`{"id": 7, ...` or `{"id": "a-1", ...`, a string without escapes):
/// the error then reaches the request that caused it. Anything less plain is `null`.
fn leading_id(line: &[u8]) -> RequestId {
    fn ws(b: &[u8]) -> &[u8] {
        let n = b
            .iter()
            .take_while(|c| matches!(c, b' ' | b'\t' | b'\r' | b'\n'))
            .count();
        &b[n..]
    }
    let plain = || -> Option<RequestId> {
        let rest = ws(line).strip_prefix(b"{")?;
        let rest = ws(ws(rest).strip_prefix(b"\"id\"")?).strip_prefix(b":")?;
        let rest = ws(rest);
        let (id, after) = match rest.first()? {
            b'"' => {
                let end = rest[1..].iter().position(|&c| c == b'"' || c == b'\\')?;
                let text = std::str::from_utf8(&rest[1..1 + end]).ok()?;
                if rest[1 + end] != b'"' || text.len() > MAX_ID_LEN {
                    return None;
                }
                (RequestId::Str(text.to_owned()), &rest[2 + end..])
            }
            b'0'..=b'9' => {
                let n = rest.iter().take_while(|c| c.is_ascii_digit()).count();
                let digits = std::str::from_utf8(&rest[..n]).ok()?;
                if n > 1 && digits.starts_with('0') {
                    return None;
                }
                (RequestId::U64(digits.parse().ok()?), &rest[n..])
            }
            _ => return None,
        };
        matches!(ws(after).first(), Some(b',' | b'}')).then_some(id)
    };
    plain().unwrap_or(RequestId::Null)
}

/// Starts the success response `{"id":..,"ok":true` and returns the writer for the
/// operation's own members; finish it with [`ObjWriter::finish`] and a `b'\n'`.
pub fn begin_ok_response<'a>(id: &RequestId, out: &'a mut Vec<u8>) -> ObjWriter<'a> {
    let mut w = ObjWriter::new(out);
    w.with("id", |out| id.write(out)).bool("ok", true);
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(s: &str) -> Result<Request, RequestError> {
        Request::decode(s.as_bytes(), &Limits::DEFAULT)
    }

    #[test]
    fn splits_id_op_and_arguments() {
        let r = decode(r#"{"id":"a-1","op":"write","session":"web","if_gen":4}"#).unwrap();
        assert_eq!(r.id, RequestId::Str("a-1".into()));
        assert_eq!(r.op, "write");
        assert_eq!(r.args.len(), 2);
        assert_eq!(r.args.req_str("session").unwrap(), "web");
        assert_eq!(r.args.opt_u64("if_gen").unwrap(), Some(4));
    }

    #[test]
    fn id_is_optional_and_echoed_as_null() {
        let r = decode(r#"{"op":"list"}"#).unwrap();
        assert_eq!(r.id, RequestId::Null);
        let mut out = Vec::new();
        begin_ok_response(&r.id, &mut out).finish();
        assert_eq!(out, br#"{"id":null,"ok":true}"#);
    }

    #[test]
    fn missing_op_keeps_the_id_for_the_answer() {
        let e = decode(r#"{"id":9}"#).unwrap_err();
        assert_eq!(e.id, RequestId::U64(9));
        assert_eq!(e.error.code, ErrorCode::BadRequest);
        assert_eq!(e.error.message, "field `op`: missing");
        let e = decode(r#"{"id":9,"op":3}"#).unwrap_err();
        assert_eq!(e.error.message, "field `op`: expected string, got integer");
    }

    #[test]
    fn rejects_non_objects_bad_json_and_bad_ids() {
        let e = decode("[1]").unwrap_err();
        assert_eq!(
            e.error.message,
            "a request must be a JSON object, got array"
        );
        let e = decode(r#"{"id":1,"op":"x""#).unwrap_err();
        assert_eq!(e.id, RequestId::U64(1), "an id that opens the line is kept");
        assert_eq!(
            e.error.message,
            "invalid JSON: unexpected end of input at byte 16"
        );
        let e = decode(r#"{"id":-1,"op":"x"}"#).unwrap_err();
        assert_eq!(
            e.error.message,
            "field `id`: expected unsigned integer or string, got negative integer"
        );
        let long = format!(r#"{{"id":"{}","op":"x"}}"#, "i".repeat(MAX_ID_LEN + 1));
        let e = decode(&long).unwrap_err();
        assert_eq!(e.error.message, "field `id`: longer than 128 bytes");
    }

    #[test]
    fn a_line_that_is_not_json_keeps_the_id_it_opens_with() {
        for (line, id) in [
            (
                r#"{"id":1,"op":"list","limit":18446744073709551616}"#,
                RequestId::U64(1),
            ),
            (
                r#" { "id" : "a-1" , "op":"x","op":"y"}"#,
                RequestId::Str("a-1".into()),
            ),
            (r#"{"id":7}  x"#, RequestId::U64(7)),
            (r#"{"op":"x","id":1,"#, RequestId::Null),
            (r#"{"id":"a\"b","op":1"#, RequestId::Null),
            (r#"{"id":01,"op":"x"}"#, RequestId::Null),
            (r#"{"id":1.5,"op":"#, RequestId::Null),
            (r#"{"id":99999999999999999999,"op":"x"}"#, RequestId::Null),
            (r#"{"id":12"#, RequestId::Null),
        ] {
            let e = decode(line).unwrap_err();
            assert_eq!(e.id, id, "{line}");
        }
    }
}
