//! Which command-line option sets which field of a spec, so that a value the daemon's
//! rules refuse is a usage error naming the option the user typed (`--log-max-size`),
//! not a failure naming a protocol field (`log.max_size`).
//!
//! The rules themselves live in [`crate::core`] and nowhere else: [`check_spec`] runs
//! the core's own checks of the parts of a spec that options fill (those that need no
//! daemon configuration) before anything is sent, and [`usage_for`] maps the daemon's
//! refusal of a field back to its option too, for a daemon whose rules are stricter than
//! this program's.

use super::args::{ArgError, Matches};
use super::client::ClientError;
use super::dispatch::CommandError;
use crate::core::{depends, Spec};
use crate::proto::framing::MAX_LINE;
use crate::proto::request::{write_spec_object, MAX_SPEC_BYTES};

/// Spec fields, as the core's errors name them, and the option that sets each.
const FIELDS: &[(&str, &str)] = &[
    ("log.path", "log"),
    ("log.max_size", "log-max-size"),
    ("log.keep", "log-keep"),
    ("ready.fd", "ready-fd"),
    ("ready.output", "ready-output"),
    ("ready.tcp", "ready-tcp"),
    ("ready.unix", "ready-unix"),
    ("ready.command", "ready-command"),
    ("ready.timeout", "ready-timeout"),
    ("live.tcp", "live-tcp"),
    ("live.unix", "live-unix"),
    ("live.command", "live-command"),
    ("live.interval", "live-interval"),
    ("live.failures", "live-failures"),
    ("depends_on", "depends-on"),
    ("user", "user"),
    ("group", "group"),
    ("groups", "groups"),
    ("umask", "umask"),
    ("env_file", "daemon-env-file"),
    ("rlimits", "rlimit"),
    ("cwd", "cwd"),
];

/// Checks, by the core's rules, the parts of `spec` (to be started as `session`) that
/// options fill; a refusal names the option given for the field refused. A refusal of a
/// field no option of this command line set is left for the daemon to report.
pub fn check_spec(m: &Matches<'_>, session: &str, spec: &Spec) -> Result<(), CommandError> {
    let checks = [
        spec.log.as_ref().map_or(Ok(()), |l| l.validate()),
        spec.ready.as_ref().map_or(Ok(()), |r| r.validate()),
        spec.live.as_ref().map_or(Ok(()), |l| l.validate()),
        depends::validate(Some(session), &spec.depends_on),
        spec.run_as.validate(),
    ];
    for refused in checks.into_iter().filter_map(Result::err) {
        if let Some(e) = usage_error(m, &refused.message) {
            return Err(e.into());
        }
    }
    check_size(m, spec)
}

/// What to do about too many argv/env entries: where the environment comes from.
const ENTRIES_HINT: &str =
    "the environment passed on counts, and by default it is all of this command's; \
     --clear-env starts from an empty one, --daemon-env from the daemon's";

/// Refuses, as the daemon would, a spec with more argv/env entries than the core's
/// limit, or too large to be sent: saying that the environment counts, and naming the
/// request line's limit.
fn check_size(m: &Matches<'_>, spec: &Spec) -> Result<(), CommandError> {
    let limit = crate::core::Config::default().max_spec_items;
    let items = spec.argv.len() + spec.env.set.len() + spec.env.unset.len();
    if items > limit {
        return Err(m
            .refused(format!(
                "{items} argv/env entries ({} words of the command, {} environment variables), beyond the daemon's limit of {limit}; {ENTRIES_HINT}",
                spec.argv.len(),
                spec.env.set.len() + spec.env.unset.len(),
            ))
            .into());
    }
    let mut encoded = Vec::new();
    if write_spec_object(spec, &mut encoded).is_ok() && encoded.len() > MAX_SPEC_BYTES {
        let longest = spec
            .argv
            .iter()
            .enumerate()
            .max_by_key(|(_, a)| a.len())
            .map(|(i, a)| {
                format!(
                    "; its longest word, argument {} of the command, is {} bytes",
                    i + 1,
                    a.len()
                )
            })
            .unwrap_or_default();
        return Err(m
            .refused(format!(
                "the command and its environment are {} bytes encoded, beyond the {MAX_SPEC_BYTES} bytes the daemon takes in one request (which is one line of at most {MAX_LINE} bytes){longest}",
                encoded.len(),
            ))
            .into());
    }
    Ok(())
}

