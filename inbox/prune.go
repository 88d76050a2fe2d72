package inbox

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/fairrelay/fairrelay/receiver"
)

// pruneLoop is a Server's retention (ServerOptions.Retention): a goroutine
// that prunes the store every interval until stop.
type pruneLoop struct {
	p         receiver.Pruner
	retention time.Duration
	every     time.Duration
	batch     int
	now       func() time.Time
	log       *slog.Logger
	m         *serverMetrics // nil: no metrics

	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// startPruning checks o's retention options (panicking on a configuration
// that cannot work, see NewServer) and starts the loop.
func startPruning(r Receiver, o ServerOptions, now func() time.Time, log *slog.Logger, m *serverMetrics) *pruneLoop {
	p := o.Pruner
	if p == nil {
		pr, ok := r.(receiver.Pruner)
		if !ok {
			panic(fmt.Sprintf("inbox: ServerOptions.Retention is set but the receiver (%T) is not a receiver.Pruner and ServerOptions.Pruner is nil", r))
		}
		p = pr
	}
	batch := o.PruneBatch
	if batch == 0 {
		batch = receiver.DefaultPruneBatch
	}
	if err := receiver.CheckPruneLimit(batch); err != nil {
		panic(fmt.Sprintf("inbox: ServerOptions.PruneBatch: %v", err))
	}
	every := o.PruneEvery
	if every <= 0 {
		every = DefaultPruneEvery
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &pruneLoop{p: p, retention: o.Retention, every: every, batch: batch, now: now, log: log, m: m,
		cancel: cancel, done: make(chan struct{})}
	go l.run(ctx)
	return l
}

// run prunes at once, then every l.every, until ctx ends.
func (l *pruneLoop) run(ctx context.Context) {
	defer close(l.done)
	l.log.Info("inbox: pruning receipts", "retention", l.retention, "every", l.every, "batch", l.batch)
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		l.prune(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// prune deletes, batch after batch, the receipts accepted more than
// retention before now, until a batch says no More or ctx ends. Each
// batch is one transaction of the store; an error ends the round (the next
// one tries again) and is logged and counted. What a batch deleted is
// counted even when its error came after its commit (receiver.Pruner:
// receiverstore's vacuum).
func (l *pruneLoop) prune(ctx context.Context) {
	before := l.now().Add(-l.retention)
	var total int64
	batches := 0
	for ctx.Err() == nil {
		r, err := l.p.Prune(ctx, before, l.batch)
		total += r.Receipts
		if l.m != nil {
			l.m.pruned.Add(float64(r.Receipts))
		}
		if err != nil {
			if ctx.Err() != nil {
				break // stopping: the batch rolled back, or only its vacuum ended
			}
			l.log.Error("inbox: prune failed; the next prune tries again", "before", before, "pruned", total, "err", err)
			if l.m != nil {
				l.m.pruneErrors.Inc()
			}
			return
		}
		batches++
		if !r.More {
			break
		}
	}
	if total > 0 {
		l.log.Info("inbox: pruned receipts", "receipts", total, "batches", batches, "accepted_before", before)
	}
}

// stop ends the loop and waits for it (a batch in progress ends first).
func (l *pruneLoop) stop() {
	l.once.Do(l.cancel)
	<-l.done
}
