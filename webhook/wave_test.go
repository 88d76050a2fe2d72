package webhook_test

import (
	"context"
	"testing"

	"github.com/fairrelay/fairrelay/webhook"
)

// TestWave: a wave travels in a context to its descendants, keeps its id
// and size, equals only itself, and the zero Wave is none.
func TestWave(t *testing.T) {
	w := webhook.NewWave("a1b2-7", 4)
	ctx, cancel := context.WithCancel(webhook.WithWave(context.Background(), w))
	defer cancel()
	got, ok := webhook.WaveOf(ctx)
	if !ok || got != w || got.ID() != "a1b2-7" || got.Size() != 4 {
		t.Fatalf("WaveOf = %v (%q, %d), %v; want the wave given to WithWave", got, got.ID(), got.Size(), ok)
	}
	if twin := webhook.NewWave("a1b2-7", 4); twin == w {
		t.Error("two NewWave calls with one id compare equal; a wave equals only itself")
	}
	if _, ok := webhook.WaveOf(context.Background()); ok {
		t.Error("a plain context has a wave")
	}
	var zero webhook.Wave
	if _, ok := webhook.WaveOf(webhook.WithWave(context.Background(), zero)); ok {
		t.Error("WithWave(ctx, zero Wave) carries a wave")
	}
	if zero.ID() != "" || zero.Size() != 0 {
		t.Errorf("zero Wave: ID %q, Size %d; want \"\", 0", zero.ID(), zero.Size())
	}
	if v := webhook.FormatWave(w.ID(), w.Size()); v != "a1b2-7/4" {
		t.Errorf("FormatWave of the wave = %q", v)
	}
}
