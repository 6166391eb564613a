//! Plain-text tables for `genward ls`: a header row, then one line per entry.
//!
//! Columns are as wide as their widest cell, separated by two spaces, with no colour and
//! no trailing spaces, so the output reads well in a terminal and splits cleanly with
//! `awk`. Widths count characters, not bytes, so a non-ASCII session name does not shift
//! the columns after it. Control characters in a cell are shown as `?`: a name or a
//! command line must not be able to break a row in two or drive the terminal. A long
//! table is printed part by part ([`Streamed`]) as its rows arrive.

/// Where a column's cells sit within its width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text: padded on the right.
    Left,
    /// Numbers: padded on the left, so digits line up.
    Right,
}

/// One column: its header and its alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column<'a> {
    /// The header text, e.g. `SESSION`.
    pub title: &'a str,
    /// How cells (and the header) are aligned.
    pub align: Align,
}

impl<'a> Column<'a> {
    /// A left-aligned column.
    pub const fn left(title: &'a str) -> Self {
        Self {
            title,
            align: Align::Left,
        }
    }

    /// A right-aligned column.
    pub const fn right(title: &'a str) -> Self {
        Self {
            title,
            align: Align::Right,
        }
    }
}

const GAP: &str = "  ";

/// Renders `rows` under `columns`, one `\n`-terminated line each, header first.
///
/// A row shorter than `columns` has empty cells at its end; cells beyond the last column
/// are not shown. With no columns the result is empty.
///
/// # Examples
///
/// ```
/// use genward::cli::table::{render, Column};
/// let rows = vec![vec!["web".to_string(), "12".to_string()]];
/// let text = render(&[Column::left("SESSION"), Column::right("GEN")], &rows);
/// assert_eq!(text, "SESSION  GEN\nweb       12\n");
/// ```
pub fn render<S: AsRef<str>>(columns: &[Column<'_>], rows: &[Vec<S>]) -> String {
    Streamed::new(columns).part(rows)
}

/// A table printed part by part as its rows arrive (a long listing, page by page), so
/// only one part is ever held.
///
/// The first part is exactly what [`render`] makes of its rows, header included; a later
/// part keeps the widths so far and widens a column only for a cell longer than any
/// before it (rows already printed cannot be widened, so columns can shift there, and
/// only there).
///
/// # Examples
///
/// ```
/// use genward::cli::table::{Column, Streamed};
/// let columns = [Column::left("SESSION"), Column::right("GEN")];
/// let mut t = Streamed::new(&columns);
/// assert_eq!(t.part(&[vec!["web", "12"]]), "SESSION  GEN\nweb       12\n");
/// assert_eq!(t.part(&[vec!["db", "7"]]), "db         7\n");
/// ```
#[derive(Debug)]
pub struct Streamed<'a> {
    columns: &'a [Column<'a>],
    widths: Vec<usize>,
    started: bool,
}

impl<'a> Streamed<'a> {
    /// A table under `columns` with nothing printed yet.
    pub fn new(columns: &'a [Column<'a>]) -> Self {
        Streamed {
            columns,
            widths: columns.iter().map(|c| width(&printable(c.title))).collect(),
            started: false,
        }
    }

    /// The lines for `rows`, preceded by the header the first time.
    pub fn part<S: AsRef<str>>(&mut self, rows: &[Vec<S>]) -> String {
        if self.columns.is_empty() {
            return String::new();
        }
        let body: Vec<Vec<String>> = rows
            .iter()
            .map(|row| {
                (0..self.columns.len())
                    .map(|i| {
                        row.get(i)
                            .map_or_else(String::new, |c| printable(c.as_ref()))
                    })
                    .collect()
            })
            .collect();
        for row in &body {
            for (w, cell) in self.widths.iter_mut().zip(row) {
                *w = (*w).max(width(cell));
            }
        }
        let mut out = String::new();
        if !self.started {
            self.started = true;
            let header: Vec<String> = self.columns.iter().map(|c| printable(c.title)).collect();
            self.line(&header, &mut out);
        }
        for row in &body {
            self.line(row, &mut out);
        }
        out
    }

    fn line(&self, cells: &[String], out: &mut String) {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i > 0 {
                text.push_str(GAP);
            }
            let pad = self.widths[i] - width(cell);
            match self.columns[i].align {
                Align::Left => {
                    text.push_str(cell);
                    text.extend(std::iter::repeat_n(' ', pad));
                }
                Align::Right => {
                    text.extend(std::iter::repeat_n(' ', pad));
                    text.push_str(cell);
                }
            }
        }
        out.push_str(text.trim_end_matches(' '));
        out.push('\n');
    }
}

