//! Deadline defaults and clamping.

use std::time::Duration;

use shellvisor_protocol::TimeoutConfig;
use shellvisor_protocol::TimeoutInfo;

/// The deadline a run gets, and what to tell the caller about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeoutDecision {
    /// `None` when the deadline is disabled (`timeout: 0`).
    pub deadline: Option<Duration>,
    /// Effective and requested values, for the result.
    pub info: TimeoutInfo,
    /// `Timeout clamped to <eff>s (requested <req>s; allowed range <min>-<max>s).`
    /// when the request was out of range.
    pub notice: Option<String>,
}

/// Resolves a requested timeout in seconds: `None` gives the default, `0`
/// disables the deadline, anything else is clamped to `min..=max`.
pub fn resolve_timeout(requested: Option<u64>, config: &TimeoutConfig) -> TimeoutDecision {
    let Some(requested) = requested else {
        return TimeoutDecision {
            deadline: Some(Duration::from_secs(config.default_secs)),
            info: TimeoutInfo {
                effective_secs: Some(config.default_secs),
                requested_secs: None,
            },
            notice: None,
        };
    };
    if requested == 0 {
        return TimeoutDecision {
            deadline: None,
            info: TimeoutInfo::default(),
            notice: None,
        };
    }
    let (min, max) = (
        config.min_secs.max(1),
        config.max_secs.max(config.min_secs.max(1)),
    );
    let effective = requested.clamp(min, max);
    let clamped = effective != requested;
    TimeoutDecision {
        deadline: Some(Duration::from_secs(effective)),
        info: TimeoutInfo {
            effective_secs: Some(effective),
            requested_secs: clamped.then_some(requested),
        },
        notice: clamped.then(|| {
            format!(
                "Timeout clamped to {effective}s (requested {requested}s; allowed range {min}-{max}s)."
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_zero_and_clamping() {
        let config = TimeoutConfig::default();
        let d = resolve_timeout(None, &config);
        assert_eq!(d.deadline, Some(Duration::from_secs(300)));
        assert_eq!(d.notice, None);

        let d = resolve_timeout(Some(0), &config);
        assert_eq!(d.deadline, None);
        assert_eq!(d.info.effective_secs, None);

        let d = resolve_timeout(Some(10), &config);
        assert_eq!(d.deadline, Some(Duration::from_secs(10)));
        assert_eq!(d.info.requested_secs, None);

        let d = resolve_timeout(Some(99_999), &config);
        assert_eq!(d.deadline, Some(Duration::from_secs(3600)));
        assert_eq!(d.info.requested_secs, Some(99_999));
        assert_eq!(
            d.notice.as_deref(),
            Some("Timeout clamped to 3600s (requested 99999s; allowed range 1-3600s).")
        );
    }
}
