package queue

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Input limits. Input outside them is refused with ErrInvalid and changes
// nothing.
const (
	// MaxNameLen is the longest event ID or flow name, in bytes. IDs and
	// flows are 1..MaxNameLen bytes of valid UTF-8 made of printable
	// characters (unicode.IsPrint: letters, marks, numbers, punctuation,
	// symbols and the ASCII space; no control or format characters), with
	// at least one character that is not a space, and neither beginning nor
	// ending with whitespace (unicode.IsSpace): "tenant-a " and "tenant-a"
	// would otherwise be two flows.
	MaxNameLen = 200
	// MaxBodyLen is the largest event body, in bytes; bodies are 1..MaxBodyLen
	// bytes, any bytes.
	MaxBodyLen = 65536
	// MaxReasonLen is the longest failure or redrive reason, in bytes.
	// Reasons follow the same character rules as names; a reason of spaces
	// only is blank: ErrEmptyReason as well as ErrInvalid.
	MaxReasonLen = 1000
)

// CheckText checks a name or reason against the character rules; what
// names the value in the error, which wraps ErrInvalid.
func CheckText(what, s string, maxLen int) error {
	if len(s) == 0 || len(s) > maxLen {
		return fmt.Errorf("%w: %s is %d bytes, want 1..%d", ErrInvalid, what, len(s), maxLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, what)
	}
	for i, r := range s {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("%w: %s has a non-printable character %U at byte %d", ErrInvalid, what, r, i)
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

// CheckID checks an event ID (CheckText, MaxNameLen).
func CheckID(id string) error { return CheckText("event ID", id, MaxNameLen) }

// Validate checks an event before it is enqueued.
func (e Event) Validate() error {
	if err := CheckID(e.ID); err != nil {
		return err
	}
	if err := CheckFlow(e.Flow); err != nil {
		return err
	}
	if len(e.Body) == 0 || len(e.Body) > MaxBodyLen {
		return fmt.Errorf("%w: body is %d bytes, want 1..%d", ErrInvalid, len(e.Body), MaxBodyLen)
	}
	if e.Weight != 0 && (e.Weight < MinWeight || e.Weight > MaxWeight) {
		return fmt.Errorf("%w: weight is %d, want 0 (keep) or %d..%d", ErrInvalid, e.Weight, MinWeight, MaxWeight)
	}
	if e.NotBefore < 0 {
		return fmt.Errorf("%w: not-before tick is %d, want >= 0", ErrInvalid, e.NotBefore)
	}
	return CheckEventDestination(e.Destination)
}

// CheckPruneLimit refuses a Prune limit outside 1..MaxPruneBatch with
// ErrInvalid.
func CheckPruneLimit(n int) error {
	if n < 1 || n > MaxPruneBatch {
		return fmt.Errorf("%w: prune limit %d, want 1..%d", ErrInvalid, n, MaxPruneBatch)
	}
	return nil
}

// Weights of flows (docs/contract.md §7.6).
const (
	MinWeight = 1    // the smallest weight
	MaxWeight = 1000 // the largest weight
)

// CheckWeight refuses a weight an operator sets (SetWeight) outside
// MinWeight..MaxWeight, with ErrInvalid. An Event's Weight may also be 0
// (keep): Event.Validate checks that.
func CheckWeight(w int) error {
	if w < MinWeight || w > MaxWeight {
		return fmt.Errorf("%w: weight %d, want %d..%d", ErrInvalid, w, MinWeight, MaxWeight)
	}
	return nil
}

// CheckReason checks an operator's or a failure's reason. An empty or blank
// (spaces only) reason is both ErrEmptyReason and ErrInvalid.
func CheckReason(reason string) error {
	if reason == "" {
		return fmt.Errorf("%w: %w", ErrInvalid, ErrEmptyReason)
	}
	if len(reason) <= MaxReasonLen && strings.TrimFunc(reason, unicode.IsSpace) == "" {
		return fmt.Errorf("%w: %w: reason is blank (spaces only)", ErrInvalid, ErrEmptyReason)
	}
	return CheckText("reason", reason, MaxReasonLen)
}

// CheckGeneration refuses a negative generation: no event ever has one.
func CheckGeneration(g int64) error {
	if g < 0 {
		return fmt.Errorf("%w: generation %d is negative", ErrInvalid, g)
	}
	return nil
}

// CheckFlow checks a flow name (CheckText, MaxNameLen).
func CheckFlow(flow string) error { return CheckText("flow", flow, MaxNameLen) }

// Validate checks one item of a settle: its event ID, its generation, and,
// for a failure, its reason.
func (it SettleItem) Validate() error {
	if err := CheckID(it.EventID); err != nil {
		return err
	}
	if err := CheckGeneration(it.Generation); err != nil {
		return err
	}
	if !it.Result.OK {
		if err := CheckReason(it.Result.Reason); err != nil {
			return err
		}
		if it.Result.RetryAfter < 0 {
			return fmt.Errorf("%w: retry-after is %d, want >= 0", ErrInvalid, it.Result.RetryAfter)
		}
		return CheckErrorText(it.Result.Error)
	}
	return nil
}

// CheckErrorText refuses an error text longer than MaxErrorLen bytes, not
// valid UTF-8, or with a character that is not printable (ErrInvalid). An
// empty text is fine.
func CheckErrorText(s string) error {
	if s == "" {
		return nil
	}
	if len(s) > MaxErrorLen {
		return fmt.Errorf("%w: error text is %d bytes, want at most %d", ErrInvalid, len(s), MaxErrorLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: error text is not valid UTF-8", ErrInvalid)
	}
	for i, r := range s {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("%w: error text has a non-printable character %U at byte %d", ErrInvalid, r, i)
		}
	}
	return nil
}

// ErrorText makes an error text that CheckErrorText accepts from any
// string: invalid UTF-8 and characters that are not printable (newlines,
// tabs, controls) become spaces, runs of spaces one space, the ends are
// trimmed, and a text longer than MaxErrorLen is cut at a character
// boundary with "…" at its end.
func ErrorText(s string) string {
	var b strings.Builder
	space := false
	for _, r := range strings.ToValidUTF8(s, " ") {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	t := b.String()
	if len(t) <= MaxErrorLen {
		return t
	}
	const ell = "…"
	cut := MaxErrorLen - len(ell)
	for cut > 0 && !utf8.RuneStart(t[cut]) {
		cut--
	}
	return t[:cut] + ell
}

// Validate checks one item of an extend: its event ID and generation.
func (it ExtendItem) Validate() error {
	if err := CheckID(it.EventID); err != nil {
		return err
	}
	return CheckGeneration(it.Generation)
}

// Validate checks a filter: a set field must be a valid flow or reason
// (ErrInvalid otherwise).
func (f RedriveFilter) Validate() error {
	if f.Flow != "" {
		if err := CheckText("filter flow", f.Flow, MaxNameLen); err != nil {
			return err
		}
	}
	if f.Reason != "" {
		if err := CheckText("filter reason", f.Reason, MaxReasonLen); err != nil {
			return err
		}
	}
	return nil
}
