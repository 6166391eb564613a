//! The terminal modes a session's output switched on, so `attach` can switch them off when
//! it lets go of the terminal.
//!
//! A full-screen program (`less`, `vim`) enters the alternate screen, application cursor
//! keys and so on, and leaves them when it exits. Detaching (or the attachment ending any
//! other way) while it runs would leave the outer terminal in those modes. A terminal
//! emulator is not needed to know which modes are on: [`ModeScanner`] reads the output one
//! byte at a time, recognising only the few sequences that set or reset them, with state
//! bounded by a fixed number of parameters, and [`ModeScanner::undo`] gives the sequences
//! that put the terminal back.
//!
//! Tracked: the alternate screen (private modes 1049, 1047, 47), cursor keys (DECCKM,
//! mode 1), the keypad (DECKPAM `ESC =` / DECKPNM `ESC >`), bracketed paste (2004), mouse
//! reporting (9, 1000, 1002, 1003, 1005, 1006, 1015), focus reporting (1004), xterm's
//! modifyOtherKeys (`CSI > 4 ; N m`, which vim 9 switches on), cursor visibility (25) and
//! the scroll region (DECSTBM). A full reset (`ESC c`) clears them all; a soft reset
//! (`CSI ! p`) the ones it resets. Other sequences are ignored.
//!
//! # References
//!  - [XTerm control sequences](https://invisible-island.net/xterm/ctlseqs/ctlseqs.html)
//!  - [ECMA-48](https://ecma-international.org/publications-and-standards/standards/ecma-48/)

/// The private modes whose `h` (set) state is undone with `l`, in the order they are
/// reset: input modes first, the alternate screen last (so the rest apply to the screen
/// the user returns to).
const PRIVATE_MODES: [u16; 13] = [
    9, 1000, 1002, 1003, 1005, 1006, 1015, 1004, 2004, 1, 1047, 47, 1049,
];

/// Cursor visibility (DECTCEM): on by default, so the mode to undo is its reset.
const CURSOR_VISIBLE: u16 = 25;

/// Parameters kept per control sequence; later ones are dropped.
const MAX_PARAMS: usize = 16;

/// A parameter's value stops growing here (no mode number is larger).
const PARAM_CAP: u16 = 9999;

/// Where the scanner is in a sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Ground,
    /// After `ESC`.
    Escape,
    /// After `ESC` and an intermediate byte (`ESC ( B`): the next final byte is not ours.
    EscapeIntermediate,
    /// Inside `ESC [`.
    Csi,
}

/// Tracks the modes set by output written to a terminal; see the [module](self) docs.
#[derive(Debug, Clone)]
pub struct ModeScanner {
    state: State,
    /// Which [`PRIVATE_MODES`] are set, by index.
    set: [bool; PRIVATE_MODES.len()],
    keypad: bool,
    cursor_hidden: bool,
    /// The scroll region's top and bottom as written (0: the default), when one is set.
    scroll_region: Option<(u16, u16)>,
    /// xterm's modifyOtherKeys level (`CSI > 4 ; N m`); 0 is off.
    modify_other_keys: u16,
    // The control sequence being read.
    private: bool,
    intermediate: Option<u8>,
    params: [u16; MAX_PARAMS],
    nparams: usize,
    /// Whether any digit or separator was seen (`CSI r` alone resets the region).
    any_param: bool,
}

impl Default for ModeScanner {
    fn default() -> Self {
        Self::new()
    }
}

impl ModeScanner {
    /// A scanner for a terminal in its default modes.
    pub fn new() -> Self {
        Self {
            state: State::Ground,
            set: [false; PRIVATE_MODES.len()],
            keypad: false,
            cursor_hidden: false,
            scroll_region: None,
            modify_other_keys: 0,
            private: false,
            intermediate: None,
            params: [0; MAX_PARAMS],
            nparams: 0,
            any_param: false,
        }
    }

