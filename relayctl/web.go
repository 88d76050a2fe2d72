package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/console"
	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiverstore"
	"github.com/fairrelay/fairrelay/relay"
)

// tokenEnv is the environment variable that carries the console's token
// (better than --token, which other users of the machine can see in the
// process list).
const tokenEnv = "FAIRRELAY_TOKEN"

func cmdWeb(e *env, args []string) (err error) {
	f := newFlags(e, "web", "web [--listen ADDR] [--token TOKEN] [--secure-cookies] [--allowed-hosts NAMES] [--relay ADDR]...",
		"Web serves the operator console: the same views as status, flows, events,\n"+
			"quarantined, audit and receiver as web pages, and redrives through forms.\n"+
			"Every write needs the token (--token, or $"+tokenEnv+"); without one the\n"+
			"console is read-only. On a loopback address the pages are open; on any other\n"+
			"address every page needs the token too, and without a token web refuses to\n"+
			"start. A request whose Host header is not a loopback name, the listen\n"+
			"address or one of --allowed-hosts is refused (421), so that no other site's\n"+
			"page can read the console by pointing its name at this machine. See\n"+
			"docs/console.md for running it behind a TLS reverse proxy. With --relay ADDR\n"+
			"(repeatable: each running relay's --metrics address) the Destinations pages\n"+
			"show each relay's breakers and failures, read from its /status.").
		withQueue().withReceiver(true).withClock("how a redrive reads time (see 'relayctl redrive -h')")
	listen := f.String("listen", "127.0.0.1:8080", "`ADDR` to listen on (host:port); loopback by default")
	token := f.String("token", "", "operator `TOKEN` for writes (default $"+tokenEnv+"; at least 16 bytes)")
	secure := f.Bool("secure-cookies", false, "mark cookies Secure (set when a TLS proxy serves the console)")
	allowed := f.String("allowed-hosts", "", "comma-separated host `NAMES` (name, IP or name:port) the console answers besides loopback names and the listen address, e.g. the name a reverse proxy serves; * answers any (default: none on a loopback --listen, * beyond it)")
	var relays repeatedFlag
	f.Var(&relays, "relay", "show the breakers and failures of the running relay at `ADDR` (its --metrics address) on the Destinations pages; repeat for more relays")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	for _, a := range relays {
		if a == "" {
			return usagef("--relay is empty: give a relay's --metrics address (host:port)")
		}
	}
	if !f.isSet("token") {
		*token = os.Getenv(tokenEnv)
	}
	if *token != "" {
		if err := console.CheckToken(*token); err != nil {
			return usagef("--token or $%s: %v", tokenEnv, err)
		}
	}
	loopback, err := isLoopback(*listen)
	if err != nil {
		return usagef("--listen %q: %v", *listen, err)
	}
	if !loopback && *token == "" {
		return usagef("--listen %s is not a loopback address: give a token (--token or $%s), so that no page is open to the network", *listen, tokenEnv)
	}
	hosts := allowedHosts(*listen, loopback, *allowed, f.isSet("allowed-hosts"))
	log := slog.New(slog.NewTextHandler(e.stderr, nil))
	e.log = log // a lost hold on a sharded queue is logged here (shardlock.go)
	q, realTime, err := e.webQueue()
	if err != nil {
		return err
	}
	defer closeWith(q, &err)
	var now func(context.Context) (clock.Tick, error)
	if realTime {
		wall := e.clock.wall
		now = func(context.Context) (clock.Tick, error) { return wall.Now(), nil }
	}
	var r console.Receiver
	if e.receiverPath != "" {
		rs, rerr := e.webReceiver()
		if rerr != nil {
			return rerr
		}
		defer closeWith(rs, &err) // the command's err, not a shadow
		r = rs
	}
	h, err := console.New(q, r, console.Options{Token: *token, ProtectReads: !loopback, Secure: *secure, Logger: log, Now: now, RealTime: realTime, AllowedHosts: hosts, Relays: relaysStatus(relays)})
	if errors.Is(err, console.ErrOptions) {
		return usagef("--allowed-hosts %q: %v", *allowed, err)
	}
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	mode := "read-only (no token)"
	switch {
	case *token != "" && loopback:
		mode = "pages open on loopback, writes need the token"
	case *token != "":
		mode = "every page and write needs the token"
	}
	fmt.Fprintf(e.stdout, "relayctl web: serving http://%s (%s); Ctrl-C stops\n", ln.Addr(), mode)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve: %w", err)
	case <-e.ctx.Done():
	}
	// Let requests in progress finish, for a few seconds at most.
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	fmt.Fprintln(e.stdout, "relayctl web: stopped")
	return nil
}

