//! Start order between sessions: a spec's `depends_on`, and the pure check of a whole set
//! of sessions for cycles and missing names (what a configuration loader calls before it
//! applies anything).

use std::collections::{BTreeMap, BTreeSet};

use super::error::Error;

/// Most dependencies one spec may name.
pub const MAX_DEPENDENCIES: usize = 64;

/// What a dependency must have reached before a dependent's generation starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DependOn {
    /// Its current generation was spawned (and has not ended).
    Started,
    /// Its current generation is ready (see the spec's `ready`).
    Ready,
    /// Its last generation exited with code 0 (a one-shot: a migration, a build).
    Completed,
}

impl DependOn {
    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            DependOn::Started => "started",
            DependOn::Ready => "ready",
            DependOn::Completed => "completed",
        }
    }

    /// Parses the wire spelling.
    pub fn parse(s: &str) -> Option<DependOn> {
        match s {
            "started" => Some(DependOn::Started),
            "ready" => Some(DependOn::Ready),
            "completed" => Some(DependOn::Completed),
            _ => None,
        }
    }

    /// How a person reads "waiting for db to be ..." .
    pub const fn wanted(self) -> &'static str {
        match self {
            DependOn::Started => "started",
            DependOn::Ready => "ready",
            DependOn::Completed => "completed",
        }
    }
}

/// A spec's dependencies, by session name (sorted, each named once).
pub type Dependencies = BTreeMap<String, DependOn>;

/// Checks one spec's dependencies on their own: valid names, not itself, not too many.
pub fn validate(session: Option<&str>, deps: &Dependencies) -> Result<(), Error> {
    if deps.len() > MAX_DEPENDENCIES {
        return Err(Error::bad(format!(
            "depends_on: {} sessions, limit {MAX_DEPENDENCIES}",
            deps.len()
        )));
    }
    for name in deps.keys() {
        if let Err(why) = super::check_session_name(name) {
            return Err(Error::bad(format!("depends_on.{name}: {why}")));
        }
        if Some(name.as_str()) == session {
            return Err(Error::bad(format!(
                "depends_on.{name}: a session cannot depend on itself"
            )));
        }
    }
    Ok(())
}

/// Checks a whole set of sessions (each name with the names it depends on): every
/// dependency names a session of the set, and no chain of dependencies comes back to where
/// it started. The error names the missing sessions or the cycle (`a -> b -> a`).
pub fn check_set<'a, I, D>(sessions: I) -> Result<(), String>
where
    I: IntoIterator<Item = (&'a str, D)>,
    D: IntoIterator<Item = &'a str>,
{
    let graph: BTreeMap<&str, Vec<&str>> = sessions
        .into_iter()
        .map(|(name, deps)| (name, deps.into_iter().collect()))
        .collect();
    let missing: Vec<String> = graph
        .iter()
        .flat_map(|(name, deps)| {
            deps.iter()
                .filter(|d| !graph.contains_key(*d))
                .map(move |d| format!("{name} depends on {d}, which is not a session"))
        })
        .collect();
    if !missing.is_empty() {
        return Err(missing.join("; "));
    }
    match find_cycle(
        |n| graph.get(n).map(|d| d.iter().copied()),
        graph.keys().copied(),
    ) {
        Some(cycle) => Err(format!("dependency cycle: {}", cycle.join(" -> "))),
        None => Ok(()),
    }
}

/// A cycle among the graph's nodes reachable from `roots`, as its names with the first
/// repeated at the end, if there is one. `edges(n)` gives `n`'s dependencies (`None` for a
/// name not in the graph). Iterative, so a long chain cannot overflow the stack.
pub fn find_cycle<'a, F, E>(
    edges: F,
    roots: impl IntoIterator<Item = &'a str>,
) -> Option<Vec<String>>
where
    F: Fn(&str) -> Option<E>,
    E: Iterator<Item = &'a str>,
{
    let mut done: BTreeSet<&str> = BTreeSet::new();
    for root in roots {
        if done.contains(root) {
            continue;
        }
        // Depth-first with an explicit stack of (node, its remaining edges).
        let mut path: Vec<&str> = vec![root];
        let mut on_path: BTreeSet<&str> = BTreeSet::from([root]);
        let mut stack: Vec<Vec<&str>> = vec![edges(root).map(|e| e.collect()).unwrap_or_default()];
        while let Some(next) = stack.last_mut() {
            let Some(n) = next.pop() else {
                stack.pop();
                if let Some(n) = path.pop() {
                    on_path.remove(n);
                    done.insert(n);
                }
                continue;
            };
            if on_path.contains(n) {
                let at = path.iter().position(|p| *p == n).unwrap_or(0);
                let mut cycle: Vec<String> = path[at..].iter().map(|s| s.to_string()).collect();
                cycle.push(n.to_string());
                return Some(cycle);
            }
            if done.contains(n) {
                continue;
            }
            path.push(n);
            on_path.insert(n);
            stack.push(edges(n).map(|e| e.collect()).unwrap_or_default());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(pairs: &[(&'static str, &[&'static str])]) -> Result<(), String> {
        check_set(pairs.iter().map(|(n, d)| (*n, d.iter().copied())))
    }

    #[test]
    fn a_set_without_cycles_or_missing_names_passes() {
        assert_eq!(
            set(&[("web", &["db", "cache"]), ("db", &[]), ("cache", &["db"])]),
            Ok(())
        );
    }

    #[test]
    fn a_missing_name_is_named() {
        let e = set(&[("web", &["db"])]).unwrap_err();
        assert_eq!(e, "web depends on db, which is not a session");
    }

    #[test]
    fn a_cycle_is_named_in_order() {
        let e = set(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"]), ("d", &["a"])]).unwrap_err();
        assert_eq!(e, "dependency cycle: a -> b -> c -> a");
    }

    #[test]
    fn a_long_chain_does_not_overflow() {
        let names: Vec<String> = (0..100_000).map(|i| format!("s{i}")).collect();
        let pairs: Vec<(&str, Vec<&str>)> = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                (
                    n.as_str(),
                    names.get(i + 1).map(|s| s.as_str()).into_iter().collect(),
                )
            })
            .collect();
        assert_eq!(
            check_set(pairs.iter().map(|(n, d)| (*n, d.iter().copied()))),
            Ok(())
        );
    }

    #[test]
    fn one_spec_cannot_name_itself_or_a_bad_name() {
        let mut deps = Dependencies::new();
        deps.insert("web".into(), DependOn::Ready);
        assert!(validate(Some("web"), &deps)
            .unwrap_err()
            .message
            .contains("itself"));
        let mut deps = Dependencies::new();
        deps.insert(".x".into(), DependOn::Ready);
        assert!(validate(None, &deps).is_err());
    }
}