    /// Reads output on its way to the terminal. Sequences may be split anywhere across
    /// calls.
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.byte(b);
        }
    }

    fn byte(&mut self, b: u8) {
        match b {
            // ESC starts a new sequence from anywhere; CAN and SUB abort one.
            0x1b => {
                self.state = State::Escape;
                return;
            }
            0x18 | 0x1a => {
                self.state = State::Ground;
                return;
            }
            _ => {}
        }
        match self.state {
            State::Ground => {}
            State::Escape => match b {
                b'[' => {
                    self.state = State::Csi;
                    self.private = false;
                    self.intermediate = None;
                    self.nparams = 0;
                    self.params = [0; MAX_PARAMS];
                    self.any_param = false;
                }
                0x20..=0x2f => self.state = State::EscapeIntermediate,
                // Control characters inside a sequence are executed and the sequence goes on.
                0x00..=0x1f => {}
                _ => {
                    self.state = State::Ground;
                    match b {
                        b'=' => self.keypad = true,
                        b'>' => self.keypad = false,
                        b'c' => self.reset_all(),
                        _ => {}
                    }
                }
            },
            State::EscapeIntermediate => {
                if b >= 0x30 {
                    self.state = State::Ground;
                }
            }
            State::Csi => self.csi_byte(b),
        }
    }

    fn csi_byte(&mut self, b: u8) {
        match b {
            b'0'..=b'9' => {
                self.any_param = true;
                if self.nparams == 0 {
                    self.nparams = 1;
                }
                if let Some(p) = self.params.get_mut(self.nparams - 1) {
                    let grown = u32::from(*p) * 10 + u32::from(b - b'0');
                    *p = grown.min(u32::from(PARAM_CAP)) as u16;
                }
            }
            b';' | b':' => {
                self.any_param = true;
                // An empty first parameter still counts as one.
                self.nparams = (self.nparams.max(1) + 1).min(MAX_PARAMS + 1);
            }
            b'?' if self.nparams == 0 && !self.any_param => self.private = true,
            // Other parameter-prefix bytes (`<`, `=`, `>`) mark sequences that are not ours.
            b'<'..=b'?' => self.intermediate = Some(b),
            0x20..=0x2f => self.intermediate = Some(b),
            0x40..=0x7e => {
                self.state = State::Ground;
                self.final_byte(b);
            }
            0x00..=0x1f => {}
            _ => self.state = State::Ground,
        }
    }

    fn final_byte(&mut self, b: u8) {
        let params = &self.params[..self.nparams.min(MAX_PARAMS)];
        match (self.private, self.intermediate, b) {
            (true, None, b'h' | b'l') => {
                let on = b == b'h';
                for &p in params {
                    if p == CURSOR_VISIBLE {
                        self.cursor_hidden = !on;
                    } else if let Some(i) = PRIVATE_MODES.iter().position(|&m| m == p) {
                        self.set[i] = on;
                    }
                }
            }
            (false, None, b'r') => {
                // No parameters, or a default top and bottom, is the whole screen.
                self.scroll_region = params.iter().any(|&p| p != 0).then(|| {
                    let at = |i: usize| params.get(i).copied().unwrap_or(0);
                    (at(0), at(1))
                });
            }
            (false, Some(b'>'), b'm') if params.first() == Some(&4) => {
                // `CSI > 4 m` and `CSI > 4 ; 0 m` reset it; a level above 0 sets it.
                self.modify_other_keys = params.get(1).copied().unwrap_or(0);
            }
            (false, Some(b'!'), b'p') => {
                // DECSTR: cursor keys, keypad, scroll region and cursor back to defaults.
                self.keypad = false;
                self.cursor_hidden = false;
                self.scroll_region = None;
                self.set[DECCKM] = false;
            }
            _ => {}
        }
    }

    /// Every mode back to its default; a sequence being read is kept.
    fn reset_all(&mut self) {
        self.set = [false; PRIVATE_MODES.len()];
        self.keypad = false;
        self.cursor_hidden = false;
        self.scroll_region = None;
        self.modify_other_keys = 0;
    }

    /// Whether every tracked mode is at its default.
    pub fn is_default(&self) -> bool {
        self.undo().is_empty()
    }

    /// The bytes that switch off every mode found on; empty when none is.
    ///
    /// The scroll region is reset between a cursor save and restore (DECSTBM homes the
    /// cursor); the alternate screen is left last.
    ///
    /// # Examples
    ///
    /// ```
    /// use genward::cli::term_modes::ModeScanner;
    /// let mut s = ModeScanner::new();
    /// s.feed(b"\x1b[?1049h\x1b[?1h\x1b=");
    /// assert_eq!(s.undo(), b"\x1b[?1l\x1b[?1049l\x1b>".to_vec());
    /// ```
    pub fn undo(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.scroll_region.is_some() {
            out.extend_from_slice(b"\x1b7\x1b[r\x1b8");
        }
        for (i, &mode) in PRIVATE_MODES.iter().enumerate() {
            if self.set[i] {
                out.extend_from_slice(format!("\x1b[?{mode}l").as_bytes());
            }
        }
        if self.modify_other_keys > 0 {
            out.extend_from_slice(b"\x1b[>4m");
        }
        if self.keypad {
            out.extend_from_slice(b"\x1b>");
        }
        if self.cursor_hidden {
            out.extend_from_slice(b"\x1b[?25h");
        }
        out
    }

    /// The bytes that switch back on every mode found on: what [`undo`](Self::undo)
    /// switched off while `attach` was stopped (`SIGTSTP`), sent again when it continues,
    /// so the program it shows gets its terminal back as it left it. The alternate screen
    /// comes first (the rest apply to it); the scroll region is set between a cursor save
    /// and restore, as it homes the cursor. A program's own redraw fills the screen.
    ///
    /// # Examples
    ///
    /// ```
    /// use genward::cli::term_modes::ModeScanner;
    /// let mut s = ModeScanner::new();
    /// s.feed(b"\x1b[?1049h\x1b[?1h\x1b=\x1b[?25l");
    /// assert_eq!(s.redo(), b"\x1b[?1049h\x1b[?1h\x1b=\x1b[?25l".to_vec());
    /// ```
    pub fn redo(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, &mode) in PRIVATE_MODES.iter().enumerate().rev() {
            if self.set[i] {
                out.extend_from_slice(format!("\x1b[?{mode}h").as_bytes());
            }
        }
        if self.modify_other_keys > 0 {
            out.extend_from_slice(format!("\x1b[>4;{}m", self.modify_other_keys).as_bytes());
        }
        if self.keypad {
            out.extend_from_slice(b"\x1b=");
        }
        if self.cursor_hidden {
            out.extend_from_slice(b"\x1b[?25l");
        }
        if let Some((top, bottom)) = self.scroll_region {
            let part = |p: u16| if p == 0 { String::new() } else { p.to_string() };
            out.extend_from_slice(
                format!("\x1b7\x1b[{};{}r\x1b8", part(top), part(bottom)).as_bytes(),
            );
        }
        out
    }

    /// [`undo`](Self::undo), and the scanner then takes the terminal as back in its
    /// default modes (a sequence in progress is kept: the output may go on).
    pub fn take_undo(&mut self) -> Vec<u8> {
        let out = self.undo();
        self.reset_all();
        out
    }
}

