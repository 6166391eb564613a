//! The state directory as a daemon uses it: sessions and descriptors written and read
//! back; every kind of bad file moved aside without stopping anything; a newer directory
//! refused; generation numbers that never go back, whatever crash comes between.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use genward::core::{
    Action, Command, Config, Core, Input, OnBusy, Response, SpawnError, SpawnErrorKind, Spec, Time,
};
use genward::store::aside::{BAD_DIR, KEEP};
use genward::store::descriptor::encode_descriptor;
use genward::store::highwater::{decode_ceiling, BLOCK, HIGHWATER_FILE, RECOVERY_GAP};
use genward::store::names::{GENS_DIR, SESSIONS_DIR};
use genward::store::session_codec::{encode_session, MAX_SESSION_FILE};
use genward::store::{
    generation_floor, Descriptor, DirId, GenAllocator, IoKind, Store, StoreError,
};
use genward::testkit::scratch::ScratchDir;
use genward::testkit::state::{place_file, sample_session};

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

fn descriptor(store: &Store, gen: u64) -> Descriptor {
    Descriptor {
        session: Arc::from("web"),
        gen,
        pid: 4242,
        pgid: 4242,
        sid: 4242,
        identity: Some("linux1:0f1e-2d:77:12345".into()),
        started_unix_ms: 1_700_000_000_000,
        io: IoKind::Pipes,
        dir_id: store.id().clone(),
        cgroup: None,
    }
}

#[test]
fn a_new_directory_gets_an_id_and_keeps_it() {
    let dir = ScratchDir::new("state-id");
    let id = Store::open(&dir).unwrap().id().clone();
    assert_eq!(
        entries(&dir),
        [BAD_DIR, GENS_DIR, "id", SESSIONS_DIR].map(String::from)
    );
    assert_eq!(Store::open(&dir).unwrap().id(), &id);
    // A corrupt id is moved aside and replaced.
    place_file(
        &dir.join("id"),
        b"{\"genward_state\":1,\"kind\":\"id\"}\n{\"id\":\"x\"}\n",
    );
    let store = Store::open(&dir).unwrap();
    assert_ne!(store.id(), &id);
    assert_eq!(entries(&dir.join(BAD_DIR)).len(), 1);
}

