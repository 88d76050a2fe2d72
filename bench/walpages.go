package bench

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// The files of the cases whose operations CycleWALPages counts.
const (
	queueFile    = "queue.db"
	receiverFile = "receiver.db"
	goqiteFile   = "goqite.db"
	ceilingFile  = "ceiling.db"
)

// flowSeqTables names, for a file, the table whose (flow, seq) index
// CycleWALPages counts the leaves of.
var flowSeqTables = map[string]string{queueFile: "events", receiverFile: "receipts"}

// phase is one operation of a case's Step: a name, the file (in the
// case's directory) it writes, and the operation.
type phase struct {
	name string
	file string
	run  func(ctx context.Context) error
}

// runPhases runs ps in order: one Step.
func runPhases(ctx context.Context, ps []phase) error {
	for _, p := range ps {
		if err := p.run(ctx); err != nil {
			return err
		}
	}
	return nil
}

// phased is a workload whose Step is its phases run in order: the
// ceiling, goqite's cycle and the relay cycles.
type phased interface {
	Workload
	phases() []phase
}

// CycleWALPages sets c up in dir, runs warm of its steps, then rounds more
// with each of their operations alone in its file's write-ahead log, and
// counts the pages each wrote: a TRUNCATE checkpoint empties the log
// before the operation, and the frame headers in the -wal file afterwards
// name its pages (one frame each), which SQLite's dbstat table places in
// their B-trees. It returns one step's operations per round. c must be
// [Ceiling], [Goqite], [RelayCycle] or [BatchedRelayCycle]. What a commit
// writes follows from the schema and the data, not from the disk.
func CycleWALPages(ctx context.Context, c Case, dir string, warm, rounds int) (_ [][]WALPages, err error) {
	w, err := c.Setup(ctx, dir)
	if err != nil {
		return nil, err
	}
	watches := map[string]*walWatch{}
	defer func() {
		for _, ww := range watches {
			err = errors.Join(err, ww.Close())
		}
		err = errors.Join(err, w.Close())
	}()
	pw, ok := w.(phased)
	if !ok {
		return nil, fmt.Errorf("wal pages: %s does not name its operations", c.Name)
	}
	for range warm {
		if _, err := w.Step(ctx); err != nil {
			return nil, err
		}
	}
	ps := pw.phases()
	for _, p := range ps {
		if watches[p.file] == nil {
			ww, err := openWALWatch(filepath.Join(dir, p.file), flowSeqTables[p.file])
			if err != nil {
				return nil, err
			}
			watches[p.file] = ww
		}
	}
	var out [][]WALPages
	for range rounds {
		var step []WALPages
		for _, p := range ps {
			m, err := watches[p.file].measure(ctx, p.name, func() error { return p.run(ctx) })
			if err != nil {
				return nil, err
			}
			step = append(step, m)
		}
		out = append(out, step)
	}
	return out, nil
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
