package main

import "fmt"

// snapshotReport is what `snapshot` prints.
type snapshotReport struct {
	Queue    any `json:"queue"`
	Receiver any `json:"receiver,omitempty"`
}

func cmdSnapshot(e *env, args []string) (err error) {
	f := newFlags(e, "snapshot", "snapshot [--receiver PATH]",
		"Snapshot prints both stores' snapshots as one JSON object: every table of\n"+
			"queue.db read in one transaction, then every table of receiver.db in another.\n"+
			"The two are not a consistent cut across the files. On a sharded queue the queue is\n"+
			"{\"shards\": [{\"store\", \"label\", \"snapshot\"}, …]}, one snapshot per shard in shard order,\n"+
			"each read in its own transaction (docs/scale.md).").
		withQueue().withReceiver(true)
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	q, err := e.readQueue()
	if err != nil {
		return err
	}
	defer closeWith(q, &err)
	var rep snapshotReport
	if rep.Queue, err = q.Snapshot(e.ctx); err != nil {
		return fmt.Errorf("read the queue snapshot: %w", err)
	}
	if e.receiverPath != "" {
		var r *receiverDB
		if r, err = e.readReceiver(true); err != nil {
			return err
		}
		defer closeWith(r, &err)
		if rep.Receiver, err = r.Snapshot(e.ctx); err != nil {
			return fmt.Errorf("read the receiver snapshot: %w", err)
		}
	}
	return writeJSON(e.stdout, rep)
}
