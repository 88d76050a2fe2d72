package bench

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/receiver"
	"maragu.dev/goqite"
)

// WALPages is what one operation wrote to its file's write-ahead log: its
// pages in all, and those that were leaves of the file's (flow, seq)
// index (the UNIQUE (flow, seq) of events in a queue, of receipts in a
// receiver), where each flow's entries sit together.
type WALPages struct {
	Op            string
	Pages         int
	FlowSeqLeaves int
}

// BatchedCycleWALPages relays warm batches of size events in a new relay in
// dir, as [BatchedRelayCycle] does (one event in each of size flows), then
// rounds more with each of their four operations (EnqueueBatch,
// ClaimBatch, ReceiveBatch, SettleBatch) alone in its file's write-ahead
// log, and counts the pages each wrote: a TRUNCATE checkpoint empties the
// log before the operation, and the frame headers in the -wal file
// afterwards name its pages (one frame each), which SQLite's dbstat table
// places in their B-trees. It returns one cycle's operations per round.
// What a commit writes follows from the schema and the data, not from the
// disk.
func BatchedCycleWALPages(ctx context.Context, dir string, size, warm, rounds int) (_ [][]WALPages, err error) {
	x, err := setupWatchedRelay(ctx, BatchedRelayCycle(size), dir, warm)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, x.Close()) }()
	b, qw, rw := x.w.(*batched), x.q, x.r
	var cs []queue.Claim
	return measureRounds(ctx, rounds, func() {
		for i := range b.es {
			b.n++
			b.es[i] = queue.Event{ID: fmt.Sprintf("e%d", b.n), Flow: flowName(i), Body: body}
		}
	}, []walOp{
		{"EnqueueBatch", qw, func() error { _, err := b.q.EnqueueBatch(ctx, b.es, now); return err }},
		{"ClaimBatch", qw, func() error {
			var err error
			if cs, err = b.q.ClaimBatch(ctx, now, size); err == nil && len(cs) != size {
				err = fmt.Errorf("claim batch: %d claims, want %d", len(cs), size)
			}
			for i, c := range cs {
				b.ms[i] = receiver.Message{ID: c.EventID, Flow: c.Flow, Seq: c.Seq, Body: c.Body}
				b.items[i] = queue.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: queue.Result{OK: true}}
			}
			return err
		}},
		{"ReceiveBatch", rw, func() error { _, err := b.r.ReceiveBatch(ctx, b.ms); return err }},
		{"SettleBatch", qw, func() error { _, err := b.q.SettleBatch(ctx, b.items, now); return err }},
	})
}

// SingleCycleWALPages is [BatchedCycleWALPages] for the single-event
// cycle ([RelayCycle]: Enqueue, Claim, Receive, Settle of one event, over
// 16 flows).
func SingleCycleWALPages(ctx context.Context, dir string, warm, rounds int) (_ [][]WALPages, err error) {
	x, err := setupWatchedRelay(ctx, RelayCycle(), dir, warm)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, x.Close()) }()
	s, qw, rw := x.w.(*single), x.q, x.r
	var (
		e queue.Event
		c queue.Claim
	)
	return measureRounds(ctx, rounds, func() {
		s.n++
		e = queue.Event{ID: fmt.Sprintf("e%d", s.n), Flow: flowName(s.n % s.flows), Body: body}
	}, []walOp{
		{"Enqueue", qw, func() error { _, err := s.q.Enqueue(ctx, e, now); return err }},
		{"Claim", qw, func() error {
			var ok bool
			var err error
			if c, ok, err = s.q.Claim(ctx, now); err == nil && (!ok || c.EventID != e.ID) {
				err = fmt.Errorf("claim after enqueueing %s: got %q, %v", e.ID, c.EventID, ok)
			}
			return err
		}},
		{"Receive", rw, func() error {
			_, err := s.r.Receive(ctx, receiver.Message{ID: c.EventID, Flow: c.Flow, Seq: c.Seq, Body: c.Body})
			return err
		}},
		{"Settle", qw, func() error {
			_, err := s.q.Settle(ctx, c.EventID, c.Generation, queue.Result{OK: true}, now)
			return err
		}},
	})
}

