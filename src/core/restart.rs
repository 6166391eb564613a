//! Restart policy: whether a session whose process ended on its own starts again, and
//! after how long. Pure arithmetic, tested on its own.

use std::time::Duration;

use super::action::ExitCause;
use super::generation::Ended;
use super::spec::{Restart, RestartPolicy};

/// What a session does after its current generation ended on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Start a new generation after `delay`. `restarts` is the consecutive count of
    /// restarts made so far (0 again after a run that lasted `reset_after`): the one
    /// decided here is counted only when its generation is created, so one a stop cancels
    /// in its backoff never is.
    Restart { delay: Duration, restarts: u32 },
    /// Stay down in this state.
    Rest(Rest),
}

/// The state of a session with no current generation and no pending restart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rest {
    Stopped,
    Exited,
    Failed,
}

/// Whether the end counts as a success (exit code 0 by itself).
fn succeeded(ended: &Ended) -> bool {
    matches!(ended, Ended::Exited { status, cause: ExitCause::Exited, .. } if status.code() == 0)
}

/// Decides per the policy. `restarts` is the consecutive count so far; a run that lasted
/// `reset_after` starts the count (and the backoff) over, as systemd and s6 users expect.
pub(crate) fn decide(policy: &RestartPolicy, restarts: u32, ended: &Ended) -> Decision {
    let ok = succeeded(ended);
    let wanted = match policy.mode {
        Restart::Never => false,
        Restart::OnFailure => !ok,
        Restart::Always => true,
    };
    if !wanted {
        return Decision::Rest(if ok { Rest::Exited } else { Rest::Failed });
    }
    let stayed_up = matches!(ended, Ended::Exited { uptime, .. } if *uptime >= policy.reset_after);
    let count = if stayed_up { 0 } else { restarts };
    if policy.max_restarts.is_some_and(|max| count >= max) {
        return Decision::Rest(Rest::Failed);
    }
    Decision::Restart {
        delay: backoff(policy, count),
        restarts: count,
    }
}

/// `initial * 2^count`, capped at `max`.
pub(crate) fn backoff(policy: &RestartPolicy, count: u32) -> Duration {
    let factor = 1u32.checked_shl(count.min(31)).unwrap_or(u32::MAX);
    policy
        .initial
        .checked_mul(factor)
        .unwrap_or(policy.max)
        .min(policy.max)
}
