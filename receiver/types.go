package receiver

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// DefaultMaxDelta is the largest delta the receiver applies unless the
// store is opened with a lower cap. It is also the highest cap allowed.
const DefaultMaxDelta = 1000

// MaxNameLen is the longest Message.ID or Message.Flow, in bytes.
const MaxNameLen = 200

// Sentinel errors. The messages keep the "receiverstore:" prefix the SQLite
// store has always printed: the experiment's golden files may quote them.
var (
	// ErrInvalidBody reports a body that is not {"delta": N} with an
	// integer N in 1..1000. Nothing changes. ParseDelta's refusals are a
	// *BodyError that names the rule broken (BodyRuleOf).
	ErrInvalidBody = errors.New("receiverstore: invalid body")
	// ErrInvalid reports a message whose ID, Flow or Seq is out of bounds,
	// or a flow name that cannot exist. Nothing changes.
	ErrInvalid = errors.New("receiverstore: invalid message")
	// ErrInvalidOption reports an Open option out of its range.
	ErrInvalidOption = errors.New("receiverstore: invalid option")
	// ErrSchemaVersion reports a file written by a newer schema than this
	// package knows. Open refuses it and changes nothing.
	ErrSchemaVersion = errors.New("receiverstore: unsupported schema version")
	// ErrEffect reports that a user's effect, run inside the receipt's
	// transaction by a store that supports effects, failed (or panicked):
	// the receipt, the flow's total and everything the effect wrote were
	// rolled back together, and the effect's own error is wrapped too.
	// Nothing changed; a retry may succeed.
	ErrEffect = errors.New("receiverstore: effect failed")
)

// MaxEffectBodyLen is the largest body, in bytes, that a store running a
// user's effect receives (any bytes, 1..MaxEffectBodyLen of them); without
// an effect a body is {"delta": N} of at most MaxBodyLen bytes.
const MaxEffectBodyLen = 1 << 20

// HookPoint names a point inside a store operation where the hook is called.
type HookPoint string

// HookAcceptBeforeCommit is called inside the accept transaction, after the
// receipt insert and the total update are made (or queued, by a store that
// sends them with COMMIT), before commit.
const HookAcceptBeforeCommit HookPoint = "receiver.accept.before_commit"

// Message is one delivery of an event to the receiver.
type Message struct {
	ID, Flow string
	Seq      int64
	Body     []byte
}

// Outcome is what Receive did with a valid message.
type Outcome string

// The outcomes of Receive, in the order of docs/contract.md §3.
const (
	// Accepted: the effect is applied. The receipt, total += delta and
	// next-expected += 1 were committed in one transaction.
	Accepted Outcome = "accepted"
	// Duplicate: this exact message (ID, Flow, Seq, Body) was accepted
	// before. Nothing changes.
	Duplicate Outcome = "duplicate"
	// Conflict: the message clashes with a receipt or with the flow's order.
	// It is recorded once for an operator; totals do not change.
	Conflict Outcome = "conflict"
	// Gap: Seq is above the flow's next expected number. Nothing changes;
	// nothing is skipped.
	Gap Outcome = "gap"
	// UnsupportedDelta: delta is above the store's MaxDelta. Nothing changes;
	// the same message is accepted once the store is opened with a cap that
	// allows it.
	UnsupportedDelta Outcome = "unsupported_delta"
	// Pruned: Seq is at or below the flow's pruned mark (FlowState.PrunedThrough)
	// and has no receipt: the flow's event with this sequence number was
	// applied, and its receipt was deleted by retention (docs/contract.md
	// §7.9). Nothing changes; a sender counts it as delivered, as it does a
	// Duplicate. The message's ID and body can no longer be compared with
	// the applied one's.
	Pruned Outcome = "pruned"
)

// Applied reports whether a message answered with this outcome has its
// effect applied, exactly once: Accepted (now), Duplicate (before), or
// Pruned (before, its receipt since deleted by retention, docs/contract.md
// §7.9). A sender counts such a message as delivered; every other outcome
// changed nothing.
func (o Outcome) Applied() bool {
	return o == Accepted || o == Duplicate || o == Pruned
}

// Conflict rules recorded in [ConflictRecord.Rule].
const (
	RuleIDReused  = "id_reused"  // rule 1: the ID has a receipt with another flow, seq or body
	RuleSeqTaken  = "seq_taken"  // rule 2: (flow, seq) has a receipt under another ID
	RuleSeqBehind = "seq_behind" // rule 4: seq is below next-expected and has no receipt
)

// BatchResult is one message's result in a ReceiveBatch: an Outcome, or Err
// for a message that failed validation (wrapping [ErrInvalidBody] or
// [ErrInvalid]).
type BatchResult struct {
	Outcome Outcome
	Err     error
}

// Validate checks m and returns its delta. A bad body wraps
// [ErrInvalidBody] and is checked first; a bad ID, Flow or Seq wraps
// [ErrInvalid].
func Validate(m Message) (int64, error) {
	delta, err := ParseDelta(m.Body)
	if err != nil {
		return 0, err
	}
	if err := ValidName("ID", m.ID); err != nil {
		return 0, err
	}
	if err := ValidName("Flow", m.Flow); err != nil {
		return 0, err
	}
	if m.Seq < 1 {
		return 0, fmt.Errorf("%w: Seq %d is below 1", ErrInvalid, m.Seq)
	}
	return delta, nil
}

