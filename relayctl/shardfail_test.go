package main

import (
	"context"
	"testing"

	"github.com/fairrelay/fairrelay/pgtest"
)

// Closing a PostgreSQL hold twice does nothing the second time: the first
// Close gave the hold's connection back to the pool, which must not be
// used after that (pgxpool panics on it).
func TestPGHold_CloseTwice(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	_, base := pgtest.Schema(t)
	h, err := holdPG(ctx, pool, base, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("the second Close panicked: %v", r)
			}
		}()
		if err := h.Close(); err != nil {
			t.Errorf("the second Close: %v", err)
		}
	}()
	x, err := holdPG(ctx, pool, base, true)
	if err != nil {
		t.Fatalf("the exclusive hold after Close: %v", err)
	}
	x.Close()
}
