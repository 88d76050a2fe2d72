package queuestore

import "github.com/fairrelay/fairrelay/queue"

// Input limits: the queue module's (docs/contract.md §2, "ID and flow
// limits", "body limits", "reasons"), which also holds the checks
// (queue.CheckText, Event.Validate, SettleItem.Validate, …) every backend
// runs. Input outside them is refused with ErrInvalid and changes nothing.
const (
	// MaxNameLen is queue.MaxNameLen: the longest event ID or flow name, in
	// bytes.
	MaxNameLen = queue.MaxNameLen
	// MaxBodyLen is queue.MaxBodyLen: the largest event body, in bytes.
	MaxBodyLen = queue.MaxBodyLen
	// MaxReasonLen is queue.MaxReasonLen: the longest failure or redrive
	// reason, in bytes.
	MaxReasonLen = queue.MaxReasonLen
)

// checkText and checkID are queue.CheckText and queue.CheckID under the
// names page.go calls them by; they go when page.go's types move to queue.
func checkText(what, s string, maxLen int) error { return queue.CheckText(what, s, maxLen) }

func checkID(id string) error { return queue.CheckID(id) }

// validateFilter is RedriveFilter.Validate, under the name page.go calls.
func validateFilter(f RedriveFilter) error { return f.Validate() }
