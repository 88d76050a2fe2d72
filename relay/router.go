package relay

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/webhook"
)

// Reasons of Destinations' own failures (both destination failures, so
// transient: the queue retries them, and the destination's breaker counts
// them; they never quarantine an event by themselves).
const (
	// ReasonUnknownDestination: the event's destination is not registered
	// as far as the relay could read, even after reading again.
	ReasonUnknownDestination = "unknown_destination"
	// ReasonBadDestination: the registered destination cannot be used (a
	// secret webhook.ParseSecret refuses).
	ReasonBadDestination = "bad_destination"
)

// DestinationLister is what Destinations reads: the registered
// destinations with their URLs and secrets (queue.DestinationStore's
// RegisteredDestinations, which reads the destinations alone, never the
// flows; both stores have it).
type DestinationLister interface {
	RegisteredDestinations(ctx context.Context) ([]queue.Destination, error)
}

// DestinationsOptions tune Destinations. The zero value of every field
// means its default.
type DestinationsOptions struct {
	// HTTP are the options of every registered destination's *HTTP
	// (timeout, client, limits). ExtraSecrets is ignored: a destination's
	// secrets are its own.
	HTTP HTTPOptions
	// Refresh is how often the registered destinations are read again
	// (default DefaultDestinationRefresh); they are read at the first
	// event too, and at once when an event names a destination not known.
	Refresh time.Duration
}

// Destinations is a Handler that delivers each event to its flow's
// destination (Event.Destination, docs/contract.md §7.11): the default
// destination to the *HTTP given to NewDestinations (the relay's own URL
// and secret, as before destinations existed), and a registered one to an
// *HTTP made from its URL and secrets.
//
// A registered destination's secrets are stored as the webhook package
// reads a secret (webhook.ParseSecret): "whsec_" and the base64 of the key
// bytes (Standard Webhooks), or else the bytes of the text themselves.
// Secrets[0] signs every request, and each further one signs it too (a
// rotation: webhook.SetHeadersRotating), so a receiver that knows any of
// them accepts it.
//
// The registered destinations are read from the store at the first event,
// then every Refresh; an *HTTP is kept (with its connections) while its
// destination's URL and secrets stay the same. An event whose destination
// the relay does not know makes it read them again at once; still unknown,
// the event fails with ReasonUnknownDestination, a destination failure
// with a RetryAfter of Refresh: the queue retries it, it is never
// quarantined at once. A failed read is such a failure too for an unknown
// destination, while known destinations go on with what was last read.
//
// It is safe for concurrent use.
type Destinations struct {
	store DestinationLister
	def   *HTTP
	o     DestinationsOptions

	mu      sync.RWMutex
	byName  map[string]*destHTTP
	readAt  time.Time // when the last successful read began
	reads   uint64    // successful reads so far
	lastErr error     // the last read's error (nil after a success)

	readMu sync.Mutex // one read at a time
}

// destHTTP is a registered destination as read, and its handler (or why
// it has none).
type destHTTP struct {
	url     string
	secrets []string
	h       *HTTP
	err     error
}

// NewDestinations returns a Destinations that reads the registered
// destinations from store and delivers the default destination's events
// to def. A nil store or def, or negative options, are ErrInvalid. It
// reads nothing yet: call Refresh to read at once (and to see a store
// that cannot be read).
func NewDestinations(store DestinationLister, def *HTTP, o DestinationsOptions) (*Destinations, error) {
	if store == nil || def == nil {
		return nil, fmt.Errorf("%w: nil store or default destination", ErrInvalid)
	}
	if o.Refresh < 0 || o.HTTP.Timeout < 0 || o.HTTP.MaxIdleConns < 0 || o.HTTP.MaxResponseBytes < 0 || o.HTTP.MaxRetryAfter < 0 {
		return nil, fmt.Errorf("%w: negative Destinations option", ErrInvalid)
	}
	if o.Refresh == 0 {
		o.Refresh = DefaultDestinationRefresh
	}
	o.HTTP.ExtraSecrets = nil
	return &Destinations{store: store, def: def, o: o, byName: map[string]*destHTTP{}}, nil
}

// Refresh reads the registered destinations now. On an error the
// destinations last read stay in use.
func (d *Destinations) Refresh(ctx context.Context) error {
	d.mu.RLock()
	reads := d.reads
	d.mu.RUnlock()
	return d.refresh(ctx, reads, true)
}

