package pgqueuestore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// BenchmarkClaimStrategies measures the ways 8 concurrent claimants could
// take turns on one queue (docs/decisions/postgres-one-write-turn.md). Each
// op is one claim transaction and one ack transaction of the claimed
// event, made by 8 goroutines with a connection each, on 64 flows that
// stay backlogged. It reports claims/s and, for the strategies that can
// fail, failed transactions per claim. meta_lock/1 is one claimant, the
// baseline; meta_lock_batch8/8 claims and acks 8 events per transaction
// (ClaimBatch, SettleBatch).
//
//   - meta_lock: the store as it is (the meta row locked FOR UPDATE first).
//   - advisory: the same statements, a transaction-level advisory lock
//     instead of the row lock.
//   - serializable: the same statements without a lock, SERIALIZABLE; a
//     serialization failure is retried by the benchmark (the store itself
//     never retries).
//   - skip_locked: no global turn: the pick locks its flow row FOR UPDATE
//     SKIP LOCKED, the ticket comes from a sequence, no clock mark. This
//     is what giving up the contract's global ticket and clock mark would
//     buy.
func BenchmarkClaimStrategies(b *testing.B) {
	for _, strategy := range []string{"meta_lock", "advisory", "serializable", "skip_locked"} {
		b.Run(strategy+"/8", func(b *testing.B) { benchStrategy(b, strategy, 8) })
	}
	b.Run("meta_lock/1", func(b *testing.B) { benchStrategy(b, "meta_lock", 1) })
	b.Run("meta_lock_batch8/8", func(b *testing.B) { benchStrategy(b, "meta_lock_batch8", 8) })
}

