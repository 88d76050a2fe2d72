// Package experiment is being built; see the issue tracker.
package experiment
