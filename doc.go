//go:build !mage

// Package fairrelay is the root of the fairrelay workspace. It holds no code:
// each folder beside it is a Go module of its own (clock, fairness,
// queuestore, receiverstore, writerlock, drivertx, crashpoint, experiment,
// relayctl, bench), joined by go.work, and magefile.go (build tag mage) runs
// the project's targets. See README.md. Its one test, layers_test.go,
// checks the import rules between the modules (docs/architecture.md,
// "Import rules").
//
// This file exists so that go vet ./... and go test ./... in the root module
// find a package instead of warning that they matched none.
package fairrelay
