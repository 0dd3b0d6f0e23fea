//! Render and policy limits: the server's ceilings, lowered where a repository asks.

use crate::config::{RepoConfig, CONFIG_FILE};
use crate::finding::{Finding, Severity};
use crate::manifest::input_finding;
use crate::policy::PolicyLimits;

/// The repository's render limits under the ceilings: lowered where it asks,
/// never raised.
pub(super) fn render_limits(
    config: &RepoConfig,
    ceiling: &crate::render::RenderLimits,
) -> crate::render::RenderLimits {
    let mut limits = ceiling.clone();
    if let Some(t) = config.render.timeout_seconds {
        limits.timeout = limits.timeout.min(std::time::Duration::from_secs(t));
    }
    if let Some(m) = config.render.max_output_bytes {
        limits.max_output_bytes = limits.max_output_bytes.min(m);
    }
    limits
}

/// The repository's policy limits under the ceilings: lowered where it asks, never
/// raised.
pub(super) fn policy_limits(config: &RepoConfig, ceiling: &PolicyLimits) -> PolicyLimits {
    let mut limits = ceiling.clone();
    if let Some(t) = config.policy.timeout_seconds {
        limits.timeout = limits.timeout.min(std::time::Duration::from_secs(t));
    }
    if let Some(m) = config.policy.max_memory_mib {
        limits.max_memory_bytes = limits.max_memory_bytes.min(m.saturating_mul(1024 * 1024));
    }
    limits
}

/// Limits the repository sets above the server's ceilings (`render.*`, `policy.*`):
/// said, on their line.
pub(super) fn limits_above_ceiling(
    config: &RepoConfig,
    render: &crate::render::RenderLimits,
    policy: &PolicyLimits,
) -> Vec<Finding> {
    const MIB: u64 = 1024 * 1024;
    let over = [
        (
            "render/limit-above-ceiling",
            "render.timeout_seconds",
            config.render.timeout_seconds,
            render.timeout.as_secs(),
            "s",
        ),
        (
            "render/limit-above-ceiling",
            "render.max_output_bytes",
            config.render.max_output_bytes.map(|m| m as u64),
            render.max_output_bytes as u64,
            "bytes",
        ),
        (
            "policy/limit-above-ceiling",
            "policy.timeout_seconds",
            config.policy.timeout_seconds,
            policy.timeout.as_secs(),
            "s",
        ),
        (
            "policy/limit-above-ceiling",
            "policy.max_memory_mib",
            config.policy.max_memory_mib,
            policy.max_memory_bytes / MIB,
            "MiB",
        ),
    ];
    over.into_iter()
        .filter_map(|(rule, key, value, ceiling, unit)| {
            let value = value.filter(|v| *v > ceiling)?;
            Some(input_finding(
                rule,
                Severity::Warning,
                CONFIG_FILE,
                config.limit_lines.get(key).copied().unwrap_or(1),
                format!("{key} is {value}, above this server's ceiling of {ceiling} {unit}; {ceiling} {unit} is used. A repository's config may lower meshward's limits, never raise them: lower the value (or remove it), or ask the server's operator to raise the ceiling."),
            ))
        })
        .collect()
}
