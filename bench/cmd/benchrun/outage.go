package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log"
	"path/filepath"
	"time"

	"github.com/fairrelay/fairrelay/bench"
)

// outageOnly runs only the outage rows (for working on them).
var outageOnly = flag.Bool("outage-only", false, "measure only the outage rows: the relay runtime through a 10 s outage of its HTTP destination")

// The outage case: 1000 flows × 20 events, a tenth delivered, then the
// destination refuses connections for outageDown.
const (
	outageFlows   = 1000
	outagePerFlow = 20
	outageDown    = 10 * time.Second
)

// measureOutage runs the outage rounds (3, or 1 in quick mode).
func measureOutage(ctx context.Context, dir string, cfg config) ([]bench.OutageResult, error) {
	rounds := 3
	if cfg.name == "quick" {
		rounds = 1
	}
	var out []bench.OutageResult
	for r := range rounds {
		res, err := bench.RuntimeOutage(ctx, filepath.Join(dir, fmt.Sprintf("outage-%d", r)), outageFlows, outagePerFlow, outageDown)
		if err != nil {
			return nil, fmt.Errorf("outage round %d: %w", r+1, err)
		}
		log.Printf("round %d outage: %.0f events/s after the return (first after %s), %d attempts charged, %d probes",
			r+1, res.Rate(), res.FirstAfter.Round(time.Millisecond), res.Charged, res.Probes)
		out = append(out, res)
	}
	return out, nil
}

// outageRows are the outage case's rows.
func outageRows(rs []bench.OutageResult) []bench.Row {
	var rate, first, charged, quarantined []float64
	for _, r := range rs {
		rate = append(rate, r.Rate())
		first = append(first, float64(r.FirstAfter)/float64(time.Millisecond))
		charged = append(charged, float64(r.Charged))
		quarantined = append(quarantined, float64(r.Quarantined))
	}
	what := fmt.Sprintf("relay runtime over HTTP, %s outage of the destination (%d flows × %d events, concurrency 16)", outageDown, outageFlows, outagePerFlow)
	q := bench.Summarize(quarantined)
	return []bench.Row{
		{What: what + ": events delivered per second after it returns (its next probe included)", Value: bench.Summarize(rate), Unit: "events/s"},
		{What: what + ": first delivery after it returns", Value: bench.Summarize(first), Unit: "ms"},
		{What: what + ": attempts charged during the outage (in flight when it began, the breaker's threshold, probes)", Value: bench.Summarize(charged), Unit: "count",
			Target: "≤ opens × (16 + 5) + probes", Met: bench.AtMost(overCharge(rs), 0)},
		{What: what + ": events quarantined", Value: q, Unit: "count", Target: "0", Met: bench.AtMost(q.Max, 0)},
	}
}

// overCharge is the most attempts any round charged beyond its bound:
// for each opening of the breaker the claims in flight (16) and its
// threshold (5), then one per probe.
func overCharge(rs []bench.OutageResult) float64 {
	var worst int64
	for _, r := range rs {
		worst = max(worst, r.Charged-(r.Opens*(16+5)+r.Probes))
	}
	return float64(worst)
}

// runOutageOnly measures and prints only the outage rows.
func runOutageOnly(ctx context.Context, dir string, cfg config) ([]byte, error) {
	rs, err := measureOutage(ctx, dir, cfg)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := bench.WriteTable(&b, outageRows(rs)); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
