package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fairrelay/fairrelay/clock"
)

// cmdPolicy is `policy` (show) and `policy set` (change, audited).
func cmdPolicy(e *env, args []string) (err error) {
	if len(args) > 0 && args[0] == "set" {
		return cmdPolicySet(e, args[1:])
	}
	f := newFlags(e, "policy", "policy [--json]\n       relayctl policy set [flags] --reason TEXT",
		"Policy prints the queue's policy, recorded in queue.db when the queue was created\n"+
			"(docs/contract.md §7.1, §7.8): the lease a claim gets, the attempts of a round, the\n"+
			"waits after a failed attempt (an explicit schedule, or a base doubling up to a cap),\n"+
			"whether they are jittered, the longest wait a receiver's Retry-After may ask for, and\n"+
			"the claim's flow order. Every process that opens the queue uses it. On a queue run in\n"+
			"real time the spans are durations (ticks are milliseconds), on a logical one tick\n"+
			"counts; --json prints ticks. 'relayctl policy set -h' says how to change it.").
		withQueue().withJSON()
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unknown subcommand %q: want 'policy' or 'policy set'", pos[0])
	}
	q, err := e.readQueue()
	if err != nil {
		return err
	}
	defer closeWith(q, &err)
	p, err := q.Policy(e.ctx)
	if err != nil {
		return fmt.Errorf("read the policy: %w", err)
	}
	st, err := q.Stats(e.ctx)
	if err != nil {
		return fmt.Errorf("read the clock mark: %w", err)
	}
	wall := e.clock.wallAt(clock.Tick(st.ClockMark))
	if f.json {
		return writeJSON(e.stdout, p.full(wall))
	}
	return printPolicy(e, p, wall)
}

// printPolicy writes p as an aligned list, with the waits it implies; wall
// shows its spans as durations (a queue run in real time), else as ticks.
func printPolicy(e *env, p policyRow, wall bool) error {
	sp := spanText(wall)
	t := &table{tw: tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)}
	t.row("lease", sp(p.Lease))
	if len(p.Schedule) > 0 {
		t.row("schedule", joinSpans(p.Schedule, sp))
		t.row("max attempts", fmt.Sprintf("%d (the schedule's %d waits plus one)", p.MaxAttempts, len(p.Schedule)))
		t.row("backoff base", sp(p.BackoffBase)+" (not used: the schedule decides)")
		t.row("backoff cap", sp(p.BackoffCap)+" (not used: the schedule decides)")
	} else {
		t.row("schedule", "none (base doubling up to the cap)")
		t.row("max attempts", itoa(int64(p.MaxAttempts)))
		t.row("backoff base", sp(p.BackoffBase))
		t.row("backoff cap", sp(p.BackoffCap))
	}
	t.row("jitter", onOff(p.Jitter))
	if p.RetryAfterCap > 0 {
		t.row("retry-after cap", sp(p.RetryAfterCap))
	} else {
		t.row("retry-after cap", sp(int64(p.policy().RetryAfterLimit()))+" (the longest wait)")
	}
	t.row("fairness", p.Fairness)
	t.row("retention", retentionText(p.Retention, sp))
	t.row("retry waits", retryWaits(p, sp))
	return t.flush()
}

// spanText shows a policy's span (ticks): as a Go duration when wall (ticks
// are milliseconds), else as a tick count.
func spanText(wall bool) func(int64) string {
	if wall {
		return func(n int64) string { return shortDuration(time.Duration(n) * time.Millisecond) }
	}
	return itoa
}

func joinSpans(ns []int64, sp func(int64) string) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = sp(n)
	}
	return strings.Join(s, ", ")
}

// retryWaits says how long a failed event waits before each retry of a
// round, and when the round ends: "2, 4; failure 3 quarantines".
func retryWaits(p policyRow, sp func(int64) string) string {
	waits := p.waits()
	end := fmt.Sprintf("failure %d quarantines", p.MaxAttempts)
	if len(waits) == 0 {
		return "none; " + end
	}
	s := joinSpans(waits, sp)
	if p.Jitter {
		s = "up to " + s + " (jittered)"
	}
	return s + "; " + end
}

