//! The store's file primitives: atomic writes that follow nothing and leave nothing half
//! written, and strict reads that refuse anything we did not write.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::{Duration, Instant};

use genward::store::atomic::SYNCFS_FROM;
use genward::store::dir::{Dir, DirError};
use genward::store::strict_read::ReadError;
use genward::testkit::scratch::ScratchDir;

fn mode(path: &std::path::Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

#[test]
fn a_write_replaces_the_file_whole_and_leaves_no_temporary() {
    let scratch = ScratchDir::new("atomic");
    let dir = Dir::open(&scratch).unwrap();
    dir.write_atomic("f", b"one").unwrap();
    dir.write_atomic("f", b"two, longer").unwrap();
    assert_eq!(std::fs::read(scratch.join("f")).unwrap(), b"two, longer");
    assert_eq!(mode(&scratch.join("f")), 0o600);
    let names: Vec<_> = std::fs::read_dir(&scratch)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["f"]);
    let mut buf = Vec::new();
    dir.read_strict("f", 64, &mut buf).unwrap();
    assert_eq!(buf, b"two, longer");
}

/// A batch of writes sharing its flushes: each file whole under its name, a file that
/// cannot be replaced (a directory in its place) fails alone and leaves no temporary, and
/// a symlink at a temporary name is replaced, never followed.
#[test]
fn a_batch_of_writes_replaces_each_file_and_fails_only_where_it_must() {
    // A small batch (each file flushed) and a large one (one `syncfs`).
    for more in [0, SYNCFS_FROM] {
        batch_of_writes(more);
    }
}

/// The batch of the test above, with `more` files besides.
fn batch_of_writes(more: usize) {
    let scratch = ScratchDir::new("atomic-batch");
    let dir = Dir::open(&scratch).unwrap();
    std::fs::create_dir(scratch.join("blocked")).unwrap();
    std::fs::write(scratch.join("b"), b"old").unwrap();
    let victim = scratch.join("victim");
    std::fs::write(&victim, b"untouched").unwrap();
    std::os::unix::fs::symlink(&victim, scratch.join(".c.tmp")).unwrap();
    let mut files: Vec<(String, &[u8])> = vec![
        ("a".into(), b"first"),
        ("blocked".into(), b"never"),
        ("b".into(), b"second, replacing"),
        ("c".into(), b"third"),
    ];
    files.extend((0..more).map(|i| (format!("more{i}"), &b"more"[..])));
    let results = dir.write_atomic_all(&files);
    assert!(results[0].is_ok() && results[2].is_ok() && results[3].is_ok());
    assert!(results[1].is_err());
    assert!(results[4..].iter().all(Result::is_ok));
    for i in 0..more {
        let name = format!("more{i}");
        assert_eq!(std::fs::read(scratch.join(&name)).unwrap(), b"more");
        std::fs::remove_file(scratch.join(name)).unwrap();
    }
    assert_eq!(std::fs::read(scratch.join("a")).unwrap(), b"first");
    assert_eq!(
        std::fs::read(scratch.join("b")).unwrap(),
        b"second, replacing"
    );
    assert_eq!(std::fs::read(scratch.join("c")).unwrap(), b"third");
    assert_eq!(std::fs::read(&victim).unwrap(), b"untouched");
    assert!(scratch.join("blocked").is_dir());
    let mut names: Vec<_> = std::fs::read_dir(&scratch)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["a", "b", "blocked", "c", "victim"]);
}

#[test]
fn a_write_follows_no_symlink() {
    let scratch = ScratchDir::new("atomic-links");
    let dir = Dir::open(&scratch).unwrap();
    let victim = scratch.join("victim");
    std::fs::write(&victim, b"untouched").unwrap();
    // At the temporary name (a daemon that died mid-write, or someone planting it) and at
    // the real name: the link itself is replaced, its target never written.
    std::os::unix::fs::symlink(&victim, scratch.join(".f.tmp")).unwrap();
    std::os::unix::fs::symlink(&victim, scratch.join("f")).unwrap();
    dir.write_atomic("f", b"ours").unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"untouched");
    assert!(std::fs::symlink_metadata(scratch.join("f"))
        .unwrap()
        .file_type()
        .is_file());
    assert!(!scratch.join(".f.tmp").exists());
}

