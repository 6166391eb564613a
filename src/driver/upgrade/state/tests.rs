//! The driver image's codec and checks.

use std::time::{Duration, Instant};

use super::*;
use crate::proto::envelope::RequestId;

fn sample() -> DriverImage {
    DriverImage {
        config: ConfigImage {
            state_dir: "/run/x".into(),
            socket: "/run/x/sock".into(),
            allow_uids: vec![1000],
            reaper: 1,
            subreaper: true,
            max_clients: 10,
            max_sessions: 7,
            max_running: 9,
            outbox_bytes: 4096,
            max_line: 1024,
            containment: 2,
            program: "/usr/bin/genward".into(),
            keeper_hold_ms: Some(600_000),
            output_to_stdout: true,
            config: Some("/etc/genward.d".into()),
        },
        clock_start_ns: 5,
        epoch_unix_ms: 6,
        lease: 3,
        cgroup_root: Some("genward-x-1".into()),
        keeper: Some(13),
        children: vec![ChildImage {
            gen: 7,
            pid: 100,
            pidfd: Some(4),
            token: Some("linux1:x".into()),
            is_child: true,
            outputs: [Some(5), None, Some(6)],
            stdin: None,
            hung_up_pty: Some(7),
            input: b"ls\n".to_vec(),
            close_input_when_written: true,
            cgroup: Some(("/sys/fs/cgroup/g".into(), "/g".into())),
            awaits_status: false,
        }],
        clients: ClientsImage {
            listener: 8,
            next_id: 3,
            next_request: 9,
            clients: vec![ClientImage {
                id: 2,
                fd: 9,
                partial: b"{\"op\"".to_vec(),
                skipping: false,
                pending: vec![LineImage::Line(b"{}".to_vec()), LineImage::TooLong(10)],
                outbox: vec![
                    OutboxPiece::Bytes(vec![0, 1, 255]),
                    OutboxPiece::Record {
                        session: "a".into(),
                        seq: 2,
                        skip: 1,
                    },
                ],
                paused: true,
                eof: false,
                waiting: 1,
                deferred: vec![DeferredImage {
                    session: "a".into(),
                    seq: 4,
                    line: b"x".to_vec(),
                }],
                cursors: vec![CursorImage {
                    session: "a".into(),
                    seq: 3,
                    pos: 10,
                    behind: true,
                    lossless_ms: Some(1500),
                }],
                all: Some("tail:5".into()),
                all_lossless_ms: Some(30_000),
            }],
            waits: vec![WaitImage {
                gen: 7,
                client: 2,
                rid: RequestId::Str("w".into()),
            }],
            replies: vec![(8, 2, RequestId::U64(1))],
        },
        unverified: vec![KeptImage {
            gen: 1,
            session: "b".into(),
            pid: 5,
            token: String::new(),
        }],
        requester: Some(RequesterImage {
            client: 2,
            rid: RequestId::Null,
            previous_version: "0.1.0".into(),
            paused_at_ns: 11,
        }),
        exec_only: vec![12],
        probe_identities: vec![(5, vec![1, 2, 3])],
        unsaved: vec!["web".into(), "db".into()],
    }
}

/// Where the image of a build before configurations ends: before the config's tag (the
/// last member), which is one byte when there is no config.
fn before_config() -> usize {
    let mut image = sample();
    image.config.config = None;
    image.probe_identities.clear();
    image.unsaved.clear();
    image.encode().len() - 8 - 8 - 1
}

/// Where the image of a build before probe identities ends: before their count (the last
/// member).
fn before_probe_identities() -> usize {
    let mut image = sample();
    image.probe_identities.clear();
    image.unsaved.clear();
    image.encode().len() - 8 - 8
}

/// Where the image of a build before unsaved sessions were carried ends: before their
/// count (the last member).
fn before_unsaved() -> usize {
    let mut image = sample();
    image.unsaved.clear();
    image.encode().len() - 8
}

#[test]
fn an_image_of_a_build_before_unsaved_sessions_resumes_without_them() {
    let bytes = sample().encode();
    let earlier = DriverImage::decode(&bytes[..before_unsaved()]).unwrap();
    assert!(earlier.unsaved.is_empty());
    assert_eq!(earlier.probe_identities, sample().probe_identities);
}

#[test]
fn an_image_of_a_build_before_probe_identities_resumes_without_them() {
    let bytes = sample().encode();
    let earlier = DriverImage::decode(&bytes[..before_probe_identities()]).unwrap();
    assert!(earlier.probe_identities.is_empty());
    assert_eq!(earlier.config.config, sample().config.config);
}

#[test]
fn an_image_of_a_build_before_configurations_resumes_without_one() {
    let bytes = sample().encode();
    let earlier = DriverImage::decode(&bytes[..before_config()]).unwrap();
    assert_eq!(earlier.config.config, None);
    assert_eq!(earlier.config.max_sessions, 7);
}

#[test]
fn an_image_of_a_build_before_the_limits_resumes_with_the_defaults() {
    let bytes = sample().encode();
    let earlier = DriverImage::decode(&bytes[..before_config() - 17]).unwrap();
    assert_eq!(earlier.config.max_sessions, 100_000);
    assert_eq!(earlier.config.max_running, 16_384);
    assert!(!earlier.config.output_to_stdout);
}

#[test]
fn an_image_of_a_build_before_output_to_stdout_resumes_without_it() {
    let bytes = sample().encode();
    let earlier = DriverImage::decode(&bytes[..before_config() - 1]).unwrap();
    assert_eq!(earlier.config.max_sessions, 7);
    assert!(!earlier.config.output_to_stdout);
}

#[test]
fn round_trip() {
    let image = sample();
    assert_eq!(DriverImage::decode(&image.encode()).unwrap(), image);
}

#[test]
fn truncations_and_corruptions_are_refused_without_panic() {
    let bytes = sample().encode();
    // Without the config, the stdout flag and the two limits at the end (each in turn),
    // the image is an earlier build's (see above).
    let earlier_builds = [
        before_unsaved(),
        before_probe_identities(),
        before_config(),
        before_config() - 1,
        before_config() - 17,
    ];
    for cut in (0..bytes.len()).filter(|c| !earlier_builds.contains(c)) {
        assert!(DriverImage::decode(&bytes[..cut]).is_err(), "cut at {cut}");
    }
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..2000 {
        let mut b = bytes.clone();
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let i = (rng as usize) % b.len();
        b[i] = (rng >> 32) as u8;
        let _ = DriverImage::decode(&b);
    }
}

#[test]
fn duplicate_and_closed_descriptors_are_refused() {
    let mut image = sample();
    image.lease = 9;
    assert!(image.check_descriptors().unwrap_err().0.contains("twice"));
    let mut image = sample();
    for c in &mut image.children {
        c.outputs = [None; 3];
        c.hung_up_pty = None;
        c.pidfd = None;
    }
    image.lease = 1 << 20;
    image.clients.listener = (1 << 20) + 1;
    image.clients.clients[0].fd = (1 << 20) + 2;
    assert!(image
        .check_descriptors()
        .unwrap_err()
        .0
        .contains("not open"));
}

#[test]
fn instants_survive_the_monotonic_round_trip() {
    let at = Instant::now() + Duration::from_millis(1500);
    let back = mono::from_ns(mono::to_ns(at));
    let diff = if back > at { back - at } else { at - back };
    assert!(diff < Duration::from_millis(100), "{diff:?}");
}
