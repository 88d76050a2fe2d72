package webhook

import "context"

// Wave is a group of deliveries that a sender started together and
// expects to reach a receiver together: a relay's handlers started from
// one claim call (see relay.WaveOf). It is the in-process side of
// HeaderWave: the sender carries it in a delivery's context (WithWave),
// an HTTP sender writes it as FormatWave(w.ID(), w.Size()), and a
// receiver in the same process that commits in groups reads it back with
// WaveOf and may wait for the rest of the wave. Like the header, it is a
// hint for batching, never for what is applied.
//
// Waves compare equal when they come from the same NewWave call; the zero
// Wave is none.
type Wave struct{ w *wave }

type wave struct {
	id   string
	size int
}

// NewWave returns a new wave of size deliveries under id. The id should
// be unique among the senders that deliver to one receiver and, to travel
// in HeaderWave, 1 to MaxWaveID printable ASCII characters other than '/'.
func NewWave(id string, size int) Wave {
	return Wave{&wave{id: id, size: size}}
}

// ID returns the wave's identifier ("" for the zero Wave).
func (w Wave) ID() string {
	if w.w == nil {
		return ""
	}
	return w.w.id
}

// Size returns how many deliveries the sender started in the wave (0 for
// the zero Wave).
func (w Wave) Size() int {
	if w.w == nil {
		return 0
	}
	return w.w.size
}

// waveKey is the context key of a delivery's wave.
type waveKey struct{}

// WithWave returns a copy of ctx that carries w; for the zero Wave it
// returns ctx.
func WithWave(ctx context.Context, w Wave) context.Context {
	if w.w == nil {
		return ctx
	}
	return context.WithValue(ctx, waveKey{}, w.w)
}

// WaveOf returns the wave that ctx (or an ancestor of ctx) carries, and
// false when it carries none.
func WaveOf(ctx context.Context) (Wave, bool) {
	w, ok := ctx.Value(waveKey{}).(*wave)
	return Wave{w}, ok
}
