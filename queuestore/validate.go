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
