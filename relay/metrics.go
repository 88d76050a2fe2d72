package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/prometheus/client_golang/prometheus"
)

// scrapeTimeout bounds the queue reads of one scrape.
const scrapeTimeout = 5 * time.Second

// metrics holds the relay's collectors; a nil *metrics records nothing.
type metrics struct {
	claims      prometheus.Counter
	settles     *prometheus.CounterVec
	extensions  *prometheus.CounterVec
	lost        prometheus.Counter
	duration    *prometheus.HistogramVec
	inflight    prometheus.Gauge
	storeErrors *prometheus.CounterVec
	pruned      *prometheus.CounterVec

	destDelivered *prometheus.CounterVec
	destFailures  *prometheus.CounterVec
	destInflight  *prometheus.GaugeVec
}

// newMetrics registers the collectors on reg (nil: no metrics).
func newMetrics(reg prometheus.Registerer, r *Relay) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		claims: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fairrelay_claims_total", Help: "Events claimed by this relay.",
		}),
		settles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairrelay_settles_total",
			Help: "Settled claims by outcome (acked, retry_scheduled, quarantined, stale, expired, error) and reason " +
				"(none for a success; the known failure reasons, else other).",
		}, []string{"outcome", "reason"}),
		extensions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairrelay_lease_extensions_total",
			Help: "Lease extensions by outcome (extended, stale, expired, error).",
		}, []string{"outcome"}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fairrelay_leases_lost_total",
			Help: "Claims whose lease this relay lost; their results are not settled.",
		}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fairrelay_handler_duration_seconds",
			Help:    "Handler run time by result (ok, failure, panic).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18), // 0.5 ms .. about 65 s
		}, []string{"result"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fairrelay_handlers_in_flight", Help: "Handlers running now.",
		}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairrelay_store_errors_total", Help: "Queue calls that failed, by operation.",
		}, []string{"op"}),
		pruned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairrelay_pruned_total",
			Help: "Rows this relay's retention passes deleted (Options.PruneEvery), by kind: events (acked, with their history) and audit.",
		}, []string{"kind"}),
	}
	m.destDelivered = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fairrelay_destination_delivered_total",
		Help: "Events acked, by destination (a registered name, or " + DefaultDestinationLabel + ").",
	}, []string{"destination"})
	m.destFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fairrelay_destination_failures_total",
		Help: "Failed deliveries settled (retry_scheduled or quarantined), by destination.",
	}, []string{"destination"})
	m.destInflight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fairrelay_destination_inflight",
		Help: "Handlers running now, by destination.",
	}, []string{"destination"})
	breakerState := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fairrelay_breaker_state", Help: "The breaker: 0 closed, 1 open, 2 probing.",
	}, func() float64 { return breakerValue(r.br.snapshot().State) })
	breakerOpens := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "fairrelay_breaker_opens_total", Help: "Times the breaker opened (the destination was seen down).",
	}, func() float64 { return float64(r.br.snapshot().Opens) })
	breakerProbes := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "fairrelay_breaker_probes_total", Help: "Probes that claimed an event while the breaker was open: the attempts charged while it is open (a probe time with nothing due is not counted).",
	}, func() float64 { return float64(r.br.snapshot().Probes) })
	// Every series from the first scrape: a rate() over a failure that
	// has not happened yet reads 0, not nothing.
	m.settles.WithLabelValues("acked", reasonNone)
	for _, o := range []string{"retry_scheduled", "quarantined", "stale", "expired", "error"} {
		for _, reason := range reasonLabels {
			m.settles.WithLabelValues(o, reason)
		}
	}
	for _, o := range []string{"stale", "expired", "error"} {
		m.settles.WithLabelValues(o, reasonNone)
	}
	for _, o := range []string{"extended", "stale", "expired", "error"} {
		m.extensions.WithLabelValues(o)
	}
	for _, k := range []string{"ok", "failure", "panic"} {
		m.duration.WithLabelValues(k)
	}
	m.destination(queue.DefaultDestination)
	for _, op := range []string{"policy", "claim", "settle", "settle_claim", "extend", "next_due", "prune", "destinations"} {
		m.storeErrors.WithLabelValues(op)
	}
	for _, k := range []string{"events", "audit"} {
		m.pruned.WithLabelValues(k)
	}
	for _, c := range []prometheus.Collector{m.claims, m.settles, m.extensions, m.lost, m.duration, m.inflight, m.storeErrors, m.pruned,
		breakerState, breakerOpens, breakerProbes, &queueCollector{r: r},
		m.destDelivered, m.destFailures, m.destInflight, &breakerCollector{r: r}} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("relay: register metrics: %w", err)
		}
	}
	return m, nil
}