// retentionText shows a retention window: "forever" for 0.
func retentionText(n int64, sp func(int64) string) string {
	if n == 0 {
		return "forever"
	}
	return sp(n)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// onOffFlag is --jitter on|off.
type onOffFlag struct{ v *bool }

// String is "" until set to on, so that the help shows no default: a
// flag left out keeps the recorded value.
func (f onOffFlag) String() string {
	if f.v == nil || !*f.v {
		return ""
	}
	return onOff(*f.v)
}

func (f onOffFlag) Set(s string) error {
	switch s {
	case "on":
		*f.v = true
	case "off":
		*f.v = false
	default:
		return fmt.Errorf("want on or off, got %q", s)
	}
	return nil
}

// fairnessFlag is --fairness min_served|rotation (docs/contract.md §7.6).
type fairnessFlag struct{ v *string }

// String is "" until set, so that the help shows no default: a flag left
// out keeps the recorded order.
func (f fairnessFlag) String() string {
	if f.v == nil {
		return ""
	}
	return *f.v
}

func (f fairnessFlag) Set(s string) error {
	switch s {
	case fairMinServed, fairRotation:
		*f.v = s
		return nil
	}
	return fmt.Errorf("want %s or %s, got %q", fairMinServed, fairRotation, s)
}

// The claim orders `policy set --fairness` accepts, as the stores name them.
const (
	fairMinServed = "min_served"
	fairRotation  = "rotation"
)

// spanArg is the value of a policy flag that says a span of time (--lease,
// --backoff-base, --backoff-cap, --retry-after-cap, each wait of
// --schedule). Its form says its unit (docs/decisions/relayctl-durations.md):
// a Go duration ("30s", "250ms") for a queue run in real time, whose ticks
// are milliseconds; a plain integer, a tick count, for a logical-time queue,
// whose ticks have no unit. 0 is 0 in both.
type spanArg struct {
	text  string
	dur   bool          // a Go duration (d); otherwise a tick count (ticks)
	d     time.Duration // when dur
	ticks int64         // when !dur
}

// spanForm is what a policy span flag's refusal says it wants.
const spanForm = durationForm + " (on a logical-time queue, a tick count such as 5)"

func parseSpan(s string) (spanArg, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return spanArg{text: s, ticks: n}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return spanArg{}, errors.New(spanForm)
	}
	return spanArg{text: s, dur: true, d: d}, nil
}

// ticks is the span in the queue's ticks: wall says the queue runs in real
// time (milliseconds). A span whose form does not fit the queue is a usage
// error that names the flag and the form it wants.
func (a spanArg) ticksFor(name string, wall bool) (int64, error) {
	switch {
	case !a.dur && a.ticks == 0:
		return 0, nil
	case wall && !a.dur:
		return 0, usagef("--%s %s: %s; the queue runs in real time (its ticks are milliseconds)", name, a.text, durationForm)
	case !wall && a.dur:
		return 0, usagef("--%s %s: want a tick count such as 5; the queue runs in logical time, which counts ticks, not seconds (--clock wall to put it in real time)", name, a.text)
	case !wall:
		return a.ticks, nil
	case a.d%time.Millisecond != 0:
		return 0, usagef("--%s %s: want whole milliseconds (a tick of a queue run in real time is a millisecond)", name, a.text)
	}
	return int64(a.d / time.Millisecond), nil
}

// spanValue is a flag holding one spanArg.
type spanValue struct{ a *spanArg }

// String is "" so that the help shows no default: a flag left out keeps
// the recorded value.
func (v spanValue) String() string {
	if v.a == nil {
		return ""
	}
	return v.a.text
}

func (v spanValue) Set(s string) error {
	a, err := parseSpan(s)
	if err != nil {
		return err
	}
	*v.a = a
	return nil
}

// scheduleValue is --schedule: a comma-separated list of spans, or "none"
// (no schedule: the base and cap formula).
type scheduleValue struct{ waits *[]spanArg }

func (v scheduleValue) String() string {
	if v.waits == nil {
		return ""
	}
	s := make([]string, len(*v.waits))
	for i, a := range *v.waits {
		s[i] = a.text
	}
	return strings.Join(s, ",")
}

func (v scheduleValue) Set(s string) error {
	*v.waits = nil
	if s == "none" {
		return nil
	}
	for _, part := range strings.Split(s, ",") {
		a, err := parseSpan(strings.TrimSpace(part))
		if err != nil {
			return fmt.Errorf("wait %q: %w; several waits are separated by commas (5s,30s,2m), none removes the schedule", part, err)
		}
		*v.waits = append(*v.waits, a)
	}
	return nil
}