// ValidName accepts 1..MaxNameLen bytes of valid UTF-8 made only of
// printable characters (letters, marks, numbers, punctuation, symbols and
// the ASCII space; see unicode.IsPrint), with at least one character that
// is not a space, neither beginning nor ending with whitespace
// (unicode.IsSpace): "tenant-a " is not a second flow beside "tenant-a".
// It is the queue store's rule for IDs and flows. what names the value in
// the error, which wraps [ErrInvalid].
func ValidName(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty %s", ErrInvalid, what)
	case len(s) > MaxNameLen:
		return fmt.Errorf("%w: %s is %d bytes, more than %d", ErrInvalid, what, len(s), MaxNameLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, what)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("%w: %s holds the unprintable character %U", ErrInvalid, what, r)
		}
	}
	if strings.TrimFunc(s, unicode.IsSpace) == "" {
		return fmt.Errorf("%w: %s is blank (spaces only)", ErrInvalid, what)
	}
	if first, _ := utf8.DecodeRuneInString(s); unicode.IsSpace(first) {
		return fmt.Errorf("%w: %s %q begins with whitespace", ErrInvalid, what, s)
	}
	if last, _ := utf8.DecodeLastRuneInString(s); unicode.IsSpace(last) {
		return fmt.Errorf("%w: %s %q ends with whitespace", ErrInvalid, what, s)
	}
	return nil
}

// FlowState is one flow's row: what it accepts next and its total.
type FlowState struct {
	Flow         string `json:"flow"`
	NextExpected int64  `json:"next_expected"`
	Total        int64  `json:"total"`
	// PrunedThrough is the highest sequence number whose receipt retention
	// deleted (docs/contract.md §7.9); 0 (omitted) before any.
	PrunedThrough int64 `json:"pruned_through,omitempty"`
}

// PruneResult is what a Prune deleted (or, from Prunable, would delete).
type PruneResult struct {
	Receipts int64 `json:"receipts"` // receipts deleted
	// More is set when the batch stopped short: its limit was reached, or a
	// backend's bound on one transaction (PostgreSQL's flows per batch);
	// more receipts may be prunable, and the caller prunes again.
	More bool `json:"more,omitempty"`
}

// Batch sizes of Prune (docs/contract.md §7.9): each batch is one short
// transaction.
const (
	DefaultPruneBatch = 1000  // what the receiver server and relayctl prune use
	MaxPruneBatch     = 10000 // the largest limit Prune accepts
)

// CheckPruneLimit is nil for a Prune limit in 1..MaxPruneBatch, and an
// error wrapping ErrInvalidOption otherwise.
func CheckPruneLimit(n int) error {
	if n < 1 || n > MaxPruneBatch {
		return fmt.Errorf("%w: prune limit %d, want 1..%d", ErrInvalidOption, n, MaxPruneBatch)
	}
	return nil
}

// SnapshotFormat is the layout version a Snapshot reports in its
// SchemaVersion field: 1, the layout of schema version 1. Later schema
// versions keep it: what they add (FlowState.PrunedThrough) is shown only
// when it differs from its default, so a store that never pruned
// snapshots as before.
const SnapshotFormat = 1

// Receipt is one accepted message, kept until retention deletes it
// (docs/contract.md §7.9; Pruner).
type Receipt struct {
	ID    string `json:"id"`
	Flow  string `json:"flow"`
	Seq   int64  `json:"seq"`
	Body  string `json:"body"` // the body bytes as received (always ASCII JSON)
	Delta int64  `json:"delta"`
}

// ConflictRecord is one distinct conflicting message and what it conflicted
// with. Rule is [RuleIDReused] or [RuleSeqTaken], with WithID, WithFlow and
// WithSeq naming the receipt it clashed with; or [RuleSeqBehind], with
// NextExpected holding the flow's next expected number when it was first
// seen.
type ConflictRecord struct {
	ID           string `json:"id"`
	Flow         string `json:"flow"`
	Seq          int64  `json:"seq"`
	Body         string `json:"body"`
	Rule         string `json:"rule"`
	WithID       string `json:"with_id,omitempty"`
	WithFlow     string `json:"with_flow,omitempty"`
	WithSeq      int64  `json:"with_seq,omitempty"`
	NextExpected int64  `json:"next_expected,omitempty"`
}

// Snapshot is every table of the receiver database, read in one read
// transaction, in a stable order. It holds no paths, PIDs or times, so it
// can be compared with golden files as it is.
type Snapshot struct {
	// SchemaVersion is the snapshot's layout version, SnapshotFormat (not
	// the database's own schema version).
	SchemaVersion int              `json:"schema_version"`
	Flows         []FlowState      `json:"flows"`     // by flow
	Receipts      []Receipt        `json:"receipts"`  // by flow, seq
	Conflicts     []ConflictRecord `json:"conflicts"` // by flow, seq, id, body
}