// setupWarm sets c up in dir and runs warm of its steps.
func setupWarm(ctx context.Context, c Case, dir string, warm int) (Workload, error) {
	w, err := c.Setup(ctx, dir)
	if err != nil {
		return nil, err
	}
	for range warm {
		if _, err := w.Step(ctx); err != nil {
			return nil, errors.Join(err, w.Close())
		}
	}
	return w, nil
}

// watchedRelay is a relay cycle's workload with a watch on each of its
// two files.
type watchedRelay struct {
	w    Workload
	q, r *walWatch // queue.db's, receiver.db's
}

// setupWatchedRelay sets c, a relay cycle, up in dir, runs warm of its
// steps and opens the watches.
func setupWatchedRelay(ctx context.Context, c Case, dir string, warm int) (*watchedRelay, error) {
	w, err := setupWarm(ctx, c, dir, warm)
	if err != nil {
		return nil, err
	}
	x := &watchedRelay{w: w}
	if x.q, err = openWALWatch(filepath.Join(dir, "queue.db"), "events"); err != nil {
		return nil, errors.Join(err, w.Close())
	}
	if x.r, err = openWALWatch(filepath.Join(dir, "receiver.db"), "receipts"); err != nil {
		return nil, errors.Join(err, x.q.Close(), w.Close())
	}
	return x, nil
}

// Close closes the watches and the workload.
func (x *watchedRelay) Close() error { return errors.Join(x.q.Close(), x.r.Close(), x.w.Close()) }

// GoqiteWALPages is [BatchedCycleWALPages] for goqite's cycle ([Goqite]):
// send, receive and delete of one message, in a new goqite file in dir.
func GoqiteWALPages(ctx context.Context, dir string, warm, rounds int) (_ [][]WALPages, err error) {
	w, err := setupWarm(ctx, Goqite(), dir, warm)
	if err != nil {
		return nil, err
	}
	g := w.(*goqiteCycle)
	gw, err := openWALWatch(filepath.Join(dir, "goqite.db"), "")
	if err != nil {
		return nil, errors.Join(err, g.Close())
	}
	defer func() { err = errors.Join(err, gw.Close(), g.Close()) }()
	var m *goqite.Message
	return measureRounds(ctx, rounds, func() {}, []walOp{
		{"send", gw, func() error { return g.q.Send(ctx, goqite.Message{Body: g.body}) }},
		{"receive", gw, func() error {
			var err error
			if m, err = g.q.Receive(ctx); err == nil && m == nil {
				err = errors.New("goqite receive: no message right after a send")
			}
			return err
		}},
		{"delete", gw, func() error { return g.q.Delete(ctx, m.ID) }},
	})
}

// CeilingWALPages is [BatchedCycleWALPages] for the storage ceiling
// ([Ceiling]): one one-row commit, in a new file in dir.
func CeilingWALPages(ctx context.Context, dir string, warm, rounds int) (_ [][]WALPages, err error) {
	w, err := setupWarm(ctx, Ceiling(), dir, warm)
	if err != nil {
		return nil, err
	}
	cw, err := openWALWatch(filepath.Join(dir, "ceiling.db"), "")
	if err != nil {
		return nil, errors.Join(err, w.Close())
	}
	defer func() { err = errors.Join(err, cw.Close(), w.Close()) }()
	return measureRounds(ctx, rounds, func() {}, []walOp{
		{"commit", cw, func() error { _, err := w.Step(ctx); return err }},
	})
}

// TotalPages is the pages that the operations of one cycle wrote, and how
// many of them were (flow, seq) index leaves.
func TotalPages(ops []WALPages) (pages, leaves int) {
	for _, p := range ops {
		pages += p.Pages
		leaves += p.FlowSeqLeaves
	}
	return pages, leaves
}

// walOp is one operation of a cycle and the watch on the file it writes.
type walOp struct {
	name string
	w    *walWatch
	run  func() error
}

// measureRounds runs next and then ops, each measured, rounds times.
func measureRounds(ctx context.Context, rounds int, next func(), ops []walOp) ([][]WALPages, error) {
	var out [][]WALPages
	for range rounds {
		next()
		var cycle []WALPages
		for _, op := range ops {
			p, err := op.w.measure(ctx, op.name, op.run)
			if err != nil {
				return nil, err
			}
			cycle = append(cycle, p)
		}
		out = append(out, cycle)
	}
	return out, nil
}

