//! The upgrade image: the whole state a daemon hands to the binary it re-executes, in a
//! sealed memory file. Its layout is documented in docs/upgrade.md; this is its one
//! encoder and its one decoder.
//!
//! ```text
//! "GENWARD-IMAGE\n"  magic
//! u32 version        the image format (IMAGE_VERSION); a reader takes every version up
//!                    to its own, so a new binary resumes from an old one's image
//! sections           each: u8 name length, name, u64 length, bytes — in any order,
//!                    each name at most once; unknown names are skipped
//! ```
//!
//! All integers are little-endian. Inside a section, values are written with [`Writer`]
//! and read with [`Reader`]: fixed-width integers, length-prefixed byte strings, and
//! counts checked against what is left, so a truncated or corrupted image is refused
//! with a message — never a panic, never an allocation larger than the image.

use std::fmt;

/// What every image starts with.
const MAGIC: &[u8] = b"GENWARD-IMAGE\n";

/// The image format this build writes and the newest it reads.
pub const IMAGE_VERSION: u32 = 1;

/// The oldest image format this build reads.
pub const OLDEST_IMAGE_VERSION: u32 = 1;

/// Largest image read: far above 4,096 sessions with their client queues, far below what
/// would hurt to map.
pub const MAX_IMAGE: usize = 1 << 30;

/// Why an image was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageError(pub String);

impl fmt::Display for ImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "upgrade image: {}", self.0)
    }
}

impl std::error::Error for ImageError {}

fn err<T>(what: impl Into<String>) -> Result<T, ImageError> {
    Err(ImageError(what.into()))
}

/// Builds an image section by section.
#[derive(Debug, Default)]
pub struct ImageBuilder {
    out: Vec<u8>,
}

impl ImageBuilder {
    /// An image with its header written.
    pub fn new() -> ImageBuilder {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&IMAGE_VERSION.to_le_bytes());
        ImageBuilder { out }
    }

    /// Appends section `name` holding `bytes`.
    pub fn section(&mut self, name: &str, bytes: &[u8]) {
        debug_assert!(name.len() <= u8::MAX as usize);
        self.out.push(name.len() as u8);
        self.out.extend_from_slice(name.as_bytes());
        self.out
            .extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        self.out.extend_from_slice(bytes);
    }

    /// The finished image.
    pub fn finish(self) -> Vec<u8> {
        self.out
    }
}

/// A parsed image: its version and its sections, borrowed from the bytes.
#[derive(Debug)]
pub struct Image<'a> {
    pub version: u32,
    sections: Vec<(&'a str, &'a [u8])>,
}

impl<'a> Image<'a> {
    /// Checks the header and splits the sections; refuses a newer or older format than
    /// this build reads, a section cut short, and a name seen twice.
    pub fn parse(bytes: &'a [u8]) -> Result<Image<'a>, ImageError> {
        if bytes.len() > MAX_IMAGE {
            return err(format!(
                "{} bytes, more than the {MAX_IMAGE} read",
                bytes.len()
            ));
        }
        let Some(rest) = bytes.strip_prefix(MAGIC) else {
            return err("not an upgrade image (bad magic)");
        };
        let mut r = Reader::new(rest);
        let version = r.u32()?;
        if version > IMAGE_VERSION {
            return err(format!(
                "format {version} is newer than this binary reads ({IMAGE_VERSION})"
            ));
        }
        if version < OLDEST_IMAGE_VERSION {
            return err(format!(
                "format {version} is older than this binary reads ({OLDEST_IMAGE_VERSION})"
            ));
        }
        let mut sections: Vec<(&str, &[u8])> = Vec::new();
        while !r.is_empty() {
            let n = r.u8()? as usize;
            let name = std::str::from_utf8(r.take(n)?)
                .map_err(|_| ImageError("a section name is not UTF-8".into()))?;
            let len = r.len_u64()?;
            let body = r.take(len)?;
            if sections.iter().any(|(seen, _)| *seen == name) {
                return err(format!("section `{name}` appears twice"));
            }
            sections.push((name, body));
        }
        Ok(Image { version, sections })
    }

    /// Section `name`'s bytes, if present.
    pub fn section(&self, name: &str) -> Option<&'a [u8]> {
        self.sections
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, b)| *b)
    }

    /// Section `name`'s bytes; its absence is an error.
    pub fn require(&self, name: &str) -> Result<&'a [u8], ImageError> {
        match self.section(name) {
            Some(b) => Ok(b),
            None => err(format!("section `{name}` is missing")),
        }
    }
}

/// Writes the values of one section.
#[derive(Debug, Default)]
pub struct Writer {
    out: Vec<u8>,
}

impl Writer {
    pub fn new() -> Writer {
        Writer::default()
    }

    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.out.push(v);
        self
    }

    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.u8(v as u8)
    }

    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.out.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.out.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.out.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// A length-prefixed byte string.
    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.u64(v.len() as u64);
        self.out.extend_from_slice(v);
        self
    }

    pub fn str(&mut self, v: &str) -> &mut Self {
        self.bytes(v.as_bytes())
    }

    /// A count of items that follow; read back with [`Reader::count`].
    pub fn count(&mut self, n: usize) -> &mut Self {
        self.u64(n as u64)
    }

    /// `None` as 0; `Some(v)` as 1 then `v`.
    pub fn opt_u64(&mut self, v: Option<u64>) -> &mut Self {
        match v {
            None => self.u8(0),
            Some(v) => self.u8(1).u64(v),
        }
    }

    /// `None` as -1 (no descriptor number is negative).
    pub fn opt_fd(&mut self, v: Option<i32>) -> &mut Self {
        self.i32(v.unwrap_or(-1))
    }

    pub fn finish(self) -> Vec<u8> {
        self.out
    }
}

