package main

import (
	"errors"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
)

// cmdPause is `flows pause FLOW --reason TEXT` and `flows resume FLOW
// --reason TEXT` (docs/contract.md §7.9): verb is "pause" or "resume".
func cmdPause(e *env, verb string, args []string) (err error) {
	about := "Pause stops claims of one flow: its head is not handed to any relay until the\n" +
		"flow is resumed. A claim already in flight settles or expires as usual (an\n" +
		"expired one is not claimed again while paused); enqueues into the flow go on,\n" +
		"and its served count, weight and place in the rotation are kept. Every other\n" +
		"flow is untouched. The reason goes into the audit in the same transaction."
	if verb == "resume" {
		about = "Resume lets a paused flow's head be claimed again, from the next claim on. Under\n" +
			"the rotation policy the flow rejoins the rotation as a flow that returns with a\n" +
			"backlog does. The reason goes into the audit in the same transaction."
	}
	flow, reason, q, now, err := pauseArgs(e, "flows "+verb, "FLOW", "flow", verb, about, args)
	if err != nil {
		return err
	}
	defer closeWith(q, &err)
	if verb == "pause" {
		err = q.PauseFlow(e.ctx, flow, reason, now)
	} else {
		err = q.ResumeFlow(e.ctx, flow, reason, now)
	}
	if err != nil {
		switch kindOf(err) {
		case kindNotFound:
			return fmt.Errorf("flow %q not found (run 'relayctl flows' for the list); nothing changed", flow)
		case kindFlowPaused:
			return fmt.Errorf("flow %q is already paused%s; nothing changed", flow, pauseReason(e, q, flow))
		case kindFlowNotPaused:
			return fmt.Errorf("flow %q is not paused; nothing changed", flow)
		case kindEmptyReason:
			return fmt.Errorf("the reason is empty: say why the flow is %sd (it is kept in the audit); nothing changed", verb)
		case kindInvalid:
			return fmt.Errorf("refused, nothing changed: %w", err)
		case kindTimeRegression:
			return timeRegression(e, q, now)
		}
		if errors.Is(err, errNoCapability) {
			return err
		}
		return fmt.Errorf("%s flow %s: %w", verb, flow, err)
	}
	if verb == "pause" {
		fmt.Fprintf(e.stdout, "flow %s paused at %s: no claim picks it until 'relayctl flows resume %s --reason ...'; reason kept in the audit\n",
			flow, e.when(now), flow)
	} else {
		fmt.Fprintf(e.stdout, "flow %s resumed at %s: its head can be claimed again; reason kept in the audit\n", flow, e.when(now))
	}
	return nil
}

// pauseReason is ` (reason: "...")` for a paused flow, read back for a
// refusal's message; "" when it cannot be read.
func pauseReason(e *env, q *queueDB, flow string) string {
	rows, err := q.Flows(e.ctx)
	if err != nil {
		return ""
	}
	for _, r := range rows {
		if r.Flow == flow && r.Paused {
			return fmt.Sprintf(" (reason: %q)", r.PauseReason)
		}
	}
	return ""
}

// pauseArgs reads the arguments of a pause or resume command (name, such as
// "flows pause") of one target (its placeholder, such as FLOW, and its noun):
// the target's name and the required --reason; then it opens the queue for
// the write, which the caller closes, and reads the write's tick.
func pauseArgs(e *env, name, placeholder, noun, verb, about string, args []string) (target, reason string, q *queueDB, now clock.Tick, err error) {
	f := newFlags(e, name, name+" "+placeholder+" --reason TEXT [--now TICK]", about).withQueue().withNow()
	r := f.String("reason", "", "why the "+noun+" is "+verb+"d (required; kept in the audit)")
	pos, err := f.parse(args)
	if err != nil {
		return "", "", nil, 0, err
	}
	switch {
	case len(pos) != 1:
		return "", "", nil, 0, usagef("want one %s, got %d arguments", placeholder, len(pos))
	case !f.isSet("reason"):
		return "", "", nil, 0, usagef("--reason is required: say why the %s is %sd (it is kept in the audit)", noun, verb)
	}
	if q, err = e.openQueue(false); err != nil {
		return "", "", nil, 0, err
	}
	if now, err = currentTick(e.ctx, q, f.now); err != nil {
		closeWith(q, &err)
		return "", "", nil, 0, err
	}
	return pos[0], *r, q, now, nil
}
