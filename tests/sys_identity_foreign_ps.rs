//! A `ps` that does not understand `-o lstart` (busybox) must make an identity
//! unverifiable, never "gone": a live process would otherwise be forgotten (invariant 5).
//! Its own test binary, because it changes PATH for the whole process.

use std::os::unix::fs::PermissionsExt;

use genward::sys::identity::{compare, ps_token, Observed, Verdict};
use genward::testkit::scratch::ScratchDir;

#[test]
fn a_ps_that_rejects_lstart_is_unreadable_not_gone() {
    let dir = ScratchDir::new("fake-ps");
    let ps = dir.join("ps");
    std::fs::write(
        &ps,
        "#!/bin/sh\necho 'ps: invalid option -- o' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&ps, std::fs::Permissions::from_mode(0o755)).unwrap();
    // This binary has no other test, so nothing else reads PATH meanwhile.
    std::env::set_var("PATH", dir.path());
    let me = std::process::id() as i32;
    let observed = ps_token(me);
    assert!(matches!(observed, Observed::Unreadable(_)), "{observed:?}");
    assert_eq!(
        compare(Some("ps1:Mon Nov 30 06:30:07 2026"), &observed),
        Verdict::Unverifiable
    );
}
