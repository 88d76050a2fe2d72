package queuestore

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkNextDue is the relay's sleep read (NextDue and OldestDue) over
// 1,000 flows of 10 named destinations and the default one: with no
// destination registered, with 10 registered and none paused (the read of
// whether one is paused, then today's statements), and with one paused
// whose 91 flows are all dispatchable (one seek per destination not
// paused; OldestDue passes over the paused one's flows).
func BenchmarkNextDue(b *testing.B) {
	for _, c := range []struct {
		name         string
		dests, pause bool
	}{{"no destinations", false, false}, {"none paused", true, false}, {"one paused", true, true}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			s, err := Open(filepath.Join(b.TempDir(), "q.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if c.dests {
				for d := range 10 {
					if err := s.PutDestination(ctx, Destination{Name: fmt.Sprintf("d%d", d), URL: "http://x/", Secrets: []string{"k"}}, "r", 0); err != nil {
						b.Fatal(err)
					}
				}
			}
			var es []Event
			for f := range 1000 {
				dest := ""
				if c.dests && f%11 != 0 {
					dest = fmt.Sprintf("d%d", f%10)
				}
				es = append(es, Event{ID: fmt.Sprintf("e%d", f), Flow: fmt.Sprintf("f%04d", f), Body: []byte("x"), Destination: dest})
			}
			if _, err := s.EnqueueBatch(ctx, es, 0); err != nil {
				b.Fatal(err)
			}
			if c.pause {
				if err := s.PauseDestination(ctx, "d0", "r", 1); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				if _, ok, err := s.NextDue(ctx); err != nil || !ok {
					b.Fatal(ok, err)
				}
				if _, ok, err := s.OldestDue(ctx, 5); err != nil || !ok {
					b.Fatal(ok, err)
				}
			}
		})
	}
}
