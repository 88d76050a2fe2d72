package queue

import (
	"context"
	"fmt"
	"net/url"

	"github.com/fairrelay/fairrelay/clock"
)

// Destinations (docs/contract.md §7.11): a queue may know several
// receivers, each flow delivers to one of them, and a claim may leave some
// out while the fair order holds among the flows that remain.

// DefaultDestination is the destination of every flow whose first event
// named none: the relay's own URL (relayctl relay --url), as before
// destinations existed. It is never registered and cannot be paused in
// the store (the relay's breaker still applies to it).
const DefaultDestination = ""

// Limits of a destination. Input outside them is ErrInvalid.
const (
	// MaxDestinationNameLen is the longest destination name, in bytes.
	// A name is 1..MaxDestinationNameLen bytes of [a-z0-9._-], beginning
	// with a letter or digit: it is a metric label and a path segment.
	MaxDestinationNameLen = 64
	// MaxDestinationURLLen is the longest destination URL, in bytes.
	MaxDestinationURLLen = 2048
	// MaxDestinationSecrets is the most signing secrets a destination
	// keeps at once (the current one and those of a rotation).
	MaxDestinationSecrets = 4
	// MaxSecretLen is the longest secret, in bytes (printable ASCII).
	MaxSecretLen = 256
	// MaxDestinations is the most destinations one queue registers: a
	// claim that leaves some out reads each remaining destination's range
	// of an index, so its cost grows with this count, never with flows.
	MaxDestinations = 1000
	// MaxDestinationConcurrency is the largest concurrency limit.
	MaxDestinationConcurrency = 100000
	// MaxDestinationRate is the largest rate limit, in claims per 1000
	// ticks.
	MaxDestinationRate = 1000000
)

// Destination is a registered receiver (docs/contract.md §7.11).
type Destination struct {
	// Name identifies the destination (CheckDestinationName).
	Name string `json:"name"`
	// URL is where the relay delivers: an absolute http or https URL.
	URL string `json:"url"`
	// Secrets are the signing secrets, 1..MaxDestinationSecrets: the relay
	// signs every request with each (a rotation: the receiver accepts any
	// one it knows). They are stored in the queue, returned to the relay
	// by Destinations, and never written to an audit row, a snapshot, a
	// log or a console page: json:"-".
	Secrets []string `json:"-"`
	// Concurrency is the most claims of this destination's events that
	// may be in flight at once (leases not yet expired), over every
	// process that claims from the queue; 0: no limit. The store's claim
	// enforces it.
	Concurrency int `json:"concurrency,omitempty"`
	// Rate is the most claims of this destination's events per 1000 ticks
	// (per second when ticks are milliseconds, as the relay runtime's
	// are), over every process; 0: no limit. The store's claim enforces it
	// with a token bucket of Rate tokens, full when registered.
	Rate int `json:"rate,omitempty"`
}

// DestinationState is a registered destination as an operator sees it.
type DestinationState struct {
	Destination
	// SecretCount is len(Secrets), the one thing about the secrets an
	// operator's view shows.
	SecretCount int    `json:"secrets"`
	Paused      bool   `json:"paused,omitempty"`
	PauseReason string `json:"pause_reason,omitempty"`
	// Flows counts the flows that deliver here; Backlog the events of
	// those flows not yet acked; Inflight the claims of its events whose
	// lease has not expired at the clock mark. An operator's read: Flows
	// and Backlog read this destination's flows.
	Flows    int64 `json:"flows"`
	Backlog  int64 `json:"backlog"`
	Inflight int64 `json:"inflight"`
}

// SnapshotDestination is one row of the destinations table in a Snapshot
// (no secrets).
type SnapshotDestination struct {
	Name        string `json:"name"`
	URL         string `json:"url"`
	Secrets     int    `json:"secrets"`
	Concurrency int    `json:"concurrency,omitempty"`
	Rate        int    `json:"rate,omitempty"`
	Paused      string `json:"paused,omitempty"` // the pause reason while paused
}

// DestinationChange is the Detail, as JSON, of the audit rows of a
// destination (AuditDestination, AuditDestinationPause,
// AuditDestinationResume): the destination's settings before (nil when it
// was registered) and after. Secrets appear as their count only.
type DestinationChange struct {
	Name string               `json:"name"`
	Old  *SnapshotDestination `json:"old,omitempty"`
	New  SnapshotDestination  `json:"new"`
}