// webQueue opens the console's queue, a SQLite file or a postgres:// schema
// that must exist, and says whether it runs in real time: its clock mark is
// Unix milliseconds, or --clock wall. A real-time queue is opened in real
// time and written at this machine's clock, as relayctl redrive writes it;
// a logical queue at its clock mark (console.Options.Now nil).
func (e *env) webQueue() (interface {
	console.Queue
	Close() error
}, bool, error) {
	if q, rt, ok, err := e.webShards(); ok {
		return q, rt, err
	}
	if isPostgres(e.queuePath) {
		p, err := openPGQueue(e.ctx, e.queuePath, false, 0)
		if err != nil {
			return nil, false, fmt.Errorf("open queue %s: %w", shown(e.queuePath), err)
		}
		mark, err := p.ClockMark(e.ctx)
		if err != nil {
			return nil, false, errors.Join(fmt.Errorf("read the clock mark: %w", err), p.Close())
		}
		if !e.realTime(mark) {
			return p, false, nil
		}
		s, err := pgqueuestore.OpenPool(e.ctx, p.pool, pgqueuestore.WithSchema(p.schema), pgqueuestore.WithRealTime(e.clock.wall, e.clock.skew))
		if err != nil {
			return nil, false, errors.Join(fmt.Errorf("open queue %s in real time: %w", shown(e.queuePath), err), p.Close())
		}
		return pgQueue{Store: s, pool: p.pool, schema: p.schema}, true, nil
	}
	if err := e.mustExist(e.queuePath, "queue", "queue"); err != nil {
		return nil, false, err
	}
	q, err := queuestore.Open(e.abs(e.queuePath))
	if err != nil {
		return nil, false, fmt.Errorf("open queue %s: %w", e.queuePath, err)
	}
	mark, err := q.ClockMark(e.ctx)
	if err != nil {
		return nil, false, errors.Join(fmt.Errorf("read the clock mark: %w", err), q.Close())
	}
	if !e.realTime(mark) {
		return q, false, nil
	}
	if err := q.Close(); err != nil {
		return nil, false, err
	}
	if q, err = queuestore.Open(e.abs(e.queuePath), queuestore.WithRealTime(e.clock.wall, e.clock.skew)); err != nil {
		return nil, false, fmt.Errorf("open queue %s in real time: %w", e.queuePath, err)
	}
	return q, true, nil
}

// realTime says whether a queue with clock mark mark runs in real time
// under --clock (auto: the mark is a Unix-millisecond time).
func (e *env) realTime(mark clock.Tick) bool {
	return e.clock.mode == clockWall || e.clock.mode == clockAuto && mark >= wallFloor
}

// webReceiver opens the console's receiver: a SQLite file or a postgres://
// schema, which must exist.
func (e *env) webReceiver() (interface {
	console.Receiver
	Close() error
}, error) {
	if isPostgres(e.receiverPath) {
		r, err := openPGReceiver(e.ctx, e.receiverPath, false)
		if err != nil {
			return nil, fmt.Errorf("open receiver %s: %w", shown(e.receiverPath), err)
		}
		return r, nil
	}
	if err := e.mustExist(e.receiverPath, "receiver", "receiver"); err != nil {
		return nil, fmt.Errorf("%w; --receiver '' leaves the receiver out", err)
	}
	rs, err := receiverstore.Open(e.abs(e.receiverPath))
	if err != nil {
		return nil, fmt.Errorf("open receiver %s: %w", e.receiverPath, err)
	}
	return rs, nil
}

// allowedHosts is the console's AllowedHosts for --listen listen and
// --allowed-hosts list (set says whether it was given): the names listed
// and the listen host when it names one address. Without the flag, a
// console beyond loopback answers any name (every page needs the token
// there) and one on loopback its loopback names only; console.New checks
// the names.
func allowedHosts(listen string, loopback bool, list string, set bool) []string {
	if !set {
		if loopback {
			return nil
		}
		return []string{"*"}
	}
	var hosts []string
	for _, h := range strings.Split(list, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	if host, _, err := net.SplitHostPort(listen); err == nil {
		if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
			hosts = append(hosts, host)
		}
	}
	return hosts
}

// isLoopback reports whether addr (host:port) listens on loopback only:
// a loopback IP or "localhost". An empty host means every interface.
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

// relaysStatus is the console's Options.Relays for the relays at addrs
// (their --metrics addresses): it reads every relay's /status at once and
// returns when all have answered or ctx (bounded by the console) ends, an
// unreachable or late relay with its error. nil without any relay.
func relaysStatus(addrs []string) func(ctx context.Context) []console.RelayStatus {
	if len(addrs) == 0 {
		return nil
	}
	return func(ctx context.Context) []console.RelayStatus {
		out := make([]console.RelayStatus, len(addrs))
		var wg sync.WaitGroup
		for i, a := range addrs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[i] = relayStatusOf(ctx, a)
			}()
		}
		wg.Wait()
		return out
	}
}

// relayStatusOf reads the relay at addr as the console shows it.
func relayStatusOf(ctx context.Context, addr string) console.RelayStatus {
	rs := console.RelayStatus{Relay: relay.RedactURLs(addr)}
	st, err := readRelayStatus(ctx, addr)
	if err != nil {
		rs.Err = err
		return rs
	}
	ds := st.Destinations
	if len(ds) == 0 { // only the default destination: its breaker is the relay's
		ds = []destinationReport{{Breaker: st.Breaker, Delivered: st.Totals.Delivered,
			Failed: st.Totals.Retried + st.Totals.Quarantined, InFlight: int(st.Totals.InFlight)}}
	}
	for _, d := range ds {
		b := d.Breaker
		rd := console.RelayDestination{Name: d.Name, Breaker: b.State, ConsecutiveFailures: b.ConsecutiveFailures,
			LastReason: b.LastReason, Delivered: d.Delivered, Failed: d.Failed, InFlight: d.InFlight}
		if b.Since != nil {
			rd.Since = *b.Since
		}
		if b.NextProbe != nil {
			rd.NextProbe = *b.NextProbe
		}
		rs.Destinations = append(rs.Destinations, rd)
	}
	return rs
}
