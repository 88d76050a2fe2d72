package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/fairrelay/fairrelay/writerlock"
)

// RawSchema is the table the multi-writer prototype drains: a stand-in for the
// queue with a claim-like and a settle-like one-row update.
const RawSchema = `CREATE TABLE IF NOT EXISTS ev (
	id INTEGER PRIMARY KEY,
	state INTEGER NOT NULL DEFAULT 0,
	owner INTEGER NOT NULL DEFAULT -1
) STRICT;
CREATE INDEX IF NOT EXISTS ev_state ON ev (state, id);`

// LoadRaw fills the prototype's table with n pending rows in one transaction.
func LoadRaw(ctx context.Context, db *sql.DB, n int) error {
	if _, err := db.ExecContext(ctx, RawSchema); err != nil {
		return fmt.Errorf("raw schema: %w", err)
	}
	_, err := db.ExecContext(ctx, `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < ?)
		INSERT INTO ev (id) SELECT x FROM c`, n)
	if err != nil {
		return fmt.Errorf("raw load: %w", err)
	}
	return nil
}

// Turn is how a write transaction waits for its turn among several processes.
type Turn string

// The turn-taking modes of the prototype.
const (
	// TurnBusyTimeout is SQLite's own: BEGIN IMMEDIATE under busy_timeout.
	TurnBusyTimeout Turn = "busy_timeout"
	// TurnShortSteps retries BEGIN IMMEDIATE (busy_timeout 0) every 500 µs,
	// for at most 10 s: a busy handler with short, even steps.
	TurnShortSteps Turn = "short_steps"
	// TurnWriterQueue takes the writerlock module's turn, handed over after
	// every write (writerlock.Keep{}): the gate, no barging, no runs.
	TurnWriterQueue Turn = "writer_queue"
	// TurnWriterKeep takes the writerlock module's turn as the stores do,
	// with writerlock.DefaultKeep: short runs of kept turns.
	TurnWriterKeep Turn = "writer_keep"
)

// RawClaimant is one process's claimant on the prototype's table.
type RawClaimant struct {
	DB    *sql.DB
	Proc  int
	Turn  Turn
	Lock  *writerlock.Lock // for the writer_* turns
	Bound time.Duration
}

func (r *RawClaimant) write(ctx context.Context, f func(*sql.Tx) error) error {
	if r.Lock != nil {
		if err := r.Lock.Lock(ctx); err != nil {
			return err
		}
		defer r.Lock.Unlock()
	}
	var tx *sql.Tx
	start := time.Now()
	for {
		var err error
		tx, err = r.DB.BeginTx(ctx, nil)
		if err == nil {
			break
		}
		if r.Turn == TurnShortSteps && IsBusy(err) && time.Since(start) < r.Bound {
			time.Sleep(500 * time.Microsecond)
			continue
		}
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if err := f(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Claim marks the lowest pending row as this process's.
func (r *RawClaimant) Claim(ctx context.Context) (any, bool, error) {
	var id int64
	err := r.write(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `UPDATE ev SET state = 1, owner = ?
			WHERE id = (SELECT id FROM ev WHERE state = 0 ORDER BY id LIMIT 1) RETURNING id`, r.Proc).Scan(&id)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("claim: %w", err)
	}
	return id, true, nil
}

// Settle marks a claimed row done.
func (r *RawClaimant) Settle(ctx context.Context, item any) error {
	return r.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE ev SET state = 2 WHERE id = ? AND state = 1`, item.(int64))
		if err != nil {
			return fmt.Errorf("settle: %w", err)
		}
		return nil
	})
}

// RawChild is the child side of a prototype drain: it opens path for turn and
// calls [ChildDrain].
func RawChild(ctx context.Context, path string, turn Turn, proc int) error {
	c := &RawClaimant{Turn: turn, Proc: proc, Bound: 10 * time.Second}
	var err error
	switch turn {
	case TurnShortSteps:
		c.DB, err = OpenDBNoWait(path)
	case TurnBusyTimeout, TurnWriterQueue, TurnWriterKeep:
		c.DB, err = OpenDB(path)
	default:
		return fmt.Errorf("unknown turn %q", turn)
	}
	if err != nil {
		return err
	}
	defer c.DB.Close()
	if turn == TurnWriterQueue || turn == TurnWriterKeep {
		keep := writerlock.DefaultKeep
		if turn == TurnWriterQueue {
			keep = writerlock.Keep{}
		}
		l, err := writerlock.OpenKeep(path, 10*time.Second, keep)
		if err != nil {
			return err
		}
		defer l.Close()
		c.Lock = l
	}
	return ChildDrain(ctx, c)
}

// RawDrain is the prototype's drain for turn: a fresh table of backlog rows,
// drained by children started with extra + ["-db", path, "-turn", turn].
func RawDrain(turn Turn, backlog int, extra ...string) DrainSpec {
	return DrainSpec{
		Name: "raw-" + string(turn),
		Prepare: func(ctx context.Context, dir string) ([]string, error) {
			path := dir + "/raw.db"
			db, err := OpenDB(path)
			if err != nil {
				return nil, err
			}
			defer db.Close()
			if err := LoadRaw(ctx, db, backlog); err != nil {
				return nil, err
			}
			return append(extra, "-db", path, "-turn", string(turn)), nil
		},
	}
}
