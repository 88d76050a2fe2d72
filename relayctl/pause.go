package main

import (
	"errors"
	"fmt"
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
	name := "flows " + verb
	f := newFlags(e, name, name+" FLOW --reason TEXT [--now TICK]", about).withQueue().withNow()
	reason := f.String("reason", "", "why the flow is "+verb+"d (required; kept in the audit)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 1:
		return usagef("want one FLOW, got %d arguments", len(pos))
	case !f.isSet("reason"):
		return usagef("--reason is required: say why the flow is %sd (it is kept in the audit)", verb)
	}
	flow := pos[0]
	q, err := e.openQueue(false)
	if err != nil {
		return err
	}
	defer closeWith(q, &err)
	now, err := currentTick(e.ctx, q, f.now)
	if err != nil {
		return err
	}
	if verb == "pause" {
		err = q.PauseFlow(e.ctx, flow, *reason, now)
	} else {
		err = q.ResumeFlow(e.ctx, flow, *reason, now)
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
