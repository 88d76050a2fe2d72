package bench

import (
	"context"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiverstore"
	relayrt "github.com/fairrelay/fairrelay/relay"
)

// OpStats counts the calls of one queue (or receiver) operation: how many,
// how many items they carried and how long they took, call by call.
type OpStats struct {
	Calls int
	Items int
	Took  []time.Duration
}

func (o *OpStats) add(items int, d time.Duration) {
	o.Calls++
	o.Items += items
	o.Took = append(o.Took, d)
}

// Total is the time spent in the calls.
func (o *OpStats) Total() time.Duration {
	var t time.Duration
	for _, d := range o.Took {
		t += d
	}
	return t
}

// probeQueue is a relayrt.Queue that times every call of the queue it wraps.
type probeQueue struct {
	q     relayrt.Queue
	mu    sync.Mutex
	op    map[string]*OpStats
	spans map[string][]span // claim and settle calls, in call order
}

// span is one queue call: when it began and ended, and its items.
type span struct {
	from, to time.Time
	n        int
}

func newProbeQueue(q relayrt.Queue) *probeQueue {
	return &probeQueue{q: q, op: map[string]*OpStats{}, spans: map[string][]span{}}
}

func (p *probeQueue) rec(op string, items int, began time.Time) {
	end := time.Now()
	d := end.Sub(began)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spans[op] = append(p.spans[op], span{began, end, items})
	s := p.op[op]
	if s == nil {
		s = &OpStats{}
		p.op[op] = s
	}
	s.add(items, d)
}

func (p *probeQueue) ClaimBatch(ctx context.Context, now clock.Tick, n int) ([]queuestore.Claim, error) {
	t := time.Now()
	cs, err := p.q.ClaimBatch(ctx, now, n)
	p.rec("claim", len(cs), t)
	return cs, err
}

func (p *probeQueue) SettleBatch(ctx context.Context, items []queuestore.SettleItem, now clock.Tick) ([]queuestore.SettleResult, error) {
	t := time.Now()
	rs, err := p.q.SettleBatch(ctx, items, now)
	p.rec("settle", len(items), t)
	return rs, err
}

// probeSettleClaimer is probeQueue for a queue that is a
// relayrt.SettleClaimer: its SettleClaimBatch calls count as the op
// "settle_claim" (items: the settled ones) and, for the split of empty slot
// time, as claims.
type probeSettleClaimer struct {
	*probeQueue
	sc relayrt.SettleClaimer
}

// opSCClaims counts the claims of the SettleClaimBatch calls (the same
// calls and times as "settle_claim", whose items are the settled ones).
const opSCClaims = "sc.claims"

func (p probeSettleClaimer) SettleClaimBatch(ctx context.Context, items []queuestore.SettleItem, now clock.Tick, n int) ([]queuestore.SettleResult, []queuestore.Claim, error) {
	t := time.Now()
	rs, cs, err := p.sc.SettleClaimBatch(ctx, items, now, n)
	p.rec("settle_claim", len(items), t)
	p.mu.Lock()
	sp := p.spans["settle_claim"]
	last := sp[len(sp)-1]
	p.spans["claim"] = append(p.spans["claim"], span{last.from, last.to, len(cs)})
	s := p.op[opSCClaims]
	if s == nil {
		s = &OpStats{}
		p.op[opSCClaims] = s
	}
	s.add(len(cs), last.to.Sub(last.from))
	p.mu.Unlock()
	return rs, cs, err
}

func (p *probeQueue) ExtendBatch(ctx context.Context, items []queuestore.ExtendItem, now clock.Tick) ([]queuestore.SettleResult, error) {
	t := time.Now()
	rs, err := p.q.ExtendBatch(ctx, items, now)
	p.rec("extend", len(items), t)
	return rs, err
}

func (p *probeQueue) NextDue(ctx context.Context) (clock.Tick, bool, error) {
	t := time.Now()
	due, ok, err := p.q.NextDue(ctx)
	p.rec("next_due", 0, t)
	return due, ok, err
}

func (p *probeQueue) Policy(ctx context.Context) (queuestore.Policy, error) {
	return p.q.Policy(ctx)
}

// ProbeResult is what RuntimeProbe measured over one run of the relay.
type ProbeResult struct {
	Name      string
	Wall      time.Duration // Step, start to return
	Run       time.Duration // of which Run, start to return
	Delivered int
	Ops       map[string]*OpStats // the relay's queue calls by operation
	Receive   OpStats             // the receiver adapter's ReceiveBatch calls
	Handler   OpStats             // handler runs (Items: 1 each)
	Slots     int                 // Concurrency

	// Idle splits the time handler slots stood empty, summed over slots:
	// "before claim" (from the slot's handler end, or the start, to the
	// start of the ClaimBatch that refilled it; of which "behind settle"
	// overlapped a SettleBatch call), "in claim" (that ClaimBatch), and
	// "end" (slots empty from their last handler's end to Run's return).
	Idle map[string]time.Duration
	// Refills is the number of slot refills (claimed events).
	Refills int
}

