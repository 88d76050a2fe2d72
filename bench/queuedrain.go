package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
)

// QueueClaimant drains a queue store, on either backend: Claim, then a
// successful Settle.
type QueueClaimant struct{ Q ClaimSettler }

// Claim takes the next head.
func (c QueueClaimant) Claim(ctx context.Context) (any, bool, error) {
	cl, ok, err := c.Q.Claim(ctx, now)
	if err != nil || !ok {
		return nil, false, err
	}
	return cl, true, nil
}

// Settle acks a claim.
func (c QueueClaimant) Settle(ctx context.Context, item any) error {
	cl := item.(queue.Claim)
	out, err := c.Q.Settle(ctx, cl.EventID, cl.Generation, queue.Result{OK: true}, now)
	if err != nil {
		return err
	}
	if out != queue.Acked {
		return fmt.Errorf("settle %s: %s, want acked", cl.EventID, out)
	}
	return nil
}

// QueueChild is the child side of a queue drain: it opens the queue store at
// path and calls [ChildDrain].
func QueueChild(ctx context.Context, path string) error {
	q, err := queuestore.Open(path)
	if err != nil {
		return err
	}
	defer q.Close()
	return ChildDrain(ctx, QueueClaimant{Q: q})
}

// MakeQueueTemplate writes a queue store at path loaded with flows × perFlow
// events, closed (and so checkpointed), for [QueueDrain] to copy.
func MakeQueueTemplate(ctx context.Context, path string, flows, perFlow int) error {
	q, err := queuestore.Open(path)
	if err != nil {
		return err
	}
	if err := LoadBacklog(ctx, q, "e", flows, perFlow); err != nil {
		q.Close()
		return err
	}
	return q.Close()
}

// QueueDrain drains a fresh copy of the queue store template with children
// started with extra + ["-db", copy].
func QueueDrain(name, template string, extra ...string) DrainSpec {
	return DrainSpec{
		Name: name,
		Prepare: func(ctx context.Context, dir string) ([]string, error) {
			path := filepath.Join(dir, "queue.db")
			if err := copyFile(template, path); err != nil {
				return nil, err
			}
			return append(extra, "-db", path), nil
		},
	}
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