/// Reads the values of one section, each checked against what is left.
#[derive(Debug)]
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { rest: bytes }
    }

    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// Refuses bytes left over after the last value.
    pub fn end(&self, what: &str) -> Result<(), ImageError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            err(format!("{} unexpected bytes after {what}", self.rest.len()))
        }
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], ImageError> {
        if n > self.rest.len() {
            return err(format!(
                "cut short: {n} bytes wanted, {} left",
                self.rest.len()
            ));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ImageError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    pub fn u8(&mut self) -> Result<u8, ImageError> {
        Ok(self.take(1)?[0])
    }

    pub fn bool(&mut self) -> Result<bool, ImageError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            b => err(format!("{b} is not a boolean")),
        }
    }

    pub fn u32(&mut self) -> Result<u32, ImageError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64, ImageError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    pub fn i32(&mut self) -> Result<i32, ImageError> {
        Ok(i32::from_le_bytes(self.array()?))
    }

    /// A length that must fit in what is left.
    fn len_u64(&mut self) -> Result<usize, ImageError> {
        let n = self.u64()?;
        if n > self.rest.len() as u64 {
            return err(format!(
                "cut short: a length of {n} with {} bytes left",
                self.rest.len()
            ));
        }
        Ok(n as usize)
    }

    pub fn bytes(&mut self) -> Result<&'a [u8], ImageError> {
        let n = self.len_u64()?;
        self.take(n)
    }

    pub fn str(&mut self) -> Result<&'a str, ImageError> {
        std::str::from_utf8(self.bytes()?).map_err(|_| ImageError("a string is not UTF-8".into()))
    }

    /// A count of items, each at least `min_item` bytes: a count the rest cannot hold is
    /// refused before anything is allocated for it.
    pub fn count(&mut self, min_item: usize) -> Result<usize, ImageError> {
        let n = self.u64()?;
        if n.saturating_mul(min_item.max(1) as u64) > self.rest.len() as u64 {
            return err(format!(
                "a count of {n} cannot fit in the {} bytes left",
                self.rest.len()
            ));
        }
        Ok(n as usize)
    }

    pub fn opt_u64(&mut self) -> Result<Option<u64>, ImageError> {
        match self.u8()? {
            0 => Ok(None),
            1 => Ok(Some(self.u64()?)),
            b => err(format!("{b} is not an option tag")),
        }
    }

    /// A descriptor number, or `None` for -1.
    pub fn opt_fd(&mut self) -> Result<Option<i32>, ImageError> {
        match self.i32()? {
            -1 => Ok(None),
            fd if fd >= 0 => Ok(Some(fd)),
            fd => err(format!("{fd} is not a descriptor number")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(7).bool(true).u32(9).u64(u64::MAX).i32(-1).str("héllo");
        w.bytes(&[0, 255]).count(2).opt_u64(None).opt_u64(Some(3));
        w.opt_fd(Some(5)).opt_fd(None);
        let mut b = ImageBuilder::new();
        b.section("one", &w.finish());
        b.section("two", b"");
        b.finish()
    }

    #[test]
    fn round_trip() {
        let bytes = sample();
        let image = Image::parse(&bytes).unwrap();
        assert_eq!(image.version, IMAGE_VERSION);
        assert_eq!(image.section("two"), Some(&b""[..]));
        assert!(image.section("three").is_none());
        let mut r = Reader::new(image.require("one").unwrap());
        assert_eq!(r.u8().unwrap(), 7);
        assert!(r.bool().unwrap());
        assert_eq!(r.u32().unwrap(), 9);
        assert_eq!(r.u64().unwrap(), u64::MAX);
        assert_eq!(r.i32().unwrap(), -1);
        assert_eq!(r.str().unwrap(), "héllo");
        assert_eq!(r.bytes().unwrap(), &[0, 255]);
        assert_eq!(r.count(1).unwrap(), 2);
        assert_eq!(r.opt_u64().unwrap(), None);
        assert_eq!(r.opt_u64().unwrap(), Some(3));
        assert_eq!(r.opt_fd().unwrap(), Some(5));
        assert_eq!(r.opt_fd().unwrap(), None);
        r.end("the sample").unwrap();
    }

    #[test]
    fn every_truncation_is_refused_or_shorter() {
        let bytes = sample();
        for cut in 0..bytes.len() {
            // A cut inside the header or a section is refused; one between sections is a
            // shorter image, which is why the reader requires the sections it needs.
            match Image::parse(&bytes[..cut]) {
                Err(e) => assert!(!e.0.is_empty()),
                Ok(image) => assert!(image.section("two").is_none()),
            }
        }
    }

    #[test]
    fn newer_version_duplicate_sections_and_bad_magic_are_refused() {
        let mut newer = sample();
        newer[MAGIC.len()..MAGIC.len() + 4].copy_from_slice(&(IMAGE_VERSION + 1).to_le_bytes());
        assert!(Image::parse(&newer).unwrap_err().0.contains("newer"));
        let mut b = ImageBuilder::new();
        b.section("a", b"x");
        b.section("a", b"y");
        assert!(Image::parse(&b.finish()).unwrap_err().0.contains("twice"));
        assert!(Image::parse(b"GENWARD-IMAGX\n\x01\0\0\0").is_err());
    }

    #[test]
    fn huge_counts_and_lengths_allocate_nothing() {
        let mut w = Writer::new();
        w.u64(u64::MAX);
        let bytes = w.finish();
        assert!(Reader::new(&bytes).count(1).is_err());
        assert!(Reader::new(&bytes).bytes().is_err());
        assert!(Reader::new(&[2]).bool().is_err());
        assert!(Reader::new(&[0xfe, 0xff, 0xff, 0xff]).opt_fd().is_err());
    }
}