// FlowDestinationChange is the Detail, as JSON, of an AuditFlowDestination
// row.
type FlowDestinationChange struct {
	Flow string `json:"flow"`
	Old  string `json:"old"`
	New  string `json:"new"`
}

// The audit kinds of destinations.
const (
	AuditDestination       AuditKind = "destination"        // PutDestination: Detail is DestinationChange
	AuditDestinationPause  AuditKind = "destination_pause"  // PauseDestination: Detail is DestinationChange
	AuditDestinationResume AuditKind = "destination_resume" // ResumeDestination: Detail is DestinationChange
	AuditFlowDestination   AuditKind = "flow_destination"   // SetFlowDestination: Detail is FlowDestinationChange
)

// ClaimFilter is what a claim leaves out beyond what the store itself
// knows (docs/contract.md §7.11): the caller's own view of its
// destinations' health and room.
type ClaimFilter struct {
	// Exclude names destinations whose flows this claim must not pick (an
	// open breaker); DefaultDestination ("") may be named.
	Exclude []string
	// Room caps, per destination, how many heads this one call may claim
	// (the caller's share of its handler slots); a destination absent from
	// Room has no cap beyond the store's own limits. 0 is the same as
	// Exclude; negative is ErrInvalid.
	Room map[string]int
}

// DestinationStore is a Store whose flows deliver to registered
// destinations (docs/contract.md §7.11). Both backends of this repository
// are DestinationStores.
//
// A flow's destination is named by its first event (Event.Destination; ""
// keeps DefaultDestination) and changed only by SetFlowDestination. Every
// claim of such a store (Claim, ClaimBatch, SettleClaimBatch, ClaimFor,
// SettleClaimFor) leaves out the flows of a paused destination, of one at
// its Concurrency limit and of one whose Rate tokens are used up, and the
// fair order (§2.3, or §7.6 under FairRotation) holds among the flows that
// remain: a claim with exclusions picks exactly the heads the same claim
// would pick if the left-out flows did not exist, and a left-out flow keeps
// its served count, pass and place. With no destination registered, every
// claim is as before and costs the same.
//
// Every change writes an audit row with the reason. An unknown
// destination is ErrUnknownDestination; a pause of a paused one
// ErrDestinationPaused, a resume of one not paused ErrDestinationNotPaused;
// an empty reason ErrEmptyReason; bad input ErrInvalid: each changes
// nothing.
type DestinationStore interface {
	// PutDestination registers d, or changes the registered destination
	// of that name (URL, secrets, limits; a pause is kept).
	PutDestination(ctx context.Context, d Destination, reason string, now clock.Tick) error
	// Destinations lists every registered destination by name, with its
	// secrets and its state: an operator's read.
	Destinations(ctx context.Context) ([]DestinationState, error)
	// RegisteredDestinations lists every registered destination by name,
	// with its settings and secrets and nothing else: the relay's read of
	// where to deliver, which reads the registered destinations alone, so
	// its cost grows with them and never with the flows or the events
	// (Destinations' counts read every flow of each destination).
	RegisteredDestinations(ctx context.Context) ([]Destination, error)
	// PauseDestination stops claims of the destination's flows until
	// ResumeDestination; claims in flight settle as usual.
	PauseDestination(ctx context.Context, name, reason string, now clock.Tick) error
	// ResumeDestination undoes PauseDestination.
	ResumeDestination(ctx context.Context, name, reason string, now clock.Tick) error
	// SetFlowDestination makes flow deliver to dest (DefaultDestination or
	// a registered one) from its next claim on; an unknown flow is
	// ErrNotFound.
	SetFlowDestination(ctx context.Context, flow, dest, reason string, now clock.Tick) error
	// ClaimFor is ClaimBatch that also leaves out what f says.
	ClaimFor(ctx context.Context, now clock.Tick, n int, f ClaimFilter) ([]Claim, error)
	// SettleClaimFor is SettleClaimBatch whose claims also leave out what
	// f says.
	SettleClaimFor(ctx context.Context, items []SettleItem, now clock.Tick, n int, f ClaimFilter) ([]SettleResult, []Claim, error)
}

