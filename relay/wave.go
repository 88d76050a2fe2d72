package relay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync/atomic"
)

// Wave is a group of handlers that a relay started together, with the
// events of one claim call (a claim parked behind a lost handler of its
// flow starts later, as a wave of its own). Their deliveries tend to reach
// a receiver together, so a receiver that commits in groups
// (inbox.Batcher) can wait for a whole wave and commit it once. Waves compare equal when they are
// the same wave; the zero Wave is none.
type Wave struct{ w *wave }

// waveKey is the context key of a handler's wave.
type waveKey struct{}

// WaveOf returns the wave of the handler whose context is ctx (or an
// ancestor of ctx), and false when ctx has none.
func WaveOf(ctx context.Context) (Wave, bool) {
	w, ok := ctx.Value(waveKey{}).(*wave)
	return Wave{w}, ok
}

// Size returns how many handlers the relay started in the wave (0 for the
// zero Wave).
func (w Wave) Size() int {
	if w.w == nil {
		return 0
	}
	return w.w.size
}

// ID returns the wave's identifier: a random prefix drawn once per
// process and a counter, so unique across the relays that deliver to one
// receiver. HTTP sends it, with Size, in the fairrelay-wave header ("" for
// the zero Wave).
func (w Wave) ID() string {
	if w.w == nil {
		return ""
	}
	return waveOrigin + strconv.FormatUint(w.w.seq, 36)
}

// waveOrigin is this process's prefix of wave IDs.
var waveOrigin = func() string {
	b := make([]byte, 6)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b) + "-"
}()

// waveSeq numbers the waves of this process.
var waveSeq atomic.Uint64