// refresh reads the destinations unless a read that began after the
// caller saw reads completed meanwhile (force: read in any case once the
// lock is held, unless such a read happened).
func (d *Destinations) refresh(ctx context.Context, seen uint64, force bool) error {
	d.readMu.Lock()
	defer d.readMu.Unlock()
	d.mu.RLock()
	done, stale, lastErr := d.reads > seen, time.Since(d.readAt) >= d.o.Refresh || d.reads == 0, d.lastErr
	d.mu.RUnlock()
	if done {
		return lastErr
	}
	if !force && !stale {
		return nil
	}
	began := time.Now()
	ds, err := d.store.RegisteredDestinations(ctx)
	if err != nil {
		err = fmt.Errorf("relay: read the destinations: %w", err)
		d.mu.Lock()
		d.lastErr = err
		d.mu.Unlock()
		return err
	}
	d.mu.RLock()
	old := d.byName
	d.mu.RUnlock()
	next := make(map[string]*destHTTP, len(ds))
	for _, s := range ds {
		if o := old[s.Name]; o != nil && o.url == s.URL && slices.Equal(o.secrets, s.Secrets) {
			next[s.Name] = o
			continue
		}
		next[s.Name] = d.build(s)
	}
	d.mu.Lock()
	d.byName, d.readAt, d.lastErr = next, began, nil
	d.reads++
	d.mu.Unlock()
	if d.o.HTTP.Client == nil { // the replaced handlers' own clients
		for name, o := range old {
			if n := next[name]; (n == nil || n != o) && o.h != nil {
				o.h.client.CloseIdleConnections()
			}
		}
	}
	return nil
}

// build makes the handler of a registered destination.
func (d *Destinations) build(s queue.Destination) *destHTTP {
	out := &destHTTP{url: s.URL, secrets: slices.Clone(s.Secrets)}
	if len(s.Secrets) == 0 {
		out.err = fmt.Errorf("destination %s has no secret", s.Name)
		return out
	}
	keys := make([][]byte, len(s.Secrets))
	for i, sec := range s.Secrets {
		k, err := webhook.ParseSecret(sec)
		if err != nil {
			out.err = fmt.Errorf("destination %s: secret %d: %w", s.Name, i+1, err)
			return out
		}
		keys[i] = k
	}
	o := d.o.HTTP
	o.ExtraSecrets = keys[1:]
	h, err := NewHTTP(s.URL, keys[0], o)
	if err != nil {
		out.err = fmt.Errorf("destination %s: %w", s.Name, err)
		return out
	}
	out.h = h
	return out
}

// lookup returns the handler of name and the count of reads so far.
func (d *Destinations) lookup(name string) (*destHTTP, uint64, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	h := d.byName[name]
	stale := d.reads == 0 || time.Since(d.readAt) >= d.o.Refresh
	return h, d.reads, stale
}

// Handle delivers e to its destination (see Destinations).
func (d *Destinations) Handle(ctx context.Context, e Event) error {
	if e.Destination == queue.DefaultDestination {
		return d.def.Handle(ctx, e)
	}
	h, reads, stale := d.lookup(e.Destination)
	if stale && h != nil && d.readMu.TryLock() {
		// A periodic read, by the one handler that finds it due; the
		// others deliver with what was last read meanwhile.
		d.readMu.Unlock()
		_ = d.refresh(ctx, reads, false)
		h, _, _ = d.lookup(e.Destination)
	}
	if h == nil {
		err := d.refresh(ctx, reads, true)
		if h, _, _ = d.lookup(e.Destination); h == nil {
			detail := fmt.Errorf("destination %q is not registered as the relay last read", e.Destination)
			if err != nil {
				detail = fmt.Errorf("destination %q is not known to the relay: %w", e.Destination, err)
			}
			return FailDestination(ReasonUnknownDestination, detail).WithRetryAfter(d.o.Refresh)
		}
	}
	if h.err != nil {
		return FailDestination(ReasonBadDestination, h.err).WithRetryAfter(d.o.Refresh)
	}
	return h.h.Handle(ctx, e)
}

// Known returns the names of the registered destinations as last read,
// sorted.
func (d *Destinations) Known() []string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	names := make([]string, 0, len(d.byName))
	for n := range d.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