// reasonNone is the reason label of a success.
const reasonNone = "none"

// reasonOther is the reason label of a reason not in reasonLabels.
const reasonOther = "other"

// reasonLabels are the reason label's values besides none: the reasons
// of HTTP delivery and of the relay itself, and other for any other.
var reasonLabels = []string{
	ReasonConflict, ReasonGap, ReasonUnsupportedDelta, ReasonInvalidBody, ReasonTooLarge,
	ReasonUnauthorized, ReasonForbidden, ReasonNotFound, ReasonRateLimited, ReasonUnavailable,
	ReasonHandler, ReasonPanic, ReasonUnknownDestination, ReasonBadDestination, reasonOther,
}

// reasonLabel bounds a settle reason to the label set: "" is none, a known
// reason is itself, anything else is other.
func reasonLabel(reason string) string {
	switch reason {
	case "":
		return reasonNone
	case ReasonConflict, ReasonGap, ReasonUnsupportedDelta, ReasonInvalidBody, ReasonTooLarge,
		ReasonUnauthorized, ReasonForbidden, ReasonNotFound, ReasonRateLimited, ReasonUnavailable,
		ReasonHandler, ReasonPanic, ReasonUnknownDestination, ReasonBadDestination:
		return reason
	}
	return reasonOther
}

// breakerValue is the fairrelay_breaker_state value of a state.
func breakerValue(state string) float64 {
	switch state {
	case BreakerOpen:
		return 1
	case BreakerProbing:
		return 2
	}
	return 0
}

func (m *metrics) claimed(n int) {
	if m != nil {
		m.claims.Add(float64(n))
	}
}

func (m *metrics) settled(outcome, reason string) {
	if m != nil {
		m.settles.WithLabelValues(outcome, reasonLabel(reason)).Inc()
	}
}

func (m *metrics) extended(outcome string) {
	if m != nil {
		m.extensions.WithLabelValues(outcome).Inc()
	}
}

func (m *metrics) leaseLost() {
	if m != nil {
		m.lost.Inc()
	}
}

func (m *metrics) ran(result string, d time.Duration) {
	if m != nil {
		m.duration.WithLabelValues(result).Observe(d.Seconds())
	}
}

func (m *metrics) running(n int) {
	if m != nil {
		m.inflight.Set(float64(n))
	}
}

func (m *metrics) prunedRows(r queue.PruneResult) {
	if m != nil {
		m.pruned.WithLabelValues("events").Add(float64(r.Events))
		m.pruned.WithLabelValues("audit").Add(float64(r.Audit))
	}
}

// destination starts the series of a destination: the relay knows it
// (registered at its last read, or claimed). Registered names are bounded
// (queue.MaxDestinations), so the label set is too.
func (m *metrics) destination(name string) {
	if m != nil {
		l := DestinationLabel(name)
		m.destDelivered.WithLabelValues(l)
		m.destFailures.WithLabelValues(l)
		m.destInflight.WithLabelValues(l)
	}
}

func (m *metrics) destRunning(name string, n int) {
	if m != nil {
		m.destInflight.WithLabelValues(DestinationLabel(name)).Set(float64(n))
	}
}

func (m *metrics) destSettled(name string, o queue.Outcome) {
	if m == nil {
		return
	}
	switch o {
	case queue.Acked:
		m.destDelivered.WithLabelValues(DestinationLabel(name)).Inc()
	case queue.RetryScheduled, queue.Quarantined:
		m.destFailures.WithLabelValues(DestinationLabel(name)).Inc()
	}
}