// Rate is the delivered events per second of wall time.
func (r ProbeResult) Rate() float64 { return float64(r.Delivered) / r.Wall.Seconds() }

// Claimed is the number of events claimed, by ClaimBatch and by
// SettleClaimBatch.
func (r ProbeResult) Claimed() int {
	n := 0
	for _, k := range []string{"claim", opSCClaims} {
		if c := r.Ops[k]; c != nil {
			n += c.Items
		}
	}
	return n
}

// Settled is the number of results settled, by SettleBatch and by
// SettleClaimBatch.
func (r ProbeResult) Settled() int {
	n := 0
	for _, k := range []string{"settle", "settle_claim"} {
		if c := r.Ops[k]; c != nil {
			n += c.Items
		}
	}
	return n
}

// Write prints the result: rate, per-operation calls, items per call, mean
// and median time per call, and the share of slot time spent in handlers.
func (r ProbeResult) Write(w io.Writer) {
	fmt.Fprintf(w, "%s: %d events in %s = %.0f/s (Run took %s of it)\n", r.Name, r.Delivered, r.Wall.Round(time.Millisecond), r.Rate(), r.Run.Round(time.Millisecond))
	names := make([]string, 0, len(r.Ops))
	for k := range r.Ops {
		names = append(names, k)
	}
	sort.Strings(names)
	line := func(name string, s *OpStats) {
		if s.Calls == 0 {
			return
		}
		fmt.Fprintf(w, "  %-9s %6d calls %7.1f items/call  mean %6.2f ms  median %6.2f ms  total %6.0f ms (%4.1f%% of wall)\n",
			name, s.Calls, float64(s.Items)/float64(s.Calls), ms(s.Total())/float64(s.Calls), ms(median(s.Took)), ms(s.Total()), 100*s.Total().Seconds()/r.Wall.Seconds())
	}
	var txs, items int
	for _, k := range names {
		line(k, r.Ops[k])
		if k == "claim" || k == "settle" || k == "extend" || k == "settle_claim" {
			txs += r.Ops[k].Calls
		}
	}
	items = r.Claimed()
	line("receive", &r.Receive)
	line("handler", &r.Handler)
	if txs > 0 {
		fmt.Fprintf(w, "  events per queue transaction: %.2f\n", float64(items)/float64(txs))
	}
	if r.Slots > 0 && r.Wall > 0 {
		fmt.Fprintf(w, "  slot occupancy (handler time ÷ slots × wall): %.2f\n", r.Handler.Total().Seconds()/(float64(r.Slots)*r.Wall.Seconds()))
	}
	if r.Refills > 0 {
		fmt.Fprintf(w, "  empty slot time per refill: before claim %.2f ms (behind settle %.2f ms), in claim %.2f ms; at the end %.0f ms in all\n",
			ms(r.Idle["before claim"])/float64(r.Refills), ms(r.Idle["behind settle"])/float64(r.Refills), ms(r.Idle["in claim"])/float64(r.Refills), ms(r.Idle["end"]))
	}
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// RuntimeProbe sets up the runtime case (kind, concurrency, batch, flows ×
// perFlow) on SQLite files in dir or, when pgURL is not empty, on that
// PostgreSQL server (RuntimePGCase), changes its relay options with tune
// (when not nil), runs one relay for d with every queue call, receive batch
// and handler run timed, and returns the counts. It is the instrument
// behind the runtime rows' analysis (docs/decisions/relay-waves.md), not a
// row itself.
func RuntimeProbe(ctx context.Context, dir, pgURL string, kind RuntimeKind, concurrency, batch, flows, perFlow int, d time.Duration, tune func(*relayrt.Options)) (ProbeResult, error) {
	c := RuntimeCase(kind, concurrency, batch, flows, perFlow, d)
	if pgURL != "" {
		c = RuntimePGCase(pgURL, kind, concurrency, batch, flows, perFlow, d)
	}
	wl, err := c.Setup(ctx, dir)
	if err != nil {
		return ProbeResult{}, err
	}
	w := wl.(*runtimeRun)
	defer w.Close()
	if tune != nil {
		tune(&w.o)
	}
	pq := newProbeQueue(w.queue())
	w.rq = pq
	if sc, ok := w.queue().(relayrt.SettleClaimer); ok {
		w.rq = probeSettleClaimer{pq, sc}
	}
	var hmu sync.Mutex
	var ends []time.Time
	res := ProbeResult{Name: c.Name, Slots: concurrency}
	inner := w.h
	w.h = relayrt.HandlerFunc(func(ctx context.Context, e relayrt.Event) error {
		t := time.Now()
		err := inner.Handle(ctx, e)
		end := time.Now()
		hmu.Lock()
		res.Handler.add(1, end.Sub(t))
		ends = append(ends, end)
		hmu.Unlock()
		return err
	})
	rc := w.rc
	t0 := time.Now()
	n, err := w.Step(ctx)
	res.Wall = time.Since(t0)
	if err != nil {
		return res, err
	}
	res.Delivered = n
	res.Run = w.runTook
	res.Ops = pq.op
	res.Idle, res.Refills = idleSplit(t0, t0.Add(res.Wall), concurrency, ends, pq.spans["claim"], pq.spans["settle"])
	if rc != nil {
		res.Receive = rc.stats()
	}
	return res, nil
}

// TxCost is the median time of one transaction of each kind at one batch
// size, measured by TxCosts.
type TxCost struct {
	Size                            int
	Enqueue, Claim, Settle, Receive time.Duration
}

// TxCosts times, reps times per size and in alternating order of sizes,
// EnqueueBatch, ClaimBatch and SettleBatch on a queue and ReceiveBatch on a
// receiver (both real files in dir, as the runtime cases open them), n
// events each, and returns the medians. The fixed cost of a transaction
// (its commit and fsync) and the cost per event follow from two sizes.
func TxCosts(ctx context.Context, dir string, sizes []int, reps int) ([]TxCost, error) {
	rl, err := openRelay(dir, 0)
	if err != nil {
		return nil, err
	}
	defer rl.Close()
	took := make([][4][]time.Duration, len(sizes))
	n := 0
	for range reps {
		for i, size := range sizes {
			es := make([]queuestore.Event, size)
			for j := range es {
				n++
				es[j] = queuestore.Event{ID: fmt.Sprintf("t%d", n), Flow: flowName(n % 100000), Body: body}
			}
			t := time.Now()
			if _, err := rl.q.EnqueueBatch(ctx, es, now); err != nil {
				return nil, err
			}
			took[i][0] = append(took[i][0], time.Since(t))
			t = time.Now()
			cs, err := rl.q.ClaimBatch(ctx, now, size)
			if err != nil {
				return nil, err
			}
			took[i][1] = append(took[i][1], time.Since(t))
			ms := make([]receiverstore.Message, len(cs))
			items := make([]queuestore.SettleItem, len(cs))
			for j, c := range cs {
				ms[j] = receiverstore.Message{ID: c.EventID, Flow: c.Flow, Seq: c.Seq, Body: c.Body}
				items[j] = queuestore.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: queuestore.Result{OK: true}}
			}
			t = time.Now()
			if _, err := rl.r.ReceiveBatch(ctx, ms); err != nil {
				return nil, err
			}
			took[i][3] = append(took[i][3], time.Since(t))
			t = time.Now()
			if _, err := rl.q.SettleBatch(ctx, items, now); err != nil {
				return nil, err
			}
			took[i][2] = append(took[i][2], time.Since(t))
		}
	}
	out := make([]TxCost, len(sizes))
	for i, size := range sizes {
		out[i] = TxCost{Size: size, Enqueue: median(took[i][0]), Claim: median(took[i][1]), Settle: median(took[i][2]), Receive: median(took[i][3])}
	}
	return out, nil
}

