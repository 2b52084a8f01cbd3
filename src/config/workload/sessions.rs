//! Traffic whose next request waits on an answer: closed-loop users
//! (`[workload.closed_loop]`) and multi-turn sessions (`[workload.sessions]`).

use super::lengths::{check_length, check_time};
use super::{LengthDist, TimeDist};
use crate::config::validate::{Check, fail};
use serde::{Deserialize, Serialize};

/// `[workload.closed_loop]`: a fixed population of users.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClosedLoop {
    /// Concurrent users (the most requests ever in flight).
    pub users: u32,
    /// Pause between a request's last token and the user's next request.
    #[serde(default)]
    pub think_time_s: TimeDist,
}

/// `[workload.sessions]`: multi-turn conversations. Turn k's prompt is the
/// previous turn's prompt and output plus `new_tokens` of user input, so it
/// shares that whole context as a prefix with the previous turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sessions {
    /// Turns per session.
    pub turns: LengthDist,
    /// Pause between a turn's last token and the next turn.
    #[serde(default)]
    pub think_time_s: TimeDist,
    /// New user tokens in each later turn (default: the prompt distribution).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_tokens: Option<LengthDist>,
}

/// `[workload.sessions]`: not with a replayed trace (`trace`), and valid turns,
/// think time and new tokens.
pub(super) fn check_sessions(s: &Sessions, trace: bool) -> Check {
    if trace {
        return fail(
            "workload.sessions",
            "a replayed trace cannot also generate sessions",
            "use the trace's session_column (format = \"csv\") instead",
        );
    }
    check_length("workload.sessions.turns", &s.turns, false)?;
    check_time("workload.sessions.think_time_s", &s.think_time_s)?;
    if let Some(n) = &s.new_tokens {
        check_length("workload.sessions.new_tokens", n, false)?;
    }
    Ok(())
}