fn width(cell: &str) -> usize {
    cell.chars().count()
}

fn printable(cell: &str) -> String {
    cell.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cells: &[&str]) -> Vec<String> {
        cells.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn aligns_by_widest_cell() {
        let cols = [
            Column::left("SESSION"),
            Column::right("GEN"),
            Column::left("STATE"),
        ];
        let rows = vec![
            row(&["web", "7", "running"]),
            row(&["database-1", "1234", "exited"]),
        ];
        assert_eq!(
            render(&cols, &rows),
            "SESSION      GEN  STATE\n\
             web            7  running\n\
             database-1  1234  exited\n"
        );
    }

    #[test]
    fn header_only_when_no_rows() {
        let rows: Vec<Vec<String>> = Vec::new();
        assert_eq!(
            render(&[Column::left("A"), Column::right("BB")], &rows),
            "A  BB\n"
        );
        assert_eq!(render::<String>(&[], &rows), "");
    }

    #[test]
    fn empty_and_missing_cells_keep_columns_and_no_trailing_space() {
        let cols = [
            Column::left("NAME"),
            Column::right("PID"),
            Column::left("EXIT"),
        ];
        let rows = vec![
            row(&["a", "", ""]),
            row(&["b"]),
            row(&["c", "9", "0", "extra"]),
        ];
        let text = render(&cols, &rows);
        assert_eq!(text, "NAME  PID  EXIT\na\nb\nc       9  0\n");
        assert!(text.lines().all(|l| !l.ends_with(' ')));
    }

    #[test]
    fn non_ascii_counts_characters_not_bytes() {
        let cols = [Column::left("NAME"), Column::right("GEN")];
        let rows = vec![
            row(&["café", "1"]),
            row(&["日本語", "22"]),
            row(&["x", "333"]),
        ];
        let text = render(&cols, &rows);
        assert_eq!(text, "NAME  GEN\ncafé    1\n日本語    22\nx     333\n");
        let ends: Vec<usize> = text.lines().map(|l| l.chars().count()).collect();
        assert!(ends.iter().all(|&n| n == ends[0]), "{ends:?}");
    }

    #[test]
    fn control_characters_cannot_break_rows() {
        let cols = [Column::left("NAME"), Column::left("CMD")];
        let rows = vec![row(&["a\nb", "echo\t\x1b[31mred"])];
        let text = render(&cols, &rows);
        assert_eq!(text.lines().count(), 2);
        assert!(!text.contains('\x1b') && !text.contains('\t'));
        assert!(text.contains("a?b"), "{text}");
    }

    #[test]
    fn right_aligned_header_wider_than_cells() {
        let rows = vec![row(&["5"])];
        assert_eq!(
            render(&[Column::right("UPTIME")], &rows),
            "UPTIME\n     5\n"
        );
    }

    #[test]
    fn parts_keep_the_first_widths_and_widen_only_when_they_must() {
        let cols = [Column::left("NAME"), Column::right("GEN")];
        let all = [row(&["a", "1"]), row(&["bb", "22"]), row(&["c", "3"])];
        let mut t = Streamed::new(&cols);
        let first = t.part(&all[..2]);
        assert_eq!(first, render(&cols, &all[..2]));
        assert_eq!(t.part(&all[2..]), "c       3\n");
        assert_eq!(t.part(&[row(&["longer-name", "4"])]), "longer-name    4\n");
        assert_eq!(t.part(&[row(&["d", "5"])]), "d              5\n");
        let none: Vec<Vec<String>> = Vec::new();
        assert_eq!(t.part(&none), "");
    }
}
