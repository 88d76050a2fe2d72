package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/fairrelay/fairrelay/console"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/relay"
)

// routeDestinations is the handler of 'relayctl relay' on a queue that
// may have registered destinations (docs/destinations.md): h (the --to
// URL's *relay.HTTP, def) wrapped in a relay.Destinations that delivers
// each event to its flow's destination, --to being the default one. The
// relay itself claims with the queue's destination filter, and keeps a
// breaker and metrics per destination, whenever its queue is a
// relay.DestinationQueue (both stores are).
//
// In-process delivery (def nil: --receiver) has no URL for a registered
// destination: a queue that has one is refused, rather than delivering
// its flows to the wrong receiver.
func routeDestinations(ctx context.Context, q relayQueue, h relay.Handler, def *relay.HTTP, o relay.DestinationsOptions, log *slog.Logger) (relay.Handler, error) {
	lister, ok := q.(relay.DestinationLister)
	if !ok {
		return h, nil // a queue without destinations: everything as before
	}
	st, err := q.Stats(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the queue's stats: %w", err)
	}
	if def == nil {
		if st.Destinations > 0 {
			return nil, usagef("the queue has %s registered ('relayctl destinations'): in-process delivery (--receiver) cannot reach them; give --to URL (the default destination)", plural(int(st.Destinations), "destination"))
		}
		return h, nil
	}
	d, err := relay.NewDestinations(lister, def, o)
	if err != nil {
		return nil, usagef("%v", err)
	}
	if st.Destinations > 0 {
		log.Info("relaying to destinations too", "registered", st.Destinations)
	}
	return d, nil
}

// Both stores and a sharded queue, as relayctl opens them, have
// destinations: the relay claims with them (relay.DestinationQueue, found
// at run time, so a method missing here would silently turn its
// per-destination breakers and slots off) and routes with them
// (relay.DestinationLister), and the console shows and pauses them
// (console.Destinations).
var (
	_ relay.DestinationQueue  = sqliteQueue{}
	_ relay.DestinationQueue  = pgQueue{}
	_ relay.DestinationQueue  = shardedLib{}
	_ relay.DestinationLister = (*queuestore.Store)(nil)
	_ relay.DestinationLister = pgQueue{}
	_ console.Destinations    = (*queuestore.Store)(nil)
	_ console.Destinations    = pgQueue{}
	_ queue.DestinationStore  = sqliteQueue{}
	_ queue.DestinationStore  = pgQueue{}
)