// walWatch is a second connection to an SQLite file in WAL mode, which
// empties the log before an operation of the file's owner and reads what
// the operation wrote to it.
type walWatch struct {
	db      *sql.DB
	path    string
	flowSeq string // the name of table's UNIQUE (flow, seq) index; "" if none
}

// openWALWatch opens a watch on the file at path whose (flow, seq) index
// is table's ("" for none).
func openWALWatch(path, table string) (*walWatch, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	w := &walWatch{db: db, path: path}
	if table != "" {
		// The unique index over exactly (flow, seq); the partial
		// quarantine index over the same columns is not it.
		const q = `SELECT il.name FROM pragma_index_list(?) AS il
			WHERE il."unique" = 1 AND il.partial = 0
			AND (SELECT group_concat(ii.name, ',') FROM pragma_index_info(il.name) AS ii) = 'flow,seq'`
		if err := db.QueryRow(q, table).Scan(&w.flowSeq); err != nil {
			db.Close()
			return nil, fmt.Errorf("wal pages: the (flow, seq) index of %s in %s: %w", table, path, err)
		}
	}
	return w, nil
}

// measure empties the log, runs op, and counts the pages op wrote to it.
func (w *walWatch) measure(ctx context.Context, name string, op func() error) (WALPages, error) {
	var busy, logged, done int
	if err := w.db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logged, &done); err != nil {
		return WALPages{}, fmt.Errorf("wal pages: checkpoint before %s: %w", name, err)
	}
	if busy != 0 {
		return WALPages{}, fmt.Errorf("wal pages: checkpoint before %s: the log is busy", name)
	}
	if err := op(); err != nil {
		return WALPages{}, fmt.Errorf("wal pages: %s: %w", name, err)
	}
	pages, err := walFramePages(w.path + "-wal")
	if err != nil {
		return WALPages{}, fmt.Errorf("wal pages: %s: %w", name, err)
	}
	p := WALPages{Op: name, Pages: len(pages)}
	if w.flowSeq == "" || len(pages) == 0 {
		return p, nil
	}
	leaves := map[uint32]bool{}
	rows, err := w.db.QueryContext(ctx, `SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf'`, w.flowSeq)
	if err != nil {
		return WALPages{}, fmt.Errorf("wal pages: %s: dbstat: %w", name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var n uint32
		if err := rows.Scan(&n); err != nil {
			return WALPages{}, fmt.Errorf("wal pages: %s: dbstat: %w", name, err)
		}
		leaves[n] = true
	}
	if err := rows.Err(); err != nil {
		return WALPages{}, fmt.Errorf("wal pages: %s: dbstat: %w", name, err)
	}
	for _, n := range pages {
		if leaves[n] {
			p.FlowSeqLeaves++
		}
	}
	return p, nil
}

// Close closes the watch's connection.
func (w *walWatch) Close() error { return w.db.Close() }

// walFramePages reads the page numbers of the valid frames of the WAL file
// at path (https://sqlite.org/fileformat.html#the_write_ahead_log): a
// 32-byte header with the page size and two salts, then frames of a
// 24-byte header (the page number first, the salts at 8 and 12) and one
// page. Only frames carrying the header's salts belong to the log.
func walFramePages(path string) ([]uint32, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, nil
	}
	if len(b) < 32 {
		return nil, fmt.Errorf("%s: %d bytes, shorter than a WAL header", path, len(b))
	}
	size := int(binary.BigEndian.Uint32(b[8:12]))
	if size < 512 || size > 65536 || size&(size-1) != 0 {
		return nil, fmt.Errorf("%s: page size %d in the WAL header", path, size)
	}
	var pages []uint32
	for off := 32; off+24+size <= len(b); off += 24 + size {
		h := b[off : off+24]
		if string(h[8:16]) != string(b[16:24]) {
			break
		}
		pages = append(pages, binary.BigEndian.Uint32(h[0:4]))
	}
	return pages, nil
}
