//go:build !mage

// Package fairrelay is the root of the fairrelay workspace. It holds no code:
// each folder beside it is a Go module of its own, joined by go.work, and
// magefile.go (build tag mage) runs the project's targets. See README.md.
//
// Its tests: layers_test.go checks the import rules between the modules
// (docs/architecture.md, "Import rules"); TestOutsideModule follows
// README.md's "Using the modules from your own Go module" as a user would:
// it builds and runs a module of its own beside this repository through a
// go.work, offline.
//
// This file also exists so that go vet ./... and go test ./... in the root
// module find a package instead of warning that they matched none.
package fairrelay