// CheckDestinationName checks a registered destination's name.
func CheckDestinationName(name string) error {
	if len(name) == 0 || len(name) > MaxDestinationNameLen {
		return fmt.Errorf("%w: destination name is %d bytes, want 1..%d", ErrInvalid, len(name), MaxDestinationNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '.' || c == '_' || c == '-')
		if !ok {
			return fmt.Errorf("%w: destination name %q: want [a-z0-9][a-z0-9._-]*", ErrInvalid, name)
		}
	}
	return nil
}

// CheckEventDestination checks Event.Destination: DefaultDestination or a
// valid name.
func CheckEventDestination(name string) error {
	if name == DefaultDestination {
		return nil
	}
	return CheckDestinationName(name)
}

// Validate checks d before a store registers it: name, an absolute http or
// https URL without user info, 1..MaxDestinationSecrets distinct secrets
// of 1..MaxSecretLen printable ASCII bytes, and limits in range.
func (d Destination) Validate() error {
	if err := CheckDestinationName(d.Name); err != nil {
		return err
	}
	if len(d.URL) == 0 || len(d.URL) > MaxDestinationURLLen {
		return fmt.Errorf("%w: destination %s: URL is %d bytes, want 1..%d", ErrInvalid, d.Name, len(d.URL), MaxDestinationURLLen)
	}
	u, err := url.Parse(d.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return fmt.Errorf("%w: destination %s: URL is not an absolute http(s) URL without user info", ErrInvalid, d.Name)
	}
	if len(d.Secrets) == 0 || len(d.Secrets) > MaxDestinationSecrets {
		return fmt.Errorf("%w: destination %s has %d secrets, want 1..%d", ErrInvalid, d.Name, len(d.Secrets), MaxDestinationSecrets)
	}
	seen := make(map[string]bool, len(d.Secrets))
	for i, s := range d.Secrets {
		if len(s) == 0 || len(s) > MaxSecretLen {
			return fmt.Errorf("%w: destination %s: secret %d is %d bytes, want 1..%d", ErrInvalid, d.Name, i+1, len(s), MaxSecretLen)
		}
		for j := 0; j < len(s); j++ {
			if s[j] < 0x21 || s[j] > 0x7e {
				return fmt.Errorf("%w: destination %s: secret %d is not printable ASCII without spaces", ErrInvalid, d.Name, i+1)
			}
		}
		if seen[s] {
			return fmt.Errorf("%w: destination %s: secret %d repeats another", ErrInvalid, d.Name, i+1)
		}
		seen[s] = true
	}
	if d.Concurrency < 0 || d.Concurrency > MaxDestinationConcurrency {
		return fmt.Errorf("%w: destination %s: concurrency %d, want 0..%d", ErrInvalid, d.Name, d.Concurrency, MaxDestinationConcurrency)
	}
	if d.Rate < 0 || d.Rate > MaxDestinationRate {
		return fmt.Errorf("%w: destination %s: rate %d, want 0..%d", ErrInvalid, d.Name, d.Rate, MaxDestinationRate)
	}
	return nil
}

// Validate checks f: every name excluded or given room is
// DefaultDestination or a valid name, and no room is negative. Names not
// registered are allowed (a relay's view may be older than the store's).
func (f ClaimFilter) Validate() error {
	for _, n := range f.Exclude {
		if err := CheckEventDestination(n); err != nil {
			return fmt.Errorf("claim filter: %w", err)
		}
	}
	for n, r := range f.Room {
		if err := CheckEventDestination(n); err != nil {
			return fmt.Errorf("claim filter: %w", err)
		}
		if r < 0 {
			return fmt.Errorf("%w: claim filter: room of %q is %d", ErrInvalid, n, r)
		}
	}
	return nil
}

// Snapshot returns s as a snapshot row (no secrets).
func (s DestinationState) Snapshot() SnapshotDestination {
	d := SnapshotDestination{Name: s.Name, URL: s.URL, Secrets: s.SecretCount, Concurrency: s.Concurrency, Rate: s.Rate}
	if s.Paused {
		d.Paused = s.PauseReason
	}
	return d
}
