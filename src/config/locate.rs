//! From byte offsets and field names to `line:column`: where in a file a problem is.

use crate::proto::json::Spans;

/// The 1-based line and column (counted in characters) of byte `offset` in `text`.
pub fn line_col(text: &[u8], offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let col = String::from_utf8_lossy(&before[line_start..])
        .chars()
        .count()
        + 1;
    (line, col)
}

/// Where the problem about `field` (as a decoder names it: `grace`, `restart.mode`,
/// `argv[2]`) of the object at `prefix` (`sessions.web`, or `""` for the document) is
/// best pointed at: the value itself; the key for an unknown member (`key`); else the
/// nearest enclosing member the file has (a missing member is pointed at by its object);
/// else the document's first byte.
pub fn offset_of(spans: &Spans, text: &[u8], prefix: &str, field: &str, key: bool) -> usize {
    let mut path = match (prefix.is_empty(), field.is_empty()) {
        (true, _) => field.to_owned(),
        (false, true) => prefix.to_owned(),
        (false, false) => format!("{prefix}.{field}"),
    };
    let mut exact = true;
    loop {
        if let Some(span) = spans.get(&path) {
            return if key && exact { span.key } else { span.value };
        }
        // Out one level: `a.b[2]` → `a.b` → `a`.
        match path.rfind(['.', '[']) {
            Some(i) => {
                path.truncate(i);
                exact = false;
            }
            None => break,
        }
    }
    text.iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(0)
}
