package relay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync/atomic"

	"github.com/fairrelay/fairrelay/webhook"
)

// Wave is a group of handlers that a relay started together, with the
// events of one claim call (a claim parked behind a lost handler of its
// flow starts later, as a wave of its own). Their deliveries tend to reach
// a receiver together, so a receiver that commits in groups
// (inbox.Batcher) can wait for a whole wave and commit it once. Waves
// compare equal when they are the same wave; the zero Wave is none. Its ID
// is a random prefix drawn once per process and a counter, so unique
// across the relays that deliver to one receiver; HTTP sends it, with
// Size, in the fairrelay-wave header.
//
// Wave is an alias of webhook.Wave, where the wave hint lives as part of
// the wire protocol, so that a receiver reads it without importing the
// relay (docs/decisions/wave-hint-in-webhook.md). The name stays for
// existing callers.
type Wave = webhook.Wave

// WaveOf returns the wave of the handler whose context is ctx (or an
// ancestor of ctx), and false when ctx has none. It is webhook.WaveOf,
// kept under this name for existing callers.
func WaveOf(ctx context.Context) (Wave, bool) {
	return webhook.WaveOf(ctx)
}

// newWave returns the Wave of a wave of size handlers, this process's
// seq-th.
func newWave(seq uint64, size int) Wave {
	return webhook.NewWave(waveOrigin+strconv.FormatUint(seq, 36), size)
}

// waveOrigin is this process's prefix of wave IDs.
var waveOrigin = func() string {
	b := make([]byte, 6)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b) + "-"
}()

// waveSeq numbers the waves of this process.
var waveSeq atomic.Uint64
