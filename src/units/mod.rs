//! Units as Kubernetes and Prometheus write them: resource quantities (`100m`,
//! `128Mi`) and durations (`7d`, `1h30m`).

pub mod duration;
pub mod quantity;