#[test]
fn leftover_temporaries_are_removed() {
    let scratch = ScratchDir::new("atomic-tmp");
    let dir = Dir::open(&scratch).unwrap();
    std::fs::write(scratch.join(".a.tmp"), b"half").unwrap();
    std::fs::write(scratch.join("keep"), b"x").unwrap();
    assert_eq!(dir.remove_temporaries().unwrap(), 1);
    assert!(scratch.join("keep").exists());
}

#[test]
fn reads_refuse_what_we_did_not_write() {
    let scratch = ScratchDir::new("strict");
    let dir = Dir::open(&scratch).unwrap();
    let mut buf = Vec::new();
    let mut read = |name: &str, max: usize| dir.read_strict(name, max, &mut buf);

    assert!(matches!(read("missing", 10), Err(ReadError::Missing)));

    std::fs::write(scratch.join("target"), b"x").unwrap();
    std::fs::set_permissions(scratch.join("target"), PermissionsExt::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink(scratch.join("target"), scratch.join("link")).unwrap();
    assert!(matches!(
        read("link", 10),
        Err(ReadError::NotRegular("symlink"))
    ));

    std::fs::create_dir(scratch.join("subdir")).unwrap();
    assert!(matches!(
        read("subdir", 10),
        Err(ReadError::NotRegular("directory"))
    ));

    // A fifo with no writer: refused at once, the open never blocks.
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        scratch.join("fifo").as_path(),
        rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
    )
    .unwrap();
    let start = Instant::now();
    assert!(matches!(
        read("fifo", 10),
        Err(ReadError::NotRegular("fifo"))
    ));
    assert!(start.elapsed() < Duration::from_secs(5));

    std::fs::hard_link(scratch.join("target"), scratch.join("hardlink")).unwrap();
    assert!(matches!(
        read("hardlink", 10),
        Err(ReadError::Linked { links: 2 })
    ));

    std::fs::write(scratch.join("open"), b"x").unwrap();
    std::fs::set_permissions(scratch.join("open"), PermissionsExt::from_mode(0o644)).unwrap();
    assert!(matches!(
        read("open", 10),
        Err(ReadError::OpenToOthers { mode: 0o644 })
    ));

    std::fs::write(scratch.join("big"), [b'x'; 11]).unwrap();
    std::fs::set_permissions(scratch.join("big"), PermissionsExt::from_mode(0o600)).unwrap();
    assert!(matches!(
        read("big", 10),
        Err(ReadError::TooLarge { limit: 10 })
    ));
    read("big", 11).unwrap();

    if rustix::process::geteuid().is_root() {
        std::fs::write(scratch.join("foreign"), b"x").unwrap();
        std::fs::set_permissions(scratch.join("foreign"), PermissionsExt::from_mode(0o600))
            .unwrap();
        std::os::unix::fs::chown(scratch.join("foreign"), Some(65534), None).unwrap();
        assert!(matches!(
            read("foreign", 10),
            Err(ReadError::NotOurs { owner: 65534 })
        ));
    }
}

#[test]
fn directories_must_be_real_ours_and_private() {
    let scratch = ScratchDir::new("dirs");
    let root = Dir::open(&scratch).unwrap();
    let sub = root.subdir("sub").unwrap();
    assert_eq!(mode(&scratch.join("sub")), 0o700);
    sub.write_atomic("f", b"x").unwrap();
    assert!(scratch.join("sub/f").exists());

    std::fs::create_dir(scratch.join("real")).unwrap();
    std::fs::set_permissions(scratch.join("real"), PermissionsExt::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(scratch.join("real"), scratch.join("link")).unwrap();
    assert!(matches!(
        root.subdir("link"),
        Err(DirError::NotADirectory(_))
    ));

    std::fs::create_dir(scratch.join("open")).unwrap();
    std::fs::set_permissions(scratch.join("open"), PermissionsExt::from_mode(0o755)).unwrap();
    assert!(matches!(
        root.subdir("open"),
        Err(DirError::OpenToOthers { mode: 0o755, .. })
    ));
}
