package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/fairrelay/fairrelay/clock"
)

// cmdPolicy is `policy` (show) and `policy set` (change, audited).
func cmdPolicy(e *env, args []string) error {
	if len(args) > 0 && args[0] == "set" {
		return cmdPolicySet(e, args[1:])
	}
	f := newFlags(e, "policy", "policy [--json]\n       relayctl policy set [flags] --reason TEXT",
		"Policy prints the queue's policy, recorded in queue.db when the queue was created\n"+
			"(docs/contract.md §7.1): the lease a claim gets, the attempts of a round, the\n"+
			"backoff after a failed attempt (base, doubling, capped) and whether it is\n"+
			"jittered. Every process that opens the queue uses it. 'relayctl policy set -h'\n"+
			"says how to change it.").
		withQueue().withJSON()
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unknown subcommand %q: want 'policy' or 'policy set'", pos[0])
	}
	q, err := e.openQueue(false)
	if err != nil {
		return err
	}
	defer closeWith(q, &err)
	p, err := q.Policy(e.ctx)
	if err != nil {
		return fmt.Errorf("read the policy: %w", err)
	}
	if f.json {
		return writeJSON(e.stdout, p)
	}
	return printPolicy(e, p)
}

// printPolicy writes p as an aligned list, with the waits it implies.
func printPolicy(e *env, p policyRow) error {
	t := &table{tw: tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)}
	t.row("lease", itoa(p.Lease))
	t.row("max attempts", itoa(int64(p.MaxAttempts)))
	t.row("backoff base", itoa(p.BackoffBase))
	t.row("backoff cap", itoa(p.BackoffCap))
	t.row("jitter", onOff(p.Jitter))
	t.row("fairness", p.Fairness)
	t.row("retry waits", retryWaits(p))
	return t.flush()
}

// retryWaits says how long a failed event waits before each retry of a
// round, and when the round ends: "2, 4; the 3rd failure quarantines".
func retryWaits(p policyRow) string {
	var waits []string
	d := p.BackoffBase
	for k := 1; k < p.MaxAttempts; k++ {
		waits = append(waits, itoa(d))
		if d > p.BackoffCap/2 {
			d = p.BackoffCap
		} else {
			d = min(d*2, p.BackoffCap)
		}
	}
	end := fmt.Sprintf("failure %d quarantines", p.MaxAttempts)
	if len(waits) == 0 {
		return "none; " + end
	}
	s := strings.Join(waits, ", ")
	if p.Jitter {
		s = "up to " + s + " (jittered)"
	}
	return s + "; " + end
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

// int64Flag is a flag holding an int64 (the policy's ticks).
type int64Flag struct{ v *int64 }

// String is "" for 0, so that the help shows no default: a flag left out
// keeps the recorded value.
func (f int64Flag) String() string {
	if f.v == nil || *f.v == 0 {
		return ""
	}
	return strconv.FormatInt(*f.v, 10)
}

func (f int64Flag) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("not an integer: %q", s)
	}
	*f.v = n
	return nil
}

func cmdPolicySet(e *env, args []string) (err error) {
	f := newFlags(e, "policy set",
		"policy set [--lease N] [--max-attempts N] [--backoff-base N] [--backoff-cap N]\n"+
			"                   [--jitter on|off] [--fairness min_served|rotation]\n"+
			"                   --reason TEXT [--now TICK]",
		"Policy set changes the queue's recorded policy (docs/contract.md §7.1) and writes\n"+
			"an audit row with the old and new policy and the reason, in one transaction.\n"+
			"A flag left out keeps its recorded value. The new policy applies to every\n"+
			"claim and settle after it, in every process; leases already handed out and\n"+
			"retries already scheduled keep their ticks. --fairness switches the claim's\n"+
			"flow order (docs/contract.md §7.6): to rotation, every flow with a head\n"+
			"joins the rotation's tail in flow name order, weights as recorded.").
		withQueue().withNow()
	var (
		next   policyRow
		jitter bool
		tries  int64
	)
	f.Var(int64Flag{&next.Lease}, "lease", "ticks a claim holds its event (`N` > 0)")
	f.Var(int64Flag{&tries}, "max-attempts", "claims in one round of an event before it is quarantined (`N`, 1..100)")
	f.Var(int64Flag{&next.BackoffBase}, "backoff-base", "wait after the first failed attempt, doubled after each next one (`N` > 0)")
	f.Var(int64Flag{&next.BackoffCap}, "backoff-cap", "the longest wait (`N` >= the base)")
	f.Var(onOffFlag{&jitter}, "jitter", "deterministic full jitter of each wait: `on|off`")
	f.Var(fairnessFlag{&next.Fairness}, "fairness", "the claim's flow order: `min_served|rotation`")
	reason := f.String("reason", "", "why the policy changes (required; kept in the audit)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	changes := 0
	for _, name := range []string{"lease", "max-attempts", "backoff-base", "backoff-cap", "jitter", "fairness"} {
		if f.isSet(name) {
			changes++
		}
	}
	switch {
	case len(pos) > 0:
		return usagef("unexpected argument %q", pos[0])
	case changes == 0:
		return usagef("nothing to change: give at least one of --lease, --max-attempts, --backoff-base, --backoff-cap, --jitter, --fairness")
	case !f.isSet("reason"):
		return usagef("--reason is required: say why the policy changes (it is kept in the audit)")
	}
	q, err := e.openQueue(false)
	if err != nil {
		return err
	}
	defer closeWith(q, &err)
	now, err := currentTick(e.ctx, q, f.now)
	if err != nil {
		return err
	}
	old, err := q.Policy(e.ctx)
	if err != nil {
		return fmt.Errorf("read the policy: %w", err)
	}
	p := old
	if f.isSet("lease") {
		p.Lease = next.Lease
	}
	if f.isSet("max-attempts") {
		p.MaxAttempts = int(tries)
	}
	if f.isSet("backoff-base") {
		p.BackoffBase = next.BackoffBase
	}
	if f.isSet("backoff-cap") {
		p.BackoffCap = next.BackoffCap
	}
	if f.isSet("jitter") {
		p.Jitter = jitter
	}
	if f.isSet("fairness") {
		p.Fairness = next.Fairness
	}
	if err := q.SetPolicy(e.ctx, p, *reason, now); err != nil {
		return explainPolicy(e, q, now, err)
	}
	fmt.Fprintf(e.stdout, "policy changed at %s: %s; reason kept in the audit\n", e.when(now), policyDiff(old, p))
	return printPolicy(e, p)
}

// policyDiff lists what changed: "lease 5 -> 30, jitter off -> on", or
// "no value changed".
func policyDiff(a, b policyRow) string {
	var d []string
	add := func(name, x, y string) {
		if x != y {
			d = append(d, name+" "+x+" -> "+y)
		}
	}
	add("lease", itoa(a.Lease), itoa(b.Lease))
	add("max attempts", itoa(int64(a.MaxAttempts)), itoa(int64(b.MaxAttempts)))
	add("backoff base", itoa(a.BackoffBase), itoa(b.BackoffBase))
	add("backoff cap", itoa(a.BackoffCap), itoa(b.BackoffCap))
	add("jitter", onOff(a.Jitter), onOff(b.Jitter))
	add("fairness", a.Fairness, b.Fairness)
	if len(d) == 0 {
		return "no value changed"
	}
	return strings.Join(d, ", ")
}

// explainPolicy turns a refused policy change into plain words.
func explainPolicy(e *env, q *queueDB, now clock.Tick, err error) error {
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