// breakerCollector sends fairrelay_breaker_open per destination at scrape
// time.
type breakerCollector struct{ r *Relay }

var descBreakerOpen = prometheus.NewDesc("fairrelay_breaker_open",
	"1 while the destination's breaker is open or probing (its flows are not claimed but for probes), else 0; "+
		"by destination (a registered name, or "+DefaultDestinationLabel+").", []string{"destination"}, nil)

// Describe sends the description.
func (c *breakerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descBreakerOpen }

// Collect sends one series per destination the relay knows.
func (c *breakerCollector) Collect(ch chan<- prometheus.Metric) {
	for name, st := range c.r.DestinationBreakers() {
		v := 0.0
		if st.State != BreakerClosed {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descBreakerOpen, prometheus.GaugeValue, v, DestinationLabel(name))
	}
}

func (m *metrics) storeError(op string) {
	if m != nil {
		m.storeErrors.WithLabelValues(op).Inc()
	}
}

// queueCollector reads the queue at scrape time, so that an idle relay makes
// no queue calls for its gauges.
type queueCollector struct{ r *Relay }

var (
	descBacklog = prometheus.NewDesc("fairrelay_backlog_events",
		"Events not yet acked or quarantined (pending + in flight); needs a StatsQueue.", nil, nil)
	descQuarantined = prometheus.NewDesc("fairrelay_quarantined_events",
		"Events quarantined in the queue; needs a StatsQueue.", nil, nil)
	descPausedFlows = prometheus.NewDesc("fairrelay_paused_flows",
		"Flows an operator has paused (docs/contract.md §7.9): their heads are not dispatchable until resumed; needs a StatsQueue.", nil, nil)
	descOldestWaiting = prometheus.NewDesc("fairrelay_oldest_waiting_age_seconds",
		"How long the oldest event not yet acked has waited since its enqueue, whatever blocks it "+
			"(a backoff, a lease, a quarantined head before it); 0 when none waits; ticks read as milliseconds. Needs a queue.Waiter.", nil, nil)
	descOldestDue = prometheus.NewDesc("fairrelay_oldest_due_age_seconds",
		"How long the earliest dispatchable head has been due (0 when none is due); ticks read as milliseconds. "+
			"Without an OldestDueQueue it is read from NextDue, which may report the queue's clock mark instead of the head's due tick: then it is a lower bound.", nil, nil)
)

// Describe sends the queue gauges' descriptions.
func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descBacklog
	ch <- descQuarantined
	ch <- descPausedFlows
	ch <- descOldestDue
	ch <- descOldestWaiting
}

// Collect reads NextDue (and Stats on a StatsQueue, OldestWaiting on a
// queue.Waiter) and sends the gauges. A failed read leaves its gauge out of
// this scrape.
func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	if sq, ok := c.r.q.(StatsQueue); ok {
		if st, err := sq.Stats(ctx); err == nil {
			ch <- prometheus.MustNewConstMetric(descBacklog, prometheus.GaugeValue, float64(st.Events.Pending+st.Events.Inflight))
			ch <- prometheus.MustNewConstMetric(descQuarantined, prometheus.GaugeValue, float64(st.Quarantined))
			ch <- prometheus.MustNewConstMetric(descPausedFlows, prometheus.GaugeValue, float64(st.PausedFlows))
		}
	}
	now := c.r.src.Now()
	next := c.r.q.NextDue
	if oq, ok := c.r.q.(OldestDueQueue); ok {
		next = func(ctx context.Context) (clock.Tick, bool, error) { return oq.OldestDue(ctx, now) }
	}
	if due, ok, err := next(ctx); err == nil {
		age := 0.0
		if ok && due < now {
			age = float64(now-due) / 1000
		}
		ch <- prometheus.MustNewConstMetric(descOldestDue, prometheus.GaugeValue, age)
	}
	if w, ok := c.r.q.(queue.Waiter); ok {
		if at, ok, err := w.OldestWaiting(ctx); err == nil {
			age := 0.0
			if ok && at < now {
				age = float64(now-at) / 1000
			}
			ch <- prometheus.MustNewConstMetric(descOldestWaiting, prometheus.GaugeValue, age)
		}
	}
}
