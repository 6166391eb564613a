//! Strict base64 (RFC 4648, standard alphabet, `=` padding) for binary request arguments.
//!
//! JSON strings carry only Unicode text, so bytes that may not be UTF-8 (input for a
//! child, for instance) travel base64-encoded in a request. Decoding is strict: no
//! whitespace, no missing or extra padding, no non-zero trailing bits, so every byte
//! string has exactly one accepted encoding.

use std::fmt;

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Why a base64 text was rejected, and at which byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Base64Error {
    /// Byte offset of the offending character (the length, for a bad length).
    pub offset: usize,
}

impl fmt::Display for Base64Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid base64 at byte {}", self.offset)
    }
}

impl std::error::Error for Base64Error {}

/// Appends the base64 encoding of `data` to `out`.
pub fn encode_into(data: &[u8], out: &mut String) {
    out.reserve(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        let sextet = |i: u32| char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]);
        out.push(sextet(0));
        out.push(sextet(1));
        out.push(if chunk.len() > 1 { sextet(2) } else { '=' });
        out.push(if chunk.len() > 2 { sextet(3) } else { '=' });
    }
}

/// The base64 encoding of `data`.
pub fn encode(data: &[u8]) -> String {
    let mut out = String::new();
    encode_into(data, &mut out);
    out
}

fn sextet(c: u8) -> Option<u32> {
    let v = match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    };
    Some(u32::from(v))
}

/// Decodes strict, padded base64.
pub fn decode(text: &str) -> Result<Vec<u8>, Base64Error> {
    let bytes = text.as_bytes();
    if bytes.len() % 4 != 0 {
        return Err(Base64Error {
            offset: bytes.len(),
        });
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    let quads = bytes.len() / 4;
    for (q, quad) in bytes.chunks_exact(4).enumerate() {
        let at = q * 4;
        let last = q + 1 == quads;
        let pad = if last {
            quad.iter().rev().take_while(|&&c| c == b'=').count()
        } else {
            0
        };
        if pad > 2 {
            return Err(Base64Error {
                offset: at + 4 - pad,
            });
        }
        let mut n: u32 = 0;
        for (i, &c) in quad[..4 - pad].iter().enumerate() {
            let v = sextet(c).ok_or(Base64Error { offset: at + i })?;
            n |= v << (18 - 6 * i);
        }
        let [_, b0, b1, b2] = n.to_be_bytes();
        let keep = 3 - pad;
        // Bits below the last kept byte must be zero, or two texts would decode alike.
        let dropped = match pad {
            1 => u32::from(b2),
            2 => u32::from(b1) | u32::from(b2),
            _ => 0,
        };
        if dropped != 0 {
            return Err(Base64Error {
                offset: at + 3 - pad,
            });
        }
        out.extend_from_slice(&[b0, b1, b2][..keep]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc4648_vectors() {
        let vectors = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, coded) in vectors {
            assert_eq!(encode(plain.as_bytes()), coded);
            assert_eq!(decode(coded).unwrap(), plain.as_bytes());
        }
    }

    #[test]
    fn round_trips_every_byte_value_and_length() {
        let data: Vec<u8> = (0..=255u8).collect();
        for len in 0..data.len() {
            assert_eq!(decode(&encode(&data[..len])).unwrap(), &data[..len]);
        }
    }

    #[test]
    fn rejects_anything_not_canonical() {
        assert_eq!(decode("Zg=").unwrap_err().offset, 3);
        assert_eq!(decode("Zg==Zg==").unwrap_err().offset, 2);
        assert_eq!(decode("Z===").unwrap_err().offset, 1);
        assert_eq!(decode("Zh==").unwrap_err().offset, 1);
        assert_eq!(decode("Zm9v\n").unwrap_err().offset, 5);
        assert_eq!(decode("Zm 9").unwrap_err().offset, 2);
        assert_eq!(decode("====").unwrap_err().offset, 0);
        assert_eq!(decode("Zm9=").unwrap_err().offset, 2);
    }
}
