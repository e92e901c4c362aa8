//! [`SourceLinkGauge`]: one run's binlog stream as the metrics show it. The source tells it of
//! every open stream and every drop as they happen (`capstan_source_connected`,
//! `capstan_source_reconnects_total`); the runner closes it when the run ends, after which a
//! late event of the source being torn down changes nothing, so a stopped runner never shows
//! as connected.

use std::sync::{Arc, Mutex, PoisonError};

use capstan_connectors::mysql::{LinkEvent, LinkObserver};

use crate::metrics::Metrics;

/// The connection gauge of one run of one pipeline.
#[derive(Debug)]
pub(super) struct SourceLinkGauge {
    metrics: Arc<Metrics>,
    pipeline: String,
    /// True once the run ended: events are ignored from then on.
    closed: Mutex<bool>,
}

impl SourceLinkGauge {
    pub(super) fn new(metrics: Arc<Metrics>, pipeline: &str) -> Arc<Self> {
        Arc::new(SourceLinkGauge {
            metrics,
            pipeline: pipeline.to_string(),
            closed: Mutex::new(false),
        })
    }

    /// The observer to give the source.
    pub(super) fn observer(self: &Arc<Self>) -> LinkObserver {
        let gauge = self.clone();
        LinkObserver::new(move |event| gauge.on(event))
    }

    fn on(&self, event: LinkEvent) {
        // held while the gauge is set, so a close cannot slip in between
        let closed = self.closed.lock().unwrap_or_else(PoisonError::into_inner);
        if *closed {
            return;
        }
        match event {
            LinkEvent::Up => self.metrics.set_source_connected(&self.pipeline, true),
            LinkEvent::Dropped => {
                self.metrics.set_source_connected(&self.pipeline, false);
                self.metrics.record_source_reconnect(&self.pipeline);
            }
        }
    }

    /// The run ended: not connected, whatever the source says later.
    pub(super) fn close(&self) {
        let mut closed = self.closed.lock().unwrap_or_else(PoisonError::into_inner);
        *closed = true;
        self.metrics.set_source_connected(&self.pipeline, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connected(m: &Metrics) -> Option<String> {
        let text = m.encode().ok()?;
        text.lines()
            .find(|l| l.starts_with("capstan_source_connected{"))
            .map(str::to_string)
    }

    #[test]
    fn follows_the_stream_until_closed() {
        let m = Arc::new(Metrics::new());
        m.runner_started("p");
        let gauge = SourceLinkGauge::new(m.clone(), "p");
        let link = gauge.observer();
        link.notify(LinkEvent::Up);
        assert_eq!(
            connected(&m).as_deref(),
            Some("capstan_source_connected{pipeline=\"p\"} 1")
        );
        link.notify(LinkEvent::Dropped);
        assert_eq!(
            connected(&m).as_deref(),
            Some("capstan_source_connected{pipeline=\"p\"} 0")
        );
        link.notify(LinkEvent::Up);
        gauge.close();
        // the source, torn down after the run, says nothing that counts
        link.notify(LinkEvent::Up);
        link.notify(LinkEvent::Dropped);
        let text = m.encode().unwrap_or_default();
        assert!(
            text.contains("capstan_source_connected{pipeline=\"p\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("capstan_source_reconnects_total{pipeline=\"p\"} 1\n"),
            "{text}"
        );
    }
}
