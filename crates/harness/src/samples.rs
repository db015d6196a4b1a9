//! Latency samples with percentiles.

use std::time::Duration;

/// Latency samples.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    values: Vec<Duration>,
}

impl Samples {
    /// Records one sample.
    pub fn push(&mut self, value: Duration) {
        self.values.push(value);
    }

    /// Adds every sample of `other`.
    pub fn extend(&mut self, other: Samples) {
        self.values.extend(other.values);
    }

    /// The `q`-quantile (0.5 for the median), by nearest rank.
    pub fn quantile(&self, q: f64) -> Duration {
        let mut sorted = self.values.clone();
        sorted.sort_unstable();
        if sorted.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1]
    }

    /// Median.
    pub fn p50(&self) -> Duration {
        self.quantile(0.50)
    }

    /// 99th percentile.
    pub fn p99(&self) -> Duration {
        self.quantile(0.99)
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether there are no samples.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The median and the 99th percentile in microseconds, as two
    /// right-aligned 12-character columns (for the benches' tables).
    pub fn p50_p99(&self) -> String {
        format!("{:>12} {:>12}", micros(self.p50()), micros(self.p99()))
    }
}

/// Formats a duration in microseconds.
pub fn micros(value: Duration) -> String {
    format!("{:.1} µs", value.as_secs_f64() * 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_use_nearest_rank() {
        let mut samples = Samples::default();
        for ms in 1..=100 {
            samples.push(Duration::from_millis(ms));
        }
        assert_eq!(samples.p50(), Duration::from_millis(50));
        assert_eq!(samples.p99(), Duration::from_millis(99));
        assert_eq!(samples.quantile(1.0), Duration::from_millis(100));
    }
}
