package experiment

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"
)

// grace is how long the runner waits, after the watchdog fired, for a
// scenario to notice its cancelled context before it abandons it.
const grace = 5 * time.Second

// Run runs one scenario on SQLite in dir, a fresh empty folder that will
// hold its queue.db and receiver.db, under the scenario's watchdog. When the
// scenario is done (and every child process it started has exited) Run
// closes its stores, runs PRAGMA integrity_check on both files and takes
// both stores' full snapshots. The result's verdict is the conjunction of
// all checks.
func Run(ctx context.Context, s Scenario, dir string) Result {
	return run(ctx, SQLite(), s, dir, s.Watchdog())
}

// RunOn runs one scenario as [Run] does, with its stores on backend b. On
// PostgreSQL dir still holds the scenario's start line and any other
// file; the stores are schemas of their own, dropped when the scenario is
// done, and the integrity check is the backend's (see [Backend]).
func RunOn(ctx context.Context, b Backend, s Scenario, dir string) Result {
	return run(ctx, b, s, dir, s.Watchdog())
}

func run(ctx context.Context, b Backend, s Scenario, dir string, limit time.Duration) Result {
	start := time.Now()
	res := Result{Name: s.Name, Clause: s.Clause}
	lab := &Lab{Dir: dir, backend: b, name: s.Name}
	if pg, ok := b.(postgresBackend); ok {
		// Fixed before the scenario starts, so that children started
		// from several goroutines only read it.
		lab.key = pg.labKey(s.Name)
	}

	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("panic: %v\n%s", p, debug.Stack())
			}
		}()
		done <- s.Run(wctx, lab)
	}()

	var err error
	hung := false
	select {
	case err = <-done:
	case <-wctx.Done():
		hung = true
		select {
		case err = <-done: // it noticed the cancellation
		case <-time.After(grace):
			// Abandoned: the scenario still holds its Lab, so nothing of it
			// can be read without a data race.
			res.Checks = []Check{{Name: "watchdog", Detail: fmt.Sprintf("stopped a hang after %s; the scenario did not return", limit)}}
			res.Elapsed = time.Since(start)
			return res
		}
	}
	if hung {
		lab.Check("watchdog", false, "stopped a hang after %s", limit)
	}
	if err != nil {
		lab.Check("scenario ran to its end", false, "error: %v", err)
	}
	if err := lab.closeAll(); err != nil {
		lab.Check("stores closed", false, "error: %v", err)
	}
	for _, file := range []string{QueueFile, ReceiverFile} {
		got, err := b.integrity(ctx, lab, file)
		if err != nil {
			lab.Check(file+" integrity_check", false, "error: %v", err)
			continue
		}
		lab.Equal(file+" integrity_check", got, "ok")
	}
	q, r, err := lab.snapshots(ctx)
	if err != nil {
		lab.Check("snapshots taken", false, "error: %v", err)
	}
	res.Queue, res.Receiver = q, r
	if err := b.cleanup(ctx, lab); err != nil {
		lab.Check("stores removed", false, "error: %v", err)
	}
	res.Checks, res.Trace = lab.checks, lab.trace
	if res.Trace == nil {
		res.Trace = []string{}
	}
	res.Passed = len(res.Failed()) == 0
	res.Elapsed = time.Since(start)
	return res
}
