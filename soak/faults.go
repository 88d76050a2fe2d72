package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fairrelay/fairrelay/pgtest"
)

// Fault kinds: what the chaos does besides (or instead of) SIGKILLing
// processes. Config.Faults lists those a run injects.
const (
	// FaultKill SIGKILLs a random process (receiver, relay or producer)
	// every Config.KillMin..KillMax; its supervisor starts it again.
	FaultKill = "kill"
	// FaultTerminate ends the PostgreSQL sessions of one kind of process
	// (relays, the receiver, the producers, or all of them) with
	// pg_terminate_backend, picked by their application_name.
	FaultTerminate = "terminate"
	// FaultRestartFast and FaultRestartImmediate restart the private
	// PostgreSQL cluster (pg_ctl restart -m fast / -m immediate: the latter
	// is a crash, WAL replayed at start) while everything runs.
	FaultRestartFast      = "restart-fast"
	FaultRestartImmediate = "restart-immediate"
	// FaultDBCut, FaultDBBlackhole and FaultDBDelay act on the fault proxy
	// between every process and the server: cut every connection; black-
	// hole for 0.5 to 3 s (the connections open then stay dead); delay
	// every chunk by 20 to 300 ms for 1 to 3 s.
	FaultDBCut       = "db-cut"
	FaultDBBlackhole = "db-blackhole"
	FaultDBDelay     = "db-delay"
	// FaultHTTPCut, FaultHTTPBlackhole and FaultHTTPDelay do the same on
	// the fault proxy between the relays and the receiver's HTTP port
	// (slow responses, lost connections, resets): the relays' timeouts,
	// retries and breaker are in play.
	FaultHTTPCut       = "http-cut"
	FaultHTTPBlackhole = "http-blackhole"
	FaultHTTPDelay     = "http-delay"
)

// FaultKinds are every fault kind, in the order the summary lists them.
var FaultKinds = []string{FaultKill, FaultTerminate, FaultRestartFast, FaultRestartImmediate,
	FaultDBCut, FaultDBBlackhole, FaultDBDelay, FaultHTTPCut, FaultHTTPBlackhole, FaultHTTPDelay}

// dbFault reports a fault that needs PostgreSQL; restartFault one that
// needs a private cluster.
func dbFault(kind string) bool {
	return kind == FaultTerminate || restartFault(kind) || strings.HasPrefix(kind, "db-")
}

func restartFault(kind string) bool {
	return kind == FaultRestartFast || kind == FaultRestartImmediate
}

// DefaultFaults is Config.Faults when it is nil: everything the backend
// can have (on PostgreSQL the restarts only with a private cluster).
func DefaultFaults(backend string, private bool) []string {
	var out []string
	for _, k := range FaultKinds {
		switch {
		case backend != BackendPostgres && dbFault(k):
		case !private && restartFault(k):
		default:
			out = append(out, k)
		}
	}
	return out
}

// FaultCounts counts the faults injected, by kind.
type FaultCounts map[string]int

// String is kind:n,kind:n in FaultKinds order ("none" when empty).
func (f FaultCounts) String() string {
	var parts []string
	for _, k := range FaultKinds {
		if f[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s:%d", k, f[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// Total is the number of faults of every kind.
func (f FaultCounts) Total() int {
	n := 0
	for _, v := range f {
		n += v
	}
	return n
}

// injector injects the non-kill faults of a run.
type injector struct {
	kinds   []string // enabled, without FaultKill
	cluster *pgtest.Cluster
	db      *FaultProxy // nil on SQLite
	http    *FaultProxy
	server  string // the server's URL, direct (not through the proxy)
	tag     string // the run's tag in its sessions' application_name
	rng     *rand.Rand
	rngMu   *sync.Mutex

	mu     sync.Mutex
	counts FaultCounts
	down   int       // faults in progress that keep processes from the server
	downAt time.Time // the last time a process could have found the server gone
	log    func(format string, args ...any)
}

func (in *injector) intn(n int64) int64 {
	in.rngMu.Lock()
	defer in.rngMu.Unlock()
	return in.rng.Int64N(n)
}

func (in *injector) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(in.intn(int64(hi-lo)+1))
}

// serverTrouble marks the span of a fault during which a starting process
// may find the server unreachable (start with on, end with off).
func (in *injector) serverTrouble(on bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if on {
		in.down++
	} else {
		in.down--
	}
	in.downAt = time.Now()
}

// troubleSince reports whether the server was (or may have been)
// unreachable at any time since t.
func (in *injector) troubleSince(t time.Time) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.down > 0 || !in.downAt.IsZero() && !in.downAt.Before(t)
}

// run injects a fault every min..max until ctx ends; the first error
// (a restart that failed) ends it.
func (in *injector) run(ctx context.Context, lo, hi time.Duration) error {
	if len(in.kinds) == 0 {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(in.between(lo, hi)):
		}
		kind := in.kinds[in.intn(int64(len(in.kinds)))]
		hit, err := in.inject(ctx, kind)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("soak: fault %s: %w", kind, err)
		}
		if hit {
			in.mu.Lock()
			in.counts[kind]++
			in.mu.Unlock()
		}
	}
}