/// The daemon's refusal `e` of a field an option of `m` set, as a usage error naming
/// that option; any other error as it is.
pub fn usage_for(m: &Matches<'_>, e: ClientError) -> CommandError {
    match &e {
        ClientError::Remote { code, message }
            if code == "bad_request" && message.contains("argv/env entries") =>
        {
            m.refused(format!("{message}; {ENTRIES_HINT}")).into()
        }
        ClientError::Remote { code, message } if code == "bad_request" => {
            match usage_error(m, message) {
                Some(usage) => usage.into(),
                None => e.into(),
            }
        }
        _ => e.into(),
    }
}

/// The usage error for a message naming a field (`ready.fd: ...`, or the protocol's
/// ``field `ready.fd`: ...``), if an option of `m` was given for that field.
fn usage_error(m: &Matches<'_>, message: &str) -> Option<ArgError> {
    let (field, reason) = split_field(message)?;
    let (_, opt) = FIELDS.iter().find(|(f, _)| {
        field == *f
            || field
                .strip_prefix(f)
                .is_some_and(|rest| rest.starts_with(['.', '[']))
    })?;
    let given = m.values(opt);
    // `depends_on.db` names the dependency: show the value that named it.
    let value = field
        .strip_prefix("depends_on.")
        .and_then(|dep| {
            given
                .iter()
                .find(|v| v.split_once('=').map_or(**v, |(name, _)| name) == dep)
        })
        .or(given.last())?;
    Some(m.invalid(&format!("--{opt}"), value, plain_ranges(reason)))
}

/// `reason` with the core's ranges (`3..=1023`, `is not within 4096..=1024`) in words:
/// `between 3 and 1023`.
fn plain_ranges(reason: &str) -> String {
    let mut out = String::new();
    let mut rest = reason;
    while let Some(at) = rest.find("..=") {
        let before = &rest[..at];
        let low_start = before
            .rfind(|c: char| !c.is_ascii_digit())
            .map_or(0, |i| i + 1);
        let after = &rest[at + 3..];
        let high_len = after
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(after.len());
        if low_start == before.len() || high_len == 0 {
            out.push_str(&rest[..at + 3]);
            rest = after;
            continue;
        }
        let lead = &before[..low_start];
        out.push_str(lead.strip_suffix("within ").unwrap_or(lead));
        out.push_str(&format!(
            "between {} and {}",
            &before[low_start..],
            &after[..high_len]
        ));
        rest = &after[high_len..];
    }
    out.push_str(rest);
    out
}

