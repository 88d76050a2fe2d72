package pgqueuestore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultNotifyInterval is the least time between two wake-up
// notifications one Store sends, unless WithNotifyInterval says otherwise.
const DefaultNotifyInterval = 100 * time.Millisecond

// WithNotifyInterval sets the least time between two wake-up notifications
// this Store sends (0: one per write that makes work). The default is
// DefaultNotifyInterval.
func WithNotifyInterval(d time.Duration) Option {
	return func(o *options) { o.notifyEvery, o.notifySet = d, true }
}

// notifier decides, per Store, whether a write sends a wake-up: at most one
// per interval, as River's insert notifications are limited. A write that
// is not sent is not lost work: a relay that slept through it wakes at
// NextDue or at its poll interval, whichever comes first, and claims it then.
type notifier struct {
	every time.Duration
	mu    sync.Mutex
	last  time.Time
}

// due reports whether a wake-up may be sent now and, if so, records it.
func (n *notifier) due() bool {
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.openAt(now) {
		return false
	}
	n.last = now
	return true
}

// open reports whether a wake-up may be sent now, as due does, without
// recording one: settle_claim is told so and sends at most one, and sent
// records it (onecall.go).
func (n *notifier) open() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.openAt(time.Now())
}

// openAt is the interval's rule: no wake-up sent yet, or the last one at
// least every before now. n.mu is held.
func (n *notifier) openAt(now time.Time) bool {
	return n.last.IsZero() || now.Sub(n.last) >= n.every
}

// sent records a wake-up that settle_claim sent.
func (n *notifier) sent() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.last = time.Now()
}

// channelPrefix begins every store's notification channel.
const channelPrefix = "fairrelay_queue."

// channel is the notification channel of the store's schema.
func (s *Store) channel() string { return channelPrefix + s.schema }

// wake sends a wake-up inside tx when the limiter allows: pg_notify is
// transactional, so listeners hear it when tx commits, and never when it
// rolls back.
func (s *Store) wake(ctx context.Context, tx pgx.Tx) error {
	if !s.notify.due() {
		return nil
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, s.channel()); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

// wakePipe is wake for a pipe: the notification, when the limiter allows,
// is queued after the statements already on pp.
func (s *Store) wakePipe(pp *pipe, pre string) {
	if s.notify.due() {
		pp.exec(pre+"notify", `SELECT pg_notify($1, '')`, s.channel())
	}
}

// Listener hears the wake-ups of one store's schema (LISTEN on a
// connection of its own): Enqueue, EnqueueBatch, Redrive, RedriveAll and an
// ack that makes a flow's next event its head send one, rate-limited per
// Store (WithNotifyInterval).
type Listener struct {
	conn *pgxpool.Conn
}

// Listen starts listening for the store's wake-ups on a connection taken
// from the store's pool for the Listener's life.
func (s *Store) Listen(ctx context.Context) (*Listener, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if _, err := c.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel()}.Sanitize()); err != nil {
		c.Release()
		return nil, fmt.Errorf("listen: %w", err)
	}
	return &Listener{conn: c}, nil
}

// Wait returns when a wake-up arrives (or one arrived since the last
// Wait), or with ctx's error.
func (l *Listener) Wait(ctx context.Context) error {
	_, err := l.wait(ctx)
	return err
}

// wait returns the payload of the next notification.
func (l *Listener) wait(ctx context.Context) (string, error) {
	n, err := l.conn.Conn().WaitForNotification(ctx)
	if err != nil {
		return "", fmt.Errorf("wait for wake-up: %w", err)
	}
	return n.Payload, nil
}

// Close stops listening and gives the connection back (closing it, so no
// LISTEN stays on a pooled connection).
func (l *Listener) Close() error {
	err := l.conn.Conn().Close(context.Background())
	l.conn.Release()
	return err
}