func benchStrategy(b *testing.B, strategy string, claimants int) {
	ctx := context.Background()
	s, _, _ := open(b)
	const flows = 64
	perFlow := b.N/flows + 2
	var es []queue.Event
	for k := range perFlow {
		for f := range flows {
			es = append(es, queue.Event{ID: fmt.Sprintf("e%d-%d", f, k), Flow: fmt.Sprintf("f%02d", f), Body: []byte("x")})
		}
	}
	for len(es) > 0 {
		n := min(len(es), 5000)
		if _, err := s.EnqueueBatch(ctx, es[:n], 0); err != nil {
			b.Fatal(err)
		}
		es = es[n:]
	}
	if _, err := s.pool.Exec(ctx, s.q(`CREATE SEQUENCE {s}.tickets; ANALYZE {s}.flows; ANALYZE {s}.events`)); err != nil {
		b.Fatal(err)
	}
	var done, failed atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, claimants)
	b.ResetTimer()
	start := time.Now()
	for range claimants {
		wg.Go(func() {
			for done.Load() < int64(b.N) {
				var err error
				var ok bool
				switch strategy {
				case "meta_lock":
					var c queue.Claim
					c, ok, err = s.Claim(ctx, 0)
					if err == nil && ok {
						_, err = s.Settle(ctx, c.EventID, c.Generation, queue.Result{OK: true}, 0)
					}
				case "meta_lock_batch8":
					var cs []queue.Claim
					cs, err = s.ClaimBatch(ctx, 0, 8)
					if err == nil && len(cs) > 0 {
						items := make([]queue.SettleItem, len(cs))
						for i, c := range cs {
							items[i] = queue.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: queue.Result{OK: true}}
						}
						_, err = s.SettleBatch(ctx, items, 0)
						done.Add(int64(len(cs) - 1))
						ok = true
					}
				case "advisory", "serializable":
					ok, err = rawClaimAck(ctx, s, strategy, &failed)
				case "skip_locked":
					ok, err = skipLockedClaimAck(ctx, s)
				}
				if err != nil {
					errs <- err
					return
				}
				if ok {
					done.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(done.Load())/elapsed.Seconds(), "claims/s")
	b.ReportMetric(float64(failed.Load())/float64(done.Load()), "retries/claim")
}

// rawClaimAck is the store's claim and ack with another turn-taking.
func rawClaimAck(ctx context.Context, s *Store, strategy string, failed *atomic.Int64) (bool, error) {
	opts := pgx.TxOptions{}
	if strategy == "serializable" {
		opts.IsoLevel = pgx.Serializable
	}
	lock := func(tx pgx.Tx) error {
		if strategy == "advisory" {
			_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(42)`)
			return err
		}
		return nil
	}
	retry := func(fn func(tx pgx.Tx) error) error {
		for {
			err := pgx.BeginTxFunc(ctx, s.pool, opts, func(tx pgx.Tx) error {
				if err := lock(tx); err != nil {
					return err
				}
				return fn(tx)
			})
			var pe *pgconn.PgError
			if errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01") {
				failed.Add(1)
				continue
			}
			return err
		}
	}
	var id string
	var gen int64
	var ok bool
	err := retry(func(tx pgx.Tx) error {
		var mark, ticket int64
		if err := tx.QueryRow(ctx, s.q(`SELECT clock_mark, ticket FROM {s}.meta WHERE id = 1`)).Scan(&mark, &ticket); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.q(qPromote), int64(0)); err != nil {
			return err
		}
		var (
			flow            string
			head            *int64
			eid, state      *string
			att             *int
			lease, avail, g *int64
			body            []byte
		)
		err := tx.QueryRow(ctx, s.q(qPickHead)).Scan(&flow, &head, &eid, &state, &att, &lease, &avail, &body, &g)
		if isNoRows(err) {
			ok = false
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.q(qClaimEvent), *eid, int64(5), ticket+1); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.q(qServeFlow), flow, int64(5)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.q(qSetTicket), ticket+1); err != nil {
			return err
		}
		id, gen, ok = *eid, *g+1, true
		return nil
	})
	if err != nil || !ok {
		return false, err
	}
	err = retry(func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.q(`SELECT clock_mark FROM {s}.meta WHERE id = 1`)); err != nil {
			return err
		}
		r, o, err := s.readSettle(ctx, tx, id, gen, 0)
		if err != nil || o != "" {
			return err
		}
		if _, err := tx.Exec(ctx, s.q(qAck), id, int64(1)); err != nil {
			return err
		}
		h := r.seq + 1
		var head, readyAt, enq *int64
		if r.seq < *r.last {
			head, readyAt, enq = &h, r.next, r.nextEnq
		}
		_, err = tx.Exec(ctx, s.q(qSetHead), r.flow, head, readyAt, int64(0), enq)
		return err
	})
	return true, err
}

// skipLockedClaimAck claims without a global turn: the flow row is locked
// with SKIP LOCKED, the ticket is a sequence value, the clock mark is not
// kept.
func skipLockedClaimAck(ctx context.Context, s *Store) (bool, error) {
	var id, flow string
	var gen int64
	ok := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.q(`UPDATE {s}.flows SET ready = true WHERE NOT ready AND ready_at <= 0`)); err != nil {
			return err
		}
		var head int64
		err := tx.QueryRow(ctx, s.q(`SELECT flow, head_seq FROM {s}.flows WHERE ready
ORDER BY served, flow LIMIT 1 FOR UPDATE SKIP LOCKED`)).Scan(&flow, &head)
		if isNoRows(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, s.q(`UPDATE {s}.events SET state = 'inflight', generation = generation + 1,
    attempts = attempts + 1, lifetime_attempts = lifetime_attempts + 1, lease_until = 5,
    ticket = nextval('{s}.tickets')
WHERE flow = $1 AND seq = $2 RETURNING id, generation`), flow, head).Scan(&id, &gen); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.q(qServeFlow), flow, int64(5)); err != nil {
			return err
		}
		ok = true
		return nil
	})
	if err != nil || !ok {
		return false, err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		r, o, err := s.readSettle(ctx, tx, id, gen, 0)
		if err != nil || o != "" {
			return err
		}
		if _, err := tx.Exec(ctx, s.q(qAck), id, int64(1)); err != nil {
			return err
		}
		h := r.seq + 1
		var head, readyAt, enq *int64
		if r.seq < *r.last {
			head, readyAt, enq = &h, r.next, r.nextEnq
		}
		_, err = tx.Exec(ctx, s.q(qSetHead), r.flow, head, readyAt, int64(0), enq)
		return err
	})
	return true, err
}