/// A message's field and what is wrong with it: `ready.fd: 2 must be ...` (the core's
/// shape), ``field `ready.fd`: ...`` (the protocol's), or `ready.command[1] contains ...`
/// (the field and the rest of the sentence).
fn split_field(message: &str) -> Option<(&str, &str)> {
    if let Some(rest) = message.strip_prefix("field `") {
        return rest.split_once("`: ");
    }
    // `depends_on.NAME: ...`: the field is all before the colon (a bad NAME may hold
    // anything but whitespace).
    if let Some((field, reason)) = message.split_once(": ") {
        if !field.is_empty() && !field.contains(char::is_whitespace) {
            return Some((field, reason));
        }
    }
    let end = message.find(|c: char| !(c.is_ascii_alphanumeric() || "._[]-".contains(c)))?;
    let field = &message[..end];
    let rest = &message[end..];
    Some((field, rest.strip_prefix(": ").unwrap_or(message)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::{parse, Outcome};
    use crate::cli::commands::RUN;
    use crate::core::{Error, ReadyCheck};

    /// The refusal as the daemon answers it, had this program's check been skipped.
    fn as_daemon_says(e: Error) -> ClientError {
        ClientError::Remote {
            code: e.code.as_str().to_owned(),
            message: e.message,
        }
    }

    fn matches(words: &[&str]) -> Matches<'static> {
        let words: Vec<String> = words.iter().map(|s| s.to_string()).collect();
        match parse(&RUN, &words) {
            Ok(Outcome::Args(m)) => m,
            other => panic!("{words:?}: {other:?}"),
        }
    }

    #[test]
    fn every_field_names_an_option_of_run() {
        for (field, opt) in FIELDS {
            assert!(RUN.option(opt).is_some(), "{field}: --{opt}");
        }
    }

    #[test]
    fn ranges_are_in_words() {
        assert_eq!(
            plain_ranges("2 must be 3..=1023 (0, 1 and 2 are the standard streams)"),
            "2 must be between 3 and 1023 (0, 1 and 2 are the standard streams)"
        );
        assert_eq!(
            plain_ranges("1024 bytes is not within 4096..=1073741824"),
            "1024 bytes is not between 4096 and 1073741824"
        );
        assert_eq!(plain_ranges("a..=b and 1..=2"), "a..=b and between 1 and 2");
    }

    #[test]
    fn too_many_entries_or_bytes_are_usage_errors_that_say_why() {
        let m = matches(&["a", "--", "true"]);
        let mut spec = Spec::new(vec![b"true".to_vec()]);
        for i in 0..5000 {
            spec.env
                .set
                .push((format!("V{i}").into_bytes(), b"1".to_vec()));
        }
        let Err(CommandError::Usage(e)) = check_spec(&m, "a", &spec) else {
            panic!("5001 entries pass")
        };
        let e = e.to_string();
        assert!(
            e.contains("5001 argv/env entries")
                && e.contains("4096")
                && e.contains("--clear-env")
                && e.contains("--daemon-env")
                && e.contains("environment"),
            "{e}"
        );
        // As the daemon refuses it (a daemon with another limit): a usage error too.
        let refused = ClientError::Remote {
            code: "bad_request".into(),
            message: "5001 argv/env entries, limit 4096".into(),
        };
        let CommandError::Usage(e) = usage_for(&m, refused) else {
            panic!("not a usage error")
        };
        assert!(e.to_string().contains("--clear-env"), "{e}");

        let spec = Spec::new(vec![b"echo".to_vec(), vec![b'x'; MAX_LINE + 1]]);
        let Err(CommandError::Usage(e)) = check_spec(&m, "a", &spec) else {
            panic!("a word longer than a request line passes")
        };
        let e = e.to_string();
        assert!(
            e.contains("request")
                && e.contains(&MAX_LINE.to_string())
                && e.contains(&format!(
                    "argument 2 of the command, is {} bytes",
                    MAX_LINE + 1
                )),
            "{e}"
        );
    }

    #[test]
    fn both_shapes_of_a_field_message_are_read() {
        assert_eq!(
            split_field("log.max_size: 1024 bytes is not within 4096..=1"),
            Some(("log.max_size", "1024 bytes is not within 4096..=1"))
        );
        assert_eq!(
            split_field("field `ready.fd`: expected a number"),
            Some(("ready.fd", "expected a number"))
        );
        assert_eq!(
            split_field("depends_on.a/b: session name contains '/'"),
            Some(("depends_on.a/b", "session name contains '/'"))
        );
        assert_eq!(
            split_field("ready.command[1] contains a NUL byte"),
            Some(("ready.command[1]", "ready.command[1] contains a NUL byte"))
        );
    }

    #[test]
    fn a_daemon_refusal_of_a_field_names_the_option() {
        let m = matches(&["a", "--ready-fd", "2", "--", "true"]);
        let refused = ReadyCheck::new(crate::core::ReadyHow::Fd(2))
            .validate()
            .unwrap_err();
        let e = usage_for(&m, as_daemon_says(refused));
        let CommandError::Usage(e) = e else {
            panic!("{e:?}")
        };
        let e = e.to_string();
        assert!(e.contains("--ready-fd") && !e.contains("ready.fd"), "{e}");
        // A number beyond what a spec holds, refused by the wire's decoding in the core's
        // words: named the same way.
        let m = matches(&["a", "--ready-fd", "4294967296", "--", "true"]);
        let refused = crate::core::readiness::bad_fd(4_294_967_296);
        let CommandError::Usage(e) = usage_for(&m, as_daemon_says(refused)) else {
            panic!("not a usage error")
        };
        let e = e.to_string();
        assert!(
            e.contains("--ready-fd") && e.contains("4294967296 must be between 3 and 1023"),
            "{e}"
        );
        // The protocol's one wording of a missing member is read as naming it too.
        assert_eq!(
            split_field("field `ready.fd`: missing"),
            Some(("ready.fd", "missing"))
        );
        // Not a field this command line set: the daemon's words, as they are.
        let other = ClientError::Remote {
            code: "bad_request".into(),
            message: "spec larger than 65536 bytes".into(),
        };
        assert!(matches!(usage_for(&m, other), CommandError::Failed(_)));
    }
}