/// Where cursor-key mode (DECCKM) is in [`PRIVATE_MODES`].
const DECCKM: usize = index(1);

const fn index(mode: u16) -> usize {
    let mut i = 0;
    while i < PRIVATE_MODES.len() {
        if PRIVATE_MODES[i] == mode {
            return i;
        }
        i += 1;
    }
    panic!("not a tracked mode")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scanned(chunks: &[&[u8]]) -> ModeScanner {
        let mut s = ModeScanner::new();
        for c in chunks {
            s.feed(c);
        }
        s
    }

    fn undo_of(bytes: &[u8]) -> Vec<u8> {
        scanned(&[bytes]).undo()
    }

    #[test]
    fn a_fresh_terminal_needs_nothing() {
        assert!(ModeScanner::new().is_default());
        assert_eq!(
            undo_of(b"plain text\r\n\x1b[1;31mred\x1b[0m\x1b[2J\x1b[H"),
            b""
        );
    }

    #[test]
    fn each_mode_is_undone() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"\x1b[?1049h", b"\x1b[?1049l"),
            (b"\x1b[?1047h", b"\x1b[?1047l"),
            (b"\x1b[?47h", b"\x1b[?47l"),
            (b"\x1b[?1h", b"\x1b[?1l"),
            (b"\x1b=", b"\x1b>"),
            (b"\x1b[?2004h", b"\x1b[?2004l"),
            (b"\x1b[?9h", b"\x1b[?9l"),
            (b"\x1b[?1000h", b"\x1b[?1000l"),
            (b"\x1b[?1002h", b"\x1b[?1002l"),
            (b"\x1b[?1003h", b"\x1b[?1003l"),
            (b"\x1b[?1005h", b"\x1b[?1005l"),
            (b"\x1b[?1006h", b"\x1b[?1006l"),
            (b"\x1b[?1015h", b"\x1b[?1015l"),
            (b"\x1b[?25l", b"\x1b[?25h"),
            (b"\x1b[5;20r", b"\x1b7\x1b[r\x1b8"),
        ];
        for (set, undo) in cases {
            assert_eq!(undo_of(set), undo.to_vec(), "{set:?}");
        }
    }

    #[test]
    fn modes_switched_back_need_nothing() {
        let out = b"\x1b[?1049h\x1b[?1h\x1b=\x1b[?2004h\x1b[?1000;1006h\x1b[?25l\x1b[3;9r\
                    \x1b[?1049l\x1b[?1l\x1b>\x1b[?2004l\x1b[?1000;1006l\x1b[?25h\x1b[r";
        assert_eq!(undo_of(out), b"");
    }

    #[test]
    fn several_modes_in_one_sequence_and_the_order_of_undoing() {
        assert_eq!(
            undo_of(b"\x1b[?1049;1;1000;1006;25h\x1b=\x1b[?25l\x1b[2;10r"),
            b"\x1b7\x1b[r\x1b8\x1b[?1000l\x1b[?1006l\x1b[?1l\x1b[?1049l\x1b>\x1b[?25h".to_vec()
        );
    }

    #[test]
    fn sequences_split_anywhere_across_chunks() {
        let out: &[u8] = b"ab\x1b[?1049;1h\x1b=\x1b[?1000h\x1b[4;8rzz";
        let whole = undo_of(out);
        assert!(!whole.is_empty());
        for cut in 0..=out.len() {
            assert_eq!(
                scanned(&[&out[..cut], &out[cut..]]).undo(),
                whole,
                "cut {cut}"
            );
        }
        let bytes: Vec<&[u8]> = out.chunks(1).collect();
        assert_eq!(scanned(&bytes).undo(), whole);
    }

    #[test]
    fn unknown_and_foreign_sequences_are_ignored() {
        // Not private, other prefixes, intermediates, other finals, charset selection,
        // an OSC title, SGR, and untracked private modes.
        let out = b"\x1b[1049h\x1b[>1h\x1b[=1h\x1b[?1$p\x1b[?1049p\x1b(B\x1b)0\
                    \x1b]0;title ?1049h\x07\x1b[38:2:1:2:3m\x1b[?7h\x1b[?12l\x1b[?1049 h\x1b[1r";
        assert_eq!(undo_of(out), b"\x1b7\x1b[r\x1b8".to_vec());
        assert!(undo_of(b"\x1b[?7h\x1b[?12h\x1b[?2026h").is_empty());
    }

    #[test]
    fn aborted_and_restarted_sequences() {
        // CAN aborts; ESC restarts; control characters inside are executed, not fatal.
        assert!(undo_of(b"\x1b[?1049\x18h").is_empty());
        assert!(undo_of(b"\x1b[?104\x1bx9h").is_empty());
        assert_eq!(undo_of(b"\x1b[?10\x1b[?1049h"), b"\x1b[?1049l".to_vec());
        assert_eq!(undo_of(b"\x1b[?10\r49h"), b"\x1b[?1049l".to_vec());
    }

    #[test]
    fn resets() {
        assert!(undo_of(b"\x1b[?1049;1;2004h\x1b=\x1b[?25l\x1b[2;5r\x1bc").is_empty());
        // Soft reset: cursor keys, keypad, cursor, region; not the screen or the mouse.
        assert_eq!(
            undo_of(b"\x1b[?1049;1;1000h\x1b=\x1b[?25l\x1b[2;5r\x1b[!p"),
            b"\x1b[?1000l\x1b[?1049l".to_vec()
        );
    }

    #[test]
    fn state_is_bounded() {
        // Endless digits, endless parameters and endless intermediates: nothing grows,
        // and the sequence still ends at its final byte.
        let mut s = ModeScanner::new();
        s.feed(b"\x1b[?");
        for _ in 0..100_000 {
            s.feed(b"7;");
        }
        s.feed(&[b'7'; 100_000]);
        s.feed(b"1049h");
        assert!(s.is_default(), "only 16 parameters are kept");
        s.feed(b"\x1b[?");
        for _ in 0..14 {
            s.feed(b"7;");
        }
        s.feed(b"99999999991049;1049h");
        assert_eq!(s.undo(), b"\x1b[?1049l".to_vec(), "capped, not wrapped");
        let size = std::mem::size_of::<ModeScanner>();
        assert!(size < 128, "{size}");
    }

    #[test]
    fn redo_sets_again_what_undo_resets() {
        let out: &[u8] = b"\x1b[?1049h\x1b[?1;2004;1000;1006h\x1b=\x1b[?25l\x1b[3;20r\x1b[>4;2m";
        let s = scanned(&[out]);
        let redo = s.redo();
        assert_eq!(
            redo,
            b"\x1b[?1049h\x1b[?1h\x1b[?2004h\x1b[?1006h\x1b[?1000h\x1b[>4;2m\x1b=\x1b[?25l\x1b7\x1b[3;20r\x1b8"
                .to_vec()
        );
        // Undone then redone, a scanner sees the same modes on as before.
        let mut again = scanned(&[&s.undo(), &redo]);
        assert_eq!(again.undo(), s.undo());
        assert_eq!(again.take_undo(), s.undo());
        assert!(ModeScanner::new().redo().is_empty());
        assert_eq!(
            scanned(&[b"\x1b[;9r"]).redo(),
            b"\x1b7\x1b[;9r\x1b8".to_vec()
        );
    }

    #[test]
    fn take_undo_forgets_but_keeps_a_sequence_in_progress() {
        let mut s = scanned(&[b"\x1b[?1049h\x1b[?10"]);
        assert_eq!(s.take_undo(), b"\x1b[?1049l".to_vec());
        assert!(s.is_default());
        s.feed(b"00h");
        assert_eq!(s.take_undo(), b"\x1b[?1000l".to_vec());
    }

    #[test]
    fn focus_reporting_and_modify_other_keys_as_vim_9_sets_them_are_undone() {
        // What vim 9.0 writes on start in an xterm-like terminal (among others).
        let s = scanned(&[b"\x1b[>4;2m\x1b[?1004h\x1b[?1049h"]);
        assert_eq!(s.undo(), b"\x1b[?1004l\x1b[?1049l\x1b[>4m".to_vec());
        // Reset by the program itself: nothing to undo.
        assert!(scanned(&[b"\x1b[>4;2m\x1b[?1004h", b"\x1b[>4;m\x1b[?1004l"]).is_default());
        assert!(scanned(&[b"\x1b[>4;1m\x1b[>4m"]).is_default());
        // Other `CSI > ... m` sequences (modifyCursorKeys and so on) are not this one.
        assert!(scanned(&[b"\x1b[>1;2m"]).is_default());
    }
}