// inject injects one fault of kind and returns when it is over; hit is
// false when it found nothing to act on (a cut with no connection open, a
// terminate that matched no session), so that a fault that never reaches
// the processes is not counted as injected.
func (in *injector) inject(ctx context.Context, kind string) (hit bool, err error) {
	hold := func(d time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	switch kind {
	case FaultTerminate:
		n, err := in.terminate(ctx)
		return n > 0, err
	case FaultRestartFast, FaultRestartImmediate:
		mode := strings.TrimPrefix(kind, "restart-")
		in.serverTrouble(true)
		defer in.serverTrouble(false)
		// Not ctx: a restart is finished even when the chaos ends.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		in.log("soak: fault: restart the server (-m %s)", mode)
		return true, in.cluster.Restart(rctx, mode)
	case FaultDBCut:
		in.serverTrouble(true)
		n := in.db.Cut()
		in.serverTrouble(false)
		return n > 0, nil
	case FaultHTTPCut:
		return in.http.Cut() > 0, nil
	case FaultDBBlackhole, FaultHTTPBlackhole:
		p := in.http
		if kind == FaultDBBlackhole {
			p = in.db
			in.serverTrouble(true)
			defer in.serverTrouble(false)
		}
		p.Blackhole(true)
		hold(in.between(500*time.Millisecond, 3*time.Second))
		p.Blackhole(false)
	case FaultDBDelay, FaultHTTPDelay:
		p := in.http
		if kind == FaultDBDelay {
			p = in.db
		}
		p.SetDelay(in.between(20*time.Millisecond, 300*time.Millisecond))
		hold(in.between(time.Second, 3*time.Second))
		p.SetDelay(0)
	default:
		return false, fmt.Errorf("%w: unknown fault kind %q", ErrConfig, kind)
	}
	return true, nil
}

// The application_name of each kind of process is fairrelay-ROLE (relayctl's
// own default is fairrelay-COMMAND) followed by ":" and the run's tag (its
// schemas' prefix), so that a terminate fault ends this run's sessions
// only, whatever else uses the server.
var sessionRoles = []string{"relay", "receive", "produce", "%"}

// appName is the application_name of a process of role in the run tagged
// tag.
func appName(role, tag string) string { return "fairrelay-" + role + ":" + tag }

// terminate ends the sessions of one kind of process (or of all) and
// returns how many it ended.
func (in *injector) terminate(ctx context.Context) (int, error) {
	role := sessionRoles[in.intn(int64(len(sessionRoles)))]
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(tctx, in.server)
	if err != nil {
		return 0, err
	}
	defer c.Close(context.Background())
	in.serverTrouble(true)
	defer in.serverTrouble(false)
	var n int
	err = c.QueryRow(tctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name LIKE $1 AND pid <> pg_backend_pid()`, appName(role, in.tag)).Scan(&n)
	return n, err
}

// processURL is a store's URL as a process of role (relay, receive,
// produce) of the run tagged tag gets it: through the database proxy,
// with its application_name and short timeouts: connect_timeout, and for
// relayctl reply_timeout (the producers bound each call themselves).
func processURL(target, proxyAddr, role, tag string) (string, error) {
	u, err := url.Parse(target)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrConfig, err)
	}
	u.Host = proxyAddr
	q := u.Query()
	q.Set("connect_timeout", "3")
	q.Set("application_name", appName(role, tag))
	if role != "produce" {
		q.Set("reply_timeout", processReplyTimeout.String())
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// processReplyTimeout is the soak's reply_timeout for relayctl, and the
// bound of each producer call: a call on a blackholed connection gives up
// after this long.
const processReplyTimeout = 5 * time.Second

// checkFaults validates a fault list for a backend.
func checkFaults(kinds []string, backend string, private bool) error {
	for _, k := range kinds {
		switch {
		case !slices.Contains(FaultKinds, k):
			return fmt.Errorf("%w: unknown fault %q (one of %s)", ErrConfig, k, strings.Join(FaultKinds, ", "))
		case dbFault(k) && backend != BackendPostgres:
			return fmt.Errorf("%w: fault %s needs the postgres backend", ErrConfig, k)
		case restartFault(k) && !private:
			return fmt.Errorf("%w: fault %s needs a private cluster (Config.PrivateCluster): the shared server is never restarted", ErrConfig, k)
		}
	}
	return nil
}

// ParseFaults reads a comma-separated fault list ("all": every kind the
// backend can have).
func ParseFaults(s, backend string, private bool) ([]string, error) {
	if s == "" || s == "all" {
		return DefaultFaults(backend, private), nil
	}
	var out []string
	for _, k := range strings.Split(s, ",") {
		if k = strings.TrimSpace(k); k != "" {
			out = append(out, k)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return slices.Index(FaultKinds, out[i]) < slices.Index(FaultKinds, out[j])
	})
	if err := checkFaults(out, backend, private); err != nil {
		return nil, err
	}
	return out, nil
}
