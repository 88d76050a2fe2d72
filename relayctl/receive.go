package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fairrelay/fairrelay/inbox"
	"github.com/fairrelay/fairrelay/receiver"
	"github.com/fairrelay/fairrelay/webhook"
)

// secretEnv is the environment variable that holds the signing secret when
// --secret is not given (a secret on the command line shows in ps).
const secretEnv = "FAIRRELAY_SECRET"

// cmdReceive serves the receiver over HTTP until it is interrupted.
func cmdReceive(e *env, args []string) (err error) {
	c := newFlags(e, "receive", "receive --listen ADDR [--secret S]... [--allow-host NAME]... [flags]",
		"Serves receiver.db over HTTP: every POST to / is a signed delivery from 'relayctl relay --to URL'\n"+
			"(Standard Webhooks signatures, checked with the shared secret), received exactly once, and\n"+
			"answered 200, 409, 422, 400, 401 or 413 with a JSON body (docs/receiver-server.md); any other\n"+
			"path is 404. GET /metrics serves Prometheus metrics (any other method there is 405).\n"+
			"The receiver database is created if it does not exist.\n"+
			"The first line of output, printed once the server listens, is the URL to deliver to.\n"+
			"Ctrl-C or SIGTERM stops it: requests in progress finish (up to --grace), then it exits 0.\n"+
			"The secret comes from --secret or the environment variable "+secretEnv+" (a \"whsec_<base64>\"\n"+
			"secret is decoded as Standard Webhooks says, padded or not). --secret again adds a secret a\n"+
			"delivery may be signed with (a rotation: any one verifying is enough).\n"+
			"On a loopback address only loopback host names and IP addresses are answered in the Host\n"+
			"header (DNS rebinding); --allow-host names the others, such as a proxy's public name.").withReceiver(false)
	listen := c.String("listen", "127.0.0.1:8080", "`ADDR` to listen on (host:port; port 0 picks a free port)")
	var secretFlags, hosts repeatedFlag
	c.Var(&secretFlags, "secret", "signing secret `S` shared with the relay (default $"+secretEnv+"); repeat it to accept each (a rotation)")
	c.Var(&hosts, "allow-host", "also answer requests whose Host header names `NAME` (repeatable; * for any)")
	maxBody := c.Int64("max-body", inbox.DefaultMaxBody, "largest request body in `BYTES` (a longer one is 413)")
	tolerance := c.Duration("tolerance", webhook.DefaultTolerance, "how far a request's timestamp may be from this clock")
	grace := c.Duration("grace", 10*time.Second, "how long requests in progress may take to finish at shutdown")
	jsonLogs := c.Bool("json", false, "log JSON lines (log/slog) on stderr instead of text")
	retention := c.Duration("retention", 0, "delete receipts accepted more than `D` ago, in the background (0: keep every receipt); see 'relayctl prune receiver -h'")
	pruneEvery := c.Duration("prune-every", inbox.DefaultPruneEvery, "with --retention: the time between two prunes")
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	secrets, err := secretsFrom(secretFlags)
	if err != nil {
		return err
	}
	switch {
	case *maxBody < 1:
		return usagef("--max-body %d is below 1", *maxBody)
	case *tolerance <= 0:
		return usagef("--tolerance %s is not positive", *tolerance)
	case *grace < 0:
		return usagef("--grace %s is negative", *grace)
	case *retention < 0:
		return usagef("--retention %s is negative", shortDuration(*retention))
	case *pruneEvery <= 0:
		return usagef("--prune-every %s is not positive", shortDuration(*pruneEvery))
	case c.isSet("prune-every") && *retention == 0:
		return usagef("--prune-every goes with --retention D (the receiver has no policy: say how long receipts are kept)")
	case e.receiverPath == "":
		return usagef("--receiver is empty")
	}
	log := newLogger(e.stderr, *jsonLogs)

	store, err := e.relayReceiver() // created if missing, as for the relay in process
	if err != nil {
		return fmt.Errorf("open receiver %s: %w", shown(e.receiverPath), err)
	}
	defer closeWith(store, &err)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Group commit: concurrent requests (several relays, or one relay's
	// concurrent handlers) share one receive transaction
	// (docs/receiver-server.md). Closed before the store (deferred after
	// it), once the server has stopped and every request has its answer.
	batcher := inbox.NewBatcher(store, inbox.BatcherOptions{})
	defer batcher.Close()
	// Retention prunes the store itself (the batcher is not a Pruner);
	// both backends are receiver.Pruners.
	var pruner receiver.Pruner
	if *retention > 0 {
		p, ok := store.(receiver.Pruner)
		if !ok {
			return fmt.Errorf("--retention: the receiver's store cannot prune")
		}
		pruner = p
	}
	// One handler for every path: deliveries on /, metrics on /metrics to
	// GET and HEAD, 404 elsewhere, and the Host check before all of them.
	handler := inbox.NewServer(batcher, secrets[0], inbox.ServerOptions{
		MaxBody: *maxBody, Tolerance: *tolerance, Logger: log, Metrics: reg, ExtraSecrets: secrets[1:],
		Path: "/", MetricsPath: "/metrics", Hosts: hosts,
		Retention: *retention, PruneEvery: *pruneEvery, Pruner: pruner,
		MetricsHandler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError)}),
	})
	// Stops the background pruning once the server has shut down (the
	// deferred calls run in reverse: before the batcher and the store close).
	defer handler.Close()

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *listen, err)
	}
	url := "http://" + ln.Addr().String() + "/"
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(e.ctx) },
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintln(e.stdout, url)
	log.Info("receiving", "url", url, "receiver", shown(e.receiverPath), "metrics", url+"metrics", "secrets", len(secrets))
	warnAutovacuum(e.ctx, log, e.receiverPath) // after "receiving", as relay's

	select {
	case err := <-served: // Serve failed on its own
		return fmt.Errorf("serve: %w", err)
	case <-e.ctx.Done():
	}
	log.Info("shutting down: finishing requests in progress", "grace", *grace)
	sctx, cancel := context.WithTimeout(context.Background(), *grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// Requests still running past the grace: close their connections;
		// their transactions roll back (nothing was answered, the relay retries).
		log.Warn("grace over: closing the remaining connections", "err", err)
		_ = srv.Close()
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("stopped")
	return nil
}