#[test]
fn a_directory_of_a_newer_genward_is_refused_and_left_alone() {
    let dir = ScratchDir::new("state-newer");
    drop(Store::open(&dir).unwrap());
    let newer = b"{\"genward_state\":2,\"kind\":\"id\"}\n{\"what\":\"ever\",\"x\":[1]}\n";
    place_file(&dir.join("id"), newer);
    match Store::open(&dir) {
        Err(e @ StoreError::Newer { version: 2, .. }) => {
            let text = e.to_string();
            assert!(text.contains("newer genward (state format 2"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(std::fs::read(dir.join("id")).unwrap(), newer);
    assert!(entries(&dir.join(BAD_DIR)).is_empty());
}

#[test]
fn sessions_round_trip_and_are_removed() {
    let dir = ScratchDir::new("state-sessions");
    let store = Store::open(&dir).unwrap();
    let (a, mut b) = (sample_session("a"), sample_session("b.2"));
    b.spec = Spec::new(vec![b"true".to_vec()]);
    b.recent_ends.clear();
    store.write_session(&b).unwrap();
    store.write_session(&a).unwrap();
    let loaded = store.load_sessions(10).unwrap();
    assert_eq!(loaded.records, [a.clone(), b]);
    assert_eq!((loaded.bad, loaded.over_limit), (0, 0));
    store.remove_session("b.2").unwrap();
    store.remove_session("never-was").unwrap();
    assert_eq!(
        store.load_sessions(10).unwrap().records,
        std::slice::from_ref(&a)
    );

    // Several at once, with one flush: each removed, a missing one no error.
    let c = sample_session("c");
    store.write_session(&c).unwrap();
    let removed = store.remove_sessions(&["a", "never-was", "c"]);
    assert!(removed.iter().all(Result::is_ok));
    assert_eq!(store.load_sessions(10).unwrap().records, []);
}

#[test]
fn a_spec_the_format_cannot_carry_is_refused_and_nothing_written() {
    let dir = ScratchDir::new("state-unencodable");
    let store = Store::open(&dir).unwrap();
    let mut s = sample_session("web");
    s.spec.argv.push(b"\xff".to_vec());
    let e = store.write_session(&s).unwrap_err();
    assert!(matches!(e, StoreError::Unencodable { .. }), "{e}");
    assert!(e.to_string().contains("argv[3]"), "{e}");
    assert!(entries(&dir.join(SESSIONS_DIR)).is_empty());
}

#[test]
fn every_kind_of_bad_session_file_is_moved_aside_and_the_good_ones_load() {
    let dir = ScratchDir::new("state-bad");
    let store = Store::open(&dir).unwrap();
    let sessions = dir.join(SESSIONS_DIR);
    let good = sample_session("good");
    store.write_session(&good).unwrap();
    let bytes = encode_session(&sample_session("web")).unwrap();

    let mut bad = 0;
    let mut place = |name: &str, contents: &[u8]| {
        place_file(&sessions.join(name), contents);
        bad += 1;
    };
    // Cut short at a sample of points, the last byte included.
    for end in (0..bytes.len()).step_by(13).chain([bytes.len() - 1]) {
        place("web.json", &bytes[..end]);
        assert_eq!(
            store.load_sessions(100).unwrap().records,
            std::slice::from_ref(&good)
        );
    }
    place("garbage.json", b"\x00\xff not json at all\n");
    place("foreign.json", b"{\"hello\":1}\n{}\n");
    place(
        "newer.json",
        b"{\"genward_state\":9,\"kind\":\"session\"}\n{\"future\":true}\n",
    );
    place(
        "kind.json",
        b"{\"genward_state\":1,\"kind\":\"highwater\"}\n{\"ceiling\":7}\n",
    );
    // The right contents under another session's name.
    place("api.json", &bytes);
    place("README", b"hello");
    place("no-suffix", &bytes);
    let huge = vec![b' '; MAX_SESSION_FILE + 1];
    place("huge.json", &huge);
    place("open.json", &bytes);
    std::fs::set_permissions(sessions.join("open.json"), PermissionsExt::from_mode(0o644)).unwrap();
    std::os::unix::fs::symlink(sessions.join("good.json"), sessions.join("link.json")).unwrap();
    std::fs::hard_link(sessions.join("good.json"), dir.join("second-name")).unwrap();
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        sessions.join("fifo.json").as_path(),
        rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
    )
    .unwrap();
    std::fs::create_dir(sessions.join("subdir.json")).unwrap();
    // A socket cannot even be opened (ENXIO): set aside all the same, the rest still read.
    drop(std::os::unix::net::UnixListener::bind(sessions.join("sock.json")).unwrap());
    place_file(&sessions.join(".web.json.tmp"), b"half a write");

    let loaded = store.load_sessions(100).unwrap();
    // The hard-linked good file is refused too: we never make a second name.
    assert!(loaded.records.is_empty(), "{:?}", loaded.records);
    assert_eq!(loaded.bad, 13, "bad files counted");
    assert_eq!(loaded.temporaries, 1);
    assert_eq!(entries(&sessions), ["subdir.json"]);
    assert!(entries(&dir.join(BAD_DIR)).len() <= KEEP);
    assert!(bad > KEEP, "the bound on kept files was exercised");
    // Nothing was followed: the link's target was moved aside as itself, not through it.
    assert!(dir.join("second-name").exists());
}

#[test]
fn loading_stops_at_the_limit_without_moving_anything() {
    let dir = ScratchDir::new("state-limit");
    let store = Store::open(&dir).unwrap();
    for i in 0..5 {
        store
            .write_session(&sample_session(&format!("s{i}")))
            .unwrap();
    }
    let loaded = store.load_sessions(3).unwrap();
    assert_eq!(
        (loaded.records.len(), loaded.over_limit, loaded.bad),
        (3, 2, 0)
    );
    assert_eq!(entries(&dir.join(SESSIONS_DIR)).len(), 5);
}

#[test]
fn descriptors_round_trip_and_foreign_ones_are_moved_aside() {
    let dir = ScratchDir::new("state-gens");
    let store = Store::open(&dir).unwrap();
    let (d7, d12) = (descriptor(&store, 7), descriptor(&store, 12));
    store.write_descriptor(&d12).unwrap();
    store.write_descriptor(&d7).unwrap();
    // Another directory's, and one whose name says another generation.
    let other = Descriptor {
        dir_id: DirId::generate(),
        ..descriptor(&store, 20)
    };
    place_file(
        &dir.join(GENS_DIR).join("20.json"),
        &encode_descriptor(&other),
    );
    place_file(
        &dir.join(GENS_DIR).join("21.json"),
        &encode_descriptor(&descriptor(&store, 22)),
    );
    let loaded = store.load_descriptors(100).unwrap();
    assert_eq!(loaded.records, [d7, d12.clone()]);
    assert_eq!(loaded.bad, 2);
    store.remove_descriptor(7).unwrap();
    store.remove_descriptor(7).unwrap();
    assert_eq!(store.load_descriptors(100).unwrap().records, [d12]);
}

/// One daemon's life on the directory: start from the store, allocate `spawns` numbers
/// through the core the way the driver does (reserve before acting on what the core
/// queued), then "crash": drop everything, nothing closed cleanly. Returns the numbers
/// handed out.
fn one_life(dir: &Path, spawns: usize) -> Vec<u64> {
    let store = Store::open(dir).unwrap();
    let sessions = store.load_sessions(1000).unwrap().records;
    let gens = store.load_descriptors(1000).unwrap().records;
    let floor = generation_floor(&sessions, gens.iter().map(|d| d.gen));
    let (mut alloc, first) = GenAllocator::open(&store, floor).unwrap();
    let mut core = Core::new(Config::default(), first);
    let mut handed_out = Vec::new();
    for i in 0..spawns {
        let command = Command::Spawn {
            session: "s".into(),
            if_gen: None,
            spec: Box::new(Spec::new(vec![b"prog".to_vec()])),
            on_busy: OnBusy::Replace,
        };
        core.handle(
            Time::ZERO,
            Input::Command {
                request: i as u64,
                command,
            },
        );
        alloc.reserve(&store, core.next_generation()).unwrap();
        assert!(alloc.ceiling() >= core.next_generation());
        let mut spawned = Vec::new();
        while let Some(action) = core.poll_action() {
            match action {
                Action::Reply {
                    result: Ok(Response::Gen(gen)),
                    ..
                } => handed_out.push(gen),
                Action::Spawn { gen, .. } => spawned.push(gen),
                _ => {}
            }
        }
        for gen in spawned {
            let error = SpawnError::new(SpawnErrorKind::NotFound, 2);
            core.handle(
                Time::ZERO,
                Input::SpawnResult {
                    gen,
                    result: Err(error),
                },
            );
            while core.poll_action().is_some() {}
        }
    }
    handed_out
}

#[test]
fn generation_numbers_never_go_back_across_crashes() {
    let dir = ScratchDir::new("state-highwater");
    let mut highest = 0;
    let lives = [0, 1, 3, BLOCK as usize / 2, 1, BLOCK as usize + 5, 0, 2];
    for spawns in lives {
        let handed = one_life(&dir, spawns);
        assert_eq!(handed.len(), spawns);
        for gen in handed {
            assert!(gen > highest, "{gen} after {highest}");
            highest = gen;
        }
        let bytes = std::fs::read(dir.join(HIGHWATER_FILE)).unwrap();
        assert!(decode_ceiling(&bytes).unwrap() > highest);
    }
    // A write that died half done leaves its temporary file: the mark is intact.
    place_file(&dir.join(".highwater.tmp"), b"{\"genward_state\":1");
    let next = one_life(&dir, 1);
    assert!(next[0] > highest);
    assert!(!dir.join(".highwater.tmp").exists());
}

#[test]
fn a_lost_or_bad_mark_restarts_numbering_far_above_what_is_on_disk() {
    let dir = ScratchDir::new("state-highwater-lost");
    let store = Store::open(&dir).unwrap();
    let mut s = sample_session("web");
    s.current = Some(5000);
    store.write_session(&s).unwrap();
    let floor = generation_floor(&[s], [7u64]);
    assert_eq!(floor, 5001);

    // Missing, with other state present.
    let (_, first) = GenAllocator::open(&store, floor).unwrap();
    assert_eq!(first, floor + RECOVERY_GAP);
    // Now present and trusted.
    let (alloc, again) = GenAllocator::open(&store, floor).unwrap();
    assert_eq!(again, first + BLOCK);
    assert_eq!(alloc.ceiling(), again + BLOCK);

    // Corrupt: moved aside, and numbering continues above everything found.
    place_file(
        &dir.join(HIGHWATER_FILE),
        b"{\"genward_state\":1,\"kind\":\"highwater\"}\n{\"ceiling\":0}\n",
    );
    let (_, first) = GenAllocator::open(&store, floor).unwrap();
    assert_eq!(first, floor + RECOVERY_GAP);
    assert_eq!(entries(&dir.join(BAD_DIR)).len(), 1);

    // Below what the records name (restored from an old copy, say).
    let above = first + BLOCK + 10;
    let (_, again) = GenAllocator::open(&store, above).unwrap();
    assert_eq!(again, above + RECOVERY_GAP);

    // A fresh directory starts at 1.
    let fresh = ScratchDir::new("state-highwater-fresh");
    let store = Store::open(&fresh).unwrap();
    assert_eq!(GenAllocator::open(&store, 1).unwrap().1, 1);
}

#[test]
fn ten_thousand_sessions_load() {
    let dir = ScratchDir::new("state-many");
    let store = Store::open(&dir).unwrap();
    let n = 10_000;
    for i in 0..n {
        let record = sample_session(&format!("session-{i:05}"));
        place_file(
            &dir.join(SESSIONS_DIR).join(format!("session-{i:05}.json")),
            &encode_session(&record).unwrap(),
        );
    }
    let loaded = store.load_sessions(n).unwrap();
    assert_eq!(loaded.records.len(), n);
    assert_eq!(loaded.bad, 0);
    assert_eq!(&*loaded.records[n - 1].name, "session-09999");
}

#[test]
fn a_resumed_program_takes_the_durable_mark_without_writing_it() {
    let dir = ScratchDir::new("state-highwater-reopen");
    let store = Store::open(&dir).unwrap();
    let (alloc, first) = GenAllocator::open(&store, 1).unwrap();
    assert_eq!(first, 1);
    let before = std::fs::read(dir.join(HIGHWATER_FILE)).unwrap();
    // An upgrade resumes with 10 numbers handed out: the mark (1 + BLOCK) is above them,
    // so it is taken as it is — nothing written, as a full directory would refuse.
    let again = GenAllocator::reopen(&store, 10).unwrap();
    assert_eq!(again.ceiling(), alloc.ceiling());
    assert_eq!(std::fs::read(dir.join(HIGHWATER_FILE)).unwrap(), before);
    // A mark at or below what was handed out is not trusted: as at a start.
    let high = GenAllocator::reopen(&store, alloc.ceiling()).unwrap();
    assert!(high.ceiling() > alloc.ceiling());
}
