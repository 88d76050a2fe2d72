package main

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fairrelay/fairrelay/pgtest"
)

func TestCommandName(t *testing.T) {
	cases := map[string][]string{
		"relay":    {"relayctl", "--queue", "postgres://x", "relay", "--to", "http://y"},
		"receive":  {"relayctl", "--receiver=postgres://x", "--skew", "1s", "receive"},
		"relayctl": {"relayctl", "--queue", "q.db"},
	}
	for want, args := range cases {
		if got := commandName(args); got != want {
			t.Errorf("commandName(%q) = %q, want %q", args, got, want)
		}
	}
}

// configured is a pool config for u as pgOpen makes it, with a reply
// timeout.
func configured(t *testing.T, u string, reply time.Duration) *pgxpool.Config {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	configureNetwork(cfg, u, reply)
	return cfg
}

// A server that accepts and never answers (a blackhole): the connection
// attempt fails at the reply timeout, not when the caller's much longer
// context ends.
func TestReplyTimeout_EndsAWaitOnASilentServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	u := "postgres://postgres@" + ln.Addr().String() + "/test?sslmode=disable&connect_timeout=600"
	cfg := configured(t, u, 200*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err == nil {
		t.Fatal("connected to a server that never answers")
	}
	if ctx.Err() != nil {
		t.Fatalf("the attempt ended with the caller's context (%v), not the reply timeout", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("err = %v, want a timeout", err)
	}
}

// The reply timeout ends only a wait for a reply: a LISTEN connection
// waiting longer than it for a notification is not cut, and still hears
// one afterwards; the session carries application_name fairrelay-COMMAND
// and the server's idle-in-transaction limit.
func TestReplyTimeout_SparesAListenerAndNamesTheSession(t *testing.T) {
	u := pgtest.Require(t)
	cfg := configured(t, u, 100*time.Millisecond)
	ctx := context.Background()
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var app, idle string
	if err := conn.QueryRow(ctx, `SELECT current_setting('application_name'), current_setting('idle_in_transaction_session_timeout')`).Scan(&app, &idle); err != nil {
		t.Fatal(err)
	}
	if want := "fairrelay-" + commandName(os.Args); app != want || idle != "100ms" {
		t.Fatalf("application_name %q, idle_in_transaction_session_timeout %q; want %q and 100ms", app, idle, want)
	}
	if _, err := conn.Exec(ctx, `LISTEN relayctl_pgnet_test`); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = conn.WaitForNotification(wctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitForNotification = %v, want the caller's deadline (5 reply timeouts later)", err)
	}
	other, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if _, err := other.Exec(ctx, `NOTIFY relayctl_pgnet_test`); err != nil {
		t.Fatal(err)
	}
	wctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := conn.WaitForNotification(wctx); err != nil {
		t.Fatalf("after a long wait the listener is broken: %v", err)
	}
}