// secretFrom is the signing secret: --secret when given, else $FAIRRELAY_SECRET.
func secretFrom(flagValue string, flagSet bool) ([]byte, error) {
	raw, from := flagValue, "--secret"
	if !flagSet {
		raw, from = os.Getenv(secretEnv), "$"+secretEnv
		if raw == "" {
			return nil, usagef("no secret: give --secret S or set %s", secretEnv)
		}
	}
	secret, err := webhook.ParseSecret(raw)
	if err != nil {
		return nil, usagef("%s: %v", from, err)
	}
	return secret, nil
}

// secretsFrom is the secrets of the repeated --secret flag, each decoded
// like secretFrom, in order, or $FAIRRELAY_SECRET when none is given: a
// receiver accepts any of them, a relay signs with all of them (the first
// first), for a rotation.
func secretsFrom(flags []string) ([][]byte, error) {
	if len(flags) == 0 {
		s, err := secretFrom("", false)
		if err != nil {
			return nil, err
		}
		return [][]byte{s}, nil
	}
	out := make([][]byte, 0, len(flags))
	for _, f := range flags {
		s, err := secretFrom(f, true)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// repeatedFlag is a flag that may be given several times: each value, in
// order. It never prints a default (it may hold secrets).
type repeatedFlag []string

func (r *repeatedFlag) String() string { return "" }

func (r *repeatedFlag) Set(v string) error {
	*r = append(*r, v)
	return nil
}

// newLogger logs to w: text lines, or JSON lines with --json.
func newLogger(w io.Writer, jsonLines bool) *slog.Logger {
	if jsonLines {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}
