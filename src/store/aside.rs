//! Bad files are moved aside, never trusted and never fatal.
//!
//! A file the daemon cannot use (corrupt, cut short, not ours, of another kind, too
//! large) is renamed into `bad/` as `<dir>.<name>.bad-<unix ms>` with a warning, so the
//! next start does not trip over it again and a person can still look at it. Only the
//! newest [`KEEP`] are kept, so a directory full of garbage cannot fill the disk twice:
//! moving one aside reads `bad/` (a few dozen entries at most), never the directory the
//! file came from. If even the move fails, the file is left where it is and skipped (it
//! is refused again next time): a bad file never stops the daemon.

use std::time::{SystemTime, UNIX_EPOCH};

use super::dir::Dir;

/// Moved-aside files kept in `bad/`.
pub const KEEP: usize = 32;

/// Where bad files go, relative to the state directory.
pub const BAD_DIR: &str = "bad";

/// Moves `name` (in `from`, whose label is e.g. `sessions`) into `bad` and logs why.
/// Returns the new name, or `None` if the file was left in place.
pub fn move_aside(from: &Dir, label: &str, name: &str, bad: &Dir, why: &str) -> Option<String> {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let base = format!("{label}.{name}.bad-{ms}");
    // Two files of one name within a millisecond, or a clock set back: never overwrite.
    let mut dest = base.clone();
    for n in 1..=KEEP {
        if !exists(bad, &dest) {
            break;
        }
        dest = format!("{base}-{n}");
    }
    match from.rename_to(name, bad, &dest) {
        Ok(()) => {
            log::warn!(
                "state file {} moved aside to {}: {why}",
                from.path_of(name).display(),
                bad.path_of(&dest).display()
            );
            prune(bad);
            Some(dest)
        }
        Err(e) => {
            log::warn!(
                "state file {} is bad ({why}) and could not be moved aside ({e}); ignoring it",
                from.path_of(name).display()
            );
            None
        }
    }
}

fn exists(dir: &Dir, name: &str) -> bool {
    rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).is_ok()
}

/// Removes the oldest moved-aside files beyond [`KEEP`]. Anything else found in `bad/`
/// counts too (it is ours to manage), and is removed oldest-name first.
fn prune(bad: &Dir) {
    let mut names: Vec<(u128, String)> = Vec::new();
    let listed = bad.each_entry(|name, _, _| {
        if let Some(name) = name {
            names.push((stamp(name), name.to_owned()));
        }
        // Bounded: `bad/` never holds much more than KEEP unless someone fills it.
        names.len() < KEEP * 64
    });
    if listed.is_err() || names.len() <= KEEP {
        return;
    }
    names.sort();
    let excess = names.len() - KEEP;
    for (_, name) in names.into_iter().take(excess) {
        if let Err(e) = bad.unlink(&name) {
            log::debug!("could not prune {}: {e}", bad.path_of(&name).display());
        }
    }
}

/// The Unix milliseconds in a moved-aside name (`...bad-<ms>` or `...bad-<ms>-<n>`), 0
/// for anything else so it goes first.
fn stamp(name: &str) -> u128 {
    let Some(at) = name.rfind(".bad-") else {
        return 0;
    };
    let rest = &name[at + 5..];
    let digits = rest.split('-').next().unwrap_or("");
    digits.parse().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::scratch::ScratchDir;

    #[test]
    fn moves_aside_and_keeps_only_the_newest() {
        let scratch = ScratchDir::new("aside");
        let root = Dir::open(&scratch).unwrap();
        let sessions = root.subdir("sessions").unwrap();
        let bad = root.subdir(BAD_DIR).unwrap();
        for i in 0..KEEP + 5 {
            let name = format!("s{i}.json");
            std::fs::write(scratch.join("sessions").join(&name), b"junk").unwrap();
            let dest = move_aside(&sessions, "sessions", &name, &bad, "test").unwrap();
            assert!(dest.starts_with(&format!("sessions.{name}.bad-")), "{dest}");
        }
        let kept = std::fs::read_dir(scratch.join(BAD_DIR)).unwrap().count();
        assert_eq!(kept, KEEP);
        assert_eq!(
            std::fs::read_dir(scratch.join("sessions")).unwrap().count(),
            0
        );
        // A missing file is left alone, reported as not moved.
        assert_eq!(
            move_aside(&sessions, "sessions", "gone", &bad, "test"),
            None
        );
    }

    #[test]
    fn stamps_order_moved_aside_files() {
        assert_eq!(
            stamp("sessions.a.json.bad-1700000000000"),
            1_700_000_000_000
        );
        assert_eq!(stamp("gens.7.json.bad-1700000000001-3"), 1_700_000_000_001);
        assert_eq!(stamp("stray"), 0);
    }
}
