package queuestore

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

// checkText checks a name or reason against the character rules.
func checkText(what, s string, maxLen int) error {
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

func checkID(id string) error { return checkText("event ID", id, MaxNameLen) }

// validate checks an event before it is enqueued.
func validateEvent(e Event) error {
	if err := checkID(e.ID); err != nil {
		return err
	}
	if err := checkText("flow", e.Flow, MaxNameLen); err != nil {
		return err
	}
	if len(e.Body) == 0 || len(e.Body) > MaxBodyLen {
		return fmt.Errorf("%w: body is %d bytes, want 1..%d", ErrInvalid, len(e.Body), MaxBodyLen)
	}
	if e.Weight != 0 {
		return checkWeight(e.Weight)
	}
	return nil
}

// checkName checks a flow name given to an operator call.
func checkName(what, s string) error { return checkText(what, s, MaxNameLen) }

// checkReason checks an operator's or a failure's reason. An empty or blank
// (spaces only) reason is both ErrEmptyReason and ErrInvalid.
func checkReason(reason string) error {
	if reason == "" {
		return fmt.Errorf("%w: %w", ErrInvalid, ErrEmptyReason)
	}
	if len(reason) <= MaxReasonLen && strings.TrimFunc(reason, unicode.IsSpace) == "" {
		return fmt.Errorf("%w: %w: reason is blank (spaces only)", ErrInvalid, ErrEmptyReason)
	}
	return checkText("reason", reason, MaxReasonLen)
}

// checkGeneration refuses a negative generation: no event ever has one.
func checkGeneration(g int64) error {
	if g < 0 {
		return fmt.Errorf("%w: generation %d is negative", ErrInvalid, g)
	}
	return nil
}
