//! The user and group databases, through the C library (so `/etc/passwd`, `/etc/group`
//! and whatever NSS adds, which may wait on the network), for the lookup helper
//! (`crate::lookup`): the daemon's loop must not wait for them, and a child may look
//! nothing up between fork and exec.

use std::ffi::{CStr, CString};
use std::io;

/// A user's entry: its ids and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// The login name.
    pub name: String,
    /// The uid.
    pub uid: u32,
    /// The primary gid.
    pub gid: u32,
    /// The home directory (empty if the entry has none).
    pub home: String,
    /// The login shell (empty if the entry has none).
    pub shell: String,
}

/// Entries larger than this are refused rather than read (a sane database has lines of
/// a few hundred bytes; a group with many members can be larger).
const MAX_BUF: usize = 1 << 20;

/// Calls a `get*_r` function with a growing buffer; `call` takes what it needs out of the
/// entry while the buffer the entry points into is alive. `Ok(None)`: no entry.
fn with_buffer<T>(
    mut call: impl FnMut(&mut [libc::c_char]) -> (libc::c_int, Option<T>),
) -> io::Result<Option<T>> {
    let mut buf = vec![0 as libc::c_char; 1024];
    loop {
        let (rc, found) = call(&mut buf);
        match rc {
            0 => return Ok(found),
            libc::ERANGE if buf.len() < MAX_BUF => buf.resize(buf.len() * 4, 0),
            // "Not found" spellings some C libraries use instead of a null result.
            libc::ENOENT | libc::ESRCH | libc::EBADF | libc::EPERM => return Ok(None),
            e => return Err(io::Error::from_raw_os_error(e)),
        }
    }
}

/// The user named `name`, `None` when there is none.
pub fn user_by_name(name: &str) -> io::Result<Option<User>> {
    let Ok(cname) = CString::new(name) else {
        return Ok(None);
    };
    // SAFETY: all-zero is a valid `passwd` (null pointers, zero ids).
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    with_buffer(|buf| {
        // SAFETY: every pointer is valid for the call; `buf` for its length.
        let rc = unsafe {
            libc::getpwnam_r(
                cname.as_ptr(),
                &mut pw,
                buf.as_mut_ptr(),
                buf.len(),
                &mut out,
            )
        };
        (rc, (!out.is_null()).then(|| user_of(&pw)))
    })
}

/// The user of uid `uid`, `None` when the database has no entry for it.
pub fn user_by_uid(uid: u32) -> io::Result<Option<User>> {
    // SAFETY: all-zero is a valid `passwd`.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    with_buffer(|buf| {
        // SAFETY: every pointer is valid for the call; `buf` for its length.
        let rc = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut out) };
        (rc, (!out.is_null()).then(|| user_of(&pw)))
    })
}

fn user_of(pw: &libc::passwd) -> User {
    let text = |p: *const libc::c_char| {
        if p.is_null() {
            String::new()
        } else {
            // SAFETY: a found entry's strings are NUL-terminated in the buffer, which
            // `with_buffer` keeps alive while this runs.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    User {
        name: text(pw.pw_name),
        uid: pw.pw_uid,
        gid: pw.pw_gid,
        home: text(pw.pw_dir),
        shell: text(pw.pw_shell),
    }
}

/// The gid of the group named `name`, `None` when there is none.
pub fn group_by_name(name: &str) -> io::Result<Option<u32>> {
    let Ok(cname) = CString::new(name) else {
        return Ok(None);
    };
    // SAFETY: all-zero is a valid `group`.
    let mut gr: libc::group = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::group = std::ptr::null_mut();
    with_buffer(|buf| {
        // SAFETY: every pointer is valid for the call; `buf` for its length.
        let rc = unsafe {
            libc::getgrnam_r(
                cname.as_ptr(),
                &mut gr,
                buf.as_mut_ptr(),
                buf.len(),
                &mut out,
            )
        };
        (rc, (!out.is_null()).then_some(gr.gr_gid))
    })
}

/// The groups `user` belongs to: `gid` first, then every group that lists it as a member.
pub fn groups_of(user: &str, gid: u32) -> io::Result<Vec<u32>> {
    let cname = CString::new(user).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    loop {
        let mut n = groups.len() as libc::c_int;
        // SAFETY: `groups` holds `n` gids; `n` is updated to the number needed.
        let rc = unsafe {
            libc::getgrouplist(cname.as_ptr(), gid as _, groups.as_mut_ptr().cast(), &mut n)
        };
        let n = usize::try_from(n).unwrap_or(0);
        if rc >= 0 {
            groups.truncate(n);
            #[allow(clippy::unnecessary_cast)]
            return Ok(groups.into_iter().map(|g| g as u32).collect());
        }
        if n <= groups.len() || n > 65536 {
            return Err(io::Error::other("the group database lists too many groups"));
        }
        groups.resize(n, 0);
    }
}

/// Our own supplementary groups.
pub fn own_groups() -> io::Result<Vec<u32>> {
    // SAFETY: a zero size only asks for the count.
    let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut groups: Vec<libc::gid_t> = vec![0; n as usize];
    // SAFETY: `groups` holds `n` gids.
    let n = unsafe { libc::getgroups(n, groups.as_mut_ptr()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    groups.truncate(n as usize);
    #[allow(clippy::unnecessary_cast)]
    Ok(groups.into_iter().map(|g| g as u32).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_found_both_ways_and_strangers_are_not() {
        let root = user_by_uid(0).unwrap().expect("uid 0 has an entry");
        assert_eq!(root.uid, 0);
        assert_eq!(user_by_name(&root.name).unwrap(), Some(root.clone()));
        assert_eq!(user_by_name("no-such-user-genward").unwrap(), None);
        assert_eq!(group_by_name("no-such-group-genward").unwrap(), None);
        assert!(groups_of(&root.name, root.gid).unwrap().contains(&root.gid));
    }
}