// countFlag is --max-attempts: an integer.
type countFlag struct{ v *int }

// String is "" for 0, so that the help shows no default: a flag left out
// keeps the recorded value.
func (f countFlag) String() string {
	if f.v == nil || *f.v == 0 {
		return ""
	}
	return strconv.Itoa(*f.v)
}

func (f countFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("not an integer: %q", s)
	}
	*f.v = n
	return nil
}

// policySpans are the span flags of `policy set`, in the order they are
// applied.
var policySpans = []string{"lease", "backoff-base", "backoff-cap", "retry-after-cap", "retention"}

func cmdPolicySet(e *env, args []string) (err error) {
	f := newFlags(e, "policy set",
		"policy set [--lease D] [--max-attempts N] [--backoff-base D] [--backoff-cap D]\n"+
			"                   [--schedule D,D,...|none] [--retry-after-cap D] [--retention D] [--jitter on|off]\n"+
			"                   [--fairness min_served|rotation] --reason TEXT [--now TICK]",
		"Policy set changes the queue's recorded policy (docs/contract.md §7.1, §7.8) and\n"+
			"writes an audit row with the old and new policy and the reason, in one transaction.\n"+
			"A flag left out keeps its recorded value. The new policy applies to every\n"+
			"claim and settle after it, in every process; leases already handed out and\n"+
			"retries already scheduled keep their ticks.\n\n"+
			"A span D is a Go duration (30s, 250ms, 2m, 4h) on a queue run in real time, and a\n"+
			"tick count (5) on a logical-time queue, which has no unit of time; the other form\n"+
			"is refused. --schedule gives the waits after each failed attempt of a round\n"+
			"(5s,30s,2m,10m,1h,4h) and sets --max-attempts to their number plus one; none\n"+
			"goes back to the base doubling up to the cap. --retry-after-cap is the longest\n"+
			"wait a receiver's Retry-After may ask for (0: the policy's longest wait).\n"+
			"--retention is how long acked events (from their ack) and audit rows are kept\n"+
			"before 'relayctl prune' or a relay's --prune-every deletes them\n"+
			"(docs/contract.md §7.9); 0, the default, keeps everything forever.\n"+
			"--fairness switches the claim's flow order (docs/contract.md §7.6): to rotation,\n"+
			"every flow with a head joins the rotation's tail in flow name order, weights as\n"+
			"recorded.").
		withQueue().withNow()
	var (
		spans    = make(map[string]*spanArg, len(policySpans))
		schedule []spanArg
		next     policyRow
		tries    int
	)
	help := map[string]string{
		"lease":           "how long a claim holds its event (`D` > 0)",
		"backoff-base":    "wait after the first failed attempt, doubled after each next one (`D` > 0)",
		"backoff-cap":     "the longest wait of the doubling (`D` >= the base)",
		"retry-after-cap": "the longest wait a failure's Retry-After may ask for (`D`; 0: the longest wait)",
		"retention":       "how long acked events and audit rows are kept before 'relayctl prune' may delete them (`D`; 0: forever)",
	}
	for _, name := range policySpans {
		spans[name] = new(spanArg)
		f.Var(spanValue{spans[name]}, name, help[name])
	}
	f.Var(countFlag{&tries}, "max-attempts", "claims in one round of an event before it is quarantined (`N`, 1..100)")
	f.Var(scheduleValue{&schedule}, "schedule", "the waits after each failed attempt: `D,D,...` (e.g. 5s,30s,2m,10m,1h,4h), or none")
	f.Var(onOffFlag{&next.Jitter}, "jitter", "deterministic full jitter of each wait: `on|off`")
	f.Var(fairnessFlag{&next.Fairness}, "fairness", "the claim's flow order: `min_served|rotation`")
	reason := f.String("reason", "", "why the policy changes (required; kept in the audit)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	changes := 0
	for _, name := range append([]string{"max-attempts", "schedule", "jitter", "fairness"}, policySpans...) {
		if f.isSet(name) {
			changes++
		}
	}
	switch {
	case len(pos) > 0:
		return usagef("unexpected argument %q", pos[0])
	case changes == 0:
		return usagef("nothing to change: give at least one of --lease, --max-attempts, --backoff-base, --backoff-cap, --schedule, --retry-after-cap, --retention, --jitter, --fairness")
	case !f.isSet("reason"):
		return usagef("--reason is required: say why the policy changes (it is kept in the audit)")
	}
	q, err := e.openQueue(false)
	if err != nil {
		return err
	}
	defer closeWith(q, &err)
	now, wall, err := currentTime(e.ctx, q, f.now)
	if err != nil {
		return err
	}
	// Spans in the queue's ticks: a form that does not fit the queue's
	// clock is a usage error, and nothing is written.
	ticks := make(map[string]int64, len(spans))
	for _, name := range policySpans {
		if f.isSet(name) {
			if ticks[name], err = spans[name].ticksFor(name, wall); err != nil {
				return err
			}
		}
	}
	var waits []int64
	for _, w := range schedule {
		n, err := w.ticksFor("schedule", wall)
		if err != nil {
			return err
		}
		waits = append(waits, n)
	}
	old, err := q.Policy(e.ctx)
	if err != nil {
		return fmt.Errorf("read the policy: %w", err)
	}
	p := old
	p.Schedule = slices.Clone(old.Schedule)
	if f.isSet("lease") {
		p.Lease = ticks["lease"]
	}
	if f.isSet("backoff-base") {
		p.BackoffBase = ticks["backoff-base"]
	}
	if f.isSet("backoff-cap") {
		p.BackoffCap = ticks["backoff-cap"]
	}
	if f.isSet("retry-after-cap") {
		p.RetryAfterCap = ticks["retry-after-cap"]
	}
	if f.isSet("retention") {
		p.Retention = ticks["retention"]
	}
	if f.isSet("schedule") {
		p.Schedule = waits
		if len(waits) > 0 {
			p.MaxAttempts = len(waits) + 1
		}
	}
	if f.isSet("max-attempts") {
		p.MaxAttempts = tries
	}
	if f.isSet("jitter") {
		p.Jitter = next.Jitter
	}
	if f.isSet("fairness") {
		p.Fairness = next.Fairness
	}
	if err := q.SetPolicy(e.ctx, p, *reason, now); err != nil {
		return explainPolicy(e, q, now, err)
	}
	fmt.Fprintf(e.stdout, "policy changed at %s: %s; reason kept in the audit\n", e.when(now), policyDiff(old, p, wall))
	return printPolicy(e, p, wall)
}

// policyDiff lists what changed: "lease 5 -> 30, jitter off -> on", or
// "no value changed"; wall shows spans as durations.
func policyDiff(a, b policyRow, wall bool) string {
	sp := spanText(wall)
	var d []string
	add := func(name, x, y string) {
		if x != y {
			d = append(d, name+" "+x+" -> "+y)
		}
	}
	sched := func(ns []int64) string {
		if len(ns) == 0 {
			return "none"
		}
		return joinSpans(ns, sp)
	}
	add("lease", sp(a.Lease), sp(b.Lease))
	add("max attempts", itoa(int64(a.MaxAttempts)), itoa(int64(b.MaxAttempts)))
	add("backoff base", sp(a.BackoffBase), sp(b.BackoffBase))
	add("backoff cap", sp(a.BackoffCap), sp(b.BackoffCap))
	add("schedule", sched(a.Schedule), sched(b.Schedule))
	add("retry-after cap", sp(a.RetryAfterCap), sp(b.RetryAfterCap))
	add("retention", retentionText(a.Retention, sp), retentionText(b.Retention, sp))
	add("jitter", onOff(a.Jitter), onOff(b.Jitter))
	add("fairness", a.Fairness, b.Fairness)
	if len(d) == 0 {
		return "no value changed"
	}
	return strings.Join(d, ", ")
}

// explainPolicy turns a refused policy change into plain words.
func explainPolicy(e *env, q *queueDB, now clock.Tick, err error) error {
	if perr := partway(q, err); perr != nil {
		return perr
	}
	switch kindOf(err) {
	case kindEmptyReason:
		return errors.New("the reason is empty: say why the policy changes (it is kept in the audit); nothing changed")
	case kindTimeRegression:
		return timeRegression(e, q, now)
	case kindInvalid:
		return fmt.Errorf("policy refused, nothing changed: %w", err)
	}
	return fmt.Errorf("set policy: %w", err)
}
