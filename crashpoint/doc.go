// Package crashpoint is being built; see the issue tracker.
package crashpoint