// idleSplit attributes the empty time of slots handler slots between start
// and end: each claimed event refills the slot that has been empty longest
// (slots free up at the handler ends given, and all at start).
func idleSplit(start, end time.Time, slots int, ends []time.Time, claims, settles []span) (map[string]time.Duration, int) {
	sort.Slice(ends, func(i, j int) bool { return ends[i].Before(ends[j]) })
	free := make([]time.Time, 0, slots+len(ends))
	for range slots {
		free = append(free, start)
	}
	out := map[string]time.Duration{}
	refills := 0
	next := 0 // ends[next:] not yet added to free
	overlap := func(a, b time.Time) time.Duration {
		var d time.Duration
		for _, s := range settles {
			lo, hi := s.from, s.to
			if lo.Before(a) {
				lo = a
			}
			if hi.After(b) {
				hi = b
			}
			if hi.After(lo) {
				d += hi.Sub(lo)
			}
		}
		return d
	}
	for _, c := range claims {
		for next < len(ends) && !ends[next].After(c.from) {
			free = append(free, ends[next])
			next++
		}
		for range c.n {
			if len(free) == 0 {
				break
			}
			f := free[0]
			free = free[1:]
			refills++
			if c.from.After(f) {
				out["before claim"] += c.from.Sub(f)
				out["behind settle"] += overlap(f, c.from)
			}
			out["in claim"] += c.to.Sub(c.from)
		}
	}
	free = append(free, ends[next:]...)
	for _, f := range free {
		if end.After(f) {
			out["end"] += end.Sub(f)
		}
	}
	return out, refills
}
