// Package queuestore is being built; see the issue tracker.
package queuestore
