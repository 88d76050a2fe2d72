// Package receiverstore is being built; see the issue tracker.
package receiverstore
