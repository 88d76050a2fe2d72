package soak

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/pgreceiverstore"
	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/receiver"
)

// viaProxy is the server URL u with its host:port replaced by the proxy's.
func viaProxy(t *testing.T, u string, p *FaultProxy) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pu.Host = p.Addr()
	return pu.String()
}

// proxyTo starts a proxy in front of the server of URL u.
func proxyTo(t *testing.T, u string) *FaultProxy {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewFaultProxy(pu.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// An echo server behind the proxy: passed, delayed, blackholed, cut.
func TestFaultProxy_PassDelayBlackholeCut(t *testing.T) {
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
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	p, err := NewFaultProxy(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	echo := func(c net.Conn, msg string, wait time.Duration) error {
		if _, err := c.Write([]byte(msg)); err != nil {
			return err
		}
		c.SetReadDeadline(time.Now().Add(wait))
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(c, buf); err != nil {
			return err
		}
		if string(buf) != msg {
			return fmt.Errorf("echo %q, want %q", buf, msg)
		}
		return nil
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c1 := dial()
	if err := echo(c1, "pass", 5*time.Second); err != nil {
		t.Fatalf("pass: %v", err)
	}
	p.SetDelay(300 * time.Millisecond)
	// A delay longer than the wait: the echo comes late (its bytes are
	// read after the delay, twice: there and back).
	if err := echo(c1, "slow", 100*time.Millisecond); err == nil {
		t.Fatal("delay: the echo came back within 100 ms through a 300 ms delay")
	}
	p.SetDelay(0)
	c1b := dial()
	if err := echo(c1b, "fast", 5*time.Second); err != nil {
		t.Fatalf("delay off: %v", err)
	}
	p.Blackhole(true)
	c2 := dial() // accepted while blackholed
	if err := echo(c1b, "lost", 300*time.Millisecond); err == nil {
		t.Fatal("blackhole: an open connection still answers")
	}
	if err := echo(c2, "lost", 300*time.Millisecond); err == nil {
		t.Fatal("blackhole: a new connection answers")
	}
	p.Blackhole(false)
	if err := echo(c1b, "dead", 300*time.Millisecond); err == nil {
		t.Fatal("a connection blackholed once answers again")
	}
	c3 := dial()
	if err := echo(c3, "again", 5*time.Second); err != nil {
		t.Fatalf("after the blackhole, a new connection: %v", err)
	}
	if n := p.Cut(); n < 1 {
		t.Fatalf("Cut cut %d connections, want at least 1", n)
	}
	if err := echo(c3, "cut", 5*time.Second); err == nil {
		t.Fatal("a cut connection still answers")
	}
}

// An enqueue whose connection is cut at its COMMIT does not know whether
// it committed. Enqueue is idempotent by event ID (docs/contract.md §2):
// enqueueing the event again settles it, and the queue then holds it
// exactly once, whether the COMMIT reached the server (Duplicate) or not
// (a new event).
func TestFaultProxy_EnqueueCutAtCommit(t *testing.T) {
	for _, after := range []bool{false, true} {
		t.Run(fmt.Sprintf("after=%v", after), func(t *testing.T) {
			ctx := context.Background()
			u, schema := pgtest.Schema(t)
			p := proxyTo(t, u)
			direct, err := pgqueuestore.Open(ctx, u, pgqueuestore.WithSchema(schema))
			if err != nil {
				t.Fatal(err)
			}
			defer direct.Close()
			proxied, err := pgqueuestore.Open(ctx, viaProxy(t, u, p), pgqueuestore.WithSchema(schema))
			if err != nil {
				t.Fatal(err)
			}
			defer proxied.Close()
			e := queue.Event{ID: "e1", Flow: "f", Body: []byte(`{"delta":1}`)}
			p.CutAtCommit(1, after)
			if _, err := proxied.Enqueue(ctx, e, 1); err == nil {
				t.Fatal("Enqueue through a connection cut at COMMIT returned no error")
			}
			got, err := direct.Enqueue(ctx, e, 2)
			if err != nil {
				t.Fatal(err)
			}
			if got.Duplicate != after || got.Seq != 1 {
				t.Fatalf("Enqueue again = %+v, want seq 1, duplicate %v (the COMMIT reached the server: %v)", got, after, after)
			}
			evs, err := direct.FlowEvents(ctx, "f")
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 1 {
				t.Fatalf("flow f holds %d events, want 1", len(evs))
			}
		})
	}
}

// A receive whose connection is cut at its COMMIT: the sender retries, and
// the receiver's idempotency settles it: the effect is applied once, the
// retry is Accepted (the COMMIT never arrived) or Duplicate (it did).
func TestFaultProxy_ReceiveCutAtCommit(t *testing.T) {
	for _, after := range []bool{false, true} {
		t.Run(fmt.Sprintf("after=%v", after), func(t *testing.T) {
			ctx := context.Background()
			u, schema := pgtest.Schema(t)
			p := proxyTo(t, u)
			direct, err := pgreceiverstore.Open(ctx, u, pgreceiverstore.WithSchema(schema))
			if err != nil {
				t.Fatal(err)
			}
			defer direct.Close()
			proxied, err := pgreceiverstore.Open(ctx, viaProxy(t, u, p), pgreceiverstore.WithSchema(schema))
			if err != nil {
				t.Fatal(err)
			}
			defer proxied.Close()
			m := receiver.Message{ID: "e1", Flow: "f", Seq: 1, Body: []byte(`{"delta":7}`)}
			p.CutAtCommit(1, after)
			if _, err := proxied.Receive(ctx, m); err == nil {
				t.Fatal("Receive through a connection cut at COMMIT returned no error")
			}
			out, err := direct.Receive(ctx, m)
			if err != nil {
				t.Fatal(err)
			}
			want := receiver.Accepted
			if after {
				want = receiver.Duplicate
			}
			if out != want {
				t.Fatalf("Receive again = %s, want %s", out, want)
			}
			total, err := direct.Total(ctx, "f")
			if err != nil {
				t.Fatal(err)
			}
			if total != 7 {
				t.Fatalf("total = %d, want 7 (applied once)", total)
			}
		})
	}
}

// An ack whose connection is cut at its COMMIT: if it never committed the
// claim is still in flight, and once its lease is over the next claim hands
// the event out again (the receiver's idempotency then answers Duplicate);
// if it committed the event is acked. Either way nothing is lost.
func TestFaultProxy_AckCutAtCommit(t *testing.T) {
	for _, after := range []bool{false, true} {
		t.Run(fmt.Sprintf("after=%v", after), func(t *testing.T) {
			ctx := context.Background()
			u, schema := pgtest.Schema(t)
			p := proxyTo(t, u)
			pol := queue.DefaultPolicy()
			pol.Lease = 100
			direct, err := pgqueuestore.Open(ctx, u, pgqueuestore.WithSchema(schema), pgqueuestore.WithPolicy(pol))
			if err != nil {
				t.Fatal(err)
			}
			defer direct.Close()
			proxied, err := pgqueuestore.Open(ctx, viaProxy(t, u, p), pgqueuestore.WithSchema(schema))
			if err != nil {
				t.Fatal(err)
			}
			defer proxied.Close()
			if _, err := direct.Enqueue(ctx, queue.Event{ID: "e1", Flow: "f", Body: []byte(`{"delta":1}`)}, 1); err != nil {
				t.Fatal(err)
			}
			cs, err := proxied.ClaimBatch(ctx, 2, 1)
			if err != nil || len(cs) != 1 {
				t.Fatalf("ClaimBatch = %v, %v", cs, err)
			}
			p.CutAtCommit(1, after)
			if _, err := proxied.SettleBatch(ctx, []queue.SettleItem{{EventID: cs[0].EventID, Generation: cs[0].Generation, Result: queue.Result{OK: true}}}, 3); err == nil {
				t.Fatal("an ack through a connection cut at COMMIT returned no error")
			}
			again, err := direct.ClaimBatch(ctx, clock.Tick(3+pol.Lease), 1)
			if err != nil {
				t.Fatal(err)
			}
			if after && len(again) != 0 {
				t.Fatalf("the ack committed, yet the event was claimed again: %+v", again)
			}
			if !after && (len(again) != 1 || again[0].EventID != "e1") {
				t.Fatalf("the ack never committed, and after the lease the claim gave %+v, want e1 again", again)
			}
		})
	}
}
