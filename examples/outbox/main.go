// Command outbox is the transactional outbox with fairrelay, end to end,
// in one short program to copy from (docs/relay-library.md):
//
//  1. A shop writes an order and enqueues its events in ONE PostgreSQL
//     transaction (pgqueuestore's EnqueueBatchTx): the order and its events
//     commit together or not at all. An order refused inside its
//     transaction leaves neither a row nor an event.
//  2. A receiving service (the inbox) serves a receiver store over HTTP;
//     its effect applies each event inside the receipt's transaction, so a
//     redelivered event is never applied twice.
//  3. A relay delivers the queue to the inbox over signed HTTP and returns
//     once the queue is idle.
//
// Run it against a PostgreSQL server (it creates its tables if missing):
//
//	go run ./examples/outbox -postgres postgres://postgres@127.0.0.1:5432/test
//
// The URL defaults to $FAIRRELAY_POSTGRES, else the one above. The
// receiving service's file is -inbox (default: in a temporary folder).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/inbox"
	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/receiverstore"
	"github.com/fairrelay/fairrelay/relay"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "outbox:", err)
		os.Exit(1)
	}
}

// Order is the shop's business row, and the body of its events.
type Order struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Item     string `json:"item"`
	Quantity int    `json:"quantity"`
}

// orders are what the shop takes; the quantity 0 is refused inside its
// transaction, which then rolls back.
var orders = []Order{
	{"o-1", "alice", "tea", 2},
	{"o-2", "bob", "cake", 1},
	{"o-3", "alice", "scones", 6},
	{"o-4", "bob", "jam", 0},
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("outbox", flag.ContinueOnError)
	pgURL := fs.String("postgres", envOr("FAIRRELAY_POSTGRES", "postgres://postgres@127.0.0.1:5432/test"), "PostgreSQL URL")
	shop := fs.String("schema", "outbox_shop", "PostgreSQL schema of the shop's orders table")
	queueSchema := fs.String("queue-schema", "outbox_queue", "PostgreSQL schema of the queue")
	inboxPath := fs.String("inbox", "", "the receiving service's SQLite file (default: in a temporary folder)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	secret := []byte("a secret the relay and the inbox share")

	// The shop: its database, its orders table, and the queue beside it.
	pool, err := pgxpool.New(ctx, *pgURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	q, err := pgqueuestore.OpenPool(ctx, pool, pgqueuestore.WithSchema(*queueSchema),
		pgqueuestore.WithRealTime(clock.Wall{}, 1000), // ticks are Unix milliseconds
		pgqueuestore.WithPolicy(queue.Policy{
			Lease: 30_000, MaxAttempts: 5, BackoffBase: 1_000, BackoffCap: 60_000, // ms
			Retention: 7 * 24 * 3600_000, // keep acked events a week (Options.PruneEvery prunes)
		}))
	if err != nil {
		return err
	}
	defer q.Close()
	table := pgx.Identifier{*shop, "orders"}.Sanitize()
	if _, err := pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{*shop}.Sanitize()+`;
		CREATE TABLE IF NOT EXISTS `+table+` (id text PRIMARY KEY, customer text NOT NULL, item text NOT NULL, quantity int NOT NULL)`); err != nil {
		return err
	}

	// 1. Each order and its events in one transaction.
	for _, o := range orders {
		added := 0
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			// A second run finds its orders there: the row stays, and the
			// enqueue of stored events is a Duplicate that changes nothing.
			if _, err := tx.Exec(ctx, `INSERT INTO `+table+` VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING`,
				o.ID, o.Customer, o.Item, o.Quantity); err != nil {
				return err
			}
			body, _ := json.Marshal(o)
			// The customer is the flow: one customer's events arrive in order.
			events := []queue.Event{
				{ID: o.ID + "/placed", Flow: o.Customer, Body: body},
				{ID: o.ID + "/ship", Flow: o.Customer, Body: body},
			}
			res, err := q.EnqueueBatchTx(ctx, tx, events, clock.Wall{}.Now())
			if err != nil {
				return err
			}
			for _, e := range res {
				if !e.Duplicate {
					added++
				}
			}
			if o.Quantity <= 0 { // a check that fails after the writes: all of them roll back
				return errRefused
			}
			return nil
		})
		switch {
		case errors.Is(err, errRefused):
			fmt.Fprintf(out, "order %s refused: rolled back with its events\n", o.ID)
		case err != nil:
			return fmt.Errorf("order %s: %w", o.ID, err)
		default:
			fmt.Fprintf(out, "order %s taken: %d events enqueued with it\n", o.ID, added)
		}
	}

	// 2. The receiving service: its effect (here a row in its table
	// applied; yours would ship, bill or email) runs inside the receipt's
	// transaction, once per event however often it is delivered.
	if *inboxPath == "" {
		dir, err := os.MkdirTemp("", "outbox-inbox")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*inboxPath = filepath.Join(dir, "inbox.db")
	}
	rs, err := receiverstore.Open(*inboxPath,
		receiverstore.WithSchema(`CREATE TABLE IF NOT EXISTS applied (event_id TEXT NOT NULL, order_id TEXT NOT NULL, item TEXT NOT NULL)`),
		receiverstore.WithEffect(func(ctx context.Context, tx receiverstore.Tx, m receiverstore.Message) error {
			var o Order
			if err := json.Unmarshal(m.Body, &o); err != nil {
				return fmt.Errorf("%w: %v", receiverstore.ErrInvalidBody, err) // 400: quarantined, never retried
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO applied VALUES (?, ?, ?)`, m.ID, o.ID, o.Item)
			return err
		}))
	if err != nil {
		return err
	}
	defer rs.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	// Receipts are kept 30 days: far longer than any redelivery (retries, a redrive).
	in := inbox.NewServer(rs, secret, inbox.ServerOptions{Retention: 30 * 24 * time.Hour})
	defer in.Close()
	srv := &http.Server{Handler: in, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	// 3. The relay: over signed HTTP to the inbox, until the queue is idle.
	h, err := relay.NewHTTP("http://"+ln.Addr().String()+"/", secret, relay.HTTPOptions{})
	if err != nil {
		return err
	}
	r, err := relay.New(q, h, relay.Options{PruneEvery: time.Hour})
	if err != nil {
		return err
	}
	err = r.RunUntilIdle(ctx)
	t := r.Totals()
	fmt.Fprintf(out, "relay idle: %d delivered, %d retried, %d quarantined\n", t.Delivered, t.Retried, t.Quarantined)
	if err != nil {
		return err
	}

	for _, customer := range []string{"alice", "bob"} {
		n, err := rs.Total(ctx, customer) // with an effect, a flow's total counts its applied events
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "inbox: %d events of %s applied\n", n, customer)
	}
	return nil
}

// errRefused is a refused order's error: its transaction rolls back.
var errRefused = errors.New("refused")

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
